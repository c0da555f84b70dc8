//! Secrets as upstream's REST strategy, conversion and validation keep them:
//!
//! - `stringData` is write-only: a decoded Secret has it merged into `data` (its values win) and
//!   removed, as upstream's v1 → internal conversion does, so it is never stored or returned,
//!   whichever way it came (create, update, patch, a protobuf body, `kubectl apply`);
//! - `type` defaults to `Opaque`, each type's required keys are checked, and it never changes;
//! - data keys are config keys and the data holds at most 1 MiB;
//! - an `immutable: true` Secret keeps its data and stays immutable.
//!
//! [`json`] says why registry credentials are not JSON, in Go's words.

mod json;

use std::collections::BTreeMap;

use api::secret::{
    BASIC_AUTH_PASSWORD_KEY, BASIC_AUTH_USERNAME_KEY, DOCKER_CONFIG_JSON_KEY, DOCKERCFG_KEY,
    MAX_SIZE, SERVICE_ACCOUNT_NAME, SSH_AUTH_PRIVATE_KEY, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY,
    TYPE_BASIC_AUTH, TYPE_DOCKER_CONFIG_JSON, TYPE_DOCKERCFG, TYPE_OPAQUE,
    TYPE_SERVICE_ACCOUNT_TOKEN, TYPE_SSH_AUTH, TYPE_TLS,
};
use api::validation::{ErrorList, FieldError, Path, validate_immutable};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use super::config_map::{IMMUTABLE_MSG, validate_keys};

/// What an error about a Secret's content shows instead of it.
const REDACTED: &str = "<secret contents redacted>";

/// Upstream's conversion: `stringData` into `data`, then gone.
pub(super) fn merge_string_data(s: &mut Secret) {
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
pub(super) fn default_secret(s: &mut Secret) {
    if s.type_.as_deref().is_none_or(str::is_empty) {
        s.type_ = Some(TYPE_OPAQUE.into());
    }
}

fn data(s: &Secret) -> BTreeMap<&str, &[u8]> {
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
pub(super) fn validate(s: &Secret) -> ErrorList {
    let mut errs = ErrorList::default();
    let data = data(s);
    let path = Path::root("data");
    validate_keys(data.keys().copied(), &path, &mut errs);
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

/// Upstream's `ValidateSecretUpdate`: the type never changes; an immutable Secret keeps its
/// data and stays immutable; then the Secret's own rules.
pub(super) fn validate_update(new: &Secret, old: &Secret) -> ErrorList {
    let mut errs = ErrorList::default();
    validate_immutable(&new.type_, &old.type_, &Path::root("type"), &mut errs);
    if old.immutable == Some(true) {
        if new.immutable != Some(true) {
            errs.push(FieldError::forbidden(&Path::root("immutable"), IMMUTABLE_MSG));
        }
        // `stringData` was merged into `data` at decoding, so this covers it too.
        if data(new) != data(old) {
            errs.push(FieldError::forbidden(&Path::root("data"), IMMUTABLE_MSG));
        }
    }
    errs.extend(validate(new));
    errs
}

#[cfg(test)]
mod tests;
