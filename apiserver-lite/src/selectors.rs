//! Label selectors (`app=web,tier!=db,env in (a,b),!legacy`) and field selectors
//! (`spec.nodeName=n1,status.phase!=Failed`), with the fields each resource supports.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::ResourceType;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn values(list: &str) -> Option<Vec<String>> {
    let inner = list.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).collect())
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = |part: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found {part:?}: invalid label selector {s:?}"
            ))
        };
        let mut reqs = Vec::new();
        for part in split_top(s).into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().to_string(), values(rest).ok_or_else(|| bad(part))?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Requirement::In(k.trim().to_string(), values(rest).ok_or_else(|| bad(part))?)
            } else if part.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
                Requirement::Exists(part.to_string())
            } else {
                return Err(bad(part));
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        })
    }
}

/// The fields a resource can be selected by (besides `metadata.name` and `metadata.namespace`).
fn supported_fields(r: &ResourceType) -> &'static [&'static str] {
    match (r.group, r.name) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") | ("events.k8s.io", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "namespaces") => &["status.phase"],
        ("", "secrets") => &["type"],
        _ => &[],
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

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
            let known = field == "metadata.name"
                || field == "metadata.namespace"
                || supported_fields(r).contains(&field);
            if !known {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            reqs.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, want)| {
            let mut v = obj;
            for part in field.split('.') {
                v = &v[part];
            }
            let have = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (have == *want) == *equal
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
    use crate::resources::find;

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
    fn field_selectors_know_their_fields() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = serde_json::json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(FieldSelector::parse("spec.nodeName=n1", pods).unwrap().matches(&pod));
        assert!(
            FieldSelector::parse("spec.nodeName=,status.phase!=Failed", pods)
                .unwrap()
                .matches(&serde_json::json!({"status": {"phase": "Pending"}}))
        );
        assert!(!FieldSelector::parse("metadata.name!=p", pods).unwrap().matches(&pod));
        let err = FieldSelector::parse("spec.bogus=x", pods).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "field label not supported: spec.bogus")
        );
    }
}
