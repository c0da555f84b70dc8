use serde_json::json;

use super::*;

fn set(v: Value) -> FieldSet {
    FieldSet::from_fields_v1(&v).unwrap()
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
}

const A: &str = r#"{"manager":"a","operation":"Apply"}"#;
const B: &str = r#"{"manager":"b","operation":"Apply"}"#;
const U: &str = r#"{"manager":"u","operation":"Update","apiVersion":"v1"}"#;

#[test]
fn an_update_takes_what_it_changed_from_everyone() {
    let mut m = ManagedFields::new();
    update(&json!({}), &cm(json!({"x": "1"})), "v1", &mut m, U, &FieldSet::new());
    assert!(m[U].set.has(&crate::managedfields::path::Path::fields(&["data", "x"]).0));
    let before = m.clone();
    let _ = apply(
        &cm(json!({"x": "1"})),
        &cm(json!({"y": "2"})),
        "v1",
        &mut m,
        A,
        false,
        &FieldSet::new(),
    )
    .unwrap();
    update(
        &cm(json!({"x": "1", "y": "2"})),
        &cm(json!({"x": "1", "y": "3"})),
        "v1",
        &mut m,
        U,
        &FieldSet::new(),
    );
    let data =
        m[U].set.with_prefix(&crate::managedfields::path::PathElement::field("data")).unwrap();
    assert_eq!(data, &set(json!({"f:x": {}, "f:y": {}})), "u keeps x and takes y");
    assert!(!m[A].set.has(&crate::managedfields::path::Path::fields(&["data", "y"]).0), "a lost y");
    assert_ne!(before, m);
}

#[test]
fn an_apply_conflicts_with_another_managers_field_unless_forced() {
    let mut m = ManagedFields::new();
    let live = apply(&json!({}), &cm(json!({"x": "1"})), "v1", &mut m, A, false, &FieldSet::new())
        .unwrap();
    let err =
        apply(&live, &cm(json!({"x": "2"})), "v1", &mut m.clone(), B, false, &FieldSet::new())
            .unwrap_err();
    assert_eq!(err.to_string(), r#"Apply failed with 1 conflict: conflict with "a": .data.x"#);
    let same =
        apply(&live, &cm(json!({"x": "1"})), "v1", &mut m.clone(), B, false, &FieldSet::new());
    assert!(same.is_ok(), "the same value is shared, not a conflict");
    let forced =
        apply(&live, &cm(json!({"x": "2"})), "v1", &mut m, B, true, &FieldSet::new()).unwrap();
    assert_eq!(forced["data"]["x"], "2");
    assert!(!m[A].set.has(&crate::managedfields::path::Path::fields(&["data", "x"]).0), "a lost x");
    assert!(m[B].applied);
}

#[test]
fn an_apply_removes_what_it_dropped_unless_another_manager_holds_it() {
    let mut m = ManagedFields::new();
    let live = apply(
        &json!({}),
        &cm(json!({"x": "1", "y": "1", "z": "1"})),
        "v1",
        &mut m,
        A,
        false,
        &FieldSet::new(),
    )
    .unwrap();
    let live =
        apply(&live, &cm(json!({"z": "1"})), "v1", &mut m, B, false, &FieldSet::new()).unwrap();
    let out =
        apply(&live, &cm(json!({"x": "1"})), "v1", &mut m, A, false, &FieldSet::new()).unwrap();
    assert_eq!(out["data"], json!({"x": "1", "z": "1"}), "y dropped, z kept for b");
    assert_eq!(
        m[A].set,
        set(
            json!({"f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:name": {}}, "f:data": {"f:x": {}}})
        )
    );
}

#[test]
fn ignored_fields_are_neither_owned_nor_conflicting() {
    let ignored = set(json!({"f:status": {}}));
    let mut m = ManagedFields::new();
    let config = json!({"spec": {"replicas": 1}, "status": {"replicas": 5}});
    apply(&json!({}), &config, "apps/v1", &mut m, A, false, &ignored).unwrap();
    assert_eq!(m[A].set, set(json!({"f:spec": {"f:replicas": {}}})));
}
