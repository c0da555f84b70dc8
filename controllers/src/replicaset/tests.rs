//! The ReplicaSet controller against the fake apiserver: tests decide when the "watch"
//! delivers, so a lagging watch is one that has not delivered yet.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use serde_json::json;

use super::*;
use crate::client::Verb;
use crate::events::MemoryRecorder;
use crate::fake::FakeApi;
use crate::metrics::QueueMetrics;

pub struct Harness {
    pub api: Arc<FakeApi>,
    pub rs_informer: Arc<Informer<ReplicaSet>>,
    pub pod_informer: Arc<Informer<Pod>>,
    pub ctrl: Arc<ReplicaSetController<FakeApi>>,
    pub events: Arc<MemoryRecorder>,
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_000_000).unwrap()
}

impl Harness {
    pub fn new() -> Self {
        let api = Arc::new(FakeApi::default());
        let (rs_informer, pod_informer) =
            (Arc::new(Informer::default()), Arc::new(Informer::default()));
        let events = Arc::new(MemoryRecorder::default());
        let ctrl = Arc::new(ReplicaSetController {
            client: api.clone(),
            recorder: events.clone(),
            replica_sets: rs_informer.cache(),
            pods: pod_informer.cache(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
            expectations: Arc::default(),
            burst_replicas: BURST_REPLICAS,
            now,
        });
        ctrl.register(&rs_informer, &pod_informer);
        Self { api, rs_informer, pod_informer, ctrl, events }
    }

    /// The watch catches up.
    pub fn deliver(&self) {
        self.api.deliver(&self.rs_informer);
        self.api.deliver(&self.pod_informer);
    }

    pub async fn sync(&self, name: &str) -> Result<(), SyncError> {
        self.ctrl.sync(&Key::new("ns", name)).await
    }

    pub fn pods(&self) -> Vec<Pod> {
        self.api.list::<Pod>()
    }

    pub fn creates(&self) -> usize {
        self.api.take_actions().iter().filter(|a| a.starts_with("create Pod")).count()
    }

    /// Marks every pod scheduled, running and ready (what the scheduler and kubelets do).
    pub fn run_pods(&self) {
        for p in self.pods() {
            self.api.edit::<Pod>("ns", p.metadata.name.as_deref().unwrap(), |p| {
                p.spec.get_or_insert_default().node_name = Some("node-1".into());
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

    pub fn rs(&self, name: &str) -> ReplicaSet {
        self.api.object("ns", name).unwrap()
    }

    pub fn scale(&self, name: &str, replicas: i32) {
        self.api.edit::<ReplicaSet>("ns", name, |rs| {
            rs.spec.get_or_insert_default().replicas = Some(replicas);
            rs.metadata.generation = Some(rs.metadata.generation.unwrap_or(1) + 1);
        });
    }
}

pub fn labels(app: &str) -> std::collections::BTreeMap<String, String> {
    [("app".to_string(), app.to_string())].into()
}

pub fn replica_set(name: &str, app: &str, replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector { match_labels: Some(labels(app)), ..Default::default() },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(app)), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some("busybox:1.35".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

fn bare_pod(name: &str, app: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(labels(app)),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
    }
}

#[tokio::test(start_paused = true)]
async fn a_replica_set_converges_to_its_replicas_and_reports_them() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 3));
    h.deliver();
    h.sync("web").await.unwrap();
    let pods = h.pods();
    assert_eq!(pods.len(), 3);
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap();
        assert!(name.starts_with("web-") && name.len() == "web-".len() + 5, "{name}");
        let owner = controller_of(&p.metadata).unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.block_owner_deletion),
            ("ReplicaSet", "web", Some(true))
        );
        assert_eq!(p.metadata.labels, Some(labels("web")));
    }
    let events = h.events.take();
    assert_eq!(events.len(), 3);
    assert_eq!(events[0].1, "SuccessfulCreate");
    assert_eq!(
        events[0].2,
        format!("Created pod: {}", events[0].2.trim_start_matches("Created pod: "))
    );

    h.run_pods();
    h.deliver();
    h.api.take_actions();
    h.sync("web").await.unwrap();
    assert_eq!(h.creates(), 0, "converged: nothing more to create");
    let status = h.rs("web").status.unwrap();
    assert_eq!(
        (status.replicas, status.ready_replicas, status.available_replicas),
        (3, Some(3), Some(3))
    );
    assert_eq!(status.fully_labeled_replicas, Some(3));
    assert_eq!(status.observed_generation, Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pod_is_replaced() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 2));
    h.deliver();
    h.sync("web").await.unwrap();
    h.deliver();
    h.sync("web").await.unwrap();
    let victim = h.pods()[0].metadata.name.clone().unwrap();
    h.api.remove::<Pod>("ns", &victim);
    h.deliver();
    assert!(h.ctrl.queue.queued().contains(&Key::new("ns", "web")), "the deletion wakes the owner");
    h.api.take_actions();
    h.sync("web").await.unwrap();
    assert_eq!(h.creates(), 1);
    assert_eq!(h.pods().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn scaling_to_zero_deletes_every_pod_and_scaling_back_recreates_them() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 3));
    h.deliver();
    h.sync("web").await.unwrap();
    h.deliver();
    h.scale("web", 0);
    h.deliver();
    h.sync("web").await.unwrap();
    assert!(h.pods().is_empty());
    assert_eq!(h.events.take().iter().filter(|e| e.1 == "SuccessfulDelete").count(), 3);
    h.deliver();
    h.sync("web").await.unwrap();
    assert_eq!(h.rs("web").status.unwrap().replicas, 0);
    h.scale("web", 2);
    h.deliver();
    h.sync("web").await.unwrap();
    assert_eq!(h.pods().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn creates_go_in_slow_start_batches_and_stop_at_the_first_failing_batch() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 10));
    h.deliver();
    // The second create fails: batch 1 (1 pod) succeeds, batch 2 (2 pods) has one failure.
    h.api.fail_nth(Verb::Create, "Pod", 1);
    let err = h.sync("web").await.unwrap_err();
    assert!(err.to_string().contains("exceeded quota"), "{err}");
    assert_eq!(h.creates(), 3, "1 + 2 attempted, no batch of 4");
    assert_eq!(h.pods().len(), 2);
    assert_eq!(
        h.ctrl.expectations.pending(&Key::new("ns", "web")),
        (2, 0),
        "skipped creates are not expected"
    );
    let failure = h.rs("web").status.unwrap().conditions.unwrap();
    assert_eq!(failure[0].type_, "ReplicaFailure");
    assert_eq!(failure[0].reason.as_deref(), Some("FailedCreate"));
    assert!(
        h.events
            .take()
            .iter()
            .any(|e| e.1 == "FailedCreate" && e.2.starts_with("Error creating: "))
    );

    // The watch delivers the two pods; the next sync makes the rest and clears the condition.
    h.deliver();
    h.sync("web").await.unwrap();
    assert_eq!(h.pods().len(), 10);
    h.deliver();
    h.sync("web").await.unwrap();
    assert_eq!(h.rs("web").status.unwrap().conditions, None);
}

