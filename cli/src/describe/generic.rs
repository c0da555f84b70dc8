//! kubectl's generic describer, for every kind without a describer of its own: name,
//! namespace, labels, annotations, then every other field of the object, keys sorted and
//! turned into labels (`apiVersion` → `API Version`), nested fields indented.

use serde_json::{Map, Value};

use super::events::{self, Involved};
use super::writer::{LEVEL_0, PrefixWriter};
use super::{Clock, Settings, fields, s};
use crate::builder::Info;
use crate::errors::Result;
use crate::factory::Factory;

/// Fields printed before the rest, or never.
const SKIPPED: &[&str] = &[
    ".metadata.managedFields",
    ".metadata.name",
    ".metadata.namespace",
    ".metadata.labels",
    ".metadata.annotations",
];

/// Parts kubectl writes in capitals.
const ACRONYMS: &[&str] = &["API", "URL", "UID", "OSB", "GUID"];

pub async fn describe(f: &Factory, info: &Info, st: Settings, clock: &Clock) -> Result<String> {
    let obj = f.get_json(&info.url()).await?;
    let events = if st.show_events {
        Some(events::search(f, &Involved::of(&obj), st.chunk_size).await.unwrap_or_default())
    } else {
        None
    };
    Ok(render(&obj, events.as_deref(), clock))
}

/// The generic describer's text.
pub fn render(obj: &Value, events: Option<&[Value]>, clock: &Clock) -> String {
    let mut pw = PrefixWriter::new();
    let w = &mut pw;
    w.write(LEVEL_0, &format!("Name:\t{}\n", s(obj, "/metadata/name")));
    w.write(LEVEL_0, &format!("Namespace:\t{}\n", s(obj, "/metadata/namespace")));
    fields::labels_multiline(w, "Labels", obj.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", obj.pointer("/metadata/annotations"));
    if let Some(m) = obj.as_object() {
        content(w, LEVEL_0, m, "");
    }
    if let Some(e) = events {
        events::describe_events(w, e, clock);
    }
    pw.finish()
}

/// `printUnstructuredContent`.
fn content(w: &mut PrefixWriter, level: usize, m: &Map<String, Value>, prefix: &str) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for field in keys {
        let path = format!("{prefix}.{field}");
        if SKIPPED.contains(&path.as_str()) {
            continue;
        }
        match &m[field] {
            Value::Object(child) => {
                w.write(level, &format!("{}:\n", smart_label(field)));
                content(w, level + 1, child, &path);
            }
            Value::Array(list) => {
                w.write(level, &format!("{}:\n", smart_label(field)));
                for item in list {
                    match item {
                        Value::Object(child) => content(w, level + 1, child, &path),
                        other => w.write(level + 1, &format!("{}\n", fields::go_v(other))),
                    }
                }
            }
            other => {
                w.write(level, &format!("{}:\t{}\n", smart_label(field), fields::go_v(other)));
            }
        }
    }
}

/// `smartLabelFor`: a field name split at its camel-case humps, each part capitalised
/// (acronyms in capitals); names with anything but letters and `-` stay as they are.
pub fn smart_label(field: &str) -> String {
    if field.chars().any(|c| !c.is_alphabetic() && c != '-') {
        return field.to_string();
    }
    camel_parts(field)
        .into_iter()
        .filter(|p| p != "_")
        .map(|p| {
            let upper = p.to_uppercase();
            if ACRONYMS.contains(&upper.as_str()) {
                upper
            } else {
                let mut c = p.chars();
                match c.next() {
                    Some(first) => {
                        first.to_uppercase().chain(c.flat_map(char::to_lowercase)).collect()
                    }
                    None => String::new(),
                }
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `camelcase.Split`: runs of lower case, upper case, digits and other characters, the last
/// capital of a run moved to a following lower-case run (`HTTPServer` → `HTTP`, `Server`).
fn camel_parts(s: &str) -> Vec<String> {
    let class = |c: char| {
        if c.is_lowercase() {
            1
        } else if c.is_uppercase() {
            2
        } else if c.is_numeric() {
            3
        } else {
            4
        }
    };
    let mut runs: Vec<Vec<char>> = Vec::new();
    let mut last = 0;
    for c in s.chars() {
        let k = class(c);
        match runs.last_mut() {
            Some(run) if k == last => run.push(c),
            _ => runs.push(vec![c]),
        }
        last = k;
    }
    for i in 0..runs.len().saturating_sub(1) {
        let upper_then_lower = runs[i].first().is_some_and(|c| c.is_uppercase())
            && runs[i + 1].first().is_some_and(|c| c.is_lowercase());
        if upper_then_lower && let Some(c) = runs[i].pop() {
            runs[i + 1].insert(0, c);
        }
    }
    runs.into_iter().filter(|r| !r.is_empty()).map(|r| r.into_iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_names_become_kubectl_labels() {
        assert_eq!(smart_label("apiVersion"), "API Version");
        assert_eq!(smart_label("creationTimestamp"), "Creation Timestamp");
        assert_eq!(smart_label("uid"), "UID");
        assert_eq!(smart_label("podIPs"), "Pod I Ps");
        assert_eq!(smart_label("HTTPServer"), "Http Server");
        assert_eq!(smart_label("serverURL"), "Server URL");
        assert_eq!(smart_label("a.b"), "a.b");
        assert_eq!(smart_label("x1"), "x1");
    }

    #[test]
    fn every_other_field_prints_sorted_and_indented() {
        let clock =
            Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC };
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l1", "namespace": "default", "uid": "u",
                         "managedFields": [{"manager": "x"}], "labels": {"a": "b"}},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 40, "list": ["x", 2]}});
        assert_eq!(
            render(&lease, Some(&[]), &clock),
            "Name:         l1\nNamespace:    default\nLabels:       a=b\nAnnotations:  <none>\nAPI Version:  coordination.k8s.io/v1\nKind:         Lease\nMetadata:\n  UID:  u\nSpec:\n  Holder Identity:         me\n  Lease Duration Seconds:  40\n  List:\n    x\n    2\nEvents:  <none>\n"
        );
    }
}
