//! The controller-manager against apiserver-lite: ReplicaSets and Deployments whose pods a real
//! kubelet runs on containerd (with the scheduler binding them), leader election between two
//! managers, the `default` ServiceAccount, and `/healthz` and `/metrics`. The real kubectl is
//! the oracle for `rollout status`, `rollout undo` and `scale`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::apiserver::ApiServer;
use e2e::cluster::JoinedNode;
use e2e::controllers::{ControllerManager, FAST_ELECTION};
use e2e::scheduler::Scheduler;
use e2e::{eventually, require};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(100);

fn ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn kubectl(api: &ApiServer, args: &[&str]) -> (bool, String, String) {
    let out = api.kubectl(args).unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Active pods with `app=<app>`: (all, ready).
async fn counts(pods: &Api<Pod>, app: &str) -> Option<(usize, usize)> {
    let list = pods.list(&ListParams::default().labels(&format!("app={app}"))).await.ok()?;
    let active: Vec<&Pod> =
        list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    Some((active.len(), active.iter().filter(|p| ready(p)).count()))
}

/// apiserver-lite, a containerd and a joined kubelet, the scheduler and the controller-manager.
struct Cluster {
    node: JoinedNode,
    _scheduler: Scheduler,
    manager: ControllerManager,
}

impl Cluster {
    async fn start() -> Self {
        let node = JoinedNode::start(NODE).await.unwrap();
        let scheduler = Scheduler::start(&node.api, &[]).unwrap();
        let manager = ControllerManager::start(&node.api, &[]).unwrap();
        Self { node, _scheduler: scheduler, manager }
    }

    fn logs(&self, what: &str) -> String {
        format!("{}\ncontroller-manager:\n{}", self.node.logs(what), self.manager.log_tail(30))
    }

    async fn stop(self) {
        let Cluster { node, _scheduler, mut manager } = self;
        manager.stop();
        drop(_scheduler);
        node.stop().await.unwrap();
    }
}

fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 2,
                    "containers": [{"name": "web", "image": "busybox-httpd:1.35"}]},
            },
        },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_of_five_converges_replaces_a_deleted_pod_and_scales_to_zero_and_back() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = Cluster::start().await;
    let client = c.node.api.admin_client().await.unwrap();
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    rss.create(&PostParams::default(), &replica_set("web", 5)).await.unwrap();
    let converged = |n: usize| {
        let pods = pods.clone();
        let rss = rss.clone();
        async move {
            eventually(&format!("{n} ready pods and status"), WAIT, POLL, || async {
                let (all, ready) = counts(&pods, "web").await?;
                let st = rss.get("web").await.ok()?.status?;
                (all == n
                    && ready == n
                    && st.ready_replicas.unwrap_or(0) == i32::try_from(n).ok()?
                    && st.replicas == i32::try_from(n).ok()?)
                .then_some(())
            })
            .await
        }
    };
    converged(5).await.unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let list = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
    for p in &list.items {
        let name = p.metadata.name.clone().unwrap();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        let owner = p.metadata.owner_references.as_ref().unwrap();
        assert_eq!(
            (owner.len(), owner[0].kind.as_str(), owner[0].controller),
            (1, "ReplicaSet", Some(true))
        );
    }
    let (_, out, _) = kubectl(&c.node.api, &["get", "rs", "web", "--no-headers"]);
    assert!(out.split_whitespace().take(4).eq(["web", "5", "5", "5"]), "{out}");

    // A deleted pod is replaced.
    let victim = list.items[0].metadata.name.clone().unwrap();
    pods.delete(&victim, &DeleteParams::default()).await.unwrap();
    eventually("a replacement", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await.ok()?;
        let names: BTreeSet<String> = list
            .items
            .iter()
            .filter(|p| ready(p))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        (names.len() == 5 && !names.contains(&victim)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    // Scale to 0 and back, as `kubectl scale` does it (the scale subresource).
    let (ok, out, err) = kubectl(&c.node.api, &["scale", "rs/web", "--replicas=0"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "replicaset.apps/web scaled");
    eventually("no pods", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let (ok, _, err) = kubectl(&c.node.api, &["scale", "rs/web", "--replicas=2"]);
    assert!(ok, "{err}");
    converged(2).await.unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let events = kubectl(
        &c.node.api,
        &["get", "events", "--field-selector", "involvedObject.kind=ReplicaSet"],
    )
    .1;
    assert!(
        events.contains("SuccessfulCreate") && events.contains("Created pod: web-"),
        "{events}"
    );
    assert!(
        events.contains("SuccessfulDelete") && events.contains("Deleted pod: web-"),
        "{events}"
    );
    c.stop().await;
}

fn deployment(replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 2,
                    "containers": [{"name": "web", "image": "busybox-httpd:1.35"}]},
            },
        },
    }))
    .unwrap()
}

