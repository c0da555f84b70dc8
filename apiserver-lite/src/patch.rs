//! PATCH bodies: JSON merge patch (RFC 7386) and JSON patch (RFC 6902) through the `json-patch`
//! crate, and strategic merge patch for the built-in types (lists merged by their merge keys,
//! with the `$patch`, `$setElementOrder`, `$retainKeys` and `$deleteFromPrimitiveList`
//! directives kubectl sends).

use serde_json::{Map, Value};

use crate::errors::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Applies `patch` of `kind` to `original`.
pub fn apply(kind: PatchType, original: &Value, patch: &Value) -> Result<Value, ApiError> {
    match kind {
        PatchType::Merge => {
            let mut out = original.clone();
            json_patch::merge(&mut out, patch);
            Ok(out)
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
                ApiError::bad_request(format!(
                    "the server rejected our request due to an error in our request: {e}"
                ))
            })?;
            let mut out = original.clone();
            // One operation at a time: a `replace` of an object member that is not there adds
            // it, as upstream's JSON patch library (evanphx v4) does; kubectl's `rollout undo`
            // replaces `/metadata/annotations` whether the Deployment has any or not.
            for op in ops.0 {
                let op = match op {
                    json_patch::PatchOperation::Replace(r)
                        if missing_member(&out, r.path.as_str()) =>
                    {
                        json_patch::PatchOperation::Add(json_patch::AddOperation {
                            path: r.path,
                            value: r.value,
                        })
                    }
                    other => other,
                };
                json_patch::patch(&mut out, &[op])
                    .map_err(|e| ApiError::new_unprocessable(e.to_string()))?;
            }
            Ok(out)
        }
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a strategic merge patch must be a JSON object"));
            }
            Ok(strategic(original, patch, ""))
        }
        // An apply is no patch: it merges through the field manager (`registry::apply`).
        PatchType::Apply => {
            Err(ApiError::internal("an apply goes through the field manager, not patch::apply"))
        }
    }
}

/// Whether `path` names a member missing from an object that exists.
fn missing_member(doc: &Value, path: &str) -> bool {
    let Some((parent, last)) = path.rsplit_once('/') else { return false };
    let key = last.replace("~1", "/").replace("~0", "~");
    doc.pointer(parent).and_then(Value::as_object).is_some_and(|m| !m.contains_key(&key))
}

/// The merge key of a list field of the built-in types, from the one table
/// [`api::schema`] keeps for server-side apply and kubectl-lite's apply too.
fn merge_key(field: &str, sample: Option<&Value>) -> Option<&'static str> {
    api::schema::merge_key(field, sample)
}

/// Primitive lists merged as sets (`patchStrategy: merge` on a list of strings).
fn primitive_merge(field: &str) -> bool {
    matches!(field, "finalizers")
}

fn strategic(original: &Value, patch: &Value, _field: &str) -> Value {
    let (Some(orig), Some(p)) = (original.as_object(), patch.as_object()) else {
        return patch.clone();
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut m = p.clone();
            m.remove("$patch");
            return Value::Object(m);
        }
        Some("delete") => return Value::Null,
        _ => {}
    }
    let mut out: Map<String, Value> = orig.clone();
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(remove)) =
                (out.get_mut(field).and_then(Value::as_array_mut), v.as_array())
            {
                list.retain(|e| !remove.contains(e));
            }
            continue;
        }
        match v {
            Value::Null => {
                out.remove(k);
            }
            Value::Object(_) => {
                let merged = strategic(out.get(k).unwrap_or(&Value::Null), v, k);
                if merged.is_null() {
                    out.remove(k);
                } else {
                    out.insert(k.clone(), merged);
                }
            }
            Value::Array(items) => {
                let current = out.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
                let order = p.get(&format!("$setElementOrder/{k}")).and_then(Value::as_array);
                let merged = merge_list(k, &current, items, order);
                out.insert(k.clone(), Value::Array(merged));
            }
            other => {
                out.insert(k.clone(), other.clone());
            }
        }
    }
    Value::Object(out)
}

