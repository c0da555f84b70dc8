//! The little DER the keys need written: a public key's `SubjectPublicKeyInfo` (what the key
//! id is a hash of, as Go's `x509.MarshalPKIXPublicKey` writes it) and a SEC1 EC private key
//! wrapped as PKCS#8 (the form `ring` reads). Reading goes through `x509-parser`.

/// `rsaEncryption` (1.2.840.113549.1.1.1), the OID's content octets.
pub const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// `id-ecPublicKey` (1.2.840.10045.2.1).
pub const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// `prime256v1`, NIST P-256 (1.2.840.10045.3.1.7).
pub const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// `secp384r1`, NIST P-384 (1.3.132.0.34).
pub const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
const NULL: u8 = 0x05;
const OID: u8 = 0x06;

/// One tag-length-value, the length in DER's shortest form.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> =
            len.to_be_bytes().iter().copied().skip_while(|b| *b == 0).collect::<Vec<u8>>();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(content);
    out
}

fn sequence(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(SEQUENCE, &parts.concat())
}

/// A non-negative INTEGER from big-endian bytes: no redundant leading zeros, and one zero
/// when the high bit is set (so it stays positive).
fn unsigned_integer(be: &[u8]) -> Vec<u8> {
    let trimmed: &[u8] = match be.iter().position(|b| *b != 0) {
        Some(i) => &be[i..],
        None => &[0],
    };
    let mut content = Vec::with_capacity(trimmed.len() + 1);
    if trimmed[0] & 0x80 != 0 {
        content.push(0);
    }
    content.extend_from_slice(trimmed);
    tlv(INTEGER, &content)
}

fn bit_string(bytes: &[u8]) -> Vec<u8> {
    tlv(BIT_STRING, &[&[0u8][..], bytes].concat())
}

/// The `SubjectPublicKeyInfo` of an RSA key (`NULL` parameters, as Go writes them).
pub fn rsa_spki(n: &[u8], e: &[u8]) -> Vec<u8> {
    let algorithm = sequence(&[tlv(OID, OID_RSA_ENCRYPTION), tlv(NULL, &[])]);
    let key = sequence(&[unsigned_integer(n), unsigned_integer(e)]);
    sequence(&[algorithm, bit_string(&key)])
}

/// The `SubjectPublicKeyInfo` of an EC key: its named curve and uncompressed point.
pub fn ec_spki(curve: &[u8], point: &[u8]) -> Vec<u8> {
    let algorithm = sequence(&[tlv(OID, OID_EC_PUBLIC_KEY), tlv(OID, curve)]);
    sequence(&[algorithm, bit_string(point)])
}

/// A SEC1 `ECPrivateKey` on `curve` as a PKCS#8 `PrivateKeyInfo`.
pub fn sec1_as_pkcs8(curve: &[u8], sec1: &[u8]) -> Vec<u8> {
    let algorithm = sequence(&[tlv(OID, OID_EC_PUBLIC_KEY), tlv(OID, curve)]);
    sequence(&[unsigned_integer(&[0]), algorithm, tlv(OCTET_STRING, sec1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_lengths_are_in_their_shortest_form() {
        assert_eq!(unsigned_integer(&[0, 0, 1]), [0x02, 0x01, 0x01]);
        assert_eq!(unsigned_integer(&[0x80]), [0x02, 0x02, 0x00, 0x80]);
        assert_eq!(unsigned_integer(&[0, 0]), [0x02, 0x01, 0x00]);
        assert_eq!(tlv(OCTET_STRING, &[7; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(tlv(OCTET_STRING, &[7; 300])[..4], [0x04, 0x82, 0x01, 0x2c]);
    }

    #[test]
    fn an_spki_reads_back_with_x509_parser() {
        use x509_parser::prelude::FromDer;
        use x509_parser::public_key::PublicKey;
        let point = [[4u8].as_slice(), &[1; 32], &[2; 32]].concat();
        let der = ec_spki(OID_P256, &point);
        let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der).unwrap();
        assert!(matches!(spki.parsed().unwrap(), PublicKey::EC(p) if p.data() == point));
        let der = rsa_spki(&[0xc3; 256], &[1, 0, 1]);
        let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der).unwrap();
        let PublicKey::RSA(rsa) = spki.parsed().unwrap() else { panic!("not RSA") };
        assert_eq!((rsa.modulus.len(), rsa.exponent), (257, &[1u8, 0, 1][..]));
    }
}
