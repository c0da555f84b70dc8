//! The files a ConfigMap's or Secret's keys become (upstream's `MakePayload` of the configmap
//! and secret plugins): every key under its own name, or only the `items` listed, each at its
//! `path`, with the item's `mode` or the volume's default.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::KeyToPath;

use super::SetupError;
use super::atomic_writer::{FileProjection, PathError, Payload, clean_path};
use crate::objects::{ObjectKey, ObjectKind};

/// Upstream's default file mode (`0644`) for ConfigMaps, Secrets, downward API and projected
/// volumes.
pub const DEFAULT_MODE: u32 = 0o644;

/// A file mode from the spec: between 0 and 0777, as upstream validates it.
pub fn mode(mode: Option<i32>, default: u32, path: &str) -> Result<u32, SetupError> {
    match mode {
        None => Ok(default),
        Some(m) => u32::try_from(m)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or_else(|| SetupError::Mode { path: path.to_string(), mode: m }),
    }
}

/// An `items` path, checked as the atomic writer will (relative, no `..`, not reserved).
pub fn item_path(path: &str) -> Result<String, SetupError> {
    clean_path(path).map_err(|reason| SetupError::BadPath { path: path.to_string(), reason })
}

/// A key used as a file name as it is: one path segment the atomic writer accepts.
fn key_as_file(object: &ObjectKey, key: &str) -> Result<String, SetupError> {
    let bad = |reason| SetupError::BadKey {
        object: object.clone(),
        key: key.to_string(),
        reason: Box::new(reason),
    };
    let clean = clean_path(key).map_err(bad)?;
    if clean != key || key.contains('/') {
        return Err(bad(PathError::NotAFileName(key.to_string())));
    }
    Ok(clean)
}

/// Adds a file; a path already taken (by another item or source) is an error.
pub fn insert(payload: &mut Payload, path: String, file: FileProjection) -> Result<(), SetupError> {
    match payload.entry(path) {
        std::collections::btree_map::Entry::Occupied(taken) => {
            Err(SetupError::Collision(taken.key().clone()))
        }
        std::collections::btree_map::Entry::Vacant(slot) => {
            slot.insert(file);
            Ok(())
        }
    }
}

fn missing(object: &ObjectKey, key: &str) -> SetupError {
    match object.kind {
        ObjectKind::ConfigMap => {
            SetupError::MissingConfigMapKey { object: object.clone(), key: key.to_string() }
        }
        ObjectKind::Secret => {
            SetupError::MissingSecretKey { object: object.clone(), key: key.to_string() }
        }
    }
}

/// Projects `data` (the object's keys; empty for an optional object that does not exist).
pub fn project_keys(
    object: &ObjectKey,
    data: &BTreeMap<&str, &[u8]>,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
) -> Result<Payload, SetupError> {
    let mut payload = Payload::new();
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (key, value) in data {
                let path = key_as_file(object, key)?;
                payload.insert(path, FileProjection { data: value.to_vec(), mode: default_mode });
            }
        }
        Some(items) => {
            for item in items {
                let Some(value) = data.get(item.key.as_str()) else {
                    if optional {
                        continue;
                    }
                    return Err(missing(object, &item.key));
                };
                let path = item_path(&item.path)?;
                let mode = mode(item.mode, default_mode, &item.path)?;
                insert(&mut payload, path, FileProjection { data: value.to_vec(), mode })?;
            }
        }
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ObjectKey {
        ObjectKey::new(ObjectKind::ConfigMap, "ns", "cm")
    }

    fn item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
        KeyToPath { key: key.into(), path: path.into(), mode }
    }

    #[test]
    fn every_key_or_only_the_items_with_their_modes() {
        let data: BTreeMap<&str, &[u8]> = [("a", &b"1"[..]), ("b", &b"2"[..])].into();
        let all = project_keys(&key(), &data, None, 0o644, false).unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(all.values().all(|f| f.mode == 0o644));
        let items = [item("a", "dir/renamed", Some(0o400))];
        let some = project_keys(&key(), &data, Some(&items), 0o644, false).unwrap();
        assert_eq!(some["dir/renamed"], FileProjection { data: b"1".to_vec(), mode: 0o400 });
        assert_eq!(some.len(), 1);
    }

    #[test]
    fn a_missing_key_is_an_error_unless_optional() {
        let data: BTreeMap<&str, &[u8]> = [("a", &b"1"[..])].into();
        let items = [item("nope", "x", None)];
        let err = project_keys(&key(), &data, Some(&items), 0o644, false).unwrap_err();
        assert_eq!(err.to_string(), "configmap references non-existent config key: nope");
        let secret = ObjectKey::new(ObjectKind::Secret, "ns", "s");
        let err = project_keys(&secret, &data, Some(&items), 0o644, false).unwrap_err();
        assert_eq!(err.to_string(), "references non-existent secret key: nope");
        assert!(project_keys(&key(), &data, Some(&items), 0o644, true).unwrap().is_empty());
    }

    #[test]
    fn bad_paths_keys_and_modes_are_errors_naming_them() {
        let data: BTreeMap<&str, &[u8]> = [("a", &b"1"[..])].into();
        for path in ["../escape", "/abs", "..data"] {
            let items = [item("a", path, None)];
            let err = project_keys(&key(), &data, Some(&items), 0o644, false).unwrap_err();
            assert!(matches!(&err, SetupError::BadPath { path: p, .. } if p == path), "{err}");
            assert!(err.to_string().contains(path), "{err}");
        }
        let items = [item("a", "x", Some(0o1777))];
        let err = project_keys(&key(), &data, Some(&items), 0o644, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "mode 0o1777 of \"x\" is out of range: must be between 0 and 0777 (octal)"
        );
        for bad in ["a/b", "..hidden", ".", ""] {
            let data: BTreeMap<&str, &[u8]> = [(bad, &b"1"[..])].into();
            let err = project_keys(&key(), &data, None, 0o644, false).unwrap_err();
            assert!(matches!(&err, SetupError::BadKey { key, .. } if key == bad), "{bad}: {err}");
            assert!(err.to_string().starts_with("configMap ns/cm: key"), "{err}");
        }
    }
}
