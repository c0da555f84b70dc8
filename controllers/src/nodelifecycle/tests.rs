//! The node lifecycle and taint-eviction controllers against the fake apiserver under paused
//! time: a kubelet is a test that renews a Lease or posts a heartbeat.

#![allow(clippy::unwrap_used)]

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus, PodSpec, PodStatus, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

use super::*;
use crate::events::MemoryRecorder;
use crate::fake::FakeApi;
use crate::informers::Informer;
use crate::pods;
use crate::tainteviction::TaintEvictionController;

const NOT_READY: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

struct Harness {
    api: Arc<FakeApi>,
    nodes: Arc<Informer<Node>>,
    leases: Arc<Informer<Lease>>,
    pods: Arc<Informer<Pod>>,
    ctrl: NodeLifecycleController<FakeApi>,
    evictor: TaintEvictionController<FakeApi>,
    events: Arc<MemoryRecorder>,
    beats: std::sync::atomic::AtomicI64,
}

fn wall() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000).unwrap()
}

impl Harness {
    fn new(config: Config) -> Self {
        let api = Arc::new(FakeApi::default());
        let (nodes, leases, pods) = (
            Arc::new(Informer::default()),
            Arc::new(Informer::default()),
            Arc::new(Informer::default()),
        );
        let events = Arc::new(MemoryRecorder::default());
        let ctrl = NodeLifecycleController::new(
            api.clone(),
            events.clone(),
            nodes.cache(),
            leases.cache(),
            pods.cache(),
            config,
            wall,
        );
        let evictor =
            TaintEvictionController::new(api.clone(), events.clone(), nodes.cache(), pods.cache());
        Self { api, nodes, leases, pods, ctrl, evictor, events, beats: 0.into() }
    }

    fn deliver(&self) {
        self.api.deliver(&self.nodes);
        self.api.deliver(&self.leases);
        self.api.deliver(&self.pods);
    }

    /// The watch catches up and both controllers make a pass.
    async fn pass(&self) {
        self.deliver();
        self.ctrl.monitor().await;
        self.deliver();
        self.evictor.pass().await;
        self.deliver();
    }

    fn add_node(&self, name: &str, zone: &str) {
        self.api.put(&Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    [("topology.kubernetes.io/zone".to_string(), zone.to_string())].into(),
                ),
                ..Default::default()
            },
            spec: None,
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    reason: Some("KubeletReady".into()),
                    last_heartbeat_time: Some(Time(wall())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        });
    }

    /// A kubelet renews its Lease.
    fn renew(&self, node: &str) {
        let n = self.beats.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let at = MicroTime(wall() + jiff::SignedDuration::from_secs(n + 1));
        if self.api.object::<Lease>(LEASE_NAMESPACE, node).is_none() {
            self.api.put(&Lease {
                metadata: ObjectMeta {
                    name: Some(node.into()),
                    namespace: Some(LEASE_NAMESPACE.into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec { renew_time: Some(at), ..Default::default() }),
            });
        } else {
            self.api.edit::<Lease>(LEASE_NAMESPACE, node, |l| {
                l.spec.get_or_insert_default().renew_time = Some(at);
            });
        }
    }

    /// A kubelet reports Ready (a returning kubelet).
    fn post_ready(&self, node: &str) {
        let n = self.beats.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.api.edit::<Node>("", node, |nd| {
            let c = &mut nd.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
            c.status = "True".into();
            c.reason = Some("KubeletReady".into());
            c.last_heartbeat_time = Some(Time(wall() + jiff::SignedDuration::from_secs(n + 1)));
        });
    }

    fn add_pod(&self, name: &str, node: &str, toleration_seconds: Option<Option<i64>>) {
        let tolerations = toleration_seconds.map(|s| {
            vec![Toleration {
                key: Some(UNREACHABLE.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: s,
                ..Default::default()
            }]
        });
        self.api.put(&Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(PodSpec { node_name: Some(node.into()), tolerations, ..Default::default() }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        });
    }

    fn node(&self, name: &str) -> Node {
        self.api.object("", name).unwrap()
    }

    fn pod_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.api.list::<Pod>().into_iter().map(|p| p.name_any()).collect();
        v.sort();
        v
    }
}

fn fast() -> Config {
    Config {
        monitor_period: Duration::from_secs(1),
        grace_period: Duration::from_secs(4),
        startup_grace_period: Duration::from_secs(8),
        ..Config::default()
    }
}

