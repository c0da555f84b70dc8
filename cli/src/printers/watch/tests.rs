use serde_json::{Value, json};

use super::*;

fn columns() -> Value {
    json!([
        {"name": "Name", "type": "string", "format": "name", "priority": 0},
        {"name": "Status", "type": "string", "priority": 0},
        {"name": "Age", "type": "string", "priority": 0}
    ])
}

fn table(columns: Value, rows: &[(&str, &str)]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|(name, status)| {
            json!({"cells": [name, status, "1s"], "object": {"metadata": {"name": name, "namespace": "default"}}})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "columnDefinitions": columns, "rows": rows})
}

#[test]
fn the_list_prints_a_header_and_events_print_rows_at_its_widths() {
    let mut p = TableWatch::new(table::Options::default());
    let list = table(columns(), &[("a", "Pending")]);
    assert_eq!(p.print(&list, None, true), "NAME   STATUS    AGE\na      Pending   1s\n");
    // The first event repeats the columns: no second header.
    let first = table(columns(), &[("b", "Running")]);
    assert_eq!(p.print(&first, None, true), "b      Running   1s\n");
    // Later events carry no columns: the last ones are used.
    let later = table(json!([]), &[("a-much-longer-name", "Running")]);
    assert_eq!(p.print(&later, None, true), "a-much-longer-name   Running   1s\n");
    let after = table(json!([]), &[("c", "Running")]);
    assert_eq!(p.print(&after, None, true), "c                    Running   1s\n");
}

#[test]
fn watch_only_learns_the_columns_and_prints_the_header_with_the_first_row() {
    let mut p = TableWatch::new(table::Options::default());
    let list = table(columns(), &[("a", "Pending")]);
    assert_eq!(p.print(&list, None, false), "");
    let first = table(columns(), &[("a", "Running")]);
    assert_eq!(p.print(&first, None, true), "NAME   STATUS    AGE\na      Running   1s\n");
}

#[test]
fn an_empty_list_prints_nothing_and_the_first_event_brings_the_header() {
    let mut p = TableWatch::new(table::Options::default());
    assert_eq!(p.print(&table(columns(), &[]), None, true), "");
    let first = table(columns(), &[("a", "Pending")]);
    assert_eq!(p.print(&first, None, true), "NAME   STATUS    AGE\na      Pending   1s\n");
}

#[test]
fn output_watch_events_adds_the_padded_event_column() {
    let mut p = TableWatch::new(table::Options::default());
    let list = table(columns(), &[("a", "Pending")]);
    assert_eq!(
        p.print(&list, Some(EventType::Added), true),
        "EVENT      NAME   STATUS    AGE\nADDED      a      Pending   1s\n"
    );
    let deleted = table(json!([]), &[("a", "Pending")]);
    assert_eq!(
        p.print(&deleted, Some(EventType::Deleted), true),
        "DELETED    a      Pending   1s\n"
    );
}

#[test]
fn no_headers_and_namespaces_decorate_as_the_plain_table() {
    let o = table::Options { with_namespace: true, no_headers: true, ..Default::default() };
    let mut p = TableWatch::new(o);
    let list = table(columns(), &[("a", "Pending")]);
    assert_eq!(p.print(&list, None, true), "default   a     Pending   1s\n");
}

#[test]
fn objects_print_one_at_a_time_and_events_wrap_them() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}});
    let mut name = ObjectWatch::Name { kind: "pod".into() };
    assert_eq!(name.print(&pod, None).unwrap(), "pod/a\n");
    let mut j = ObjectWatch::Json;
    let event = j.print(&json!({"a": "<1>"}), Some(EventType::Modified)).unwrap();
    assert_eq!(event, "{\"type\":\"MODIFIED\",\"object\":{\"a\":\"\\u003c1\\u003e\"}}\n");
    let mut y = ObjectWatch::Yaml { printed: 0 };
    assert_eq!(y.print(&json!({"a": 1}), None).unwrap(), "a: 1\n");
    assert_eq!(y.print(&json!({"a": 2}), None).unwrap(), "---\na: 2\n");
    assert_eq!(
        y.print(&json!({"a": 3}), Some(EventType::Added)).unwrap(),
        "---\nobject:\n  a: 3\ntype: ADDED\n"
    );
}
