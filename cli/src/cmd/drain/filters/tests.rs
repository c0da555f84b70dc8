#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

fn now() -> jiff::Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn pod(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "d"},
           "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}})
}

fn owned(name: &str, kind: &str, owner: &str) -> Value {
    let mut p = pod(name);
    let api_version = if kind == "DaemonSet" || kind == "ReplicaSet" { "apps/v1" } else { "v1" };
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind, "name": owner, "uid": "u", "controller": true}]);
    p
}

fn with_empty_dir(mut p: Value) -> Value {
    p["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    p
}

fn phase(mut p: Value, phase: &str) -> Value {
    p["status"]["phase"] = json!(phase);
    p
}

fn daemon_sets(state: DaemonSet) -> BTreeMap<(String, String), DaemonSet> {
    [(("d".to_string(), "agent".to_string()), state)].into()
}

fn names(pods: &[Value]) -> Vec<&str> {
    pods.iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect()
}

#[test]
fn replicated_pods_go_and_mirror_pods_are_skipped_silently() {
    let mut mirror = pod("static-n1");
    mirror["metadata"]["annotations"] = json!({MIRROR: "hash"});
    let pods = vec![owned("web-1", "ReplicaSet", "web"), mirror];
    let plan = filter(pods, &BTreeMap::new(), &Options::default(), now());
    assert_eq!(names(&plan.pods()), ["web-1"]);
    assert_eq!(plan.warnings(), "");
    assert!(plan.errors().is_empty());
}

#[test]
fn daemon_set_pods_are_refused_unless_ignored_and_never_deleted() {
    let pods = vec![owned("agent-1", "DaemonSet", "agent"), owned("agent-2", "DaemonSet", "agent")];
    let ds = daemon_sets(DaemonSet::Found);
    let plan = filter(pods.clone(), &ds, &Options::default(), now());
    assert_eq!(
        plan.errors(),
        [
            "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): d/agent-1, d/agent-2"
        ]
    );
    let ignore = Options { ignore_daemonsets: true, ..Options::default() };
    let plan = filter(pods, &ds, &ignore, now());
    assert!(plan.pods().is_empty() && plan.errors().is_empty());
    assert_eq!(plan.warnings(), "ignoring DaemonSet-managed Pods: d/agent-1, d/agent-2");
}

#[test]
fn an_orphan_of_a_missing_daemon_set_goes_only_with_force() {
    let pods = vec![owned("agent-1", "DaemonSet", "agent")];
    let gone = daemon_sets(DaemonSet::Missing("daemonsets.apps \"agent\" not found".into()));
    let plan = filter(pods.clone(), &gone, &Options::default(), now());
    assert_eq!(plan.errors(), ["cannot delete daemonsets.apps \"agent\" not found: d/agent-1"]);
    let force = Options { force: true, ..Options::default() };
    let plan = filter(pods, &gone, &force, now());
    assert_eq!(names(&plan.pods()), ["agent-1"]);
    // The filters after it have the final word (the pod declares a controller): no warning.
    assert_eq!(plan.warnings(), "");
}

#[test]
fn bare_pods_are_refused_unless_forced() {
    let plan = filter(vec![pod("solo")], &BTreeMap::new(), &Options::default(), now());
    assert_eq!(
        plan.errors(),
        [
            "cannot delete cannot delete Pods that declare no controller (use --force to override): d/solo"
        ]
    );
    assert!(plan.pods().is_empty());
    let force = Options { force: true, ..Options::default() };
    let plan = filter(vec![pod("solo")], &BTreeMap::new(), &force, now());
    assert_eq!(names(&plan.pods()), ["solo"]);
    assert_eq!(plan.warnings(), "deleting Pods that declare no controller: d/solo");
}

#[test]
fn pods_with_empty_dir_are_refused_unless_their_data_may_go_and_the_warning_is_kubectls_last() {
    let cache = with_empty_dir(owned("cache-1", "ReplicaSet", "cache"));
    let plan = filter(vec![cache.clone()], &BTreeMap::new(), &Options::default(), now());
    assert_eq!(
        plan.errors(),
        [
            "cannot delete Pods with local storage (use --delete-emptydir-data to override): d/cache-1"
        ]
    );
    let data = Options { delete_emptydir_data: true, ..Options::default() };
    let plan = filter(vec![cache], &BTreeMap::new(), &data, now());
    assert_eq!(names(&plan.pods()), ["cache-1"]);
    // The unreplicated filter comes last and has the final word, as in kubectl.
    assert_eq!(plan.warnings(), "");
    // A bare emptyDir pod is refused for its storage first.
    let bare = with_empty_dir(pod("scratch"));
    let plan = filter(vec![bare.clone()], &BTreeMap::new(), &Options::default(), now());
    assert_eq!(plan.errors().len(), 1);
    assert!(plan.errors()[0].starts_with("cannot delete Pods with local storage"));
    let both = Options { delete_emptydir_data: true, force: true, ..Options::default() };
    let plan = filter(vec![bare], &BTreeMap::new(), &both, now());
    assert_eq!(plan.warnings(), "deleting Pods that declare no controller: d/scratch");
}

#[test]
fn finished_pods_always_go() {
    let pods = vec![
        phase(pod("done"), "Succeeded"),
        phase(with_empty_dir(pod("failed")), "Failed"),
        phase(owned("agent-1", "DaemonSet", "agent"), "Succeeded"),
    ];
    // No DaemonSet is looked up for a finished pod.
    assert_eq!(daemon_set_of(&pods[2]), None);
    let plan = filter(pods, &BTreeMap::new(), &Options::default(), now());
    assert_eq!(names(&plan.pods()), ["done", "failed", "agent-1"]);
    assert!(plan.errors().is_empty() && plan.warnings().is_empty());
}

#[test]
fn refusals_and_warnings_are_grouped_by_message() {
    let pods = vec![pod("a"), owned("agent-1", "DaemonSet", "agent"), pod("b")];
    let ds = daemon_sets(DaemonSet::Found);
    let plan = filter(pods.clone(), &ds, &Options::default(), now());
    assert_eq!(
        plan.errors(),
        [
            "cannot delete cannot delete Pods that declare no controller (use --force to override): d/a, d/b",
            "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): d/agent-1",
        ]
    );
    let both = Options { force: true, ignore_daemonsets: true, ..Options::default() };
    let plan = filter(pods, &ds, &both, now());
    assert_eq!(
        plan.warnings(),
        "deleting Pods that declare no controller: d/a, d/b; ignoring DaemonSet-managed Pods: d/agent-1"
    );
}

#[test]
fn pods_deleted_longer_ago_than_the_skip_timeout_are_skipped() {
    let mut old = owned("old", "ReplicaSet", "web");
    old["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:50Z");
    let mut recent = owned("recent", "ReplicaSet", "web");
    recent["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:58Z");
    let skip = Options { skip_wait_for_delete_timeout_seconds: 5, ..Options::default() };
    let plan = filter(vec![old.clone(), recent.clone()], &BTreeMap::new(), &skip, now());
    assert_eq!(names(&plan.pods()), ["recent"]);
    // 0 (the default) never skips.
    let plan = filter(vec![old, recent], &BTreeMap::new(), &Options::default(), now());
    assert_eq!(plan.pods().len(), 2);
}
