//! JSON Web Tokens in compact serialization, as upstream's go-jose writes them: a header of
//! `alg` and `kid` (no `typ`), the claims, and the signature, each unpadded base64url and
//! joined by dots. Reading splits a token without trusting it; [`Token::verify`] checks the
//! signature against the keys that may have made it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::keys::{Algorithm, KeyError, PublicKey, SigningKey};

/// The most a token may be (a pod's token is under 2 KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    kid: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("not a JWT")]
    Malformed,
    #[error("the JWT header names algorithm {0:?}, not RS256, ES256 or ES384")]
    Algorithm(String),
    /// Upstream's words.
    #[error("invalid signature, no keys found")]
    NoKeys,
    #[error("invalid signature")]
    Signature,
}

fn b64_json(v: &impl Serialize) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap_or_default())
}

/// Signs `claims` with `key`: the compact JWS.
pub fn sign(key: &SigningKey, claims: &impl Serialize) -> Result<String, KeyError> {
    let public = key.public();
    let header = Header { alg: public.alg.name().into(), kid: public.kid.clone() };
    let input = format!("{}.{}", b64_json(&header), b64_json(claims));
    let signature = key.sign(input.as_bytes())?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// A token split into its parts; nothing in it is trusted until [`Token::verify`].
#[derive(Debug)]
pub struct Token<'a> {
    alg: Algorithm,
    kid: String,
    /// The decoded claims (JSON).
    pub payload: Vec<u8>,
    signing_input: &'a str,
    signature: Vec<u8>,
}

impl<'a> Token<'a> {
    pub fn parse(token: &'a str) -> Result<Self, JwtError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let decode = |s: &str| URL_SAFE_NO_PAD.decode(s).map_err(|_| JwtError::Malformed);
        let header: Header =
            serde_json::from_slice(&decode(header)?).map_err(|_| JwtError::Malformed)?;
        let alg = match header.alg.as_str() {
            "RS256" => Algorithm::RS256,
            "ES256" => Algorithm::ES256,
            "ES384" => Algorithm::ES384,
            other => return Err(JwtError::Algorithm(other.to_string())),
        };
        let signing_input = &token[..token.len() - signature.len() - 1];
        Ok(Token {
            alg,
            kid: header.kid,
            payload: decode(payload)?,
            signing_input,
            signature: decode(signature)?,
        })
    }

    /// Checks the signature with the keys whose id the header names (all keys when it names
    /// none), as upstream picks them.
    pub fn verify(&self, keys: &[PublicKey]) -> Result<(), JwtError> {
        let candidates: Vec<&PublicKey> =
            keys.iter().filter(|k| self.kid.is_empty() || k.kid == self.kid).collect();
        if candidates.is_empty() {
            return Err(JwtError::NoKeys);
        }
        let message = self.signing_input.as_bytes();
        if candidates.iter().any(|k| k.verify(self.alg, message, &self.signature)) {
            Ok(())
        } else {
            Err(JwtError::Signature)
        }
    }
}

/// The `iss` claim of a token, read without checking anything (upstream's `hasCorrectIssuer`:
/// only tokens of our issuers go further).
pub fn unverified_issuer(token: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Iss {
        #[serde(default)]
        iss: String,
    }
    if token.trim_start().starts_with('{') || token.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice::<Iss>(&payload).ok().map(|c| c.iss)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_signed_token_has_go_joses_header_and_verifies_with_its_key_only() {
        let (key, _) = SigningKey::generate().unwrap();
        let (other, _) = SigningKey::generate().unwrap();
        let token = sign(&key, &json!({"iss": "https://issuer", "sub": "x"})).unwrap();
        let header = URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap();
        assert_eq!(
            String::from_utf8(header).unwrap(),
            format!("{{\"alg\":\"ES256\",\"kid\":\"{}\"}}", key.public().kid)
        );
        assert_eq!(unverified_issuer(&token).as_deref(), Some("https://issuer"));
        let parsed = Token::parse(&token).unwrap();
        assert_eq!(parsed.verify(&[other.public().clone(), key.public().clone()]), Ok(()));
        assert_eq!(parsed.verify(&[other.public().clone()]), Err(JwtError::NoKeys));
        // Another key under the same id (a forged header) does not verify.
        let mut impostor = other.public().clone();
        impostor.kid = key.public().kid.clone();
        assert_eq!(parsed.verify(&[impostor]), Err(JwtError::Signature));
    }

    #[test]
    fn a_tampered_or_malformed_token_is_refused() {
        let (key, _) = SigningKey::generate().unwrap();
        let token = sign(&key, &json!({"sub": "a"})).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let forged_payload = URL_SAFE_NO_PAD.encode(br#"{"sub":"b"}"#);
        let forged = format!("{}.{forged_payload}.{}", parts[0], parts[2]);
        let parsed = Token::parse(&forged).unwrap();
        assert_eq!(parsed.verify(&[key.public().clone()]), Err(JwtError::Signature));
        for bad in ["", "a.b", "a.b.c.d", "!!.e30.x", &format!("{}.e30", parts[0])] {
            assert_eq!(Token::parse(bad).unwrap_err(), JwtError::Malformed, "{bad:?}");
        }
        let none = format!("{}.{}.", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#), parts[1]);
        assert_eq!(Token::parse(&none).unwrap_err(), JwtError::Algorithm("none".into()));
        assert_eq!(unverified_issuer("{\"iss\":\"x\"}"), None);
        assert_eq!(unverified_issuer("plain-token"), None);
    }
}
