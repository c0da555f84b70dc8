use serde_json::json;

use super::*;

fn object(name: &str, uid: &str, annotated: bool) -> Value {
    let mut o = json!({"metadata": {"name": name, "uid": uid, "labels": {"app": "x"}}});
    if annotated {
        o["metadata"]["annotations"] = json!({LAST_APPLIED: "{}\n", "other": "1"});
    }
    o
}

fn plan(dry_run: DryRun, grace_period: i64) -> Plan {
    Plan {
        types: Vec::new(),
        selector: Some("app=x".into()),
        dry_run,
        propagation: "Background",
        grace_period,
        names_only: false,
    }
}

#[test]
fn only_objects_apply_made_and_did_not_apply_now_are_pruned() {
    let items = [
        object("kept", "u1", true),
        object("gone", "u2", true),
        object("made-by-create", "u3", false),
        object("also-gone", "u4", true),
    ];
    let applied: HashSet<String> = ["u1".to_string()].into();
    assert_eq!(to_prune(&items, &applied), ["gone", "also-gone"]);
}

#[test]
fn an_empty_last_applied_annotation_still_marks_an_applied_object() {
    let mut o = object("empty", "u1", false);
    o["metadata"]["annotations"] = json!({LAST_APPLIED: ""});
    assert_eq!(to_prune(&[o], &HashSet::new()), ["empty"]);
}

#[test]
fn nothing_is_pruned_from_an_empty_list() {
    assert!(to_prune(&[], &HashSet::new()).is_empty());
}

#[test]
fn allowlist_entries_read_as_group_version_kind_with_core_for_the_core_group() {
    assert_eq!(
        parse_gvk("core/v1/ConfigMap").unwrap(),
        ("".to_string(), "v1".to_string(), "ConfigMap".to_string())
    );
    assert_eq!(
        parse_gvk("apps/v1/Deployment").unwrap(),
        ("apps".to_string(), "v1".to_string(), "Deployment".to_string())
    );
    assert_eq!(parse_gvk("/v1/Secret").unwrap().0, "");
}

#[test]
fn a_malformed_allowlist_entry_is_refused_in_kubectls_words() {
    for entry in ["ConfigMap", "v1/ConfigMap", "a/b/c/d", ""] {
        assert_eq!(
            parse_gvk(entry).unwrap_err().to_string(),
            format!(
                "error: invalid GroupVersionKind format: {entry}, please follow <group/version/kind>"
            )
        );
    }
}

#[test]
fn the_default_set_is_kubectls_namespaced_kinds_then_namespaces_and_volumes() {
    let types = default_types();
    assert_eq!(types.len(), 16);
    assert_eq!(types[0].to_string(), "/v1, Kind=ConfigMap, Namespaced=true");
    assert_eq!(types[9].to_string(), "networking.k8s.io/v1, Kind=Ingress, Namespaced=true");
    let cluster: Vec<_> = types.iter().filter(|t| !t.namespaced).map(|t| &t.kind).collect();
    assert_eq!(cluster, ["Namespace", "PersistentVolume"]);
    assert!(types.iter().all(|t| t.version == "v1"));
}

#[test]
fn deletes_propagate_in_the_background_with_the_grace_period_only_when_given() {
    assert_eq!(
        delete_options(&plan(DryRun::None, -1)),
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    );
    let o = delete_options(&plan(DryRun::None, 0));
    assert_eq!(o["gracePeriodSeconds"], 0);
    assert!(o.get("dryRun").is_none());
}

#[test]
fn a_server_dry_run_delete_carries_dry_run_all() {
    assert_eq!(delete_options(&plan(DryRun::Server, -1))["dryRun"], json!(["All"]));
}
