//! The Deployment controller and the ReplicaSet controller together against the fake
//! apiserver, with a pretend kubelet that makes pods ready one step after they appear: each
//! [`Cluster::step`] is one round of watch delivery and syncs, and the rollout invariants are
//! checked after every step.

#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::util::{self, POD_TEMPLATE_HASH, REVISION};
use super::*;
use crate::events::MemoryRecorder;
use crate::expectations::Expectations;
use crate::fake::FakeApi;
use crate::metrics::QueueMetrics;
use crate::replicaset::{BURST_REPLICAS, ReplicaSetController};

thread_local! {
    static CLOCK: Cell<i64> = const { Cell::new(1_000_000) };
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(CLOCK.with(Cell::get)).unwrap()
}

fn advance(secs: i64) {
    CLOCK.with(|c| c.set(c.get() + secs));
}

struct Cluster {
    api: Arc<FakeApi>,
    deployments: Arc<Informer<Deployment>>,
    replica_sets: Arc<Informer<ReplicaSet>>,
    pods: Arc<Informer<Pod>>,
    dc: Arc<DeploymentController<FakeApi>>,
    rsc: Arc<ReplicaSetController<FakeApi>>,
    events: Arc<MemoryRecorder>,
    /// Pods seen in the previous step: ready now.
    seen: std::collections::HashSet<String>,
}

impl Cluster {
    fn new() -> Self {
        let api = Arc::new(FakeApi::default());
        let (deployments, replica_sets, pods) = (
            Arc::new(Informer::default()),
            Arc::new(Informer::default()),
            Arc::new(Informer::default()),
        );
        let events = Arc::new(MemoryRecorder::default());
        let dc = Arc::new(DeploymentController {
            client: api.clone(),
            recorder: events.clone(),
            deployments: deployments.cache(),
            replica_sets: replica_sets.cache(),
            pods: pods.cache(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
            now,
        });
        dc.register(&deployments, &replica_sets, &pods);
        let rsc = Arc::new(ReplicaSetController {
            client: api.clone(),
            recorder: Arc::new(MemoryRecorder::default()),
            replica_sets: replica_sets.cache(),
            pods: pods.cache(),
            queue: WorkQueue::new(crate::replicaset::NAME, QueueMetrics::default()),
            expectations: Arc::new(Expectations::default()),
            burst_replicas: BURST_REPLICAS,
            now,
        });
        rsc.register(&replica_sets, &pods);
        Self { api, deployments, replica_sets, pods, dc, rsc, events, seen: Default::default() }
    }

    fn deliver(&self) {
        self.api.deliver(&self.deployments);
        self.api.deliver(&self.replica_sets);
        self.api.deliver(&self.pods);
    }

    /// One round: the deployment controller, the ReplicaSet controller, then the kubelet.
    async fn step(&mut self) {
        self.deliver();
        let _ = self.dc.sync(&Key::new("ns", "web")).await;
        self.deliver();
        for rs in self.api.list::<ReplicaSet>() {
            let _ = self.rsc.sync(&Key::of(&rs)).await;
        }
        self.deliver();
        for rs in self.api.list::<ReplicaSet>() {
            let _ = self.rsc.sync(&Key::of(&rs)).await;
        }
        // The kubelet: pods from the previous step are now running and ready.
        for p in self.api.list::<Pod>() {
            let name = p.metadata.name.clone().unwrap();
            if self.seen.contains(&name) && !crate::pods::is_ready(&p) {
                self.api.edit::<Pod>("ns", &name, |p| {
                    p.spec.get_or_insert_default().node_name = Some("node-1".into());
                    p.status = Some(PodStatus {
                        phase: Some("Running".into()),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            last_transition_time: Some(Time(now())),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    });
                });
            }
            self.seen.insert(name);
        }
        self.deliver();
    }

    fn deployment(&self) -> Deployment {
        self.api.object("ns", "web").unwrap()
    }

    fn edit(&self, f: impl FnOnce(&mut Deployment)) {
        self.api.edit::<Deployment>("ns", "web", |d| {
            f(d);
            d.metadata.generation = Some(d.metadata.generation.unwrap_or(1) + 1);
        });
    }

    fn set_image(&self, image: &str) {
        self.edit(|d| {
            d.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0].image =
                Some(image.into())
        });
    }

