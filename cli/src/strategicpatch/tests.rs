use serde_json::{Value, json};

use super::*;

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn patch(original: Value, modified: Value, current: Value) -> Value {
    Value::Object(three_way(&obj(original), &obj(modified), &obj(current)).unwrap())
}

fn deploy(image: &str, ports: Value) -> Value {
    json!({"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": image, "ports": ports},
        {"name": "side", "image": "side:1"}
    ]}}}})
}

#[test]
fn nothing_changed_is_an_empty_patch() {
    let cfg = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}});
    // The live object carries fields the server added; they are no change.
    let live =
        json!({"metadata": {"name": "a", "labels": {"x": "1"}, "uid": "u"}, "data": {"k": "v"}});
    assert_eq!(patch(cfg.clone(), cfg, live), json!({}));
}

#[test]
fn a_changed_field_is_set_and_a_dropped_one_deleted() {
    let original = json!({"metadata": {"labels": {"a": "1"}, "annotations": {"gone": "x"}}});
    let modified = json!({"metadata": {"labels": {"a": "2"}, "annotations": {}}});
    let current =
        json!({"metadata": {"labels": {"a": "1"}, "annotations": {"gone": "x", "server": "s"}}});
    assert_eq!(
        patch(original, modified, current),
        json!({"metadata": {"labels": {"a": "2"}, "annotations": {"gone": null}}})
    );
}

#[test]
fn a_field_changed_on_the_server_alone_is_set_back_and_one_never_applied_is_kept() {
    let cfg = json!({"spec": {"replicas": 2}});
    let current = json!({"spec": {"replicas": 5, "paused": false}});
    assert_eq!(patch(cfg.clone(), cfg, current), json!({"spec": {"replicas": 2}}));
}

#[test]
fn a_merge_keyed_item_changed_and_one_added_carry_their_key_and_the_order() {
    let original = deploy("web:1", json!([{"containerPort": 80}]));
    let modified = deploy("web:2", json!([{"containerPort": 80}, {"containerPort": 443}]));
    let current = deploy("web:1", json!([{"containerPort": 80, "protocol": "TCP"}]));
    assert_eq!(
        patch(original, modified, current),
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}, {"name": "side"}],
            "containers": [{
                "name": "web",
                "image": "web:2",
                "$setElementOrder/ports": [{"containerPort": 80}, {"containerPort": 443}],
                "ports": [{"containerPort": 443}]
            }]
        }}}})
    );
}

#[test]
fn a_merge_keyed_item_removed_is_deleted_by_directive() {
    let original = deploy("web:1", json!([]));
    let mut modified = original.clone();
    modified["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().pop();
    assert_eq!(
        patch(original.clone(), modified, original),
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}],
            "containers": [{"$patch": "delete", "name": "side"}]
        }}}})
    );
}

#[test]
fn a_plain_list_is_replaced_whole() {
    let original = json!({"spec": {"args": ["a", "b"], "tolerations": [{"key": "k"}]}});
    let modified = json!({"spec": {"args": ["a", "c"], "tolerations": [{"key": "k"}]}});
    assert_eq!(patch(original.clone(), modified, original), json!({"spec": {"args": ["a", "c"]}}));
}

#[test]
fn a_set_of_scalars_adds_and_deletes_in_parallel_lists() {
    let original = json!({"metadata": {"finalizers": ["a", "b"]}});
    let modified = json!({"metadata": {"finalizers": ["a", "c"]}});
    assert_eq!(
        patch(original.clone(), modified, original),
        json!({"metadata": {
            "finalizers": ["c"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
            "$setElementOrder/finalizers": ["a", "c"]
        }})
    );
}

#[test]
fn a_dropped_whole_section_is_deleted_and_a_new_one_added() {
    let original = json!({"data": {"k": "v"}});
    let modified = json!({"binaryData": {"b": "eA=="}});
    let current = json!({"data": {"k": "v"}});
    assert_eq!(
        patch(original, modified, current),
        json!({"data": null, "binaryData": {"b": "eA=="}})
    );
}

#[test]
fn an_item_without_its_merge_key_is_an_error() {
    let original = json!({"spec": {"containers": [{"name": "a"}]}});
    let modified = json!({"spec": {"containers": [{"image": "x"}]}});
    let err = three_way(&obj(original.clone()), &obj(modified), &obj(original)).unwrap_err();
    assert!(matches!(err, PatchError::NoMergeKey { key: "name", .. }), "{err}");
}

#[test]
fn a_two_way_patch_sets_changes_and_nulls_what_the_edit_removed() {
    let before = obj(json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}}));
    let after = obj(json!({"metadata": {"labels": {"a": "9"}}, "data": {"k": "v"}}));
    let p = two_way(&before, &after).unwrap();
    assert_eq!(Value::Object(p), json!({"metadata": {"labels": {"a": "9", "b": null}}}));
    assert!(two_way(&before, &before).unwrap().is_empty());
}
