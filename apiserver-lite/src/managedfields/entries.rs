//! `metadata.managedFields` on the wire: entries (`manager`, `operation` Apply or Update,
//! `apiVersion`, `time`, `fieldsType: FieldsV1`, `fieldsV1`, `subresource`) to managers and
//! back, as upstream's `DecodeManagedFields`/`encodeManagedFields`: one manager per identifier
//! (the entry less its fields and time, and less its apiVersion for an applier), entries sorted
//! by operation, time, manager, apiVersion and subresource.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::merge::{ManagedFields, VersionedSet};
use super::set::{FieldSet, FieldsError};

/// A manager's identifier: the JSON of its entry without fields and time, in upstream's field
/// order, so that conflicts can print it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerId<'a> {
    pub manager: &'a str,
    pub apply: bool,
    pub api_version: &'a str,
    pub subresource: &'a str,
}

impl ManagerId<'_> {
    pub fn encode(&self) -> String {
        let name = if self.manager.is_empty() { "unknown" } else { self.manager };
        let op = if self.apply { "Apply" } else { "Update" };
        let mut s = format!("{{\"manager\":{},\"operation\":\"{op}\"", json!(name));
        if !self.apply && !self.api_version.is_empty() {
            s.push_str(&format!(",\"apiVersion\":{}", json!(self.api_version)));
        }
        if !self.subresource.is_empty() {
            s.push_str(&format!(",\"subresource\":{}", json!(self.subresource)));
        }
        s.push('}');
        s
    }
}

/// Managers with the time of their last change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managed {
    pub fields: ManagedFields,
    pub times: BTreeMap<String, Option<String>>,
}

/// An entry that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("managedFields must be a list")]
    NotList,
    #[error("operation must be `Apply` or `Update`")]
    Operation,
    #[error("apiVersion must not be empty")]
    ApiVersion,
    #[error("missing fieldsType in managed fields entry {0}")]
    MissingFieldsType(usize),
    #[error("invalid fieldsType {1:?} in managed fields entry {0}")]
    FieldsType(usize, String),
    #[error("error decoding set of managed fields entry {0}: {1}")]
    Fields(usize, FieldsError),
}

impl Managed {
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Reads `metadata.managedFields` (absent reads as none).
    pub fn decode(entries: Option<&Value>) -> Result<Managed, EntryError> {
        let mut out = Managed::default();
        let Some(entries) = entries.filter(|v| !v.is_null()) else { return Ok(out) };
        let list = entries.as_array().ok_or(EntryError::NotList)?;
        for (i, e) in list.iter().enumerate() {
            let apply = match e["operation"].as_str() {
                Some("Apply") => true,
                Some("Update") => false,
                _ => return Err(EntryError::Operation),
            };
            let api_version = e["apiVersion"].as_str().unwrap_or_default();
            if api_version.is_empty() {
                return Err(EntryError::ApiVersion);
            }
            match e["fieldsType"].as_str().unwrap_or_default() {
                "FieldsV1" => {}
                "" => return Err(EntryError::MissingFieldsType(i)),
                other => return Err(EntryError::FieldsType(i, other.to_string())),
            }
            let set = match e.get("fieldsV1") {
                Some(f) if !f.is_null() => {
                    FieldSet::from_fields_v1(f).map_err(|err| EntryError::Fields(i, err))?
                }
                _ => FieldSet::new(),
            };
            let id = ManagerId {
                manager: e["manager"].as_str().unwrap_or_default(),
                apply,
                api_version,
                subresource: e["subresource"].as_str().unwrap_or_default(),
            }
            .encode();
            out.times.insert(id.clone(), e["time"].as_str().map(str::to_string));
            out.fields
                .insert(id, VersionedSet { set, api_version: api_version.into(), applied: apply });
        }
        Ok(out)
    }

    /// The entries, sorted as upstream sorts them; `None` when there are none.
    pub fn encode(&self) -> Option<Value> {
        if self.fields.is_empty() {
            return None;
        }
        let mut entries: Vec<Value> = self
            .fields
            .iter()
            .map(|(id, vs)| {
                let ident: Value = serde_json::from_str(id).unwrap_or_default();
                let mut e = Map::new();
                e.insert("manager".into(), ident["manager"].clone());
                let op = if vs.applied { "Apply" } else { "Update" };
                e.insert("operation".into(), json!(op));
                e.insert("apiVersion".into(), json!(vs.api_version));
                if let Some(Some(t)) = self.times.get(id) {
                    e.insert("time".into(), json!(t));
                }
                e.insert("fieldsType".into(), json!("FieldsV1"));
                e.insert("fieldsV1".into(), vs.set.to_fields_v1());
                if let Some(sub) = ident["subresource"].as_str() {
                    e.insert("subresource".into(), json!(sub));
                }
                Value::Object(e)
            })
            .collect();
        let key = |e: &Value| {
            let seconds = e["time"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|t| t.as_second())
                .unwrap_or(0);
            (
                e["operation"].as_str().unwrap_or_default().to_string(),
                seconds,
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["apiVersion"].as_str().unwrap_or_default().to_string(),
                e["subresource"].as_str().unwrap_or_default().to_string(),
            )
        };
        entries.sort_by_cached_key(key);
        Some(Value::Array(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_follow_upstreams_rules() {
        let apply =
            ManagerId { manager: "kubectl", apply: true, api_version: "apps/v1", subresource: "" };
        assert_eq!(apply.encode(), r#"{"manager":"kubectl","operation":"Apply"}"#);
        let status = ManagerId {
            manager: "kubelet",
            apply: false,
            api_version: "v1",
            subresource: "status",
        };
        assert_eq!(
            status.encode(),
            r#"{"manager":"kubelet","operation":"Update","apiVersion":"v1","subresource":"status"}"#
        );
        let unnamed = ManagerId { manager: "", apply: false, api_version: "v1", subresource: "" };
        assert!(unnamed.encode().contains(r#""manager":"unknown""#));
    }

    #[test]
    fn entries_round_trip_in_upstreams_order() {
        let entries = json!([
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-01T00:00:02Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:01Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}, "subresource": "status"},
        ]);
        let m = Managed::decode(Some(&entries)).unwrap();
        assert_eq!(m.fields.len(), 3);
        assert_eq!(m.encode(), Some(entries), "Apply first, then updates oldest first");
        assert_eq!(Managed::decode(None).unwrap().encode(), None);
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let e = |v: Value| Managed::decode(Some(&json!([v]))).unwrap_err().to_string();
        assert_eq!(
            e(json!({"operation": "Patch", "apiVersion": "v1"})),
            "operation must be `Apply` or `Update`"
        );
        assert_eq!(e(json!({"operation": "Apply"})), "apiVersion must not be empty");
        assert_eq!(
            e(json!({"operation": "Apply", "apiVersion": "v1"})),
            "missing fieldsType in managed fields entry 0"
        );
        assert_eq!(
            e(json!({"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV2"})),
            "invalid fieldsType \"FieldsV2\" in managed fields entry 0"
        );
        assert!(e(json!({"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"x": {}}})).contains("entry 0"));
        assert_eq!(Managed::decode(Some(&json!({}))), Err(EntryError::NotList));
    }
}