    fn replica_sets(&self) -> Vec<ReplicaSet> {
        let mut rss = self.api.list::<ReplicaSet>();
        rss.sort_by_key(util::revision);
        rss
    }

    /// (image, spec.replicas, revision) of each ReplicaSet, oldest revision first.
    fn summary(&self) -> Vec<(String, i32, i64)> {
        self.replica_sets()
            .iter()
            .map(|rs| {
                let image = rs
                    .spec
                    .as_ref()
                    .unwrap()
                    .template
                    .as_ref()
                    .unwrap()
                    .spec
                    .as_ref()
                    .unwrap()
                    .containers[0]
                    .image
                    .clone()
                    .unwrap();
                (image, util::replicas(rs), util::revision(rs))
            })
            .collect()
    }

    /// Pods per image: (all, ready).
    fn pods_of(&self, image: &str) -> (usize, usize) {
        let pods: Vec<Pod> = self
            .api
            .list::<Pod>()
            .into_iter()
            .filter(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image))
            .collect();
        (pods.len(), pods.iter().filter(|p| crate::pods::is_ready(p)).count())
    }

    fn ready(&self) -> usize {
        self.api.list::<Pod>().iter().filter(|p| crate::pods::is_ready(p)).count()
    }

    fn condition(&self, type_: &str) -> Option<(String, String, String)> {
        let d = self.deployment();
        let c = util::condition(d.status.as_ref()?, type_)?;
        Some((
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        ))
    }

    async fn settle(&mut self, steps: usize) {
        for _ in 0..steps {
            self.step().await;
        }
    }
}

fn deployment(replicas: i32, strategy: DeploymentStrategy) -> Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "web".to_string())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some("busybox:1".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            strategy: Some(strategy),
            revision_history_limit: Some(10),
            progress_deadline_seconds: Some(600),
            ..Default::default()
        }),
        status: None,
    }
}

fn rolling(surge: i32, unavailable: i32) -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(surge)),
            max_unavailable: Some(IntOrString::Int(unavailable)),
        }),
    }
}

fn recreate() -> DeploymentStrategy {
    DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None }
}

