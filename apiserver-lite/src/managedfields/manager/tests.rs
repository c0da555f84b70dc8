use serde_json::json;

use super::*;

fn fm() -> FieldManager {
    FieldManager {
        now: "2026-01-01T00:00:00Z".into(),
        ..FieldManager::new("apps/v1", "Deployment", "", true)
    }
}

fn deploy(replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|es| {
            es.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn created(manager: &str) -> Value {
    let f = fm();
    let mut obj = deploy(1, "a");
    obj["metadata"]["uid"] = json!("u1");
    f.update(&f.empty_object(), &mut obj, manager, true);
    obj
}

#[test]
fn a_creation_is_recorded_for_its_manager_without_metadata_it_does_not_own() {
    let obj = created("kubectl-create");
    assert_eq!(managers(&obj), [("kubectl-create".to_string(), "Update".to_string())]);
    let e = &obj["metadata"]["managedFields"][0];
    assert_eq!(
        (e["apiVersion"].as_str(), e["time"].as_str(), e["fieldsType"].as_str()),
        (Some("apps/v1"), Some("2026-01-01T00:00:00Z"), Some("FieldsV1"))
    );
    assert!(e["fieldsV1"].get("f:metadata").is_none(), "name, namespace and uid are stripped");
    assert_eq!(e["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
    assert!(e.get("subresource").is_none());
}

#[test]
fn updates_merge_per_manager_and_an_unchanged_write_keeps_the_time() {
    let f = fm();
    let old = created("kubectl-create");
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(3);
    let later = FieldManager { now: "2026-01-01T00:01:00Z".into(), ..fm() };
    later.update(&old, &mut new, "kubectl-scale", false);
    assert_eq!(managers(&new).len(), 2);
    let mut same = new.clone();
    f.update(&new, &mut same, "kubectl-scale", false);
    assert_eq!(same, new, "nothing changed: nothing recorded");
}

#[test]
fn a_status_write_is_recorded_with_its_subresource_and_only_status() {
    let status = FieldManager {
        now: "2026-01-01T00:00:00Z".into(),
        ..FieldManager::new("apps/v1", "Deployment", "status", true)
    };
    let mut old = created("kubectl-create");
    old["status"] = json!({});
    let mut new = old.clone();
    new["status"] = json!({"replicas": 1});
    status.update(&old, &mut new, "kube-controller-manager", false);
    let e = new["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kube-controller-manager")
        .unwrap()
        .clone();
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
}

#[test]
fn written_managed_fields_replace_and_an_empty_list_clears() {
    let f = fm();
    let old = created("kubectl-create");
    let mut cleared = old.clone();
    cleared["metadata"]["managedFields"] = json!([]);
    cleared["spec"]["replicas"] = json!(2);
    f.update(&old, &mut cleared, "kubectl-edit", false);
    assert!(cleared["metadata"].get("managedFields").is_none());
    let mut after = cleared.clone();
    after["spec"]["replicas"] = json!(4);
    f.update(&cleared, &mut after, "kubectl-edit", false);
    assert!(after["metadata"].get("managedFields").is_none(), "an object without entries stays so");
}

#[test]
fn apply_creates_records_and_conflicts_as_upstream() {
    let f = fm();
    let created = f.apply(&f.empty_object(), &deploy(2, "a"), "kubectl", false).unwrap();
    assert_eq!(managers(&created), [("kubectl".to_string(), "Apply".to_string())]);
    let err = f.apply(&created, &deploy(5, "a"), "other", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );
    let forced = f.apply(&created, &deploy(5, "a"), "other", true).unwrap();
    assert_eq!(forced["spec"]["replicas"], 5);
    let fields = forced["metadata"]["managedFields"].as_array().unwrap();
    let kubectl = fields.iter().find(|e| e["manager"] == "kubectl").unwrap();
    assert!(kubectl["fieldsV1"]["f:spec"].get("f:replicas").is_none(), "taken by the forced apply");
}

#[test]
fn the_first_apply_to_an_untracked_object_names_before_first_apply() {
    let f = fm();
    let live = deploy(1, "a");
    let out = f.apply(&live, &deploy(1, "a"), "mine", false).unwrap();
    let names: Vec<String> = managers(&out).into_iter().map(|(m, _)| m).collect();
    assert!(names.contains(&BEFORE_FIRST_APPLY.to_string()), "{names:?}");
    let err = f.apply(&out, &deploy(1, "b"), "mine", false).unwrap_err();
    assert!(
        err.to_string().contains(r#"conflict with "before-first-apply" using apps/v1"#),
        "{err}"
    );
}

#[test]
fn kubectl_takes_over_what_client_side_apply_last_applied() {
    let f = fm();
    let mut last = deploy(1, "a");
    last["metadata"].as_object_mut().unwrap().remove("namespace");
    let mut live = deploy(1, "a");
    live["metadata"]["annotations"] = json!({LAST_APPLIED: serde_json::to_string(&last).unwrap()});
    let mut tracked = live.clone();
    f.update(&f.empty_object(), &mut tracked, "kubectl-client-side-apply", true);
    let err = f.apply(&tracked, &deploy(3, "a"), "someone", false).unwrap_err();
    assert!(matches!(err, ApplyError::Conflicts(_)), "{err}");
    let out = f.apply(&tracked, &deploy(3, "a"), "kubectl", false).unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
    let annotation: Value =
        serde_json::from_str(out["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap())
            .unwrap();
    assert_eq!(annotation["spec"]["replicas"], 3, "the annotation follows the server-side apply");
}

#[test]
fn bad_configurations_are_refused_with_upstreams_words() {
    let f = fm();
    let mut wrong = deploy(1, "a");
    wrong["apiVersion"] = json!("v1");
    wrong["kind"] = json!("ConfigMap");
    assert_eq!(
        f.apply(&f.empty_object(), &wrong, "m", false).unwrap_err().to_string(),
        "invalid object type: /v1, Kind=ConfigMap"
    );
    let mut with_fields = deploy(1, "a");
    with_fields["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        f.apply(&f.empty_object(), &with_fields, "m", false).unwrap_err().to_string(),
        "metadata.managedFields must be nil"
    );
}

#[test]
fn update_managers_are_capped_at_ten_merging_the_oldest() {
    let mut m = Managed::default();
    for i in 0..12 {
        let id = ManagerId {
            manager: &format!("m{i:02}"),
            apply: false,
            api_version: "v1",
            subresource: "",
        }
        .encode();
        let mut s = FieldSet::new();
        s.insert(&Path::fields(&["data", &format!("k{i}")]).0);
        m.fields
            .insert(id.clone(), VersionedSet { set: s, api_version: "v1".into(), applied: false });
        m.times.insert(id, Some(format!("2026-01-01T00:00:{i:02}Z")));
    }
    cap_update_managers(&mut m);
    assert_eq!(m.fields.len(), 10);
    let bucket =
        ManagerId { manager: ANCIENT_CHANGES, apply: false, api_version: "v1", subresource: "" }
            .encode();
    assert_eq!(m.fields[&bucket].set.paths().len(), 3, "the three oldest merged");
}

#[test]
fn a_manager_is_named_after_the_user_agent_up_to_its_first_slash() {
    assert_eq!(
        prefix_from_user_agent("kubectl-client-side-apply/v1.35.0 (linux/amd64) kubernetes/abc"),
        "kubectl-client-side-apply"
    );
    assert_eq!(prefix_from_user_agent("kubelet"), "kubelet");
    assert_eq!(prefix_from_user_agent(""), "");
    assert_eq!(prefix_from_user_agent(&"x".repeat(200)).len(), 128);
    assert_eq!(prefix_from_user_agent("a\u{7}b/1"), "ab");
}
