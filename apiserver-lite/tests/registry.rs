//! The registry's semantics, as the real API server's, on every store: a real SQLite file, one
//! etcd member, three (see `support::stores`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

#[macro_use]
mod support;

use std::sync::Arc;
use std::time::Duration;

use apiserver_lite::admission::{Admission, Plugin};
use apiserver_lite::objects::FieldValidation;
use apiserver_lite::registry::{
    DeleteOptions, ListAt, ListOptions, Propagation, Registry, WatchItem, WatchOptions, WatchStart,
    WriteOptions,
};

const W: WriteOptions = WriteOptions { dry_run: false, validation: FieldValidation::Strict };
use apiserver_lite::resources::{ResourceType, find};
use apiserver_lite::selectors::{FieldSelector, LabelSelector};
use apiserver_lite::storage::Store;
use apiserver_lite::storage::sqlite::SqliteBackend;
use serde_json::{Value, json};
use support::stores::{Backend, TestStore};

fn pods() -> &'static ResourceType {
    find("", "v1", "pods").unwrap()
}

async fn registry(dir: &TestStore) -> Arc<Registry> {
    let store = dir.open().await;
    // No controller-manager makes `default` ServiceAccounts here: pods are admitted without
    // the ServiceAccount plugin, as upstream's integration tests run.
    let admission = Admission::default().without(Plugin::ServiceAccount);
    let r = Arc::new(Registry::new(Arc::new(store)).with_admission(admission));
    r.bootstrap().await.unwrap();
    r
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}})
}

async fn create(r: &Registry, name: &str) -> Value {
    r.create(pods(), Some("default"), pod(name, json!({"app": "web"})), W).await.unwrap().0
}

async fn create_get_list_and_update_with_optimistic_concurrency(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let created = create(&r, "web").await;
    assert_eq!(created["status"]["phase"], "Pending");
    let rv1 = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let err = r.create(pods(), Some("default"), pod("web", json!({})), W).await.unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (409, "pods \"web\" already exists"));
    let err = r.create(pods(), Some("nons"), pod("x", json!({})), W).await.unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (404, "namespaces \"nons\" not found"));

    let mut changed = created.clone();
    changed["metadata"]["labels"]["tier"] = json!("front");
    let updated =
        r.update(pods(), Some("default"), "web", None, changed.clone(), W).await.unwrap().0;
    let rv2 = updated["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert!(rv2.parse::<i64>().unwrap() > rv1.parse::<i64>().unwrap());
    // The same write again, with the now stale resourceVersion: a conflict.
    let err = r.update(pods(), Some("default"), "web", None, changed, W).await.unwrap_err();
    assert_eq!((err.code, err.reason), (409, "Conflict"));
    // An update that changes nothing keeps the resourceVersion.
    let same = r.update(pods(), Some("default"), "web", None, updated.clone(), W).await.unwrap().0;
    assert_eq!(same["metadata"]["resourceVersion"], rv2.as_str());

    create(&r, "db").await;
    let opts = ListOptions {
        labels: LabelSelector::parse("tier=front").unwrap(),
        ..ListOptions::default()
    };
    let page = r.list(pods(), Some("default"), &opts).unwrap();
    assert_eq!(page.items.len(), 1);
    let all = r.list(pods(), None, &ListOptions::default()).unwrap();
    assert_eq!(all.items.len(), 2);
    assert_eq!(all.revision, r.store.revision());
}

async fn paging_follows_continue_tokens(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    for i in 0..5 {
        create(&r, &format!("p{i}")).await;
    }
    let mut seen = Vec::new();
    let mut opts = ListOptions { limit: Some(2), ..ListOptions::default() };
    loop {
        let page = r.list(pods(), Some("default"), &opts).unwrap();
        seen.extend(names(&page));
        match page.continue_token {
            Some(t) => {
                assert!(page.remaining.unwrap() > 0);
                opts.continue_from = Some(t);
            }
            None => break,
        }
    }
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"]);
    let bad = ListOptions { continue_from: Some("zz".into()), ..ListOptions::default() };
    assert_eq!(r.list(pods(), Some("default"), &bad).unwrap_err().code, 400);
}

