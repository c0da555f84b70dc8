use serde_json::json;

use super::*;

fn set(v: Value) -> FieldSet {
    FieldSet::from_fields_v1(&v).unwrap()
}

fn deployment(image: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

#[test]
fn an_applied_configuration_sets_leaves_map_entries_and_list_items() {
    let s = to_set(&deployment("nginx:1", 2));
    assert_eq!(
        s.to_fields_v1(),
        json!({
            "f:apiVersion": {}, "f:kind": {},
            "f:metadata": {"f:name": {}, "f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {}, "f:name": {}, "f:image": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        }),
        "selector atomic, the port's protocol defaulted into its key"
    );
}

#[test]
fn duplicate_keys_and_missing_keys_are_refused_with_upstreams_words() {
    let mut d = deployment("nginx:1", 1);
    d["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]);
    assert_eq!(
        check(&d).unwrap_err().to_string(),
        r#".spec.template.spec.containers[name="nginx"].env: duplicate entries for key [name="A"]"#
    );
    let mut d = deployment("nginx:1", 1);
    d["spec"]["template"]["spec"]["containers"] = json!([{"image": "x"}]);
    let e = check(&d).unwrap_err();
    assert_eq!(e.path.to_string(), ".spec.template.spec.containers");
    assert!(e.message.contains(r#"omits key field "name""#), "{e}");
    assert!(check(&deployment("nginx:1", 1)).is_ok());
}

#[test]
fn compare_finds_added_modified_and_removed_and_whole_new_items() {
    let old = deployment("nginx:1", 1);
    let mut new = deployment("nginx:2", 1);
    new["metadata"]["labels"]["tier"] = json!("front");
    new["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "s"}));
    new["spec"].as_object_mut().unwrap().remove("replicas");
    let c = compare(&old, &new);
    assert_eq!(
        c.modified,
        set(
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {"f:image": {}}}}}}})
        )
    );
    assert_eq!(c.removed, set(json!({"f:spec": {"f:replicas": {}}})));
    assert_eq!(
        c.added,
        set(json!({
            "f:metadata": {"f:labels": {"f:tier": {}}},
            "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"side\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}
        }))
    );
    assert_eq!(compare(&old, &old), Comparison::default());
}

#[test]
fn compare_from_nothing_adds_every_node_down_to_atomic_values_and_duplicate_items_once() {
    let mut new = deployment("nginx:1", 1);
    new["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "nginx", "image": "duplicate"}));
    new["spec"]["template"]["metadata"] = json!({});
    let c = compare(&json!({}), &new);
    let port = json!({".": {}, "f:containerPort": {}});
    let container = json!({".": {}, "f:name": {}, "f:image": {},
        "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": port}});
    assert_eq!(
        c.added,
        set(json!({
            "f:apiVersion": {}, "f:kind": {},
            "f:metadata": {".": {}, "f:name": {}, "f:labels": {".": {}, "f:app": {}}},
            "f:spec": {".": {}, "f:replicas": {},
                "f:selector": {},
                "f:template": {".": {}, "f:metadata": {},
                    "f:spec": {".": {}, "f:containers": {".": {}, "k:{\"name\":\"nginx\"}": container}}}}
        }))
    );
    assert!(c.modified.is_empty() && c.removed.is_empty());
}

#[test]
fn compare_of_an_atomic_field_is_one_leaf() {
    let old = deployment("nginx:1", 1);
    let mut new = old.clone();
    new["spec"]["selector"]["matchLabels"]["x"] = json!("y");
    assert_eq!(compare(&old, &new).modified, set(json!({"f:spec": {"f:selector": {}}})));
}

#[test]
fn merge_keeps_live_fields_and_merges_list_items_by_key() {
    let mut live = deployment("nginx:1", 3);
    live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
        json!("/dev/termination-log");
    live["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "s"}));
    let config = json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}}});
    let out = merge(&live, &config);
    let cs = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(cs[0]["image"], "nginx:2");
    assert_eq!(cs[0]["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(cs[1]["name"], "side", "an item the configuration does not name stays");
    assert_eq!(out["spec"]["replicas"], 3);
}

#[test]
fn merge_orders_items_as_upstream_and_replaces_atomic_values() {
    let live = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "selector": {"matchLabels": {"a": "1", "b": "2"}}}});
    let config = json!({"spec": {"containers": [{"name": "c"}, {"name": "a"}], "selector": {"matchLabels": {"c": "3"}}}});
    let out = merge(&live, &config);
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b", "c", "a"]);
    assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"c": "3"}}));
    let fin = merge(
        &json!({"metadata": {"finalizers": ["x"]}}),
        &json!({"metadata": {"finalizers": ["y"]}}),
    );
    assert_eq!(fin["metadata"]["finalizers"], json!(["x", "y"]), "a set merges");
}

#[test]
fn prune_removes_what_only_the_last_apply_held() {
    let mut merged = deployment("nginx:1", 2);
    merged["metadata"]["labels"]["old"] = json!("1");
    merged["metadata"]["labels"]["kept"] = json!("1");
    merged["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().push(
        json!({"name": "gone", "image": "g", "terminationMessagePath": "/dev/termination-log"}),
    );
    let last = set(json!({"f:metadata": {"f:labels": {"f:old": {}, "f:kept": {}, "f:app": {}}},
        "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"gone\"}": {".": {}, "f:image": {}}}}}}}));
    let owned = set(json!({"f:metadata": {"f:labels": {"f:app": {}, "f:kept": {}}},
        "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {".": {}}}}}}}));
    prune(&mut merged, &last, &owned);
    assert_eq!(merged["metadata"]["labels"], json!({"app": "web", "kept": "1"}));
    let names: Vec<&str> = merged["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nginx"], "the item goes with its unowned defaults");
    assert_eq!(merged["spec"]["replicas"], 2, "fields the last apply did not hold stay");
}

#[test]
fn prune_takes_a_struct_no_one_holds_anything_in_as_upstream() {
    let mut v = json!({"spec": {"replicas": 1, "strategy": {"type": "RollingUpdate"}}, "metadata": {"name": "x"}});
    let last = set(json!({"f:spec": {"f:replicas": {}}}));
    prune(&mut v, &last, &set(json!({"f:metadata": {"f:name": {}}})));
    assert_eq!(v, json!({"metadata": {"name": "x"}}), "the last apply held spec through replicas");
}

#[test]
fn prune_drops_a_map_it_empties() {
    let mut v = json!({"metadata": {"name": "x", "annotations": {"a": "1"}}});
    let owned = set(json!({"f:metadata": {"f:name": {}}}));
    prune(&mut v, &set(json!({"f:metadata": {"f:annotations": {"f:a": {}}}})), &owned);
    assert_eq!(v, json!({"metadata": {"name": "x"}}));
}
