//! The store over a real etcd (Debian's, started here on loopback ports): what several
//! apiservers sharing one etcd cluster rely on. Each `Store` below is what one apiserver holds.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use apiserver_lite::registry::versioner::set_resource_version;
use apiserver_lite::resources;
use apiserver_lite::storage::etcd::{EtcdConfig, KeyLayout, Remote};
use apiserver_lite::storage::memory::{Mutation, WatchEnd};
use apiserver_lite::storage::{EventType, StorageError, Store};
use bytes::Bytes;
use e2e::etcd::EtcdCluster;
use serde_json::json;

const POD: &str = "/registry/core/pods/default/";

fn config(etcd: &EtcdCluster, prefix: &str) -> EtcdConfig {
    EtcdConfig {
        servers: etcd.endpoints(),
        prefix: prefix.to_string(),
        ca_file: None,
        cert_file: None,
        key_file: None,
    }
}

async fn open(etcd: &EtcdCluster, prefix: &str) -> Store {
    let layout = KeyLayout::new(prefix, resources::etcd_routes());
    let remote =
        Remote::connect(&config(etcd, prefix), layout, set_resource_version).await.unwrap();
    Store::open_etcd(remote).await.unwrap()
}

fn object(name: &str, n: u64) -> Bytes {
    let v = json!({"kind": "Pod", "metadata": {"name": name, "resourceVersion": "0"}, "n": n});
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

fn n_of(value: &[u8]) -> u64 {
    serde_json::from_slice::<serde_json::Value>(value).unwrap()["n"].as_u64().unwrap()
}

fn rv_of(value: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(value).unwrap();
    v["metadata"]["resourceVersion"].as_str().unwrap().to_string()
}

async fn put(s: &Store, name: &str, n: u64) -> i64 {
    let key = format!("{POD}{name}");
    s.mutate::<StorageError, _>(&key, |_, _| Ok(Mutation::Put(object(name, n))))
        .await
        .unwrap()
        .revision
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_store_reaches_every_watcher_of_another_in_order_once() {
    let etcd = EtcdCluster::start(1).unwrap();
    let (a, b) = (open(&etcd, "/registry").await, open(&etcd, "/registry").await);
    let mut watch = b.watch(POD, None).unwrap();
    let mut written = Vec::new();
    for i in 0..50 {
        let store = if i % 2 == 0 { &a } else { &b };
        written.push((format!("{POD}p{}", i % 7), put(store, &format!("p{}", i % 7), i).await));
    }
    let mut seen = Vec::new();
    while seen.len() < written.len() {
        let e = tokio::time::timeout(Duration::from_secs(10), watch.next()).await.unwrap().unwrap();
        assert_eq!(rv_of(&e.value), e.revision.to_string(), "each event carries its revision");
        seen.push((e.key.clone(), e.revision));
    }
    assert_eq!(seen, written, "every write, in revision order, none twice");
    // Both stores now read the same objects at the same revisions.
    b.sync().await.unwrap();
    a.sync().await.unwrap();
    assert_eq!(a.list(POD).0, b.list(POD).0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_read_modify_writes_through_two_stores_lose_no_update() {
    let etcd = EtcdCluster::start(1).unwrap();
    let stores =
        [Arc::new(open(&etcd, "/registry").await), Arc::new(open(&etcd, "/registry").await)];
    let key = format!("{POD}counter");
    let bump = |s: Arc<Store>, key: String| async move {
        s.mutate::<StorageError, _>(&key, |cur, _| {
            let n = cur.map_or(0, |c| n_of(&c.value));
            Ok(Mutation::Put(object("counter", n + 1)))
        })
        .await
        .unwrap()
        .revision
    };
    let tasks: Vec<_> =
        (0..100).map(|i| tokio::spawn(bump(stores[i % 2].clone(), key.clone()))).collect();
    let mut revisions = Vec::new();
    for t in tasks {
        revisions.push(t.await.unwrap());
    }
    revisions.sort_unstable();
    revisions.dedup();
    assert_eq!(revisions.len(), 100, "each increment its own revision");
    for s in &stores {
        s.sync().await.unwrap();
        assert_eq!(n_of(&s.get(&key).unwrap().value), 100);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_has_not_seen_another_apiservers_write_decides_again_on_the_new_value() {
    let etcd = EtcdCluster::start(1).unwrap();
    let (a, b) = (open(&etcd, "/registry").await, open(&etcd, "/registry").await);
    let key = format!("{POD}x");
    put(&a, "x", 1).await;
    // Create-if-absent through `b`, whose cache may not hold `x` yet: it must find it.
    let r = b
        .mutate::<StorageError, _>(&key, |cur, _| {
            Ok(if cur.is_some() { Mutation::Unchanged } else { Mutation::Put(object("x", 9)) })
        })
        .await
        .unwrap();
    assert_eq!(r.kind, None, "x existed: nothing written");
    assert_eq!(n_of(&r.value.unwrap()), 1);
    // A delete through `b` of what `a` just changed removes the latest value.
    put(&a, "x", 2).await;
    let d = b.mutate::<StorageError, _>(&key, |_, _| Ok(Mutation::Delete)).await.unwrap();
    assert_eq!((d.kind, n_of(&d.value.unwrap())), (Some(EventType::Deleted), 2));
    a.sync().await.unwrap();
    assert_eq!(a.get(&key), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_laid_out_as_upstreams_and_foreign_or_undecodable_ones_are_skipped() {
    let etcd = EtcdCluster::start(1).unwrap();
    let mut client = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    client.put("/registry/pods/default/garbage", "k8s\0protobuf", None).await.unwrap();
    client.put("/registry/minions/n1", r#"{"metadata":{"name":"n1"}}"#, None).await.unwrap();
    client.put("/registry/somethingelse/x", r#"{"metadata":{"name":"x"}}"#, None).await.unwrap();
    client.put("/other/pods/default/y", r#"{"metadata":{"name":"y"}}"#, None).await.unwrap();
    let s = open(&etcd, "/registry").await;
    let node = s.get("/registry/core/nodes/n1").expect("nodes live under minions/");
    assert_eq!(rv_of(&node.value), node.revision.to_string(), "served with its revision");
    assert_eq!(s.list(POD).0, [], "the undecodable pod is skipped, the foreign keys ignored");
    put(&s, "web", 1).await;
    let raw = client.get("/registry/pods/default/web", None).await.unwrap();
    assert_eq!(raw.kvs().len(), 1, "the pod is at upstream's key");
    // A value that stops decoding while followed leaves the store's view.
    let mut w = s.watch(POD, None).unwrap();
    client.put("/registry/pods/default/web", "not json", None).await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(10), w.next()).await.unwrap().unwrap();
    assert_eq!((e.kind, e.key.as_str()), (EventType::Deleted, "/registry/core/pods/default/web"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_prefixes_on_one_etcd_are_two_clusters() {
    let etcd = EtcdCluster::start(1).unwrap();
    let (a, b) = (open(&etcd, "/cluster-a").await, open(&etcd, "/cluster-b").await);
    put(&a, "only-in-a", 1).await;
    b.sync().await.unwrap();
    assert_eq!(b.list(POD).0, []);
    assert_eq!(a.list(POD).0.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_expires_old_revisions_on_every_store() {
    let etcd = EtcdCluster::start(1).unwrap();
    let (a, b) = (open(&etcd, "/registry").await, open(&etcd, "/registry").await);
    let first = put(&a, "p", 1).await;
    a.compact().await.unwrap(); // the first round records where etcd stands
    let later = put(&a, "p", 2).await;
    b.sync().await.unwrap(); // b has followed past what is compacted next (else it reloads)
    a.compact().await.unwrap(); // compacts to the first round's revision
    b.compact().await.unwrap(); // loses the round, learns the compacted revision
    for s in [&a, &b] {
        s.sync().await.unwrap();
        let e = s.watch(POD, Some(first - 1)).unwrap_err();
        assert_eq!(e.requested, first - 1);
        let w = s.watch(POD, Some(later));
        assert!(w.is_ok(), "first {first} later {later}: {:?}", w.err());
    }
    // etcd itself has compacted: a read at the old revision is refused.
    let mut client = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    let old = etcd_client::GetOptions::new().with_revision(first);
    assert!(client.get("/registry/pods/default/p", Some(old)).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lost_fails_requests_and_readiness_and_everything_resumes_when_it_returns() {
    let mut etcd = EtcdCluster::start(1).unwrap();
    let s = open(&etcd, "/registry").await;
    put(&s, "before", 1).await;
    let mut w = s.watch(POD, None).unwrap();
    assert_eq!(s.ready(), Ok(()));
    etcd.kill(0).unwrap();
    let key = format!("{POD}during");
    let err = s
        .mutate::<StorageError, _>(&key, |_, _| Ok(Mutation::Put(object("during", 1))))
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::Etcd { .. }), "{err:?}");
    assert!(s.sync().await.is_err(), "no consistent read without etcd");
    apiserver_lite_eventually(|| s.ready().is_err()).await;
    etcd.restart(0).unwrap();
    apiserver_lite_eventually(|| s.ready().is_ok()).await;
    put(&s, "after", 2).await;
    let e = tokio::time::timeout(Duration::from_secs(10), w.next()).await.unwrap();
    assert_eq!(e.map(|e| e.key.clone()), Ok(format!("{POD}after")), "the watch carried on");
    let _ = WatchEnd::Closed;
}

#[tokio::test]
async fn an_unreachable_etcd_at_start_is_an_error_naming_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = EtcdConfig {
        servers: vec![format!("http://127.0.0.1:{port}")],
        prefix: "/registry".into(),
        ca_file: None,
        cert_file: None,
        key_file: None,
    };
    let layout = KeyLayout::new("/registry", resources::etcd_routes());
    let err = Remote::connect(&config, layout, set_resource_version).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")) && text.contains("unreachable"), "{text}");
}

async fn apiserver_lite_eventually(cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "condition not reached in 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
