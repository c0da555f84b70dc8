//! Upstream's `MakeDockerKeyring`: the credentials in a pod's image pull secrets, from each
//! `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson` and each
//! `kubernetes.io/dockercfg` Secret's `.dockercfg` (other types, and empty data, add nothing).
//! One that does not parse fails the whole keyring, naming the Secret, as upstream fails the
//! pull.

use api::secret::{DOCKER_CONFIG_JSON_KEY, DOCKERCFG_KEY, TYPE_DOCKER_CONFIG_JSON, TYPE_DOCKERCFG};
use k8s_openapi::api::core::v1::Secret;

use super::config::{ConfigError, parse_config_json, parse_dockercfg};
use super::keyring::Keyring;

/// How one kind of registry credentials is read.
type Parser = fn(&[u8]) -> Result<super::config::DockerConfig, ConfigError>;

/// A pull secret whose credentials do not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("image pull secret \"{namespace}/{name}\": data[{key}]: {source}")]
pub struct SecretError {
    pub namespace: String,
    pub name: String,
    pub key: &'static str,
    #[source]
    pub source: ConfigError,
}

/// The keyring of `secrets`, or `None` when none of them holds registry credentials.
pub fn keyring(secrets: &[Secret]) -> Result<Option<Keyring>, SecretError> {
    let mut keyring = Keyring::default();
    let mut found = false;
    for s in secrets {
        let data = |key: &str| {
            s.data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.as_slice())
                .filter(|b| !b.is_empty())
        };
        let (key, bytes, parse): (_, _, Parser) = match s.type_.as_deref() {
            Some(TYPE_DOCKER_CONFIG_JSON) => {
                (DOCKER_CONFIG_JSON_KEY, data(DOCKER_CONFIG_JSON_KEY), parse_config_json)
            }
            Some(TYPE_DOCKERCFG) => (DOCKERCFG_KEY, data(DOCKERCFG_KEY), parse_dockercfg),
            _ => continue,
        };
        let Some(bytes) = bytes else { continue };
        let cfg = parse(bytes).map_err(|source| SecretError {
            namespace: s.metadata.namespace.clone().unwrap_or_default(),
            name: s.metadata.name.clone().unwrap_or_default(),
            key,
            source,
        })?;
        keyring.add(&cfg);
        found = true;
    }
    Ok(found.then_some(keyring))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(name: &str, type_: &str, key: &str, value: &str) -> Secret {
        let mut s = Secret {
            type_: Some(type_.into()),
            data: Some(BTreeMap::from([(key.to_string(), ByteString(value.as_bytes().to_vec()))])),
            ..Default::default()
        };
        s.metadata.name = Some(name.into());
        s.metadata.namespace = Some("default".into());
        s
    }

    fn users(k: &Keyring, repo: &str) -> Vec<String> {
        k.lookup(repo).into_iter().map(|e| e.username).collect()
    }

    #[test]
    fn both_registry_secret_types_add_their_credentials() {
        let k = keyring(&[
            secret(
                "json",
                TYPE_DOCKER_CONFIG_JSON,
                ".dockerconfigjson",
                r#"{"auths": {"r.io": {"auth": "YTpw"}}}"#,
            ),
            secret(
                "cfg",
                TYPE_DOCKERCFG,
                ".dockercfg",
                r#"{"r.io": {"username": "b", "password": "p"}}"#,
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(users(&k, "r.io/app"), ["a", "b"]);
    }

    #[test]
    fn other_types_and_empty_data_add_nothing() {
        let opaque = secret("o", "Opaque", ".dockerconfigjson", r#"{"auths": {"r.io": {}}}"#);
        let wrong_key = secret("w", TYPE_DOCKER_CONFIG_JSON, ".dockercfg", r#"{"r.io": {}}"#);
        let empty = secret("e", TYPE_DOCKERCFG, ".dockercfg", "");
        assert_eq!(keyring(&[opaque, wrong_key, empty]), Ok(None));
    }

    #[test]
    fn a_secret_that_does_not_parse_is_named() {
        let good = secret("good", TYPE_DOCKERCFG, ".dockercfg", r#"{"r.io": {}}"#);
        let bad =
            secret("regcred", TYPE_DOCKER_CONFIG_JSON, ".dockerconfigjson", r#"{"auths": []}"#);
        let err = keyring(&[good, bad]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "image pull secret \"default/regcred\": data[.dockerconfigjson]: auths: must be an object of registries"
        );
    }
}
