//! Service-account keys, as upstream's `keyutil` reads them: the signing key
//! (`--service-account-signing-key-file`: an RSA key signs RS256, an EC P-256 key ES256, P-384
//! ES384) and the keys tokens are verified with (`--service-account-key-file`: public keys,
//! certificates or private keys, PEM). A key's id (`kid`) is upstream's: the unpadded base64url
//! SHA-256 of the public key's DER `SubjectPublicKeyInfo`. The JWK of a public key is what
//! `/openid/v1/jwks` serves.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents};
use serde_json::{Value, json};
use x509_parser::prelude::FromDer;

use super::der;

/// The JWS algorithms keys sign with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    RS256,
    ES256,
    ES384,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::RS256 => "RS256",
            Algorithm::ES256 => "ES256",
            Algorithm::ES384 => "ES384",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{path}: not valid PEM: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("{path}: no private key in the file")]
    NoPrivateKey { path: PathBuf },
    #[error("{path}: no public key, certificate or private key in the file")]
    NoKeys { path: PathBuf },
    #[error(
        "{path}: {what}: only RSA keys of 2048 to 8192 bits and EC keys on P-256 or P-384 are supported"
    )]
    Unsupported { path: PathBuf, what: String },
    #[error("generating a key: {0}")]
    Generate(String),
    #[error("signing: {0}")]
    Sign(String),
}

/// What a public key is made of.
#[derive(Clone, PartialEq, Eq)]
enum Material {
    /// Modulus and exponent, big-endian without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed point (`04 || x || y`); the curve is the algorithm's.
    Ec { point: Vec<u8> },
}

/// A key tokens are verified with.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    pub kid: String,
    pub alg: Algorithm,
    material: Material,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicKey").field("kid", &self.kid).field("alg", &self.alg).finish()
    }
}

fn trim_zeros(b: &[u8]) -> Vec<u8> {
    b.iter().copied().skip_while(|x| *x == 0).collect()
}

impl PublicKey {
    fn new(alg: Algorithm, material: Material) -> Self {
        let mut key = PublicKey { kid: String::new(), alg, material };
        let digest = ring::digest::digest(&ring::digest::SHA256, &key.spki_der());
        key.kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        key
    }

    /// The DER `SubjectPublicKeyInfo`, as Go's `x509.MarshalPKIXPublicKey` writes it.
    pub fn spki_der(&self) -> Vec<u8> {
        match (&self.material, self.alg) {
            (Material::Rsa { n, e }, _) => der::rsa_spki(n, e),
            (Material::Ec { point }, Algorithm::ES384) => der::ec_spki(der::OID_P384, point),
            (Material::Ec { point }, _) => der::ec_spki(der::OID_P256, point),
        }
    }

