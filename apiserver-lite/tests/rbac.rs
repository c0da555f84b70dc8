//! RBAC over a real store (SQLite in a temp dir): the bootstrap policy reconciled into it
//! (idempotently, sparing `autoupdate: "false"`), aggregation settled, and the index following
//! writes made after start.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use apiserver_lite::auth::User;
use apiserver_lite::auth::authorizer::{Attributes, ResourceAttributes, Target};
use apiserver_lite::auth::rbac::{self, Rbac};
use apiserver_lite::objects::FieldValidation;
use apiserver_lite::registry::{Registry, WriteOptions};
use apiserver_lite::resources::find;
use apiserver_lite::storage::Store;
use apiserver_lite::storage::sqlite::SqliteBackend;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const W: WriteOptions = WriteOptions { dry_run: false, validation: FieldValidation::Strict };
const GROUP: &str = "rbac.authorization.k8s.io";

async fn registry(dir: &std::path::Path) -> Arc<Registry> {
    let store = Store::open(Arc::new(SqliteBackend::open(&dir.join("db")).unwrap())).unwrap();
    let r = Arc::new(Registry::new(Arc::new(store)));
    r.bootstrap().await.unwrap();
    r
}

fn can(rbac: &Rbac, name: &str, verb: &str, resource: &str, ns: &str) -> bool {
    let user =
        User { name: name.into(), groups: vec!["system:authenticated".into()], ..User::default() };
    let attrs = ResourceAttributes { resource, namespace: ns, ..Default::default() };
    rbac.decide(&Attributes { user: &user, verb, target: Target::Resource(attrs) }).allowed()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bootstrap_policy_is_reconciled_into_the_store_and_the_index_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path()).await;
    rbac::reconcile::bootstrap(&reg).await.unwrap();
    let rbac = Arc::new(Rbac::default());
    rbac::aggregation::settle(&rbac, &reg).await;
    let roles = find(GROUP, "v1", "clusterroles").unwrap();
    let view = reg.get(roles, None, "view").unwrap();
    assert!(view["rules"].as_array().is_some_and(|r| !r.is_empty()), "view is aggregated: {view}");

    // An operator's changes survive a restart's reconciliation: an extra rule stays, a role
    // marked autoupdate=false keeps even a removal.
    let revision = reg.store.revision();
    rbac::reconcile::bootstrap(&reg).await.unwrap();
    assert_eq!(reg.store.revision(), revision, "a second reconciliation changes nothing");
    reg.update_with(roles, None, "system:basic-user", None, W, |old| {
        let mut new = old.clone();
        new["rules"] = json!([]);
        new["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] =
            json!("false");
        Ok(new)
    })
    .await
    .unwrap();
    reg.update_with(roles, None, "system:discovery", None, W, |old| {
        let mut new = old.clone();
        new["rules"] = json!([{"verbs": ["get"], "nonResourceURLs": ["/extra"]}]);
        Ok(new)
    })
    .await
    .unwrap();
    rbac::reconcile::bootstrap(&reg).await.unwrap();
    assert_eq!(reg.get(roles, None, "system:basic-user").unwrap()["rules"], json!([]));
    let discovery = reg.get(roles, None, "system:discovery").unwrap();
    let urls: Vec<String> = discovery["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["nonResourceURLs"].as_array().cloned().unwrap_or_default())
        .map(|u| u.as_str().unwrap().to_string())
        .collect();
    assert!(
        urls.contains(&"/extra".to_string()) && urls.contains(&"/version".to_string()),
        "{urls:?}"
    );

    // A binding written after start takes effect once the watch delivers it.
    let stop = CancellationToken::new();
    let task = tokio::spawn(rbac.clone().run(reg.clone(), stop.clone()));
    let ns = find("", "v1", "namespaces").unwrap();
    reg.create(ns, None, json!({"metadata": {"name": "a"}}), W).await.unwrap();
    assert!(!can(&rbac, "alice", "list", "pods", "a"));
    let rb = find(GROUP, "v1", "rolebindings").unwrap();
    let binding = json!({
        "metadata": {"name": "alice-view"},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}],
    });
    reg.create(rb, Some("a"), binding, W).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !can(&rbac, "alice", "list", "pods", "a") {
        assert!(std::time::Instant::now() < deadline, "the index never saw the binding");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!can(&rbac, "alice", "list", "secrets", "a"));
    // A new role labelled for view is aggregated into it, and so granted.
    let widget_reader = json!({
        "metadata": {"name": "widget-reader", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}],
    });
    reg.create(roles, None, widget_reader, W).await.unwrap();
    let can_widgets = || {
        let user = User { name: "alice".into(), ..User::default() };
        let attrs = ResourceAttributes {
            group: "example.com",
            resource: "widgets",
            namespace: "a",
            ..Default::default()
        };
        rbac.decide(&Attributes { user: &user, verb: "get", target: Target::Resource(attrs) })
            .allowed()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !can_widgets() {
        assert!(std::time::Instant::now() < deadline, "view never aggregated the new role");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    reg.delete(rb, Some("a"), "alice-view", &Default::default(), false).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while can(&rbac, "alice", "list", "pods", "a") {
        assert!(std::time::Instant::now() < deadline, "the index never saw the deletion");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    task.await.unwrap();
}
