//! Label selectors (`app=web,tier!=db,env in (a,b),!legacy`) and field selectors
//! (`spec.nodeName=n1,status.phase!=Failed`) over the fields each kind's strategy names.

use std::collections::BTreeMap;

use api::labels;
use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::ResourceType;

/// A request's `labelSelector`, read by the `api` crate's `labels.Parse`; empty matches
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(labels::Selector);

impl LabelSelector {
    /// The selector, or a 400 with `labels.Parse`'s words, as upstream's parameter decoding.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        labels::parse(s).map(Self).map_err(|e| ApiError::bad_request(e.to_string()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.matches_labels(labels)
    }
}

/// How a selectable field is read from the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A string at this JSON path (missing: empty).
    Str(&'static str),
    /// A boolean at this path, as `true`/`false` (missing: `false`).
    Bool(&'static str),
    /// An integer at this path (missing: `0`).
    Int(&'static str),
}

fn lookup<'a>(obj: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(obj, |v, part| &v[part])
}

impl Source {
    fn read(self, obj: &Value) -> String {
        match self {
            Source::Str(p) => match lookup(obj, p) {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            },
            Source::Bool(p) => lookup(obj, p).as_bool().unwrap_or(false).to_string(),
            Source::Int(p) => lookup(obj, p).as_i64().unwrap_or(0).to_string(),
        }
    }
}

/// A parsed field selector: each requirement's source, whether it wants equality, the value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(Source, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str, r: &ResourceType) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: {s:?}; can't understand {part:?}"
                )));
            };
            let field = field.trim();
            let source = match field {
                "metadata.name" => Source::Str("metadata.name"),
                "metadata.namespace" => Source::Str("metadata.namespace"),
                _ => r
                    .strategy
                    .fields
                    .iter()
                    .find(|(f, _)| *f == field)
                    .map(|(_, src)| *src)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("field label not supported: {field}"))
                    })?,
            };
            reqs.push((source, equal, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(source, equal, want)| (source.read(obj) == *want) == *equal)
    }

    /// Whether no object named `name` can match: a `metadata.name` requirement rules it out.
    /// Decided from the name alone (a storage key ends in it), nothing decoded.
    pub fn excludes_name(&self, name: &str) -> bool {
        self.0.iter().any(|(source, equal, want)| {
            *source == Source::Str("metadata.name") && (name == want) != *equal
        })
    }
}

/// An object's labels.
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selectors() {
        let web = l(&[("app", "web"), ("env", "prod")]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=web,env=dev", false),
            ("env in (dev, prod)", true),
            ("env notin (prod)", false),
            ("app", true),
            ("!app", false),
            ("!legacy", true),
            ("tier notin (db)", true),
        ];
        for (sel, want) in cases {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&web), want, "{sel}");
        }
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn a_name_requirement_rules_out_other_names_without_the_object() {
        let pods = &crate::resources::PODS;
        let one = FieldSelector::parse("metadata.name=watched", pods).unwrap();
        assert!(one.excludes_name("other") && !one.excludes_name("watched"));
        let not = FieldSelector::parse("metadata.name!=skip,spec.nodeName=a", pods).unwrap();
        assert!(not.excludes_name("skip") && !not.excludes_name("other"));
        let by_node = FieldSelector::parse("spec.nodeName=a", pods).unwrap();
        assert!(!by_node.excludes_name("anything"), "other fields need the object");
        assert!(!FieldSelector::default().excludes_name("x"));
    }

    #[test]
    fn field_selectors_know_their_fields() {
        let pods = &crate::resources::PODS;
        let pod = serde_json::json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(FieldSelector::parse("spec.nodeName=n1", pods).unwrap().matches(&pod));
        assert!(
            FieldSelector::parse("spec.nodeName=,status.phase!=Failed", pods)
                .unwrap()
                .matches(&serde_json::json!({"status": {"phase": "Pending"}}))
        );
        assert!(!FieldSelector::parse("metadata.name!=p", pods).unwrap().matches(&pod));
        let nodes = &crate::resources::NODES;
        let schedulable = FieldSelector::parse("spec.unschedulable=false", nodes).unwrap();
        assert!(schedulable.matches(&serde_json::json!({"spec": {}})), "a missing bool is false");
        let jobs = &crate::resources::JOBS;
        let done = FieldSelector::parse("status.successful=1", jobs).unwrap();
        assert!(done.matches(&serde_json::json!({"status": {"succeeded": 1}})));
        assert!(!done.matches(&serde_json::json!({"status": {}})));
        let events = &crate::resources::EVENTS;
        let by =
            FieldSelector::parse("source=kubelet,involvedObject.kind=Pod,type!=Normal", events)
                .unwrap();
        let e = serde_json::json!({"source": {"component": "kubelet"}, "involvedObject": {"kind": "Pod"}, "type": "Warning"});
        assert!(by.matches(&e));
        let v1 = &crate::resources::EVENTS_V1;
        let by = FieldSelector::parse("involvedObject.name=web,reason=Started", v1).unwrap();
        assert!(
            by.matches(&serde_json::json!({"regarding": {"name": "web"}, "reason": "Started"}))
        );
        let err = FieldSelector::parse("spec.bogus=x", pods).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "field label not supported: spec.bogus")
        );
    }
}