    /// Whether `signature` is this key's signature of `message` with `alg`.
    pub fn verify(&self, alg: Algorithm, message: &[u8], signature: &[u8]) -> bool {
        if alg != self.alg {
            return false;
        }
        match &self.material {
            Material::Rsa { n, e } => RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, signature)
                .is_ok(),
            Material::Ec { point } => {
                let algorithm = match alg {
                    Algorithm::ES384 => &signature::ECDSA_P384_SHA384_FIXED,
                    _ => &signature::ECDSA_P256_SHA256_FIXED,
                };
                signature::UnparsedPublicKey::new(algorithm, point)
                    .verify(message, signature)
                    .is_ok()
            }
        }
    }

    /// The public JWK (`use: sig`), as `/openid/v1/jwks` lists it.
    pub fn jwk(&self) -> Value {
        let b64 = |b: &[u8]| URL_SAFE_NO_PAD.encode(b);
        match &self.material {
            Material::Rsa { n, e } => json!({
                "use": "sig", "kty": "RSA", "kid": self.kid, "alg": self.alg.name(),
                "n": b64(n), "e": b64(e),
            }),
            Material::Ec { point } => {
                let coordinates = point.get(1..).unwrap_or_default();
                let (x, y) = coordinates.split_at(coordinates.len() / 2);
                let crv = if self.alg == Algorithm::ES384 { "P-384" } else { "P-256" };
                json!({
                    "use": "sig", "kty": "EC", "kid": self.kid, "crv": crv,
                    "alg": self.alg.name(), "x": b64(x), "y": b64(y),
                })
            }
        }
    }

    /// The key of a DER `SubjectPublicKeyInfo`; `what` names it in errors.
    fn from_spki(path: &Path, what: &str, spki_der: &[u8]) -> Result<Self, KeyError> {
        use x509_parser::public_key::PublicKey as Parsed;
        let unsupported = |detail: &str| KeyError::Unsupported {
            path: path.to_path_buf(),
            what: format!("{what}: {detail}"),
        };
        let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(spki_der)
            .map_err(|e| unsupported(&format!("not a SubjectPublicKeyInfo: {e}")))?;
        let parsed = spki.parsed().map_err(|e| unsupported(&e.to_string()))?;
        let curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok());
        match parsed {
            Parsed::RSA(rsa) => {
                let n = trim_zeros(rsa.modulus);
                if !(2048..=8192).contains(&(n.len() * 8)) {
                    return Err(unsupported(&format!("an RSA key of {} bits", n.len() * 8)));
                }
                Ok(PublicKey::new(
                    Algorithm::RS256,
                    Material::Rsa { n, e: trim_zeros(rsa.exponent) },
                ))
            }
            Parsed::EC(point) => {
                let alg = match curve {
                    Some(c) if c.as_bytes() == der::OID_P256 => Algorithm::ES256,
                    Some(c) if c.as_bytes() == der::OID_P384 => Algorithm::ES384,
                    other => {
                        let curve = other.map(|c| c.to_id_string()).unwrap_or_default();
                        return Err(unsupported(&format!("an EC key on curve {curve:?}")));
                    }
                };
                Ok(PublicKey::new(alg, Material::Ec { point: point.data().to_vec() }))
            }
            _ => Err(unsupported("neither an RSA nor an EC key")),
        }
    }
}

enum Signer {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

/// The key tokens are signed with.
pub struct SigningKey {
    public: PublicKey,
    signer: Signer,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("public", &self.public).finish_non_exhaustive()
    }
}

fn ec_signing(alg: Algorithm) -> &'static signature::EcdsaSigningAlgorithm {
    match alg {
        Algorithm::ES384 => &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
        _ => &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
    }
}

