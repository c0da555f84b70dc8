//! Secret types, the data keys each one requires, and the limits upstream's core/v1 gives
//! Secrets and ConfigMaps: what the apiserver validates and the kubelet reads; how a Secret
//! written with `stringData` becomes one with `data` ([`merge_string_data`]).
//!
//! [`json`] says why registry credentials are not JSON, in Go's words.

pub mod json;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

/// `type` when none is given.
pub const TYPE_OPAQUE: &str = "Opaque";
/// A service account's token; `metadata.annotations[SERVICE_ACCOUNT_NAME]` names the account.
pub const TYPE_SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
/// A legacy `~/.dockercfg` in [`DOCKERCFG_KEY`].
pub const TYPE_DOCKERCFG: &str = "kubernetes.io/dockercfg";
/// A `~/.docker/config.json` in [`DOCKER_CONFIG_JSON_KEY`].
pub const TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
/// [`BASIC_AUTH_USERNAME_KEY`] and/or [`BASIC_AUTH_PASSWORD_KEY`].
pub const TYPE_BASIC_AUTH: &str = "kubernetes.io/basic-auth";
/// [`SSH_AUTH_PRIVATE_KEY`].
pub const TYPE_SSH_AUTH: &str = "kubernetes.io/ssh-auth";
/// [`TLS_CERT_KEY`] and [`TLS_PRIVATE_KEY_KEY`].
pub const TYPE_TLS: &str = "kubernetes.io/tls";

pub const SERVICE_ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
pub const DOCKERCFG_KEY: &str = ".dockercfg";
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
pub const BASIC_AUTH_USERNAME_KEY: &str = "username";
pub const BASIC_AUTH_PASSWORD_KEY: &str = "password";
pub const SSH_AUTH_PRIVATE_KEY: &str = "ssh-privatekey";
pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_PRIVATE_KEY_KEY: &str = "tls.key";

/// The most bytes a Secret's data, or a ConfigMap's data and binary data together, may hold
/// (upstream's `MaxSecretSize`).
pub const MAX_SIZE: usize = 1024 * 1024;

/// Upstream's conversion: `stringData` into `data` (its values win), then gone.
pub fn merge_string_data(s: &mut Secret) {
    let Some(strings) = s.string_data.take() else { return };
    if strings.is_empty() {
        return;
    }
    let data = s.data.get_or_insert_with(BTreeMap::new);
    for (k, v) in strings {
        data.insert(k, ByteString(v.into_bytes()));
    }
}

/// Upstream's `SetDefaults_Secret`.
pub fn default_secret(s: &mut Secret) {
    if s.type_.as_deref().is_none_or(str::is_empty) {
        s.type_ = Some(TYPE_OPAQUE.into());
    }
}
