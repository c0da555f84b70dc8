//! ConfigMaps and Secrets as upstream's `ValidateConfigMap` and `ValidateSecret` keep them,
//! minus the metadata: keys of `data` (and a ConfigMap's `binaryData`) are config keys (they
//! become file names), a ConfigMap has no key in both maps, either object holds at most 1 MiB,
//! and each Secret `type` has its required keys. apiserver-lite answers 422s with these; the
//! kubelet refuses node-local objects (`staticConfigPath`) with the same words.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::names::config_map_key;
use super::{ErrorList, FieldError, Path};
use crate::secret::{
    BASIC_AUTH_PASSWORD_KEY, BASIC_AUTH_USERNAME_KEY, DOCKER_CONFIG_JSON_KEY, DOCKERCFG_KEY,
    MAX_SIZE, SERVICE_ACCOUNT_NAME, SSH_AUTH_PRIVATE_KEY, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY,
    TYPE_BASIC_AUTH, TYPE_DOCKER_CONFIG_JSON, TYPE_DOCKERCFG, TYPE_SERVICE_ACCOUNT_TOKEN,
    TYPE_SSH_AUTH, TYPE_TLS, json,
};

/// What an error about a Secret's content shows instead of it.
const REDACTED: &str = "<secret contents redacted>";

/// Each key must be a config key (`<path>[<key>]`).
pub fn validate_config_keys<'a>(
    keys: impl Iterator<Item = &'a str>,
    path: &Path,
    errs: &mut ErrorList,
) {
    for key in keys {
        for msg in config_map_key(key) {
            errs.push(FieldError::invalid(&path.key(key), key, msg));
        }
    }
}

/// Upstream's `ValidateConfigMap`, minus the metadata.
pub fn validate_config_map(c: &ConfigMap) -> ErrorList {
    let mut errs = ErrorList::default();
    let (data, binary) = (c.data.as_ref(), c.binary_data.as_ref());
    let data_path = Path::root("data");
    for key in data.into_iter().flat_map(|d| d.keys()) {
        validate_config_keys(std::iter::once(key.as_str()), &data_path, &mut errs);
        if binary.is_some_and(|b| b.contains_key(key)) {
            let msg = "duplicate of key present in binaryData";
            errs.push(FieldError::invalid(&data_path.key(key), key, msg));
        }
    }
    let keys = binary.into_iter().flat_map(|b| b.keys().map(String::as_str));
    validate_config_keys(keys, &Path::root("binaryData"), &mut errs);
    let size = data.into_iter().flat_map(|d| d.values()).map(String::len).sum::<usize>()
        + binary.into_iter().flat_map(|b| b.values()).map(|v| v.0.len()).sum::<usize>();
    if size > MAX_SIZE {
        // The whole object is too big: upstream reports it at the empty path.
        errs.push(FieldError::too_long(&Path::root(""), MAX_SIZE));
    }
    errs
}

/// A Secret's data by key.
pub fn secret_data(s: &Secret) -> BTreeMap<&str, &[u8]> {
    s.data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice())).collect()
}

/// `data[<key>]`: present, or `Required value`.
fn required<'a>(
    data: &BTreeMap<&str, &'a [u8]>,
    key: &str,
    errs: &mut ErrorList,
) -> Option<&'a [u8]> {
    let found = data.get(key).copied();
    if found.is_none() {
        errs.push(FieldError::required(&Path::root("data").key(key), ""));
    }
    found
}

/// A registry credentials key holds JSON that unmarshals into a map.
fn registry_json(data: &BTreeMap<&str, &[u8]>, key: &str, errs: &mut ErrorList) {
    if let Some(why) = required(data, key, errs).and_then(json::unmarshal_map_error) {
        errs.push(FieldError::invalid(&Path::root("data").key(key), REDACTED, why));
    }
}

/// Upstream's `ValidateSecret`, minus the metadata: keys, size, and the type's own rules.
pub fn validate_secret(s: &Secret) -> ErrorList {
    let mut errs = ErrorList::default();
    let data = secret_data(s);
    let path = Path::root("data");
    validate_config_keys(data.keys().copied(), &path, &mut errs);
    if data.values().map(|v| v.len()).sum::<usize>() > MAX_SIZE {
        errs.push(FieldError::too_long(&path, MAX_SIZE));
    }
    match s.type_.as_deref().unwrap_or_default() {
        TYPE_SERVICE_ACCOUNT_TOKEN => {
            let annotations = s.metadata.annotations.as_ref();
            if annotations.and_then(|a| a.get(SERVICE_ACCOUNT_NAME)).is_none_or(String::is_empty) {
                let at = Path::root("metadata").child("annotations").key(SERVICE_ACCOUNT_NAME);
                errs.push(FieldError::required(&at, ""));
            }
        }
        TYPE_DOCKERCFG => registry_json(&data, DOCKERCFG_KEY, &mut errs),
        TYPE_DOCKER_CONFIG_JSON => registry_json(&data, DOCKER_CONFIG_JSON_KEY, &mut errs),
        // Either may be empty, but one must be there.
        TYPE_BASIC_AUTH
            if !data.contains_key(BASIC_AUTH_USERNAME_KEY)
                && !data.contains_key(BASIC_AUTH_PASSWORD_KEY) =>
        {
            required(&data, BASIC_AUTH_USERNAME_KEY, &mut errs);
            required(&data, BASIC_AUTH_PASSWORD_KEY, &mut errs);
        }
        TYPE_SSH_AUTH if data.get(SSH_AUTH_PRIVATE_KEY).is_none_or(|k| k.is_empty()) => {
            errs.push(FieldError::required(&path.key(SSH_AUTH_PRIVATE_KEY), ""));
        }
        TYPE_TLS => {
            required(&data, TLS_CERT_KEY, &mut errs);
            required(&data, TLS_PRIVATE_KEY_KEY, &mut errs);
        }
        // Opaque, any type of the user's own, and the types above when they are whole.
        _ => {}
    }
    errs
}