/// The fewest ready pods seen by a watch since `armed` was set; and by a watch of the
/// ReplicaSets, the largest sum of their `spec.replicas` (what maxSurge bounds: pods of an old
/// ReplicaSet scaled down may still be on their way out while the new one adds its own).
#[derive(Debug, Default)]
struct Watched {
    armed: bool,
    ready: BTreeMap<String, bool>,
    min_ready: Option<usize>,
    replicas: BTreeMap<String, i32>,
    max_replicas: i32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_rolls_to_a_new_template_never_below_min_available_and_rolls_back_with_undo() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = Cluster::start().await;
    let api = &c.node.api;
    let client = api.admin_client().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    deployments.create(&PostParams::default(), &deployment(4)).await.unwrap();
    let (ok, out, err) = kubectl(api, &["rollout", "status", "deployment/web", "--timeout=90s"]);
    assert!(ok, "{err}\n{}", c.logs("first rollout"));
    assert_eq!(out.lines().last(), Some("deployment \"web\" successfully rolled out"), "{out}");
    let first = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(first.len(), 1);
    let first_name = first[0].metadata.name.clone().unwrap();
    let hash = first[0].metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(first_name, format!("web-{hash}"));

    // Watch every pod change during the rollout: never fewer than replicas - maxUnavailable
    // ready, never more than replicas + maxSurge pods.
    let watched = Arc::new(Mutex::new(Watched::default()));
    let w = watched.clone();
    let stream = watcher(pods.clone(), watcher::Config::default().labels("app=web"));
    let watch = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(e)) = stream.next().await {
            let mut w = w.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match e {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    if p.metadata.deletion_timestamp.is_some() {
                        w.ready.remove(&name);
                    } else {
                        w.ready.insert(name, ready(&p));
                    }
                }
                watcher::Event::Delete(p) => {
                    w.ready.remove(&p.metadata.name.clone().unwrap_or_default());
                }
                _ => {}
            }
            if w.armed {
                let n = w.ready.values().filter(|r| **r).count();
                w.min_ready = Some(w.min_ready.map_or(n, |m| m.min(n)));
            }
        }
    });
    let w = watched.clone();
    let rs_stream = watcher(rss.clone(), watcher::Config::default());
    let rs_watch = tokio::spawn(async move {
        let mut stream = std::pin::pin!(rs_stream);
        // A relist (Init, InitApply…, InitDone) is one snapshot: summed only once it is whole,
        // never half old and half new.
        let mut relisted: Option<BTreeMap<String, i32>> = None;
        while let Some(Ok(e)) = stream.next().await {
            let mut w = w.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let size = |rs: &ReplicaSet| {
                let n = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
                (rs.metadata.name.clone().unwrap_or_default(), n)
            };
            match e {
                watcher::Event::Init => relisted = Some(BTreeMap::new()),
                watcher::Event::InitApply(rs) => {
                    let (name, n) = size(&rs);
                    relisted.get_or_insert_default().insert(name, n);
                    continue;
                }
                watcher::Event::InitDone => w.replicas = relisted.take().unwrap_or_default(),
                watcher::Event::Apply(rs) => {
                    let (name, n) = size(&rs);
                    w.replicas.insert(name, n);
                }
                watcher::Event::Delete(rs) => {
                    w.replicas.remove(&size(&rs).0);
                }
            }
            let total = w.replicas.values().sum();
            w.max_replicas = w.max_replicas.max(total);
        }
    });
    eventually("the watch to see 4 ready pods", WAIT, POLL, || async {
        let mut w = watched.lock().unwrap();
        let n = w.ready.values().filter(|r| **r).count();
        (n == 4).then(|| w.armed = true)
    })
    .await
    .unwrap();

    let (ok, _, err) = kubectl(api, &["set", "env", "deployment/web", "VERSION=2"]);
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(api, &["rollout", "status", "deployment/web", "--timeout=90s"]);
    assert!(ok, "{err}\n{}", c.logs("second rollout"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.last(), Some(&"deployment \"web\" successfully rolled out"), "{out}");
    for l in &lines[..lines.len() - 1] {
        // kubectl's first line when it reads before the controller saw the new generation.
        if *l == "Waiting for deployment spec update to be observed..." {
            continue;
        }
        assert!(
            l.starts_with("Waiting for deployment \"web\" rollout to finish: ")
                && (l.ends_with("new replicas have been updated...")
                    || l.ends_with("old replicas are pending termination...")
                    || l.ends_with("updated replicas are available...")),
            "not what kubectl prints: {l}"
        );
    }
    {
        let w = watched.lock().unwrap();
        assert!(w.min_ready.unwrap_or(0) >= 3, "fell below replicas - maxUnavailable: {w:?}");
        assert!(w.max_replicas <= 5, "above replicas + maxSurge: {w:?}\n{}", c.logs("the rollout"));
    }
    watch.abort();
    rs_watch.abort();
    let d = deployments.get("web").await.unwrap();
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "2");
    let cond = d.status.unwrap().conditions.unwrap();
    assert!(
        cond.iter()
            .any(|c| c.type_ == "Progressing"
                && c.reason.as_deref() == Some("NewReplicaSetAvailable")),
        "{cond:?}"
    );
    assert!(cond.iter().any(|c| c.type_ == "Available" && c.status == "True"), "{cond:?}");
    let (_, history, _) = kubectl(api, &["rollout", "history", "deployment/web"]);
    let revisions: Vec<&str> =
        history.lines().skip(2).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    // Undo: kubectl copies the first ReplicaSet's template back; the controller reuses it.
    let (ok, out, err) = kubectl(api, &["rollout", "undo", "deployment/web"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "deployment.apps/web rolled back");
    let (ok, _, err) = kubectl(api, &["rollout", "status", "deployment/web", "--timeout=90s"]);
    assert!(ok, "{err}\n{}", c.logs("undo"));
    let all = rss.list(&ListParams::default()).await.unwrap().items;
    let d = deployments.get("web").await.unwrap();
    assert_eq!(
        all.len(),
        2,
        "no third ReplicaSet: deployment template {}\nreplica sets {}",
        serde_json::to_string(&d.spec.unwrap().template).unwrap(),
        all.iter()
            .map(|r| serde_json::to_string(&r.spec.as_ref().unwrap().template).unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let back =
        all.iter().find(|r| r.metadata.name.as_deref() == Some(first_name.as_str())).unwrap();
    assert_eq!(back.spec.as_ref().unwrap().replicas, Some(4));
    let anns = back.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        (
            anns["deployment.kubernetes.io/revision"].as_str(),
            anns["deployment.kubernetes.io/revision-history"].as_str()
        ),
        ("3", "1")
    );
    let (_, out, _) = kubectl(api, &["get", "deployment", "web", "--no-headers"]);
    assert!(out.split_whitespace().take(4).eq(["web", "4/4", "4", "4"]), "{out}");
    let events =
        kubectl(api, &["get", "events", "--field-selector", "involvedObject.kind=Deployment"]).1;
    assert!(
        events.contains(&format!("Scaled up replica set {first_name} from 0 to 4")),
        "{events}"
    );
    c.stop().await;
}

async fn holder(client: &kube::Client) -> Option<String> {
    let l = Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get_opt("kube-controller-manager")
        .await
        .ok()??;
    l.spec?.holder_identity.filter(|h| !h.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_racing_managers_never_create_extra_pods_and_a_standby_takes_over_within_the_lease() {
    // No kubelet: pods stay pending, which is all this needs.
    let api = ApiServer::start().unwrap();
    let client = api.admin_client().await.unwrap();
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut first = ControllerManager::start(&api, &FAST_ELECTION).unwrap();
    let first_id =
        eventually("the first identity", WAIT, POLL, || async { first.identity() }).await.unwrap();
    eventually("the first manager to lead", WAIT, POLL, || async {
        holder(&client).await.filter(|h| *h == first_id)
    })
    .await
    .unwrap();
    let mut second = ControllerManager::start(&api, &FAST_ELECTION).unwrap();
    let second_id = eventually("the second identity", WAIT, POLL, || async { second.identity() })
        .await
        .unwrap();
    assert_ne!(first_id, second_id);

    rss.create(&PostParams::default(), &replica_set("race", 5)).await.unwrap();
    let count = || async {
        pods.list(&ListParams::default().labels("app=race"))
            .await
            .map(|l| l.items.len())
            .unwrap_or(0)
    };
    eventually("5 pods", WAIT, POLL, || async { (count().await == 5).then_some(()) })
        .await
        .unwrap();
    // A few election rounds later there are still exactly 5, and the standby acted on nothing.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(count().await, 5);
    }
    assert!(
        !second.log().contains("caches synced"),
        "the standby started its controllers:\n{}",
        second.log_tail(20)
    );

    // The leader dies without releasing: the standby takes over within the lease duration
    // (4 s, plus a retry period and its jitter) and keeps the count right.
    first.kill9();
    let killed = std::time::Instant::now();
    eventually("the standby to lead", Duration::from_secs(15), POLL, || async {
        holder(&client).await.filter(|h| *h == second_id)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", second.log_tail(20)));
    let handover = killed.elapsed();
    assert!(handover < Duration::from_secs(4 + 1 + 3), "handover took {handover:?}");
    let victim = pods.list(&ListParams::default().labels("app=race")).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&victim, &DeleteParams::default().grace_period(0)).await.unwrap();
    eventually("the new leader to replace the deleted pod", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default().labels("app=race")).await.ok()?;
        let names: Vec<_> = list.items.iter().filter_map(|p| p.metadata.name.clone()).collect();
        (names.len() == 5 && !names.contains(&victim)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", second.log_tail(20)));
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(count().await, 5);
    }
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get("kube-controller-manager")
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));
    second.stop();
    assert_eq!(holder(&client).await, None, "a clean stop releases the lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_namespace_gets_the_default_service_account_and_metrics_are_served() {
    let api = ApiServer::start().unwrap();
    let client = api.admin_client().await.unwrap();
    let manager = ControllerManager::start(&api, &["--leader-elect=false"]).unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap(),
        )
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team-a");
    eventually("default in team-a", WAIT, POLL, || async {
        accounts.get_opt("default").await.ok()?
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(20)));
    accounts.delete("default", &DeleteParams::default()).await.unwrap();
    eventually("default recreated", WAIT, POLL, || async {
        accounts
            .get_opt("default")
            .await
            .ok()?
            .filter(|sa| sa.metadata.deletion_timestamp.is_none())
    })
    .await
    .unwrap();
    let (ok, out, _) = kubectl(&api, &["get", "serviceaccounts", "-n", "team-a", "--no-headers"]);
    assert!(ok && out.starts_with("default"), "{out}");

    let url = |p: &str| format!("https://127.0.0.1:{}{p}", manager.port());
    let curl = |p: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "--max-time", "5", &url(p)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(curl("/healthz"), "ok");
    let metrics = curl("/metrics");
    for want in [
        "workqueue_adds_total{name=\"serviceaccount\"}",
        "workqueue_depth{name=\"replicaset\"}",
        "workqueue_queue_duration_seconds_bucket{",
        "workqueue_work_duration_seconds_count{name=\"serviceaccount\"}",
        "workqueue_retries_total{name=\"deployment\"}",
        "controller_sync_duration_seconds_count{controller=\"serviceaccount\",result=\"success\"}",
    ] {
        assert!(metrics.contains(want), "{want} missing:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_resume_after_the_apiserver_restarts_without_duplicate_creates() {
    let mut api = ApiServer::start().unwrap();
    let manager = ControllerManager::start(&api, &["--leader-elect=false"]).unwrap();
    let client = api.admin_client().await.unwrap();
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    rss.create(&PostParams::default(), &replica_set("web", 3)).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let count = |pods: Api<Pod>| async move {
        pods.list(&ListParams::default().labels("app=web")).await.map(|l| l.items.len()).ok()
    };
    eventually("3 pods", WAIT, POLL, || async {
        (count(pods.clone()).await == Some(3)).then_some(())
    })
    .await
    .unwrap();

    api.kill9();
    tokio::time::sleep(Duration::from_secs(2)).await;
    api.restart().unwrap();
    let client = api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (ok, _, err) = kubectl(&api, &["scale", "rs/web", "--replicas=5"]);
    assert!(ok, "{err}");
    eventually("5 pods after the restart", WAIT, POLL, || async {
        (count(pods.clone()).await == Some(5)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(30)));
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(count(pods.clone()).await, Some(5), "no duplicate creates");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_its_lease_stops_and_exits() {
    let mut api = ApiServer::start().unwrap();
    let client = api.admin_client().await.unwrap();
    let mut manager = ControllerManager::start(&api, &FAST_ELECTION).unwrap();
    let id = eventually("the identity", WAIT, POLL, || async { manager.identity() }).await.unwrap();
    eventually("the lease", WAIT, POLL, || async { holder(&client).await.filter(|h| *h == id) })
        .await
        .unwrap();
    api.kill9();
    // The renew deadline is 3 s: it must give up and exit soon after.
    eventually("the manager to exit", Duration::from_secs(15), POLL, || {
        let exited = !manager.is_running();
        async move { exited.then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(20)));
    assert!(manager.log().contains("leader election lost"), "{}", manager.log_tail(20));
}