impl SigningKey {
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The JWS signature of `message` (RSASSA-PKCS1-v1_5, or ECDSA as `r || s`).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let rng = SystemRandom::new();
        match &self.signer {
            Signer::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .map_err(|e| KeyError::Sign(e.to_string()))?;
                Ok(sig)
            }
            Signer::Ec(k) => Ok(k
                .sign(&rng, message)
                .map_err(|e| KeyError::Sign(e.to_string()))?
                .as_ref()
                .to_vec()),
        }
    }

    fn rsa(k: RsaKeyPair) -> Self {
        let c: RsaPublicKeyComponents<Vec<u8>> = k.public().into();
        let public = PublicKey::new(Algorithm::RS256, Material::Rsa { n: c.n, e: c.e });
        SigningKey { public, signer: Signer::Rsa(k) }
    }

    fn ec(alg: Algorithm, k: EcdsaKeyPair) -> Self {
        let public = PublicKey::new(alg, Material::Ec { point: k.public_key().as_ref().to_vec() });
        SigningKey { public, signer: Signer::Ec(k) }
    }

    /// A PKCS#8 key: EC on P-256 or P-384, or RSA.
    fn from_pkcs8(path: &Path, der: &[u8]) -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        for alg in [Algorithm::ES256, Algorithm::ES384] {
            if let Ok(k) = EcdsaKeyPair::from_pkcs8(ec_signing(alg), der, &rng) {
                return Ok(Self::ec(alg, k));
            }
        }
        RsaKeyPair::from_pkcs8(der).map(Self::rsa).map_err(|e| KeyError::Unsupported {
            path: path.to_path_buf(),
            what: format!("the PKCS#8 private key ({e})"),
        })
    }

    /// The private key of one PEM block, if the block is one.
    fn from_pem_block(path: &Path, label: &str, der: &[u8]) -> Option<Result<Self, KeyError>> {
        Some(match label {
            "PRIVATE KEY" => Self::from_pkcs8(path, der),
            "RSA PRIVATE KEY" => {
                RsaKeyPair::from_der(der).map(Self::rsa).map_err(|e| KeyError::Unsupported {
                    path: path.to_path_buf(),
                    what: format!("the RSA private key ({e})"),
                })
            }
            // SEC1: wrapped as PKCS#8 for its curve (ring needs the public key in it, which
            // every common tool writes).
            "EC PRIVATE KEY" => [der::OID_P256, der::OID_P384]
                .iter()
                .find_map(|curve| Self::from_pkcs8(path, &der::sec1_as_pkcs8(curve, der)).ok())
                .ok_or_else(|| KeyError::Unsupported {
                    path: path.to_path_buf(),
                    what: "the EC private key".into(),
                }),
            _ => return None,
        })
    }

    /// The first private key in a PEM file.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let bytes = std::fs::read(path)
            .map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?;
        for block in pem_blocks(path, &bytes)? {
            if let Some(key) = Self::from_pem_block(path, &block.label, &block.contents) {
                return key;
            }
        }
        Err(KeyError::NoPrivateKey { path: path.to_path_buf() })
    }

    /// A new EC P-256 key and its PKCS#8 PEM.
    pub fn generate() -> Result<(Self, String), KeyError> {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng)
            .map_err(|e| KeyError::Generate(e.to_string()))?;
        let key = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng)
            .map_err(|e| KeyError::Generate(e.to_string()))?;
        Ok((Self::ec(Algorithm::ES256, key), pem("PRIVATE KEY", pkcs8.as_ref())))
    }

    /// The key in `path`, made there (EC P-256, mode 0600, written whole) when the file does
    /// not exist.
    pub fn load_or_generate(path: &Path) -> Result<Self, KeyError> {
        if path.exists() {
            return Self::from_file(path);
        }
        let (key, pem) = Self::generate()?;
        daemon::write_atomically(path, pem.as_bytes(), 0o600)
            .map_err(|source| KeyError::Write { path: path.to_path_buf(), source })?;
        Ok(key)
    }
}

fn pem_blocks(path: &Path, bytes: &[u8]) -> Result<Vec<x509_parser::pem::Pem>, KeyError> {
    x509_parser::pem::Pem::iter_from_buffer(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| KeyError::Pem { path: path.to_path_buf(), reason: e.to_string() })
}

/// The verification keys in a PEM file: public keys, the keys of certificates, and the public
/// halves of private keys, in file order.
pub fn public_keys_from_file(path: &Path) -> Result<Vec<PublicKey>, KeyError> {
    let bytes = std::fs::read(path)
        .map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?;
    let mut keys = Vec::new();
    for block in pem_blocks(path, &bytes)? {
        let key = match block.label.as_str() {
            "PUBLIC KEY" => PublicKey::from_spki(path, "the public key", &block.contents)?,
            "CERTIFICATE" => {
                let (_, cert) =
                    x509_parser::parse_x509_certificate(&block.contents).map_err(|e| {
                        KeyError::Pem {
                            path: path.to_path_buf(),
                            reason: format!("certificate: {e}"),
                        }
                    })?;
                PublicKey::from_spki(path, "the certificate's key", cert.public_key().raw)?
            }
            label => match SigningKey::from_pem_block(path, label, &block.contents) {
                Some(key) => key?.public,
                None => continue,
            },
        };
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(KeyError::NoKeys { path: path.to_path_buf() });
    }
    Ok(keys)
}