#[tokio::test(start_paused = true)]
async fn a_new_deployment_creates_its_replica_set_and_reports_completion() {
    let mut c = Cluster::new();
    c.api.put(&deployment(3, rolling(1, 1)));
    c.settle(5).await;
    let rss = c.replica_sets();
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH].clone();
    assert_eq!(rs.metadata.name.as_deref(), Some(format!("web-{hash}").as_str()));
    assert_eq!(
        rs.spec.as_ref().unwrap().selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH],
        hash
    );
    assert_eq!(util::revision(rs), 1);
    assert_eq!(c.ready(), 3);
    let d = c.deployment();
    assert_eq!(d.metadata.annotations.as_ref().unwrap()[REVISION], "1");
    let s = d.status.clone().unwrap();
    assert_eq!(
        (s.replicas, s.updated_replicas, s.ready_replicas, s.available_replicas),
        (Some(3), Some(3), Some(3), Some(3))
    );
    assert_eq!(s.observed_generation, d.metadata.generation);
    assert_eq!(
        c.condition("Progressing"),
        Some((
            "True".into(),
            "NewReplicaSetAvailable".into(),
            format!("ReplicaSet \"web-{hash}\" has successfully progressed.")
        ))
    );
    assert_eq!(
        c.condition("Available"),
        Some((
            "True".into(),
            "MinimumReplicasAvailable".into(),
            "Deployment has minimum availability.".into()
        ))
    );
    let events = c.events.take();
    assert!(
        events.iter().any(|e| e.1 == "ScalingReplicaSet"
            && e.2 == format!("Scaled up replica set web-{hash} from 0 to 3")),
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_rolling_update_stays_within_max_surge_and_max_unavailable_at_every_step() {
    for (replicas, surge, unavailable) in [(4, 1, 1), (5, 2, 0), (3, 0, 1), (6, 3, 2)] {
        let mut c = Cluster::new();
        c.api.put(&deployment(replicas, rolling(surge, unavailable)));
        c.settle(6).await;
        assert_eq!(c.pods_of("busybox:1"), (replicas as usize, replicas as usize));
        c.set_image("busybox:2");
        let mut steps = 0;
        while c.pods_of("busybox:2") != (replicas as usize, replicas as usize)
            || c.pods_of("busybox:1").0 > 0
        {
            c.step().await;
            steps += 1;
            let total = c.api.list::<Pod>().len();
            let ready = c.ready();
            assert!(
                total <= (replicas + surge) as usize,
                "{replicas}/{surge}/{unavailable}: {total} pods at step {steps}"
            );
            assert!(
                ready >= (replicas - unavailable) as usize,
                "{replicas}/{surge}/{unavailable}: {ready} ready at step {steps}"
            );
            assert!(steps < 50, "the rollout did not finish: {:?}", c.summary());
        }
        let summary = c.summary();
        assert_eq!(summary, [("busybox:1".into(), 0, 1), ("busybox:2".into(), replicas, 2)]);
        c.settle(2).await;
        assert_eq!(c.condition("Progressing").unwrap().1, "NewReplicaSetAvailable");
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_replica_set_its_cache_has_not_seen_yet_is_no_hash_collision() {
    let mut c = Cluster::new();
    c.api.put(&deployment(4, rolling(1, 1)));
    c.settle(6).await;
    c.set_image("busybox:2");
    c.deliver();
    // The first sync makes the new ReplicaSet; a second runs before its cache has seen it.
    let _ = c.dc.sync(&Key::new("ns", "web")).await;
    c.api.deliver(&c.deployments);
    let second = c.dc.sync(&Key::new("ns", "web")).await;
    assert!(second.is_err(), "retried once the cache has it");
    let d = c.deployment();
    assert_eq!(d.status.and_then(|s| s.collision_count), None, "no collision counted");
    assert_eq!(c.replica_sets().len(), 2, "{:?}", c.summary());
    let total: i32 = c.replica_sets().iter().map(util::replicas).sum();
    assert!(total <= 5, "within replicas + maxSurge: {:?}", c.summary());
    c.settle(20).await;
    assert_eq!(c.summary(), [("busybox:1".into(), 0, 1), ("busybox:2".into(), 4, 2)]);
}

#[tokio::test(start_paused = true)]
async fn recreate_removes_every_old_pod_before_starting_new_ones() {
    let mut c = Cluster::new();
    c.api.put(&deployment(3, recreate()));
    c.settle(5).await;
    c.set_image("busybox:2");
    let mut steps = 0;
    while c.pods_of("busybox:2").1 < 3 {
        c.step().await;
        steps += 1;
        let (old, new) = (c.pods_of("busybox:1").0, c.pods_of("busybox:2").0);
        assert!(
            old == 0 || new == 0,
            "old and new pods together at step {steps}: {old} old, {new} new"
        );
        assert!(steps < 20);
    }
    assert_eq!(c.summary(), [("busybox:1".into(), 0, 1), ("busybox:2".into(), 3, 2)]);
}

#[tokio::test(start_paused = true)]
async fn rolling_back_to_an_old_template_reuses_its_replica_set_with_the_next_revision() {
    let mut c = Cluster::new();
    c.api.put(&deployment(2, rolling(1, 0)));
    c.settle(5).await;
    let first = c.replica_sets()[0].metadata.name.clone();
    c.set_image("busybox:2");
    c.settle(10).await;
    // What `kubectl rollout undo` does: the old ReplicaSet's template (minus the hash label).
    c.set_image("busybox:1");
    c.settle(10).await;
    let rss = c.replica_sets();
    assert_eq!(rss.len(), 2, "no third ReplicaSet");
    let back = rss.iter().find(|r| r.metadata.name == first).unwrap();
    assert_eq!(util::replicas(back), 2);
    assert_eq!(util::revision(back), 3);
    assert_eq!(back.metadata.annotations.as_ref().unwrap()[util::REVISION_HISTORY], "1");
    assert_eq!(c.deployment().metadata.annotations.as_ref().unwrap()[REVISION], "3");
    assert_eq!(c.pods_of("busybox:1"), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn old_replica_sets_beyond_the_revision_history_limit_are_deleted() {
    let mut c = Cluster::new();
    let mut d = deployment(1, rolling(1, 0));
    d.spec.as_mut().unwrap().revision_history_limit = Some(1);
    c.api.put(&d);
    c.settle(4).await;
    for image in ["busybox:2", "busybox:3", "busybox:4"] {
        c.set_image(image);
        c.settle(8).await;
    }
    let images: Vec<String> = c.summary().into_iter().map(|s| s.0).collect();
    assert_eq!(images, ["busybox:3", "busybox:4"], "one old ReplicaSet kept");
}

#[tokio::test(start_paused = true)]
async fn a_paused_deployment_does_not_roll_out_until_resumed() {
    let mut c = Cluster::new();
    c.api.put(&deployment(2, rolling(1, 0)));
    c.settle(4).await;
    c.edit(|d| d.spec.as_mut().unwrap().paused = Some(true));
    c.set_image("busybox:2");
    c.settle(4).await;
    assert_eq!(c.replica_sets().len(), 1, "no new ReplicaSet while paused");
    assert_eq!(
        c.condition("Progressing").map(|x| (x.0, x.1, x.2)),
        Some(("Unknown".into(), "DeploymentPaused".into(), "Deployment is paused".into()))
    );
    // Scaling still works while paused.
    c.edit(|d| d.spec.as_mut().unwrap().replicas = Some(3));
    c.settle(3).await;
    assert_eq!(c.pods_of("busybox:1").0, 3);
    c.edit(|d| d.spec.as_mut().unwrap().paused = Some(false));
    c.settle(20).await;
    assert_eq!(c.pods_of("busybox:2"), (3, 3));
    assert_eq!(c.condition("Progressing").unwrap().1, "NewReplicaSetAvailable");
}

#[tokio::test(start_paused = true)]
async fn scaling_to_zero_and_back() {
    let mut c = Cluster::new();
    c.api.put(&deployment(3, rolling(1, 1)));
    c.settle(4).await;
    c.edit(|d| d.spec.as_mut().unwrap().replicas = Some(0));
    c.settle(3).await;
    assert_eq!(c.api.list::<Pod>().len(), 0);
    assert!(
        c.events
            .take()
            .iter()
            .any(|e| e.2.starts_with("Scaled down replica set web-")
                && e.2.ends_with(" from 3 to 0"))
    );
    c.edit(|d| d.spec.as_mut().unwrap().replicas = Some(2));
    c.settle(3).await;
    assert_eq!(c.pods_of("busybox:1"), (2, 2));
    assert_eq!(c.replica_sets().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_rollout_without_progress_for_the_deadline_is_reported_as_exceeded() {
    let mut c = Cluster::new();
    let mut d = deployment(2, rolling(1, 0));
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(30);
    c.api.put(&d);
    c.settle(4).await;
    c.set_image("busybox:never");
    // The kubelet never makes the new pods ready.
    c.deliver();
    c.dc.sync(&Key::new("ns", "web")).await.unwrap();
    c.deliver();
    for rs in c.api.list::<ReplicaSet>() {
        let _ = c.rsc.sync(&Key::of(&rs)).await;
    }
    c.deliver();
    c.dc.sync(&Key::new("ns", "web")).await.unwrap();
    assert_eq!(c.condition("Progressing").unwrap().1, "NewReplicaSetCreated");
    advance(31);
    c.deliver();
    c.dc.sync(&Key::new("ns", "web")).await.unwrap();
    let (status, reason, message) = c.condition("Progressing").unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "ProgressDeadlineExceeded"));
    assert!(
        message.starts_with("ReplicaSet \"web-")
            && message.ends_with("\" has timed out progressing."),
        "{message}"
    );
}

#[test]
fn proportional_scaling_splits_new_replicas_by_size_during_a_rollout() {
    let mut d = deployment(20, rolling(3, 2));
    d.status = Some(Default::default());
    let rs = |name: &str, replicas: i32, created: i64| {
        Arc::new(ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(jiff::Timestamp::from_second(created).unwrap())),
                annotations: Some([(util::MAX_REPLICAS.to_string(), "13".to_string())].into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            }),
            status: None,
        })
    };
    let sizes = sync::proportional_sizes(&d, &[rs("old", 8, 1), rs("new", 5, 2)]).unwrap();
    let got: Vec<(String, i32, &str)> =
        sizes.into_iter().map(|r| (r.rs.metadata.name.clone().unwrap(), r.size, r.op)).collect();
    assert_eq!(
        got,
        [("old".to_string(), 14, "up"), ("new".to_string(), 9, "up")],
        "13 → 23 (20 + surge 3)"
    );
    d.spec.as_mut().unwrap().replicas = Some(5);
    let sizes = sync::proportional_sizes(&d, &[rs("old", 8, 1), rs("new", 5, 2)]).unwrap();
    let total: i32 = sizes.iter().map(|r| r.size).sum();
    assert_eq!(total, 8, "13 → 8 (5 + surge 3)");
}

#[test]
fn the_new_replica_set_grows_only_within_max_surge() {
    let d = deployment(10, rolling(3, 2));
    let rs = |n: i32| {
        Arc::new(ReplicaSet {
            spec: Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(n),
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    assert_eq!(sync::new_rs_new_replicas(&d, &[rs(10), rs(0)], 0), Ok(3));
    assert_eq!(sync::new_rs_new_replicas(&d, &[rs(8), rs(3)], 3), Ok(5));
    assert_eq!(sync::new_rs_new_replicas(&d, &[rs(10), rs(3)], 3), Ok(3), "at 13 already");
    assert_eq!(sync::new_rs_new_replicas(&d, &[rs(0), rs(9)], 9), Ok(10), "never above replicas");
}

#[tokio::test(start_paused = true)]
async fn a_deployment_whose_selector_changes_lets_its_old_replica_sets_go_and_makes_a_new_one() {
    let mut c = Cluster::new();
    c.api.put(&deployment(2, rolling(1, 0)));
    c.settle(4).await;
    let old = c.replica_sets()[0].metadata.name.clone().unwrap();
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "web2".to_string())].into();
    c.edit(|d| {
        let spec = d.spec.as_mut().unwrap();
        spec.selector.match_labels = Some(labels.clone());
        spec.template.metadata.as_mut().unwrap().labels = Some(labels.clone());
    });
    c.settle(8).await;
    let released: ReplicaSet = c.api.object("ns", &old).unwrap();
    assert!(
        crate::pods::controller_of(&released.metadata).is_none(),
        "released: {:?}",
        released.metadata.owner_references
    );
    let owned: Vec<_> = c
        .replica_sets()
        .into_iter()
        .filter(|r| crate::pods::controller_of(&r.metadata).is_some())
        .collect();
    assert_eq!(owned.len(), 1);
    assert_eq!(util::replicas(&owned[0]), 2);
    assert_eq!(
        owned[0].spec.as_ref().unwrap().selector.match_labels.as_ref().unwrap()["app"],
        "web2"
    );
}
