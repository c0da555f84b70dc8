//! Several apiservers on one etcd cluster (Debian's etcd, started by the harness): a watcher on
//! one sees every write made through the other, in order, none missing, none twice, across a
//! kill -9 and restart of either; killing etcd's leader loses no acknowledged write;
//! compaction expires old resourceVersions; the seed flow works with the kubelet and the
//! scheduler on different apiservers.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use e2e::apiserver::ApiServer;
use e2e::etcd::EtcdCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;

fn config_map(i: usize) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": format!("cm-{i}")}, "data": {"i": i.to_string()}}),
    )
    .unwrap()
}

/// Creates `cm-<i>` through `api`, retrying while the apiserver or etcd is away (an
/// `AlreadyExists` after a retry means an earlier attempt landed). `None` after 30 s.
async fn create_until_done(server: &ApiServer, i: usize) -> Option<i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(client) = server.admin_client().await {
            let cms: Api<ConfigMap> = Api::namespaced(client, "default");
            match cms.create(&PostParams::default(), &config_map(i)).await {
                Ok(c) => return c.metadata.resource_version?.parse().ok(),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    let c = cms.get(&format!("cm-{i}")).await.ok()?;
                    return c.metadata.resource_version?.parse().ok();
                }
                Err(_) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_on_one_apiserver_sees_every_write_through_the_other_in_order_across_restarts() {
    let etcd = EtcdCluster::start(1).unwrap();
    let mut a = ApiServer::start_on(&etcd, &[]).unwrap();
    let mut b = a.start_peer(&[]).unwrap();
    let watched: Api<ConfigMap> = Api::namespaced(a.admin_client().await.unwrap(), "default");
    // kube-rs's watcher: it lists once, then watches, and resumes from the last resourceVersion
    // it saw whenever the connection drops; a 410 would make it list again.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watching = tokio::spawn(async move {
        let mut stream = watcher(watched, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            let _ = tx.send(event.map_err(|e| e.to_string()));
        }
    });
    while !matches!(rx.recv().await.unwrap(), Ok(watcher::Event::InitDone)) {}
    let mut lists = 1;
    const N: usize = 60;
    for i in 0..N {
        if i == 20 {
            b.kill9();
            b.restart().unwrap();
        }
        if i == 40 {
            a.kill9();
            a.restart().unwrap();
        }
        assert!(
            create_until_done(&b, i).await.is_some(),
            "cm-{i} never written:\n{}",
            b.log_tail(20)
        );
    }
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < N {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("saw {seen:?}; apiserver a:\n{}", a.log_tail(20)))
            .unwrap();
        match event {
            Ok(watcher::Event::Apply(cm)) => seen.push(cm.metadata.name.unwrap()),
            Ok(watcher::Event::Init) => lists += 1,
            Ok(_) | Err(_) => {}
        }
    }
    watching.abort();
    let written: Vec<String> = (0..N).map(|i| format!("cm-{i}")).collect();
    assert_eq!(seen, written, "every write, in order, once");
    assert_eq!(lists, 1, "the watcher resumed after each restart without listing again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_etcd_leader_during_a_stream_of_writes_loses_no_acknowledged_write() {
    let mut etcd = EtcdCluster::start(3).unwrap();
    let a = ApiServer::start_on(&etcd, &[]).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(a.admin_client().await.unwrap(), "default");
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = tokio::spawn({
        let (cms, killed) = (cms.clone(), killed.clone());
        async move {
            let (mut acked, mut failed, mut after_kill) = (Vec::new(), 0, 0);
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut i = 0;
            while (acked.len() < 300 || after_kill < 50) && Instant::now() < deadline {
                let dead = killed.load(std::sync::atomic::Ordering::SeqCst);
                match cms.create(&PostParams::default(), &config_map(i)).await {
                    Ok(_) => {
                        acked.push(format!("cm-{i}"));
                        after_kill += usize::from(dead);
                    }
                    Err(_) => failed += 1,
                }
                i += 1;
            }
            (acked, failed, after_kill)
        }
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    let leader = etcd.leader().unwrap();
    etcd.kill(leader).unwrap();
    killed.store(true, std::sync::atomic::Ordering::SeqCst);
    let (acked, failed, after_kill) = writer.await.unwrap();
    let stored: BTreeSet<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|n| !stored.contains(*n)).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert!(
        after_kill >= 50,
        "writes carried on after the leader died: {} acked ({after_kill} after), {failed} failed:\n{}",
        acked.len(),
        a.log_tail(20)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_makes_an_old_resource_version_expire() {
    let etcd = EtcdCluster::start(1).unwrap();
    let a = ApiServer::start_on(&etcd, &["--etcd-compaction-interval=1s"]).unwrap();
    let b = a.start_peer(&[]).unwrap();
    let old = create_until_done(&a, 0).await.unwrap();
    // Writes for a few rounds: each round compacts to what the round before saw.
    for i in 1..=4 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        create_until_done(&a, i).await.unwrap();
    }
    for server in [&a, &b] {
        let cms: Api<ConfigMap> = Api::namespaced(server.admin_client().await.unwrap(), "default");
        let expired = e2e::eventually(
            "a watch from the old revision is 410",
            Duration::from_secs(10),
            Duration::from_millis(200),
            || async {
                let mut s =
                    cms.watch(&WatchParams::default(), &(old - 1).to_string()).await.ok()?.boxed();
                match s.next().await? {
                    Ok(WatchEvent::Error(e)) if e.code == 410 => Some(e),
                    _ => None,
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(expired.reason, "Expired");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_flow_runs_with_the_kubelet_and_the_scheduler_on_different_apiservers() {
    use e2e::containerd::Containerd;
    use e2e::kubelet::Kubelet;
    use e2e::scheduler::Scheduler;
    use k8s_openapi::api::core::v1::Pod;
    if !e2e::require::real_runtime(e2e::require::CONTAINERD_TOOLS) {
        return;
    }
    const NODE: &str = "node-ha";
    let etcd = EtcdCluster::start(1).unwrap();
    let servers = etcd.servers_flag();
    let a = ApiServer::start_for_nodes_with(&[NODE], &[&servers]).unwrap();
    let b = a.start_peer(&[]).unwrap();
    let containerd = Containerd::start(Default::default()).await.unwrap();
    containerd.import_test_images().unwrap();
    // The kubelet on b; the scheduler and kubectl on a.
    let kubelet =
        Kubelet::start_joined(&containerd, NODE, &b.node_kubeconfig(NODE).unwrap()).unwrap();
    let scheduler = Scheduler::start(&a, &[]).unwrap();
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/manifests/nginx-pod.yaml");
    let out = a.kubectl(&["create", "-f", &manifest.display().to_string()]).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for server in [&a, &b] {
        let pods: Api<Pod> = Api::namespaced(server.admin_client().await.unwrap(), "default");
        e2e::eventually(
            "nginx-pod Running on node-ha",
            Duration::from_secs(60),
            Duration::from_millis(100),
            || async {
                let p = pods.get("nginx-pod").await.ok()?;
                let s = p.status.as_ref()?;
                let ready = s.container_statuses.as_ref()?.iter().all(|c| c.ready);
                let bound = p.spec.as_ref()?.node_name.as_deref() == Some(NODE);
                (s.phase.as_deref() == Some("Running") && ready && bound).then_some(())
            },
        )
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e}\nkubelet:\n{}\nscheduler:\n{}\na:\n{}\nb:\n{}",
                kubelet.log_tail(30),
                scheduler.log_tail(10),
                a.log_tail(10),
                b.log_tail(10)
            )
        });
    }
    drop(scheduler);
    drop(kubelet);
    drop(b);
    drop(a);
    let report = containerd.stop().await;
    assert!(report.is_clean(), "teardown left {report:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_apiserver_keeps_an_identity_lease_the_others_see() {
    use k8s_openapi::api::coordination::v1::Lease;
    let etcd = EtcdCluster::start(1).unwrap();
    let a = ApiServer::start_on(&etcd, &[]).unwrap();
    let b = a.start_peer(&[]).unwrap();
    let leases: Api<Lease> = Api::namespaced(b.admin_client().await.unwrap(), "kube-system");
    let selector = ListParams::default().labels("apiserver.kubernetes.io/identity=kube-apiserver");
    let found = e2e::eventually(
        "two identity leases",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || async {
            let list = leases.list(&selector).await.ok()?;
            (list.items.len() == 2).then_some(list.items)
        },
    )
    .await
    .unwrap();
    for lease in found {
        let name = lease.metadata.name.unwrap();
        assert!(name.starts_with("apiserver-") && name.len() == "apiserver-".len() + 26, "{name}");
        let spec = lease.spec.unwrap();
        assert_eq!(spec.lease_duration_seconds, Some(3600));
        assert!(spec.holder_identity.unwrap().starts_with(&format!("{name}_")));
        assert!(spec.renew_time.is_some());
    }
}