fn merge_list(
    field: &str,
    current: &[Value],
    patch: &[Value],
    order: Option<&Vec<Value>>,
) -> Vec<Value> {
    if primitive_merge(field) {
        let mut out = current.to_vec();
        for v in patch {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        return out;
    }
    let Some(key) = merge_key(field, patch.first().or(current.first())) else {
        return patch.to_vec();
    };
    let id = |v: &Value| v.get(key).cloned();
    let mut out: Vec<Value> = current.to_vec();
    for item in patch {
        let Some(item_id) = id(item) else {
            out.push(item.clone());
            continue;
        };
        match out.iter().position(|e| id(e).as_ref() == Some(&item_id)) {
            Some(i) => {
                let merged = strategic(&out[i], item, field);
                if merged.is_null() {
                    out.remove(i);
                } else {
                    out[i] = merged;
                }
            }
            None if item.get("$patch").and_then(Value::as_str) == Some("delete") => {}
            None => {
                let mut fresh = item.clone();
                if let Some(m) = fresh.as_object_mut() {
                    m.remove("$patch");
                }
                out.push(fresh);
            }
        }
    }
    if let Some(order) = order {
        let rank = |v: &Value| {
            let k = id(v);
            order.iter().position(|o| o.get(key).cloned() == k).unwrap_or(usize::MAX)
        };
        out.sort_by_key(rank);
    }
    out
}

impl ApiError {
    fn new_unprocessable(message: String) -> Self {
        ApiError::new(
            422,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {message}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [
                {"name": "web", "image": "web:1", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "side:1"}
            ]}
        })
    }

    #[test]
    fn merge_patch_replaces_lists_and_removes_with_null() {
        let out = apply(PatchType::Merge, &pod(), &json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"containers": [{"name": "only"}]}})).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn json_patch_applies_operations_and_tests() {
        let ops = json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "web:2"}, {"op": "add", "path": "/metadata/labels/c", "value": "3"}]);
        let out = apply(PatchType::Json, &pod(), &ops).unwrap();
        assert_eq!(
            (
                out["spec"]["containers"][0]["image"].as_str(),
                out["metadata"]["labels"]["c"].as_str()
            ),
            (Some("web:2"), Some("3"))
        );
        let failing = json!([{"op": "test", "path": "/metadata/name", "value": "other"}]);
        assert_eq!(apply(PatchType::Json, &pod(), &failing).unwrap_err().code, 422);
        assert_eq!(apply(PatchType::Json, &pod(), &json!({"op": "x"})).unwrap_err().code, 400);
    }

    #[test]
    fn json_patch_replace_of_a_missing_member_adds_it_as_upstream() {
        let ops = json!([{"op": "replace", "path": "/metadata/annotations", "value": {"a": "1"}}]);
        let out = apply(PatchType::Json, &pod(), &ops).unwrap();
        assert_eq!(out["metadata"]["annotations"], json!({"a": "1"}));
        // Beyond the end of a list, or under a member that is not there, it still fails.
        let ops = json!([{"op": "replace", "path": "/spec/containers/9", "value": {}}]);
        assert!(apply(PatchType::Json, &pod(), &ops).is_err());
        let ops = json!([{"op": "replace", "path": "/status/nothing/here", "value": 1}]);
        assert!(apply(PatchType::Json, &pod(), &ops).is_err());
    }

    #[test]
    fn strategic_merge_merges_lists_by_key() {
        let patch = json!({"spec": {"containers": [{"name": "web", "image": "web:2", "env": [{"name": "B", "value": "2"}]}, {"name": "new", "image": "n:1"}]}});
        let out = apply(PatchType::Strategic, &pod(), &patch).unwrap();
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 3);
        assert_eq!(cs[0]["image"], "web:2");
        assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2, "env merged by name");
        assert_eq!(cs[0]["ports"][0]["containerPort"], 80, "untouched fields stay");
        assert_eq!(cs[1]["name"], "side");
    }

    #[test]
    fn strategic_merge_directives() {
        let delete = json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}});
        let out = apply(PatchType::Strategic, &pod(), &delete).unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 1);
        let order = json!({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "web"}], "containers": [{"name": "web", "image": "web:3"}]}});
        let out = apply(PatchType::Strategic, &pod(), &order).unwrap();
        assert_eq!(out["spec"]["containers"][0]["name"], "side");
        let fin = json!({"metadata": {"finalizers": ["y"], "$deleteFromPrimitiveList/finalizers": ["x"]}});
        let out = apply(PatchType::Strategic, &pod(), &fin).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
        let replace = json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}});
        assert_eq!(
            apply(PatchType::Strategic, &pod(), &replace).unwrap()["metadata"]["labels"],
            json!({"z": "9"})
        );
        assert_eq!(apply(PatchType::Apply, &pod(), &json!({})).unwrap_err().code, 500);
    }
}
