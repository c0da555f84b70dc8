//! The DaemonSet controller against the fake apiserver: tests decide when the "watch"
//! delivers; the harness plays the scheduler and kubelets (binding each pod to the node its
//! affinity names, marking it running and ready).

#![allow(clippy::unwrap_used)]

use k8s_openapi::api::core::v1::{NodeSpec, PodCondition, PodStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;
use crate::events::MemoryRecorder;
use crate::fake::FakeApi;
use crate::metrics::QueueMetrics;

struct Harness {
    api: Arc<FakeApi>,
    ds: Arc<Informer<DaemonSet>>,
    nodes: Arc<Informer<Node>>,
    pods: Arc<Informer<Pod>>,
    revisions: Arc<Informer<ControllerRevision>>,
    ctrl: Arc<DaemonSetController<FakeApi>>,
    events: Arc<MemoryRecorder>,
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(2_000_000_000).unwrap()
}

impl Harness {
    fn new() -> Self {
        let api = Arc::new(FakeApi::default());
        let (ds, nodes, pods) = (
            Arc::new(Informer::default()),
            Arc::new(Informer::default()),
            Arc::new(Informer::default()),
        );
        let events = Arc::new(MemoryRecorder::default());
        let revisions: Arc<Informer<ControllerRevision>> = Arc::new(Informer::default());
        let ctrl = Arc::new(DaemonSetController {
            client: api.clone(),
            recorder: events.clone(),
            daemon_sets: ds.cache(),
            nodes: nodes.cache(),
            pods: pods.cache(),
            revisions: revisions.cache(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
            expectations: Arc::default(),
            burst_replicas: BURST_REPLICAS,
            now,
            failed_pods_backoff: backoff::Backoff::default(),
        });
        ctrl.register(&ds, &nodes, &pods);
        Self { api, ds, nodes, pods, revisions, ctrl, events }
    }

    fn deliver(&self) {
        self.api.deliver(&self.ds);
        self.api.deliver(&self.nodes);
        self.api.deliver(&self.pods);
        self.api.deliver(&self.revisions);
    }

    /// The watch catches up, then one sync.
    async fn sync(&self) -> Result<(), SyncError> {
        self.deliver();
        self.ctrl.sync(&Key::new("ns", "d")).await
    }

    fn pods(&self) -> Vec<Pod> {
        self.api
            .list::<Pod>()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    }

    /// Node → names of its pods.
    fn placed(&self) -> BTreeMap<String, Vec<String>> {
        let mut m = BTreeMap::<String, Vec<String>>::new();
        for p in self.pods() {
            m.entry(util::target_node(&p).unwrap()).or_default().push(p.name_any());
        }
        m
    }

    /// The scheduler binds every pod to its node; the kubelets run it and report it Ready.
    fn run_pods(&self) {
        for p in self.pods() {
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                continue;
            }
            let node = util::target_node(&p).unwrap();
            self.api.edit::<Pod>("ns", &p.name_any(), |p| {
                p.spec.get_or_insert_default().node_name = Some(node);
                p.status = Some(PodStatus {
                    phase: Some("Running".into()),
                    conditions: Some(vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(jiff::Timestamp::from_second(1).unwrap())),
                        ..Default::default()
                    }]),
                    ..Default::default()
                });
            });
        }
    }

    fn status(&self) -> k8s_openapi::api::apps::v1::DaemonSetStatus {
        self.api.object::<DaemonSet>("ns", "d").unwrap().status.unwrap()
    }

    /// A user changes the template (the apiserver bumps the template generation).
    fn change_template(&self, image: &str) {
        self.api.edit::<DaemonSet>("ns", "d", |d| {
            let spec = d.spec.as_mut().unwrap();
            spec.template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
            let g = util::template_generation(d).unwrap_or(1) + 1;
            d.metadata
                .annotations
                .get_or_insert_default()
                .insert(api::keys::DAEMONSET_TEMPLATE_GENERATION.into(), g.to_string());
            d.metadata.generation = Some(d.metadata.generation.unwrap_or(1) + 1);
        });
    }

    fn deletes(&self) -> usize {
        self.api.take_actions().iter().filter(|a| a.starts_with("delete Pod")).count()
    }
}

fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
    Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(
                taints
                    .iter()
                    .map(|(k, e)| Taint {
                        key: (*k).into(),
                        effect: (*e).into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

fn daemon_set(strategy: serde_json::Value, template_spec: serde_json::Value) -> DaemonSet {
    let mut spec = json!({"containers": [{"name": "c", "image": "agent:1"}]});
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), template_spec.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "metadata": {"name": "d", "namespace": "ns",
                     "annotations": {"deprecated.daemonset.template.generation": "1"}},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "updateStrategy": strategy,
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}}
    }))
    .unwrap()
}

fn rolling(max_unavailable: serde_json::Value, max_surge: serde_json::Value) -> serde_json::Value {
    json!({"type": "RollingUpdate",
           "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": max_surge}})
}

#[tokio::test(start_paused = true)]
async fn one_pod_per_eligible_node_pinned_by_node_affinity() {
    let h = Harness::new();
    h.api.put(&node("a", &[("role", "edge")], &[]));
    h.api.put(&node("b", &[("role", "edge")], &[("dedicated", "NoSchedule")]));
    h.api.put(&node("c", &[("role", "core")], &[]));
    h.api.put(&node("d", &[("role", "edge")], &[("node.kubernetes.io/not-ready", "NoExecute")]));
    h.api.put(&node("e", &[("role", "edge")], &[("x", "PreferNoSchedule"), ("y", "Bogus")]));
    h.api.put(&daemon_set(rolling(json!(1), json!(0)), json!({"nodeSelector": {"role": "edge"}})));
    h.sync().await.unwrap();
    let placed = h.placed();
    assert_eq!(placed.keys().collect::<Vec<_>>(), ["a", "d", "e"], "tainted b and core c skipped");
    let pod = h.pods().into_iter().find(|p| util::target_node(p).as_deref() == Some("a")).unwrap();
    assert!(pod.name_any().starts_with("d-"));
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.node_name, None, "the scheduler binds it");
    let terms = spec
        .affinity
        .unwrap()
        .node_affinity
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .unwrap()
        .node_selector_terms;
    assert_eq!(
        serde_json::to_value(&terms).unwrap(),
        json!([{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a"]}]}])
    );
    let tolerations = spec.tolerations.unwrap();
    assert!(tolerations.iter().any(|t| t.key.as_deref() == Some("node.kubernetes.io/unreachable")
        && t.effect.as_deref() == Some("NoExecute")
        && t.toleration_seconds.is_none()));
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("pod-template-generation").map(String::as_str), Some("1"));
    assert!(labels.contains_key("controller-revision-hash"));
    assert_eq!(controller_of(&pod.metadata).unwrap().kind, "DaemonSet");
    let events = h.events.take();
    assert_eq!(events.iter().filter(|e| e.1 == "SuccessfulCreate").count(), 3);

    // A node that starts matching gets its pod; its affinity is checked with the node's labels.
    h.api.edit::<Node>("", "c", |n| {
        n.metadata.labels.get_or_insert_default().insert("role".into(), "edge".into());
    });
    h.deliver();
    assert!(h.ctrl.queue.queued().contains(&Key::new("ns", "d")), "a node change wakes it");
    h.sync().await.unwrap();
    assert_eq!(h.placed().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn required_node_affinity_of_the_template_selects_nodes() {
    let h = Harness::new();
    h.api.put(&node("a", &[("zone", "z1")], &[]));
    h.api.put(&node("b", &[("zone", "z2")], &[]));
    let affinity = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]}}}});
    h.api.put(&daemon_set(rolling(json!(1), json!(0)), affinity));
    h.sync().await.unwrap();
    assert_eq!(h.placed().keys().collect::<Vec<_>>(), ["b"]);
}

