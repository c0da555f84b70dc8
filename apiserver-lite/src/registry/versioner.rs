//! The resourceVersion of a stored object is the revision it is stored at (upstream's
//! `APIObjectVersioner`). Over SQLite the store knows the revision before it writes; over etcd
//! it is etcd's, known after, so what etcd holds may carry a guess, and values read back are
//! made to carry the revision etcd gave them.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::storage::Revision;

/// Only `metadata.resourceVersion`; the rest of the object is skipped, not built.
#[derive(Deserialize)]
struct Probe {
    metadata: ProbeMeta,
}

#[derive(Deserialize)]
struct ProbeMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// `value` with `metadata.resourceVersion` set to `revision`: `Ok(None)` when it already is,
/// `Err` when the value is not a JSON object with metadata (written by something else).
pub fn set_resource_version(value: &[u8], revision: Revision) -> Result<Option<Bytes>, String> {
    let probe: Probe = serde_json::from_slice(value).map_err(|e| e.to_string())?;
    let want = revision.to_string();
    if probe.metadata.resource_version.as_deref() == Some(want.as_str()) {
        return Ok(None);
    }
    let mut obj: Value = serde_json::from_slice(value).map_err(|e| e.to_string())?;
    let metadata = obj
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| "metadata is not an object".to_string())?;
    metadata.insert("resourceVersion".into(), json!(want));
    serde_json::to_vec(&obj).map(|v| Some(Bytes::from(v))).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_already_at_its_revision_is_left_alone() {
        let v = br#"{"kind":"Pod","metadata":{"name":"p","resourceVersion":"7"},"spec":{"x":[1,{"resourceVersion":"1"}]}}"#;
        assert_eq!(set_resource_version(v, 7), Ok(None));
    }

    #[test]
    fn a_value_stored_with_another_revision_is_rewritten_to_carry_its_own() {
        let v = br#"{"kind":"Event","metadata":{"name":"e","resourceVersion":"6"},"involvedObject":{"resourceVersion":"9"}}"#;
        let out = set_resource_version(v, 9).unwrap().unwrap();
        let obj: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(obj["metadata"]["resourceVersion"], "9");
        assert_eq!(obj["involvedObject"]["resourceVersion"], "9", "other fields untouched");
        let none = br#"{"metadata":{"name":"n"}}"#;
        let out: Value =
            serde_json::from_slice(&set_resource_version(none, 3).unwrap().unwrap()).unwrap();
        assert_eq!(out["metadata"]["resourceVersion"], "3");
    }

    #[test]
    fn values_that_are_not_our_objects_are_errors_naming_why() {
        for bad in [&b"k8s\x00\x0a\x09protobuf"[..], b"[]", b"{}", br#"{"metadata":"x"}"#, b""] {
            assert!(set_resource_version(bad, 1).is_err(), "{bad:?}");
        }
    }
}