#[tokio::test(start_paused = true)]
async fn a_lagging_watch_never_causes_extra_creates() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 3));
    h.deliver();
    h.sync("web").await.unwrap();
    assert_eq!(h.creates(), 3);
    // The watch has not delivered the pods: the cache shows none, but the expectations hold.
    for _ in 0..3 {
        h.sync("web").await.unwrap();
    }
    assert_eq!(h.creates(), 0);
    h.deliver();
    assert!(h.ctrl.expectations.satisfied(&Key::new("ns", "web")));
    h.sync("web").await.unwrap();
    assert_eq!(h.creates(), 0);
    assert_eq!(h.pods().len(), 3);
    // Five minutes without the watch: the expectations expire and the owner acts again.
    h.scale("web", 4);
    h.api.deliver(&h.rs_informer);
    h.sync("web").await.unwrap();
    assert_eq!(h.creates(), 1);
    h.sync("web").await.unwrap();
    assert_eq!(h.creates(), 0);
    tokio::time::advance(crate::expectations::TIMEOUT + std::time::Duration::from_secs(1)).await;
    h.sync("web").await.unwrap();
    assert_eq!(h.creates(), 1, "expired expectations");
}

#[tokio::test(start_paused = true)]
async fn matching_orphans_are_adopted_and_pods_controlled_elsewhere_are_left_alone() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 3));
    h.api.put(&bare_pod("orphan", "web"));
    let mut other = bare_pod("theirs", "web");
    other.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "other".into(),
        uid: "other-uid".into(),
        controller: Some(true),
        ..Default::default()
    }]);
    h.api.put(&other);
    h.api.put(&bare_pod("unrelated", "db"));
    h.deliver();
    h.api.take_actions();
    h.sync("web").await.unwrap();
    let actions = h.api.take_actions();
    assert!(
        actions.contains(&"get ReplicaSet ns/web".to_string()),
        "a fresh read before adopting: {actions:?}"
    );
    assert!(actions.contains(&"patch Pod ns/orphan".to_string()), "{actions:?}");
    assert_eq!(actions.iter().filter(|a| a.starts_with("create Pod")).count(), 2, "{actions:?}");
    let orphan: Pod = h.api.object("ns", "orphan").unwrap();
    assert_eq!(controller_of(&orphan.metadata).map(|r| r.name.as_str()), Some("web"));
    let theirs: Pod = h.api.object("ns", "theirs").unwrap();
    assert_eq!(controller_of(&theirs.metadata).map(|r| r.name.as_str()), Some("other"));
    let unrelated: Pod = h.api.object("ns", "unrelated").unwrap();
    assert!(unrelated.metadata.owner_references.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_pod_whose_labels_stop_matching_is_released_and_replaced() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 2));
    h.deliver();
    h.sync("web").await.unwrap();
    h.deliver();
    let name = h.pods()[0].metadata.name.clone().unwrap();
    h.api.edit::<Pod>("ns", &name, |p| p.metadata.labels = Some(labels("debug")));
    h.deliver();
    h.api.take_actions();
    h.sync("web").await.unwrap();
    let released: Pod = h.api.object("ns", &name).unwrap();
    assert_eq!(released.metadata.owner_references, Some(vec![]));
    assert_eq!(h.creates(), 1);
}

#[tokio::test(start_paused = true)]
async fn scaling_down_deletes_the_least_valuable_pods_first() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 3));
    h.deliver();
    h.sync("web").await.unwrap();
    h.run_pods();
    let names: Vec<String> = h.pods().iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    // One pod is not ready: it goes first.
    h.api.edit::<Pod>("ns", &names[1], |p| p.status.get_or_insert_default().conditions = None);
    h.deliver();
    h.scale("web", 2);
    h.deliver();
    h.sync("web").await.unwrap();
    let left: Vec<String> = h.pods().iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(left, [names[0].clone(), names[2].clone()]);
}

#[tokio::test(start_paused = true)]
async fn a_deleted_replica_set_forgets_its_expectations() {
    let h = Harness::new();
    h.api.put(&replica_set("web", "web", 2));
    h.deliver();
    h.sync("web").await.unwrap();
    h.api.remove::<ReplicaSet>("ns", "web");
    h.deliver();
    assert_eq!(h.ctrl.expectations.pending(&Key::new("ns", "web")), (0, 0));
    h.sync("web").await.unwrap();
    let _ = json!({});
}