#[tokio::test(start_paused = true)]
async fn status_counts_scheduled_ready_updated_and_misscheduled() {
    let h = Harness::new();
    for n in ["a", "b", "c"] {
        h.api.put(&node(n, &[], &[]));
    }
    h.api.put(&daemon_set(rolling(json!(1), json!(0)), json!({})));
    h.sync().await.unwrap();
    // The status counts what the caches held when the sync started: the next sync sees the pods.
    assert_eq!(h.status().current_number_scheduled, 0);
    h.sync().await.unwrap();
    let s = h.status();
    assert_eq!((s.desired_number_scheduled, s.current_number_scheduled, s.number_ready), (3, 3, 0));
    assert_eq!((s.number_available, s.number_unavailable), (Some(0), Some(3)));
    assert_eq!(s.observed_generation, Some(1));
    h.run_pods();
    h.sync().await.unwrap();
    let s = h.status();
    assert_eq!(
        (s.number_ready, s.number_available, s.updated_number_scheduled),
        (3, Some(3), Some(3))
    );

    // A NoSchedule taint keeps the pod running there, but misscheduled; NoExecute evicts it.
    h.api.edit::<Node>("", "b", |n| {
        n.spec.get_or_insert_default().taints = Some(vec![Taint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
    });
    h.api.take_actions();
    h.sync().await.unwrap();
    assert_eq!(h.deletes(), 0);
    let s = h.status();
    assert_eq!((s.desired_number_scheduled, s.number_misscheduled), (2, 1));
    h.api.edit::<Node>("", "b", |n| {
        n.spec.get_or_insert_default().taints =
            Some(vec![Taint { key: "k".into(), effect: "NoExecute".into(), ..Default::default() }]);
    });
    h.sync().await.unwrap();
    assert_eq!(h.deletes(), 1);
    assert_eq!(h.placed().keys().collect::<Vec<_>>(), ["a", "c"]);
}

/// Runs syncs until nothing changes, playing scheduler and kubelets between them; the most
/// nodes that lacked an available pod at any point.
async fn converge(h: &Harness) -> usize {
    let mut worst = 0;
    for _ in 0..20 {
        h.sync().await.unwrap();
        let available = h
            .pods()
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && pods::is_available(p, 0, now()))
            .filter_map(util::target_node)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        worst = worst.max(4 - available);
        let actions = h.api.take_actions();
        h.run_pods();
        if !actions.iter().any(|a| a.starts_with("create Pod") || a.starts_with("delete Pod")) {
            break;
        }
    }
    worst
}

fn images(h: &Harness) -> Vec<String> {
    let mut v: Vec<String> = h
        .pods()
        .iter()
        .map(|p| p.spec.as_ref().unwrap().containers[0].image.clone().unwrap())
        .collect();
    v.sort();
    v
}

#[tokio::test(start_paused = true)]
async fn rolling_update_replaces_at_most_max_unavailable_at_a_time() {
    let h = Harness::new();
    for n in ["a", "b", "c", "d"] {
        h.api.put(&node(n, &[], &[]));
    }
    h.api.put(&daemon_set(rolling(json!(2), json!(0)), json!({})));
    converge(&h).await;
    assert_eq!(h.pods().len(), 4);
    h.change_template("agent:2");
    h.sync().await.unwrap();
    assert_eq!(h.deletes(), 2, "maxUnavailable=2: two old pods go in the first round");
    h.run_pods();
    let worst = converge(&h).await;
    assert!(worst <= 2, "never more than maxUnavailable nodes without an available pod: {worst}");
    assert_eq!(images(&h), ["agent:2"; 4]);
    let s = h.status();
    assert_eq!((s.updated_number_scheduled, s.number_available), (Some(4), Some(4)));
    // One ControllerRevision per template; the current one has the highest number and its
    // hash is the pods' label.
    let mut revs: Vec<(i64, String)> = h
        .api
        .list::<ControllerRevision>()
        .into_iter()
        .map(|r| (r.revision, r.name_any()))
        .collect();
    revs.sort();
    assert_eq!(revs.len(), 2, "{revs:?}");
    let hash = h.pods()[0].metadata.labels.clone().unwrap()["controller-revision-hash"].clone();
    assert_eq!(revs[1], (2, format!("d-{hash}")));
}

#[tokio::test(start_paused = true)]
async fn history_keeps_revision_history_limit_unused_revisions() {
    let h = Harness::new();
    h.api.put(&node("a", &[], &[]));
    let mut d = daemon_set(rolling(json!(1), json!(0)), json!({}));
    d.spec.as_mut().unwrap().revision_history_limit = Some(1);
    h.api.put(&d);
    for image in ["agent:2", "agent:3", "agent:4"] {
        converge(&h).await;
        h.change_template(image);
    }
    converge(&h).await;
    converge(&h).await;
    let mut revs: Vec<i64> =
        h.api.list::<ControllerRevision>().into_iter().map(|r| r.revision).collect();
    revs.sort_unstable();
    assert_eq!(revs, [3, 4], "the current one and one more");
}

#[tokio::test(start_paused = true)]
async fn rolling_update_with_surge_starts_new_pods_beside_old_ones() {
    let h = Harness::new();
    for n in ["a", "b", "c", "d"] {
        h.api.put(&node(n, &[], &[]));
    }
    h.api.put(&daemon_set(rolling(json!(0), json!("25%")), json!({})));
    converge(&h).await;
    h.change_template("agent:2");
    h.api.take_actions();
    h.sync().await.unwrap();
    let actions = h.api.take_actions();
    assert_eq!(actions.iter().filter(|a| a.starts_with("create Pod")).count(), 1, "{actions:?}");
    assert_eq!(actions.iter().filter(|a| a.starts_with("delete Pod")).count(), 0);
    assert_eq!(h.placed().values().filter(|p| p.len() == 2).count(), 1, "one node surged");
    h.run_pods();
    let worst = converge(&h).await;
    assert_eq!(worst, 0, "maxUnavailable=0: every node keeps an available pod");
    assert_eq!(images(&h), ["agent:2"; 4]);
}

#[tokio::test(start_paused = true)]
async fn on_delete_replaces_only_pods_a_user_deleted() {
    let h = Harness::new();
    for n in ["a", "b"] {
        h.api.put(&node(n, &[], &[]));
    }
    h.api.put(&daemon_set(json!({"type": "OnDelete"}), json!({})));
    converge(&h).await;
    h.change_template("agent:2");
    converge(&h).await;
    assert_eq!(images(&h), ["agent:1", "agent:1"], "OnDelete: nothing replaced by itself");
    assert_eq!(h.status().updated_number_scheduled, Some(0));
    let victim = h.placed()["a"][0].clone();
    h.api.remove::<Pod>("ns", &victim);
    converge(&h).await;
    assert_eq!(images(&h), ["agent:1", "agent:2"]);
    assert_eq!(h.status().updated_number_scheduled, Some(1));
}

#[tokio::test(start_paused = true)]
async fn failed_and_surplus_pods_are_deleted_and_replaced() {
    let h = Harness::new();
    h.api.put(&node("a", &[], &[]));
    h.api.put(&daemon_set(rolling(json!(1), json!(0)), json!({})));
    converge(&h).await;
    let first = h.placed()["a"][0].clone();
    h.api.edit::<Pod>("ns", &first, |p| {
        p.status.get_or_insert_default().phase = Some("Failed".into());
    });
    h.events.take();
    h.sync().await.unwrap();
    let events = h.events.take();
    assert!(events.iter().any(|e| e.1 == "FailedDaemonPod"
        && e.2 == format!("Found failed daemon pod ns/{first} on node a, will try to kill it")));
    converge(&h).await;
    let placed = h.placed();
    assert_eq!(placed["a"].len(), 1);
    let second = placed["a"][0].clone();
    assert_ne!(second, first);

    // The replacement fails too, within a second: its deletion waits for the backoff.
    h.api.edit::<Pod>("ns", &second, |p| {
        p.status.get_or_insert_default().phase = Some("Failed".into());
    });
    h.api.take_actions();
    h.sync().await.unwrap();
    assert_eq!(h.deletes(), 0, "backing off");
    assert!(h.events.take().iter().all(|e| e.1 != "FailedDaemonPod"));
    tokio::time::advance(Duration::from_secs(3)).await;
    h.sync().await.unwrap();
    assert_eq!(h.deletes(), 1, "deleted once the backoff passed");
}

#[tokio::test(start_paused = true)]
async fn a_selector_matching_everything_is_refused_with_an_event() {
    let h = Harness::new();
    h.api.put(&node("a", &[], &[]));
    let mut d = daemon_set(rolling(json!(1), json!(0)), json!({}));
    d.spec.as_mut().unwrap().selector = Default::default();
    h.api.put(&d);
    h.sync().await.unwrap();
    assert!(h.pods().is_empty());
    assert_eq!(h.events.take()[0].1, "SelectingAll");
}

#[tokio::test(start_paused = true)]
async fn creates_wait_for_the_watch_to_see_the_last_round() {
    let h = Harness::new();
    h.api.put(&node("a", &[], &[]));
    h.api.put(&daemon_set(rolling(json!(1), json!(0)), json!({})));
    h.sync().await.unwrap();
    // The watch has not delivered the new pod: a second sync must not create another.
    h.ctrl.sync(&Key::new("ns", "d")).await.unwrap();
    assert_eq!(h.pods().len(), 1);
}