async fn tick(h: &Harness, secs: u64, renewing: &[&str]) {
    for _ in 0..secs {
        for n in renewing {
            h.renew(n);
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        h.pass().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_node_goes_unknown_gets_tainted_and_its_pods_go_at_their_toleration() {
    let h = Harness::new(fast());
    h.add_node("quiet", "z");
    h.add_node("alive", "z");
    h.add_pod("short", "quiet", Some(Some(10)));
    h.add_pod("forever", "quiet", Some(None));
    h.add_pod("intolerant", "quiet", None);
    h.add_pod("elsewhere", "alive", None);
    h.renew("quiet");
    h.pass().await;

    // Within the grace period nothing happens.
    tick(&h, 4, &["alive"]).await;
    assert_eq!(conditions::readiness(&h.node("quiet")), Readiness::Ready);
    tick(&h, 1, &["alive"]).await;
    let quiet = h.node("quiet");
    let ready = conditions::condition(&quiet, "Ready").unwrap().clone();
    assert_eq!(ready.status, "Unknown");
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(ready.message.as_deref(), Some("Kubelet stopped posting node status."));
    assert_eq!(
        conditions::condition(&quiet, "MemoryPressure").unwrap().reason.as_deref(),
        Some("NodeStatusNeverUpdated")
    );
    assert_eq!(conditions::readiness(&h.node("alive")), Readiness::Ready);
    let events = h.events.take();
    assert!(
        events.iter().any(|e| e.0 == "quiet" && e.2 == "Node quiet status is now: NodeNotReady")
    );
    assert!(events.iter().any(|e| e.0 == "short" && e.1 == "NodeNotReady"));

    // The same pass taints it; the untolerating pod goes at once.
    let quiet = h.node("quiet");
    assert!(conditions::has_taint(&quiet, UNREACHABLE, "NoExecute"));
    assert!(conditions::has_taint(&quiet, UNREACHABLE, "NoSchedule"));
    let short: Pod = h.api.object("ns", "short").unwrap();
    assert!(!pods::is_ready(&short), "its pods' Ready condition is False");
    assert_eq!(h.pod_names(), ["elsewhere", "forever", "short"]);
    tick(&h, 9, &["alive"]).await;
    assert_eq!(h.pod_names(), ["elsewhere", "forever", "short"], "tolerated for 10 s");
    tick(&h, 1, &["alive"]).await;
    assert_eq!(h.pod_names(), ["elsewhere", "forever"], "evicted at tolerationSeconds");
    tick(&h, 30, &["alive"]).await;
    assert_eq!(h.pod_names(), ["elsewhere", "forever"], "no tolerationSeconds: never evicted");

    // The kubelet returns: the taints go.
    h.renew("quiet");
    h.post_ready("quiet");
    h.pass().await;
    let quiet = h.node("quiet");
    assert_eq!(conditions::readiness(&quiet), Readiness::Ready);
    let taints = quiet.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(taints.is_empty(), "{taints:?}");
}

#[tokio::test(start_paused = true)]
async fn a_node_without_a_lease_is_judged_by_its_heartbeats() {
    let h = Harness::new(fast());
    h.add_node("old", "z");
    h.add_node("alive", "z");
    h.pass().await;
    for _ in 0..6 {
        h.post_ready("old");
        tick(&h, 1, &["alive"]).await;
    }
    assert_eq!(conditions::readiness(&h.node("old")), Readiness::Ready);
    tick(&h, 6, &["alive"]).await;
    assert_eq!(conditions::readiness(&h.node("old")), Readiness::Unknown);
}

#[tokio::test(start_paused = true)]
async fn a_not_ready_node_gets_not_ready_taints_and_nodes_are_tainted_at_the_eviction_rate() {
    let h = Harness::new(Config { eviction_rate: 0.1, ..fast() });
    for n in ["a", "b", "c", "d", "e"] {
        h.add_node(n, "z");
    }
    h.pass().await;
    for n in ["a", "b"] {
        h.api.edit::<Node>("", n, |nd| {
            nd.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
        });
    }
    tick(&h, 1, &["a", "b", "c", "d", "e"]).await;
    let tainted = |h: &Harness| {
        ["a", "b"]
            .iter()
            .filter(|n| conditions::has_taint(&h.node(n), NOT_READY, "NoExecute"))
            .count()
    };
    assert_eq!(tainted(&h), 1, "one node per 10 s at --node-eviction-rate=0.1");
    assert!(conditions::has_taint(&h.node("a"), NOT_READY, "NoSchedule"));
    assert!(conditions::has_taint(&h.node("b"), NOT_READY, "NoSchedule"), "NoSchedule at once");
    tick(&h, 8, &["a", "b", "c", "d", "e"]).await;
    assert_eq!(tainted(&h), 1);
    tick(&h, 2, &["a", "b", "c", "d", "e"]).await;
    assert_eq!(tainted(&h), 2);
}

#[tokio::test(start_paused = true)]
async fn when_every_node_is_silent_nothing_is_tainted_for_eviction() {
    let h = Harness::new(fast());
    h.add_node("only", "z");
    h.add_pod("p", "only", None);
    h.pass().await;
    tick(&h, 10, &[]).await;
    assert_eq!(conditions::readiness(&h.node("only")), Readiness::Unknown);
    assert!(!conditions::has_taint(&h.node("only"), UNREACHABLE, "NoExecute"));
    assert_eq!(h.pod_names(), ["p"]);
}
