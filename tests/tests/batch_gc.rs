//! Jobs, CronJobs and cascading deletion end to end: apiserver-lite, a real kubelet on
//! containerd with the scheduler binding, and the controller-manager; the real kubectl v1.35 is
//! the oracle (`kubectl wait --for=condition=complete`, `kubectl delete --cascade=...`). Each
//! test starts its own cluster and runs at most three pods.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::apiserver::ApiServer;
use e2e::cluster::JoinedNode;
use e2e::controllers::ControllerManager;
use e2e::scheduler::Scheduler;
use e2e::{eventually, eventually_showing, require};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);

fn kubectl(api: &ApiServer, args: &[&str]) -> (bool, String, String) {
    let out = api.kubectl(args).unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

struct Cluster {
    node: JoinedNode,
    _scheduler: Scheduler,
    manager: ControllerManager,
}

impl Cluster {
    async fn start() -> Self {
        let node = JoinedNode::start(NODE).await.unwrap();
        let scheduler = Scheduler::start(&node.api, &[]).unwrap();
        let manager = ControllerManager::start(&node.api, &["--leader-elect=false"]).unwrap();
        Self { node, _scheduler: scheduler, manager }
    }

    fn logs(&self, what: &str) -> String {
        format!("{}\ncontroller-manager:\n{}", self.node.logs(what), self.manager.log_tail(40))
    }

    async fn stop(self) {
        let Cluster { node, _scheduler, mut manager } = self;
        manager.stop();
        drop(_scheduler);
        node.stop().await.unwrap();
    }
}

fn job(name: &str, spec: serde_json::Value, command: &str) -> Job {
    let mut spec = spec;
    spec["template"] = json!({"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "busybox:1.35", "command": ["sh", "-c", command]}]}});
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_of_three_completions_two_at_a_time_completes_and_kubectl_wait_returns() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = Cluster::start().await;
    let client = c.node.api.admin_client().await.unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("pi", json!({"completions": 3, "parallelism": 2}), "sleep 1"),
    )
    .await
    .unwrap();
    let (ok, out, err) =
        kubectl(&c.node.api, &["wait", "--for=condition=complete", "job/pi", "--timeout=90s"]);
    assert!(ok, "{err}\n{}", c.logs("kubectl wait"));
    assert_eq!(out.trim(), "job.batch/pi condition met");
    let st = jobs.get("pi").await.unwrap().status.unwrap();
    assert_eq!((st.succeeded, st.failed, st.active), (Some(3), Some(0), Some(0)));
    assert!(st.completion_time.is_some() && st.start_time.is_some());
    let conditions: Vec<String> = st.conditions.unwrap().into_iter().map(|c| c.type_).collect();
    assert_eq!(conditions, ["SuccessCriteriaMet", "Complete"]);
    let list =
        pods.list(&ListParams::default().labels("batch.kubernetes.io/job-name=pi")).await.unwrap();
    assert_eq!(list.items.len(), 3, "one pod per completion");
    for p in &list.items {
        assert!(p.metadata.finalizers.as_ref().is_none_or(Vec::is_empty), "counted and released");
        assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Succeeded"));
    }
    // No more than two ran at once: each pod's run overlaps at most one other.
    let spans: Vec<(jiff::Timestamp, jiff::Timestamp)> = list
        .items
        .iter()
        .map(|p| {
            let t = p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0]
                .state
                .as_ref()
                .unwrap()
                .terminated
                .clone()
                .unwrap();
            (t.started_at.unwrap().0, t.finished_at.unwrap().0)
        })
        .collect();
    for (s, _) in &spans {
        let running = spans.iter().filter(|(a, b)| a <= s && s < b).count();
        assert!(running <= 2, "{spans:?}");
    }
    let (_, out, _) = kubectl(&c.node.api, &["get", "job", "pi", "--no-headers"]);
    assert!(out.split_whitespace().take(3).eq(["pi", "Complete", "3/3"]), "{out}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_stops_at_its_backoff_limit_after_the_back_off() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = Cluster::start().await;
    let client = c.node.api.admin_client().await.unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &job("bad", json!({"backoffLimit": 1}), "exit 3"))
        .await
        .unwrap();
    let (ok, out, err) =
        kubectl(&c.node.api, &["wait", "--for=condition=failed", "job/bad", "--timeout=90s"]);
    assert!(ok, "{err}\n{}", c.logs("kubectl wait"));
    assert_eq!(out.trim(), "job.batch/bad condition met");
    let st = jobs.get("bad").await.unwrap().status.unwrap();
    assert_eq!((st.failed, st.succeeded), (Some(2), Some(0)));
    let failed = st.conditions.unwrap().into_iter().find(|c| c.type_ == "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(failed.message.as_deref(), Some("Job has reached the specified backoff limit"));
    let mut list = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=bad"))
        .await
        .unwrap()
        .items;
    assert_eq!(list.len(), 2, "backoffLimit 1: the first pod and one retry");
    list.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
    let finished = list[0].status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap()
        .finished_at
        .unwrap()
        .0;
    let retried = list[1].metadata.creation_timestamp.clone().unwrap().0;
    let gap = retried.duration_since(finished).as_secs_f64();
    // Upstream's back-off: 10 s after the first failure (creation times are whole seconds).
    assert!(gap >= 9.0, "the retry waited {gap} s");
    // The controller records the event after the status it follows: wait for it.
    let args = ["get", "events", "--field-selector", "involvedObject.name=bad"];
    eventually_showing("job/bad's BackoffLimitExceeded event", WAIT, POLL, || async {
        let (_, events, _) = kubectl(&c.node.api, &args);
        if events.contains("BackoffLimitExceeded") { Ok(()) } else { Err(events) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_every_minute_creates_a_job_on_schedule() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = Cluster::start().await;
    let client = c.node.api.admin_client().await.unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let (ok, _, err) = kubectl(
        &c.node.api,
        &[
            "create",
            "cronjob",
            "tick",
            "--image=busybox:1.35",
            "--schedule=* * * * *",
            "--",
            "true",
        ],
    );
    assert!(ok, "{err}");
    // The next minute boundary is at most 60 s away.
    let made = eventually("a scheduled Job", Duration::from_secs(75), POLL, || async {
        let list = jobs.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|j| j.metadata.name.as_deref().is_some_and(|n| n.starts_with("tick-")))
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let name = made.metadata.name.clone().unwrap();
    let stamp = made.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/cronjob-scheduled-timestamp"].clone();
    let scheduled: jiff::Timestamp = stamp.parse().unwrap();
    assert_eq!(scheduled.as_second() % 60, 0, "{stamp}");
    assert_eq!(name, format!("tick-{}", scheduled.as_second() / 60));
    let owner = &made.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("CronJob", "tick", Some(true))
    );
    let (ok, _, err) = kubectl(
        &c.node.api,
        &["wait", "--for=condition=complete", &format!("job/{name}"), "--timeout=60s"],
    );
    assert!(ok, "{err}\n{}", c.logs("kubectl wait"));
    let (_, out, _) = kubectl(
        &c.node.api,
        &["get", "cronjob", "tick", "-o", "jsonpath={.status.lastScheduleTime}"],
    );
    assert_eq!(out.parse::<jiff::Timestamp>().ok(), Some(scheduled));
    c.stop().await;
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "web", "image": "busybox-httpd:1.35"}]}}},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_deployment_cascades_in_the_background_the_foreground_or_orphans() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = Cluster::start().await;
    let client = c.node.api.admin_client().await.unwrap();
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let of = |app: &str| ListParams::default().labels(&format!("app={app}"));
    for name in ["bg", "fg", "or"] {
        deps.create(&PostParams::default(), &deployment(name)).await.unwrap();
    }
    eventually("three running pods", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 3).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    // Background: the Deployment goes at once, its ReplicaSet and pods after.
    let (ok, out, err) =
        kubectl(&c.node.api, &["delete", "deployment", "bg", "--cascade=background"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "deployment.apps \"bg\" deleted from default namespace");
    eventually("bg's ReplicaSet and pods collected", WAIT, POLL, || async {
        let (r, p) = (rss.list(&of("bg")).await.ok()?, pods.list(&of("bg")).await.ok()?);
        (r.items.is_empty() && p.items.is_empty()).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    // Foreground: kubectl waits for the Deployment, which goes only after its dependents.
    let (ok, _, err) = kubectl(
        &c.node.api,
        &["delete", "deployment", "fg", "--cascade=foreground", "--timeout=60s"],
    );
    assert!(ok, "{err}\n{}", c.logs("foreground delete"));
    assert!(deps.get_opt("fg").await.unwrap().is_none());
    assert!(rss.list(&of("fg")).await.unwrap().items.is_empty(), "the ReplicaSet went first");
    assert!(pods.list(&of("fg")).await.unwrap().items.is_empty(), "its pods went before it");

    // Orphan: the ReplicaSet and pod stay, without the owner reference.
    let (ok, _, err) = kubectl(&c.node.api, &["delete", "deployment", "or", "--cascade=orphan"]);
    assert!(ok, "{err}\n{}", c.logs("orphan delete"));
    assert!(deps.get_opt("or").await.unwrap().is_none());
    let rs = eventually("or's ReplicaSet without owner", Duration::from_secs(10), POLL, || async {
        let list = rss.list(&of("or")).await.ok()?;
        list.items
            .into_iter()
            .find(|r| r.metadata.owner_references.as_ref().is_none_or(Vec::is_empty))
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let left = pods.list(&of("or")).await.unwrap().items;
    assert_eq!(left.len(), 1, "the orphaned ReplicaSet keeps its pod");
    assert_eq!(
        left[0].metadata.owner_references.as_ref().unwrap()[0].uid,
        rs.metadata.uid.clone().unwrap()
    );
    assert!(rss.get_opt(&rs.metadata.name.clone().unwrap()).await.unwrap().is_some());
    c.stop().await;
}
