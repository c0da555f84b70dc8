//! Service-account issuer discovery, as upstream serves it: `/.well-known/openid-configuration`
//! (the issuer, where its keys are, what it signs with) and `/openid/v1/jwks` (the public keys
//! as a JWK set), so that relying parties outside the cluster can verify tokens. Both are
//! rendered once at start; served only when the issuer is an `https` URL without query or
//! fragment (upstream's check), with upstream's content types and an hour's cache.

use serde_json::{Value, json};

use super::keys::PublicKey;

pub const CONFIG_PATH: &str = "/.well-known/openid-configuration";
pub const JWKS_PATH: &str = "/openid/v1/jwks";
pub const JWKS_CONTENT_TYPE: &str = "application/jwk-set+json";
/// `Cache-Control`: the keys may be cached for an hour (upstream's static keys).
pub const CACHE_CONTROL: &str = "public, max-age=3600";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenIdError {
    #[error("issuer URL must use https scheme, got: {0}")]
    Scheme(String),
    #[error("issuer URL may not include a query, got: {0}")]
    Query(String),
    #[error("issuer URL may not include a fragment, got: {0}")]
    Fragment(String),
    #[error("jwksURI requires https scheme, parsed as: {0}")]
    JwksScheme(String),
    #[error("no keys provided for validating keyset")]
    NoKeys,
}

/// The two documents, rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub config: Vec<u8>,
    pub keys: Vec<u8>,
}

impl Discovery {
    /// The documents for `issuer` with keys at `jwks_uri`.
    pub fn new(issuer: &str, jwks_uri: &str, keys: &[PublicKey]) -> Result<Self, OpenIdError> {
        let rest =
            issuer.strip_prefix("https://").ok_or_else(|| OpenIdError::Scheme(issuer.into()))?;
        if rest.contains('?') {
            return Err(OpenIdError::Query(issuer.into()));
        }
        if rest.contains('#') {
            return Err(OpenIdError::Fragment(issuer.into()));
        }
        if !jwks_uri.starts_with("https://") {
            return Err(OpenIdError::JwksScheme(jwks_uri.into()));
        }
        if keys.is_empty() {
            return Err(OpenIdError::NoKeys);
        }
        let mut algs: Vec<&str> = keys.iter().map(|k| k.alg.name()).collect();
        algs.sort_unstable();
        algs.dedup();
        let config = json!({
            "issuer": issuer,
            "jwks_uri": jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": algs,
        });
        let keys: Vec<Value> = keys.iter().map(PublicKey::jwk).collect();
        Ok(Discovery {
            config: serde_json::to_vec(&config).unwrap_or_default(),
            keys: serde_json::to_vec(&json!({ "keys": keys })).unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::serviceaccount::keys::SigningKey;

    #[test]
    fn the_documents_name_the_issuer_its_keys_and_algorithms() {
        let (a, _) = SigningKey::generate().unwrap();
        let (b, _) = SigningKey::generate().unwrap();
        let keys = [a.public().clone(), b.public().clone()];
        let d =
            Discovery::new("https://issuer.example", "https://10.0.0.1:6443/openid/v1/jwks", &keys)
                .unwrap();
        let config: Value = serde_json::from_slice(&d.config).unwrap();
        assert_eq!(config["issuer"], "https://issuer.example");
        assert_eq!(config["jwks_uri"], "https://10.0.0.1:6443/openid/v1/jwks");
        assert_eq!(config["id_token_signing_alg_values_supported"], json!(["ES256"]));
        assert_eq!(config["response_types_supported"], json!(["id_token"]));
        let jwks: Value = serde_json::from_slice(&d.keys).unwrap();
        let kids: Vec<&str> =
            jwks["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap()).collect();
        assert_eq!(kids, [a.public().kid.as_str(), b.public().kid.as_str()]);
    }

    #[test]
    fn an_issuer_that_is_no_https_url_gets_no_documents() {
        let (a, _) = SigningKey::generate().unwrap();
        let keys = [a.public().clone()];
        let jwks = "https://h/openid/v1/jwks";
        assert_eq!(
            Discovery::new("http://issuer", jwks, &keys).unwrap_err().to_string(),
            "issuer URL must use https scheme, got: http://issuer"
        );
        assert!(matches!(Discovery::new("https://i?x=1", jwks, &keys), Err(OpenIdError::Query(_))));
        assert!(matches!(
            Discovery::new("https://i#f", jwks, &keys),
            Err(OpenIdError::Fragment(_))
        ));
        assert!(matches!(
            Discovery::new("https://i", "http://h", &keys),
            Err(OpenIdError::JwksScheme(_))
        ));
        assert_eq!(Discovery::new("https://i", jwks, &[]).unwrap_err(), OpenIdError::NoKeys);
    }
}