fn names(page: &apiserver_lite::registry::ListPage) -> Vec<String> {
    page.items
        .iter()
        .map(|item| {
            let v: Value = serde_json::from_slice(item).unwrap();
            v["metadata"]["name"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A registry with pods p0..p4, the options of a list by twos, and its first page (p0, p1).
async fn five_pods_and_a_first_page_of_two(
    dir: &TestStore,
) -> (Arc<Registry>, ListOptions, apiserver_lite::registry::ListPage) {
    let r = registry(dir).await;
    for i in 0..5 {
        create(&r, &format!("p{i}")).await;
    }
    let opts = ListOptions { limit: Some(2), ..ListOptions::default() };
    let first = r.list(pods(), Some("default"), &opts).unwrap();
    assert_eq!(names(&first), ["p0", "p1"]);
    (r, opts, first)
}

async fn a_paged_list_is_one_snapshot_at_the_first_pages_revision(b: Backend) {
    let dir = TestStore::start(b);
    let (r, mut opts, first) = five_pods_and_a_first_page_of_two(&dir).await;
    // Writes between the pages: a deletion, a label change and a creation.
    r.delete(pods(), Some("default"), "p2", &DeleteOptions::default(), false).await.unwrap();
    let mut p3 = r.get(pods(), Some("default"), "p3").unwrap();
    p3["metadata"]["labels"]["changed"] = json!("yes");
    r.update(pods(), Some("default"), "p3", None, p3, W).await.unwrap();
    create(&r, "p25").await;

    opts.continue_from = first.continue_token.clone();
    let second = r.list(pods(), Some("default"), &opts).unwrap();
    assert_eq!(names(&second), ["p2", "p3"], "the deleted pod is still in the snapshot");
    assert_eq!(second.revision, first.revision, "every page reports the snapshot's revision");
    let p3_then: Value = serde_json::from_slice(&second.items[1]).unwrap();
    assert!(p3_then["metadata"]["labels"].get("changed").is_none(), "{p3_then}");
    opts.continue_from = second.continue_token.clone();
    let third = r.list(pods(), Some("default"), &opts).unwrap();
    assert_eq!((names(&third), third.continue_token), (vec!["p4".to_string()], None));

    // A fresh list sees the writes.
    let now = r.list(pods(), Some("default"), &ListOptions::default()).unwrap();
    assert_eq!(names(&now), ["p0", "p1", "p25", "p3", "p4"]);
    assert!(now.revision > first.revision);

    // resourceVersion with Exact reads the past; beyond the newest revision is a 504 to retry.
    let exact = ListOptions { at: ListAt::Exact(first.revision), ..ListOptions::default() };
    assert_eq!(
        names(&r.list(pods(), Some("default"), &exact).unwrap()),
        ["p0", "p1", "p2", "p3", "p4"]
    );
    for at in [ListAt::Exact(now.revision + 10), ListAt::NotOlderThan(now.revision + 10)] {
        let err = r.list(pods(), None, &ListOptions { at, ..ListOptions::default() }).unwrap_err();
        assert_eq!((err.code, err.reason), (504, "Timeout"), "{at:?}");
        assert!(err.message.starts_with("Too large resource version"), "{}", err.message);
    }
    let old_enough =
        ListOptions { at: ListAt::NotOlderThan(first.revision), ..ListOptions::default() };
    assert_eq!(r.list(pods(), None, &old_enough).unwrap().revision, now.revision);

    // After a restart the history is gone: the old token and revision are 410 Expired.
    let token = first.continue_token.clone();
    drop(r);
    dir.forget_history().await;
    let r = registry(&dir).await;
    let stale = ListOptions { limit: Some(2), continue_from: token, ..ListOptions::default() };
    let err = r.list(pods(), Some("default"), &stale).unwrap_err();
    assert_eq!((err.code, err.reason), (410, "Expired"));
    assert!(err.message.contains("start a new list"), "{}", err.message);
    let err = r.list(pods(), Some("default"), &exact).unwrap_err();
    assert_eq!((err.code, err.reason), (410, "Expired"));
}

async fn an_expired_continue_token_is_answered_with_a_token_for_the_rest_as_it_is_now(b: Backend) {
    let dir = TestStore::start(b);
    let (r, mut opts, first) = five_pods_and_a_first_page_of_two(&dir).await;

    // Writes on both sides of the page boundary, then a restart drops the kept history.
    r.delete(pods(), Some("default"), "p2", &DeleteOptions::default(), false).await.unwrap();
    create(&r, "p0a").await;
    create(&r, "p5").await;
    drop(r);
    dir.forget_history().await;
    let r = registry(&dir).await;

    opts.continue_from = first.continue_token.clone();
    let err = r.list(pods(), Some("default"), &opts).unwrap_err();
    assert_eq!((err.code, err.reason), (410, "Expired"));
    let status = err.status();
    let next = status["metadata"]["continue"].as_str().expect("a token for the rest").to_string();
    assert!(err.message.contains("continue with the token in this answer"), "{}", err.message);

    // The rest as it is now, after the last name the first page returned: p2 is gone, p5 is
    // new, p0a sorts before the boundary and is not seen.
    opts.continue_from = Some(next);
    let second = r.list(pods(), Some("default"), &opts).unwrap();
    assert_eq!(names(&second), ["p3", "p4"]);
    let newest = r.list(pods(), None, &ListOptions::default()).unwrap().revision;
    assert_eq!(second.revision, newest);
    // That page fixes the snapshot for the pages after it.
    create(&r, "p6").await;
    opts.continue_from = second.continue_token.clone();
    let third = r.list(pods(), Some("default"), &opts).unwrap();
    assert_eq!((names(&third), third.revision), (vec!["p5".to_string()], newest));
    assert_eq!(third.continue_token, None);
}

async fn strict_field_validation_refuses_unknown_fields_and_warn_reports_them(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let mut typo = pod("t", json!({}));
    typo["spec"]["containers"][0]["comand"] = json!(["sh"]);
    let err = r.create(pods(), Some("default"), typo.clone(), W).await.unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "strict decoding error: unknown field \"spec.containers[0].comand\"")
    );
    let (obj, warnings) = r
        .create(
            pods(),
            Some("default"),
            typo,
            WriteOptions { validation: FieldValidation::Warn, ..W },
        )
        .await
        .unwrap();
    assert_eq!(warnings, ["unknown field \"spec.containers[0].comand\""]);
    assert!(obj["spec"]["containers"][0].get("comand").is_none(), "unknown fields are not stored");
    let err = r.create(pods(), Some("default"), pod("NO", json!({})), W).await.unwrap_err();
    assert_eq!(err.code, 422);
}

async fn a_pod_on_a_node_is_deleted_gracefully_and_removed_when_its_kubelet_confirms(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let mut p = pod("bound", json!({}));
    p["spec"]["nodeName"] = json!("node-1");
    r.create(pods(), Some("default"), p, W).await.unwrap();
    let d =
        r.delete(pods(), Some("default"), "bound", &DeleteOptions::default(), false).await.unwrap();
    assert!(!d.removed);
    assert!(d.object["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(d.object["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(
        r.get(pods(), Some("default"), "bound").is_ok(),
        "still there until the kubelet confirms"
    );
    let confirm = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
    assert!(r.delete(pods(), Some("default"), "bound", &confirm, false).await.unwrap().removed);
    assert_eq!(r.get(pods(), Some("default"), "bound").unwrap_err().code, 404);

    create(&r, "unbound").await;
    assert!(
        r.delete(pods(), Some("default"), "unbound", &DeleteOptions::default(), false)
            .await
            .unwrap()
            .removed,
        "an unscheduled pod goes at once"
    );
}

async fn finalizers_hold_an_object_until_they_are_removed(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let cm = find("", "v1", "configmaps").unwrap();
    let body = json!({"metadata": {"name": "held", "finalizers": ["example.com/keep"]}, "data": {"a": "1"}});
    r.create(cm, Some("default"), body, W).await.unwrap();
    let d = r.delete(cm, Some("default"), "held", &DeleteOptions::default(), false).await.unwrap();
    assert!(!d.removed && d.object["metadata"]["deletionTimestamp"].is_string());
    let mut released = r.get(cm, Some("default"), "held").unwrap();
    released["metadata"]["finalizers"] = json!([]);
    r.update(cm, Some("default"), "held", None, released, W).await.unwrap();
    assert_eq!(r.get(cm, Some("default"), "held").unwrap_err().code, 404);
}

async fn propagation_policies_set_the_gc_finalizers_and_removing_them_completes_the_delete(
    b: Backend,
) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let deploys = find("apps", "v1", "deployments").unwrap();
    let deployment = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}},
               "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}}}})
    };
    let with = |p| DeleteOptions { propagation: Some(p), ..DeleteOptions::default() };
    let ns = Some("default");
    for name in ["fg", "orphan", "bg"] {
        r.create(deploys, ns, deployment(name), W).await.unwrap();
    }
    // Foreground: marked, with the finalizer the garbage collector removes once the dependents
    // are gone; the object stays until then.
    let d = r.delete(deploys, ns, "fg", &with(Propagation::Foreground), false).await.unwrap();
    assert!(!d.removed);
    assert_eq!(d.object["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(d.object["metadata"]["deletionTimestamp"].is_string());
    // Nothing may add a finalizer now.
    let mut more = r.get(deploys, ns, "fg").unwrap();
    more["metadata"]["finalizers"] = json!(["foregroundDeletion", "example.com/late"]);
    let err = r.update(deploys, ns, "fg", None, more, W).await.unwrap_err();
    assert!(
        err.message.contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        err.message
    );
    // The garbage collector's patch removing it completes the deletion.
    let mut done = r.get(deploys, ns, "fg").unwrap();
    done["metadata"]["finalizers"] = json!([]);
    r.update(deploys, ns, "fg", None, done, W).await.unwrap();
    assert_eq!(r.get(deploys, ns, "fg").unwrap_err().code, 404);

    // Orphan, and the legacy orphanDependents, set the orphan finalizer.
    let d = r.delete(deploys, ns, "orphan", &with(Propagation::Orphan), false).await.unwrap();
    assert_eq!(d.object["metadata"]["finalizers"], json!(["orphan"]));
    // Background: gone at once (the garbage collector deletes dependents after).
    let d = r.delete(deploys, ns, "bg", &with(Propagation::Background), false).await.unwrap();
    assert!(d.removed && d.warnings.is_empty());

    // A batch/v1 Job with no policy orphans its pods, and says so.
    let jobs = find("batch", "v1", "jobs").unwrap();
    let job = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.35"}]}}}});
    r.create(jobs, ns, job, W).await.unwrap();
    let d = r.delete(jobs, ns, "j", &DeleteOptions::default(), false).await.unwrap();
    assert_eq!(d.object["metadata"]["finalizers"], json!(["orphan"]));
    assert_eq!(
        d.warnings,
        [
            "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"
        ]
    );
    // Asked again in the background, the orphan finalizer goes and so does the Job.
    let d = r.delete(jobs, ns, "j", &with(Propagation::Background), false).await.unwrap();
    assert!(d.removed);
}

async fn deleting_a_namespace_removes_its_contents_then_itself(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let nsr = find("", "v1", "namespaces").unwrap();
    r.create(nsr, None, json!({"metadata": {"name": "team"}}), W).await.unwrap();
    r.create(pods(), Some("team"), pod("a", json!({})), W).await.unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(r.clone().run_namespace_controller(stop.clone()));
    let d = r.delete(nsr, None, "team", &DeleteOptions::default(), false).await.unwrap();
    assert_eq!(d.object["status"]["phase"], "Terminating");
    let err = r.create(pods(), Some("team"), pod("b", json!({})), W).await.unwrap_err();
    assert_eq!(err.code, 403, "{}", err.message);
    for _ in 0..100 {
        if r.get(nsr, None, "team").is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(r.get(nsr, None, "team").unwrap_err().code, 404);
    assert_eq!(r.get(pods(), Some("team"), "a").unwrap_err().code, 404);
    stop.cancel();
}

async fn next_event(w: &mut apiserver_lite::registry::WatchStream) -> (String, String) {
    match tokio::time::timeout(Duration::from_secs(5), w.next()).await.unwrap().unwrap() {
        WatchItem::Event { kind, object } => {
            (kind.to_string(), object["metadata"]["name"].as_str().unwrap().to_string())
        }
        other => panic!("unexpected {other:?}"),
    }
}

async fn watches_send_current_objects_then_changes_through_their_selectors(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    create(&r, "a").await;
    let opts = WatchOptions {
        start: WatchStart::InitialEvents,
        list: ListOptions {
            labels: LabelSelector::parse("app=web").unwrap(),
            ..ListOptions::default()
        },
        bookmarks: true,
    };
    let mut w = r.watch(pods(), Some("default"), opts).unwrap();
    assert_eq!(next_event(&mut w).await, ("ADDED".into(), "a".into()));
    match w.next().await.unwrap() {
        WatchItem::Bookmark { initial_events_end, revision } => {
            assert!(initial_events_end && revision > 0)
        }
        other => panic!("{other:?}"),
    }
    create(&r, "b").await;
    assert_eq!(next_event(&mut w).await, ("ADDED".into(), "b".into()));
    // b stops matching: the watcher sees it DELETED; it matches again: ADDED.
    let mut b = r.get(pods(), Some("default"), "b").unwrap();
    b["metadata"]["labels"]["app"] = json!("other");
    let b = r.update(pods(), Some("default"), "b", None, b, W).await.unwrap().0;
    assert_eq!(next_event(&mut w).await, ("DELETED".into(), "b".into()));
    let mut b = b;
    b["metadata"]["labels"]["app"] = json!("web");
    r.update(pods(), Some("default"), "b", None, b, W).await.unwrap();
    assert_eq!(next_event(&mut w).await, ("ADDED".into(), "b".into()));
    r.delete(pods(), Some("default"), "a", &DeleteOptions::default(), false).await.unwrap();
    assert_eq!(next_event(&mut w).await, ("DELETED".into(), "a".into()));
}

async fn a_watch_by_name_sees_only_that_objects_events(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let fields = FieldSelector::parse("metadata.name=watched", pods()).unwrap();
    let list = ListOptions { fields, ..ListOptions::default() };
    let opts = WatchOptions { start: WatchStart::Now, list, bookmarks: false };
    let mut w = r.watch(pods(), Some("default"), opts).unwrap();
    create(&r, "other").await;
    create(&r, "watched").await;
    assert_eq!(next_event(&mut w).await, ("ADDED".into(), "watched".into()));
    r.delete(pods(), Some("default"), "other", &DeleteOptions::default(), false).await.unwrap();
    r.delete(pods(), Some("default"), "watched", &DeleteOptions::default(), false).await.unwrap();
    assert_eq!(next_event(&mut w).await, ("DELETED".into(), "watched".into()));
}

async fn a_watch_resumes_after_a_revision_and_a_too_old_one_is_expired(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let a = create(&r, "a").await;
    let after = a["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    create(&r, "b").await;
    let opts = WatchOptions {
        start: WatchStart::After(after),
        list: ListOptions::default(),
        bookmarks: false,
    };
    let mut w = r.watch(pods(), Some("default"), opts.clone()).unwrap();
    assert_eq!(next_event(&mut w).await, ("ADDED".into(), "b".into()));

    dir.forget_history().await;
    let r2 = registry(&dir).await; // a restart: no history before now
    let mut old = r2
        .watch(pods(), Some("default"), WatchOptions { start: WatchStart::After(1), ..opts })
        .unwrap();
    match old.next().await.unwrap() {
        WatchItem::Error(status) => {
            assert_eq!(
                (status["code"].as_u64(), status["reason"].as_str()),
                (Some(410), Some("Expired"))
            );
            assert!(
                status["message"].as_str().unwrap().starts_with("too old resource version: 1 (")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(old.next().await.is_none());
    let fields = FieldSelector::parse("spec.nodeName=nowhere", pods()).unwrap();
    assert!(
        r.list(pods(), None, &ListOptions { fields, ..ListOptions::default() })
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn new_pods_tolerate_unready_and_unreachable_nodes_for_the_configured_time() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        Store::open(Arc::new(SqliteBackend::open(&dir.path().join("db")).unwrap())).unwrap();
    let admission = Admission {
        default_not_ready_toleration_seconds: 30,
        default_unreachable_toleration_seconds: 45,
        ..Admission::default().without(Plugin::ServiceAccount)
    };
    let r = Registry::new(Arc::new(store)).with_admission(admission);
    r.bootstrap().await.unwrap();
    let (p, _) = r.create(pods(), Some("default"), pod("p", json!({})), W).await.unwrap();
    assert_eq!(
        p["spec"]["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 45},
        ])
    );
    // An update that leaves them out gets them back, as upstream's plugin runs on updates too.
    let mut bare = p.clone();
    bare["spec"]["tolerations"] = json!([]);
    let (u, _) = r.update(pods(), Some("default"), "p", None, bare, W).await.unwrap();
    assert_eq!(u["spec"]["tolerations"], p["spec"]["tolerations"]);
}

fn service(name: &str, ip: Option<&str>) -> Value {
    let mut s = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                       "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
    if let Some(ip) = ip {
        s["spec"]["clusterIP"] = json!(ip);
    }
    s
}

async fn services_never_share_a_cluster_ip_and_a_taken_one_is_refused(b: Backend) {
    let dir = TestStore::start(b);
    // Over etcd, two apiservers' registries on the one store; over SQLite, one.
    let first = registry(&dir).await;
    let second = if dir.etcd.is_some() { registry(&dir).await } else { first.clone() };
    let svcs = find("", "v1", "services").unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let r = if i % 2 == 0 { first.clone() } else { second.clone() };
            tokio::spawn(async move {
                let (s, _) = r
                    .create(svcs, Some("default"), service(&format!("s{i}"), None), W)
                    .await
                    .unwrap();
                s["spec"]["clusterIP"].as_str().unwrap().to_string()
            })
        })
        .collect();
    let mut ips = Vec::new();
    for t in tasks {
        ips.push(t.await.unwrap());
    }
    let distinct: std::collections::BTreeSet<&String> = ips.iter().collect();
    assert_eq!(distinct.len(), 20, "{ips:?}");
    let err =
        second.create(svcs, Some("default"), service("taken", Some(&ips[0])), W).await.unwrap_err();
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        format!(
            "Service \"taken\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{0}\"}}: failed to allocate IP {0}: provided IP is already allocated",
            ips[0]
        )
    );
    // Deleting s0 gives its address back.
    first.delete(svcs, Some("default"), "s0", &DeleteOptions::default(), false).await.unwrap();
    let (s, _) =
        second.create(svcs, Some("default"), service("again", Some(&ips[0])), W).await.unwrap();
    assert_eq!(s["spec"]["clusterIP"], ips[0].as_str());
}

async fn a_create_answers_with_the_bytes_it_stored_which_are_the_object(b: Backend) {
    let dir = TestStore::start(b);
    let r = registry(&dir).await;
    let body = pod("web", json!({"app": "web"}));
    let created = r.create_as(pods(), Some("default"), body.clone(), W, "kubectl").await.unwrap();
    let stored: Value = serde_json::from_slice(&created.encoded.unwrap()).unwrap();
    assert_eq!(stored, created.object);
    assert_eq!(stored, r.get(pods(), Some("default"), "web").unwrap());
    assert_eq!(stored["metadata"]["managedFields"][0]["manager"], "kubectl");

    let dry = WriteOptions { dry_run: true, ..W };
    let body = pod("dry", json!({}));
    let preview = r.create_as(pods(), Some("default"), body, dry, "kubectl").await.unwrap();
    assert!(preview.encoded.is_none(), "nothing is stored by a dry run");
    assert_eq!(preview.object["metadata"]["name"], "dry");
}

on_every_store!(
    create_get_list_and_update_with_optimistic_concurrency,
    a_create_answers_with_the_bytes_it_stored_which_are_the_object,
    paging_follows_continue_tokens,
    a_paged_list_is_one_snapshot_at_the_first_pages_revision,
    an_expired_continue_token_is_answered_with_a_token_for_the_rest_as_it_is_now,
    strict_field_validation_refuses_unknown_fields_and_warn_reports_them,
    a_pod_on_a_node_is_deleted_gracefully_and_removed_when_its_kubelet_confirms,
    finalizers_hold_an_object_until_they_are_removed,
    propagation_policies_set_the_gc_finalizers_and_removing_them_completes_the_delete,
    deleting_a_namespace_removes_its_contents_then_itself,
    watches_send_current_objects_then_changes_through_their_selectors,
    a_watch_resumes_after_a_revision_and_a_too_old_one_is_expired,
    a_watch_by_name_sees_only_that_objects_events,
    services_never_share_a_cluster_ip_and_a_taken_one_is_refused,
);
