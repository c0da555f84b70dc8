//! ConfigMaps as upstream's validation keeps them: keys of `data` and `binaryData` are config
//! keys (they become file names), no key is in both, both together hold at most 1 MiB, and an
//! `immutable: true` ConfigMap keeps its data and stays immutable.

use std::collections::BTreeMap;

use api::validation::{ErrorList, FieldError, Path};
use k8s_openapi::api::core::v1::ConfigMap;

/// Upstream's message for data changed under `immutable: true` (Secrets share it).
pub(super) const IMMUTABLE_MSG: &str = "field is immutable when `immutable` is set";

pub(crate) use api::validation::config::validate_config_map as validate;

/// A map, with an empty one the same as none.
fn non_empty<V>(m: &Option<BTreeMap<String, V>>) -> Option<&BTreeMap<String, V>> {
    m.as_ref().filter(|m| !m.is_empty())
}

/// Upstream's `ValidateConfigMapUpdate`: an immutable ConfigMap keeps `data` and `binaryData`
/// and stays immutable; then the ConfigMap's own rules.
pub(crate) fn validate_update(new: &ConfigMap, old: &ConfigMap) -> ErrorList {
    let mut errs = ErrorList::default();
    if old.immutable == Some(true) {
        if new.immutable != Some(true) {
            errs.push(FieldError::forbidden(&Path::root("immutable"), IMMUTABLE_MSG));
        }
        if non_empty(&new.data) != non_empty(&old.data) {
            errs.push(FieldError::forbidden(&Path::root("data"), IMMUTABLE_MSG));
        }
        if non_empty(&new.binary_data) != non_empty(&old.binary_data) {
            errs.push(FieldError::forbidden(&Path::root("binaryData"), IMMUTABLE_MSG));
        }
    }
    errs.extend(validate(new));
    errs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use api::secret::MAX_SIZE;
    use k8s_openapi::ByteString;

    use super::*;

    fn cm(data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> ConfigMap {
        ConfigMap {
            data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            binary_data: Some(
                binary.iter().map(|(k, v)| (k.to_string(), ByteString(v.to_vec()))).collect(),
            ),
            ..Default::default()
        }
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn keys_must_be_config_keys_in_data_and_binary_data() {
        assert!(
            validate(&cm(&[("app.conf", "x"), (".env", "y")], &[("logo.png", b"\x89")])).is_empty()
        );
        let errs = validate(&cm(&[("a b", "x")], &[("..data", b"y")]));
        assert_eq!(
            messages(&errs),
            [
                "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "binaryData[..data]: Invalid value: \"..data\": must not start with '..'",
            ]
        );
        assert_eq!(
            messages(&validate(&cm(&[("k", "x")], &[("k", b"y")]))),
            ["data[k]: Invalid value: \"k\": duplicate of key present in binaryData"]
        );
    }

    #[test]
    fn data_and_binary_data_together_hold_at_most_one_mebibyte() {
        let half = "x".repeat(MAX_SIZE / 2);
        let bytes = vec![0u8; MAX_SIZE / 2];
        assert!(validate(&cm(&[("a", &half)], &[("b", &bytes)])).is_empty());
        let errs = validate(&cm(&[("a", &half)], &[("b", &[&bytes[..], b"!"].concat())]));
        assert_eq!(messages(&errs), [": Too long: must have at most 1048576 bytes"]);
    }

    #[test]
    fn an_immutable_config_map_keeps_its_data_and_stays_immutable() {
        let mut old = cm(&[("a", "1")], &[]);
        old.immutable = Some(true);
        let mut same = old.clone();
        same.metadata.labels = Some(BTreeMap::from([("l".to_string(), "v".to_string())]));
        assert!(validate_update(&same, &old).is_empty(), "metadata may change");
        let mut changed = old.clone();
        changed.data = Some(BTreeMap::from([("a".to_string(), "2".to_string())]));
        changed.binary_data = Some(BTreeMap::from([("b".to_string(), ByteString(vec![1]))]));
        changed.immutable = Some(false);
        assert_eq!(
            messages(&validate_update(&changed, &old)),
            [
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
                "binaryData: Forbidden: field is immutable when `immutable` is set",
            ]
        );
        let mut mutable = old.clone();
        mutable.immutable = None;
        let mut edited = mutable.clone();
        edited.data = None;
        assert!(validate_update(&edited, &mutable).is_empty(), "a mutable one may change");
        let mut freeze = mutable.clone();
        freeze.immutable = Some(true);
        assert!(validate_update(&freeze, &mutable).is_empty(), "and may become immutable");
    }
}
