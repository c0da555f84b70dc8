//! kube-rs (typed `Api<Pod>`, the watcher, patches) against apiserver-lite, and durability:
//! kill -9 during a stream of writes loses no acknowledged write; on every store (SQLite, one
//! etcd member, three).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::apiserver::{Store, start_on_store};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]},
    }))
    .unwrap()
}

async fn typed_pods_crud_with_conflicts_and_patches(store: Store) {
    let (server, _etcd) = start_on_store(store, &[]).unwrap();
    let client = server.admin_client().await.unwrap();
    assert_eq!(client.apiserver_version().await.unwrap().minor, "35");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods.create(&PostParams::default(), &pod("web")).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let got = pods.get("web").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let listed = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
    assert_eq!(listed.items.len(), 1);

    // A replace from a stale copy is a 409 Conflict.
    let mut first = got.clone();
    first.metadata.labels.get_or_insert_default().insert("v".into(), "1".into());
    pods.replace("web", &PostParams::default(), &first).await.unwrap();
    let mut stale = got;
    stale.metadata.labels.get_or_insert_default().insert("v".into(), "2".into());
    match pods.replace("web", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("expected a conflict, got {other:?}"),
    }

    let merged = pods
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.labels.unwrap()["m"], "1");
    let strategic =
        Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}));
    let patched = pods.patch("web", &PatchParams::default(), &strategic).await.unwrap();
    assert_eq!(patched.spec.unwrap().containers[0].image.as_deref(), Some("busybox:1.36"));
    let ops: json_patch::Patch = serde_json::from_value(
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]),
    )
    .unwrap();
    let jsonp = pods.patch("web", &PatchParams::default(), &Patch::<()>::Json(ops)).await.unwrap();
    assert_eq!(jsonp.metadata.annotations.unwrap()["a"], "b");

    match pods.get("nope").await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (404, "NotFound")),
        other => panic!("{other:?}"),
    }
    let deleted = pods.delete("web", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_left(), "a pod deletion answers with the pod");
    assert!(pods.get_opt("web").await.unwrap().is_none());
}

async fn the_watcher_lists_then_follows_changes_in_both_list_modes(store: Store) {
    let (server, _etcd) = start_on_store(store, &[]).unwrap();
    let client = server.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("before")).await.unwrap();
    for config in [watcher::Config::default(), watcher::Config::default().streaming_lists()] {
        let mut stream = watcher(pods.clone(), config).boxed();
        let mut seen_init_done = false;
        let mut names = BTreeSet::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let name = format!("after-{}", rand::random::<u16>());
        let mut created = false;
        while let Ok(Some(event)) =
            tokio::time::timeout_at(deadline, stream.try_next()).await.unwrap()
        {
            match event {
                watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                    names.insert(p.metadata.name.unwrap());
                }
                watcher::Event::InitDone => {
                    seen_init_done = true;
                    pods.create(&PostParams::default(), &pod(&name)).await.unwrap();
                    created = true;
                }
                _ => {}
            }
            if created && names.contains(&name) {
                break;
            }
        }
        assert!(seen_init_done && names.contains("before") && names.contains(&name), "{names:?}");
    }
}

async fn kill_9_during_a_stream_of_writes_loses_no_acknowledged_write(store: Store) {
    let (mut server, _etcd) = start_on_store(store, &[]).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client().await.unwrap(), "default");
    let writer = tokio::spawn(async move {
        let mut acked = Vec::new();
        for i in 0.. {
            let cm: ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": format!("cm-{i}")}, "data": {"i": i.to_string()}}),
            )
            .unwrap();
            match cms.create(&PostParams::default(), &cm).await {
                Ok(c) => acked.push((
                    c.metadata.name.unwrap(),
                    c.metadata.resource_version.unwrap().parse::<i64>().unwrap(),
                )),
                Err(_) => break,
            }
        }
        acked
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill9();
    let acked = writer.await.unwrap();
    assert!(acked.len() > 50, "the writer got going: {}", acked.len());
    server.restart().unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client().await.unwrap(), "default");
    let stored: BTreeSet<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let missing: Vec<&String> =
        acked.iter().map(|(n, _)| n).filter(|n| !stored.contains(*n)).collect();
    assert!(missing.is_empty(), "acknowledged but lost after kill -9: {missing:?}");
    let highest = acked.iter().map(|(_, rv)| *rv).max().unwrap();
    let next: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "after-restart"}})).unwrap();
    let next = cms.create(&PostParams::default(), &next).await.unwrap();
    assert!(
        next.metadata.resource_version.unwrap().parse::<i64>().unwrap() > highest,
        "resourceVersions continue upward"
    );
}

// Each test on every store: SQLite, one etcd member, three.
e2e::on_every_store!(
    typed_pods_crud_with_conflicts_and_patches,
    the_watcher_lists_then_follows_changes_in_both_list_modes,
    kill_9_during_a_stream_of_writes_loses_no_acknowledged_write,
);