/// PEM text: base64 in lines of 64.
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_generated_key_is_kept_private_and_loads_again_with_the_same_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sa.key");
        let key = SigningKey::load_or_generate(&path).unwrap();
        assert_eq!(key.public().alg, Algorithm::ES256);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let again = SigningKey::load_or_generate(&path).unwrap();
        assert_eq!(again.public(), key.public());
        assert_eq!(public_keys_from_file(&path).unwrap(), [key.public().clone()]);
        // The id is the hash of the DER SubjectPublicKeyInfo.
        let digest = ring::digest::digest(&ring::digest::SHA256, &key.public().spki_der());
        assert_eq!(key.public().kid, URL_SAFE_NO_PAD.encode(digest.as_ref()));
        assert_eq!(key.public().kid.len(), 43);
    }

    #[test]
    fn signatures_verify_only_with_their_key_and_algorithm() {
        let (a, _) = SigningKey::generate().unwrap();
        let (b, _) = SigningKey::generate().unwrap();
        let sig = a.sign(b"message").unwrap();
        assert_eq!(sig.len(), 64, "ES256 signatures are r || s");
        assert!(a.public().verify(Algorithm::ES256, b"message", &sig));
        assert!(!a.public().verify(Algorithm::ES256, b"massage", &sig));
        assert!(!b.public().verify(Algorithm::ES256, b"message", &sig));
        assert!(!a.public().verify(Algorithm::RS256, b"message", &sig));
    }

    fn testdata(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/serviceaccount/testdata").join(name)
    }

    /// The fixtures were made with openssl (`genrsa -traditional`, `ecparam -genkey -noout`),
    /// and their ids with `openssl pkey -pubout -outform DER | sha256 | base64url`: our DER
    /// matches Go's and OpenSSL's.
    #[test]
    fn keys_load_from_every_pem_form_operators_have_with_upstreams_ids() {
        let rsa = SigningKey::from_file(&testdata("rsa2048.pem")).unwrap();
        assert_eq!(rsa.public().alg, Algorithm::RS256);
        assert_eq!(rsa.public().kid, "L7_fPeKrhMw1PVrtUFCEY0Szc8YP_5EPJObxezTgn7Q");
        let sig = rsa.sign(b"m").unwrap();
        assert!(rsa.public().verify(Algorithm::RS256, b"m", &sig));
        assert_eq!(rsa.public().jwk()["e"], "AQAB");
        assert_eq!(
            public_keys_from_file(&testdata("rsa2048.pub")).unwrap(),
            [rsa.public().clone()]
        );
        let sec1 = SigningKey::from_file(&testdata("ec-sec1.pem")).unwrap();
        assert_eq!(sec1.public().alg, Algorithm::ES256);
        assert_eq!(sec1.public().kid, "9Vp4dT08vMHObn4Tr-DUkc3kNUzp3RTRwfve1mDAUmo");
        let jwk = sec1.public().jwk();
        assert_eq!((jwk["kty"].as_str(), jwk["crv"].as_str()), (Some("EC"), Some("P-256")));
        assert_eq!(URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap().len(), 32);

        let dir = tempfile::tempdir().unwrap();
        let p384 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
        let f = dir.path().join("p384.key");
        std::fs::write(&f, p384.serialize_pem()).unwrap();
        let key = SigningKey::from_file(&f).unwrap();
        assert_eq!(key.public().alg, Algorithm::ES384);
        let sig = key.sign(b"m").unwrap();
        assert!(key.public().verify(Algorithm::ES384, b"m", &sig));
        assert_eq!(key.public().jwk()["crv"], "P-384");
        let cert = rcgen::CertificateParams::new(vec!["x".to_string()])
            .unwrap()
            .self_signed(&p384)
            .unwrap();
        let certs = dir.path().join("cert.pem");
        std::fs::write(&certs, format!("{}{}", cert.pem(), p384.public_key_pem())).unwrap();
        assert_eq!(
            public_keys_from_file(&certs).unwrap(),
            [key.public().clone(), key.public().clone()]
        );
    }

    #[test]
    fn bad_key_files_name_the_file_and_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("k");
        std::fs::write(&f, "not a key\n").unwrap();
        let err = SigningKey::from_file(&f).unwrap_err().to_string();
        assert!(err.contains("k: no private key"), "{err}");
        let err = public_keys_from_file(&f).unwrap_err().to_string();
        assert!(err.contains("no public key, certificate or private key"), "{err}");
        std::fs::write(&f, pem("PUBLIC KEY", &[0x30, 0x03, 0x02, 0x01, 0x00])).unwrap();
        let err = public_keys_from_file(&f).unwrap_err().to_string();
        assert!(err.contains("not a SubjectPublicKeyInfo"), "{err}");
        let missing = dir.path().join("missing");
        assert!(matches!(SigningKey::from_file(&missing), Err(KeyError::Read { .. })));
    }
}
