//! The Job controller against the fake apiserver and a fake clock: tests decide when the
//! "watch" delivers and when time passes.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::client::Verb;
use crate::clock::FakeClock;
use crate::events::MemoryRecorder;
use crate::fake::FakeApi;
use crate::metrics::QueueMetrics;

struct Harness {
    api: Arc<FakeApi>,
    jobs: Arc<Informer<Job>>,
    pods: Arc<Informer<Pod>>,
    ctrl: Arc<JobController<FakeApi>>,
    events: Arc<MemoryRecorder>,
    clock: Arc<FakeClock>,
}

fn start() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_000_000).unwrap()
}

impl Harness {
    fn new() -> Self {
        let api = Arc::new(FakeApi::default());
        let (jobs, pods) = (Arc::new(Informer::default()), Arc::new(Informer::default()));
        let events = Arc::new(MemoryRecorder::default());
        let clock = Arc::new(FakeClock::new(start()));
        let ctrl = Arc::new(JobController {
            client: api.clone(),
            recorder: events.clone(),
            jobs: jobs.cache(),
            pods: pods.cache(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
            expectations: Arc::default(),
            clock: clock.clone(),
            backoff: Mutex::default(),
        });
        ctrl.register(&jobs, &pods);
        Self { api, jobs, pods, ctrl, events, clock }
    }

    fn deliver(&self) {
        self.api.deliver(&self.jobs);
        self.api.deliver(&self.pods);
    }

    /// Delivers, then syncs `job`.
    async fn sync(&self, job: &str) {
        self.deliver();
        self.ctrl.sync(&Key::new("ns", job)).await.unwrap();
        self.deliver();
    }

    fn job(&self, name: &str) -> Job {
        self.api.object("ns", name).unwrap()
    }

    fn status(&self, name: &str) -> JobStatus {
        self.job(name).status.unwrap_or_default()
    }

    fn pods(&self) -> Vec<Pod> {
        self.api.list::<Pod>()
    }

    fn active(&self) -> Vec<Pod> {
        self.pods().into_iter().filter(|p| pods::phase(p).is_empty()).collect()
    }

    /// A kubelet reports the pod finished with `code` at the clock's time.
    fn finish(&self, pod: &str, code: i32) {
        let at = self.clock.now().to_string();
        self.api.edit::<Pod>("ns", pod, |p| {
            p.status = Some(
                serde_json::from_value(json!({
                    "phase": if code == 0 { "Succeeded" } else { "Failed" },
                    "containerStatuses": [{"name": "main", "image": "i", "imageID": "",
                        "ready": false, "restartCount": 0,
                        "state": {"terminated": {"exitCode": code, "finishedAt": at}}}]
                }))
                .unwrap(),
            );
        });
    }

    fn finish_active(&self, code: i32) {
        for p in self.active() {
            self.finish(p.metadata.name.as_deref().unwrap(), code);
        }
    }

    fn condition(&self, name: &str, type_: &str) -> Option<JobCondition> {
        self.status(name).conditions.into_iter().flatten().find(|c| c.type_ == type_)
    }
}

fn job(name: &str, spec: serde_json::Value) -> Job {
    let uid = format!("uid-Job-{name}");
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    spec["template"] = json!({
        "metadata": {"labels": {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.35"}]}
    });
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn completions_three_with_parallelism_two_run_two_at_a_time_and_complete() {
    let h = Harness::new();
    h.api.put(&job("pi", json!({"completions": 3, "parallelism": 2})));
    h.sync("pi").await;
    let pods = h.pods();
    assert_eq!(pods.len(), 2);
    for p in &pods {
        assert!(p.metadata.name.as_deref().unwrap().starts_with("pi-"));
        assert_eq!(p.metadata.finalizers.as_deref(), Some(&[TRACKING_FINALIZER.to_string()][..]));
        let owner = controller_of(&p.metadata).unwrap();
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Job", "pi"));
    }
    let st = h.status("pi");
    assert_eq!(
        (st.active, st.succeeded, st.failed, st.ready),
        (Some(2), Some(0), Some(0), Some(0))
    );
    assert_eq!(st.start_time.map(|t| t.0), Some(start()));

    let first = pods[0].metadata.name.clone().unwrap();
    h.finish(&first, 0);
    h.sync("pi").await;
    let done: Pod = h.api.object("ns", &first).unwrap();
    assert!(done.metadata.finalizers.unwrap_or_default().is_empty(), "counted, then released");
    let st = h.status("pi");
    assert_eq!(
        (st.active, st.succeeded),
        (Some(2), Some(1)),
        "one more created for the third completion"
    );
    assert_eq!(st.uncounted_terminated_pods, Some(Default::default()));
    assert_eq!(h.pods().len(), 3);

    h.finish_active(0);
    h.clock.advance(Duration::from_secs(5));
    h.sync("pi").await;
    let st = h.status("pi");
    assert_eq!((st.active, st.succeeded), (Some(0), Some(3)));
    let met = h.condition("pi", "SuccessCriteriaMet").unwrap();
    let complete = h.condition("pi", "Complete").unwrap();
    assert_eq!((met.status.as_str(), met.reason.as_deref()), ("True", Some("CompletionsReached")));
    assert_eq!(
        (complete.status.as_str(), complete.reason.as_deref()),
        ("True", Some("CompletionsReached"))
    );
    assert_eq!(complete.message.as_deref(), Some("Reached expected number of succeeded pods"));
    assert_eq!(st.completion_time.map(|t| t.0.as_second()), Some(start().as_second() + 5));
    assert_eq!(h.pods().len(), 3, "no pod beyond the completions");
    let events: Vec<String> = h.events.take().into_iter().map(|e| e.1).collect();
    assert_eq!(events.iter().filter(|e| *e == "SuccessfulCreate").count(), 3);
    assert_eq!(events.last().map(String::as_str), Some("Completed"));

    h.api.take_actions();
    h.sync("pi").await;
    assert!(h.api.take_actions().is_empty(), "a finished Job is left alone");
}

#[tokio::test(start_paused = true)]
async fn a_failing_job_backs_off_ten_then_twenty_seconds_and_stops_at_its_backoff_limit() {
    let h = Harness::new();
    h.api.put(&job("bad", json!({"backoffLimit": 2})));
    h.sync("bad").await;
    assert_eq!(h.pods().len(), 1);

    h.finish_active(1);
    h.sync("bad").await;
    assert_eq!(h.status("bad").failed, Some(1));
    assert!(h.active().is_empty(), "the replacement waits out the back-off");
    h.clock.advance(Duration::from_secs(9));
    h.sync("bad").await;
    assert!(h.active().is_empty(), "9 s < 10 s");
    h.clock.advance(Duration::from_secs(1));
    h.sync("bad").await;
    assert_eq!(h.active().len(), 1, "after 10 s");

    h.finish_active(1);
    h.clock.advance(Duration::from_secs(1));
    h.sync("bad").await;
    h.clock.advance(Duration::from_secs(18));
    h.sync("bad").await;
    assert!(h.active().is_empty(), "the second failure waits 20 s");
    h.clock.advance(Duration::from_secs(1));
    h.sync("bad").await;
    assert_eq!(h.active().len(), 1);

    h.finish_active(1);
    h.sync("bad").await;
    let st = h.status("bad");
    assert_eq!((st.failed, st.active), (Some(3), Some(0)));
    for type_ in ["FailureTarget", "Failed"] {
        let c = h.condition("bad", type_).unwrap();
        assert_eq!(c.reason.as_deref(), Some("BackoffLimitExceeded"), "{type_}");
        assert_eq!(c.message.as_deref(), Some("Job has reached the specified backoff limit"));
    }
    assert_eq!(st.completion_time, None, "only a Complete Job has a completion time");
    h.clock.advance(Duration::from_secs(3600));
    h.sync("bad").await;
    assert_eq!(h.pods().len(), 3, "no pod after the limit");
    let events = h.events.take();
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("BackoffLimitExceeded"));
}

#[tokio::test(start_paused = true)]
async fn the_back_off_requeues_the_job_for_when_it_ends() {
    let h = Harness::new();
    h.api.put(&job("bad", json!({"backoffLimit": 6})));
    h.sync("bad").await;
    h.finish_active(1);
    h.clock.advance(Duration::from_secs(4));
    h.sync("bad").await;
    // Paused tokio time: the delayed add becomes due after the remaining 6 s.
    let queue = h.ctrl.queue.clone();
    let delays = tokio::spawn(queue.clone().run_delays(tokio_util::sync::CancellationToken::new()));
    for _ in queue.queued() {
        let k = queue.get().await.unwrap();
        queue.done(&k);
    }
    tokio::time::sleep(Duration::from_millis(5_900)).await;
    assert!(queue.queued().is_empty(), "not before 6 s");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(queue.queued(), [Key::new("ns", "bad")]);
    delays.abort();
}

#[tokio::test(start_paused = true)]
async fn a_job_active_longer_than_its_deadline_fails_and_its_pods_are_deleted() {
    let h = Harness::new();
    h.api.put(&job(
        "slow",
        json!({"activeDeadlineSeconds": 30, "parallelism": 2, "completions": 4}),
    ));
    h.sync("slow").await;
    assert_eq!(h.active().len(), 2);
    h.clock.advance(Duration::from_secs(30));
    h.sync("slow").await;
    assert!(h.pods().is_empty(), "the active pods are deleted");
    let c = h.condition("slow", "FailureTarget").unwrap();
    assert_eq!(c.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(c.message.as_deref(), Some("Job was active longer than specified deadline"));
    h.sync("slow").await;
    let failed = h.condition("slow", "Failed").unwrap();
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_deref()),
        ("True", Some("DeadlineExceeded"))
    );
}

#[tokio::test(start_paused = true)]
async fn indexed_pods_carry_their_index_and_a_completed_index_is_not_run_again() {
    let h = Harness::new();
    h.api
        .put(&job("idx", json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3})));
    h.sync("idx").await;
    let mut pods = h.pods();
    pods.sort_by_key(|p| p.metadata.name.clone());
    assert_eq!(pods.len(), 3);
    for (i, p) in pods.iter().enumerate() {
        let name = p.metadata.name.as_deref().unwrap();
        assert!(name.starts_with(&format!("idx-{i}-")), "{name}");
        let i = i.to_string();
        assert_eq!(p.metadata.annotations.as_ref().unwrap()[COMPLETION_INDEX], i);
        assert_eq!(p.metadata.labels.as_ref().unwrap()[COMPLETION_INDEX], i);
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(format!("idx-{i}").as_str()));
        let env = &spec.containers[0].env.as_ref().unwrap()[0];
        assert_eq!(env.name, "JOB_COMPLETION_INDEX");
        assert_eq!(
            env.value_from.as_ref().unwrap().field_ref.as_ref().unwrap().field_path,
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
    }
    h.finish(pods[1].metadata.name.as_deref().unwrap(), 0);
    h.finish(pods[2].metadata.name.as_deref().unwrap(), 1);
    h.clock.advance(Duration::from_secs(10));
    h.sync("idx").await;
    let st = h.status("idx");
    assert_eq!(st.completed_indexes.as_deref(), Some("1"));
    assert_eq!((st.succeeded, st.failed), (Some(1), Some(1)));
    let active: Vec<String> = h
        .active()
        .iter()
        .map(|p| p.metadata.annotations.as_ref().unwrap()[COMPLETION_INDEX].clone())
        .collect();
    let mut active = active;
    active.sort();
    assert_eq!(active, ["0", "2"], "index 2 is run again, index 1 is not");
    h.finish_active(0);
    h.sync("idx").await;
    assert_eq!(h.status("idx").completed_indexes.as_deref(), Some("0-2"));
    assert!(h.condition("idx", "Complete").is_some());
}

#[tokio::test(start_paused = true)]
async fn the_pod_failure_policy_fails_the_job_ignores_or_counts_by_exit_code() {
    let h = Harness::new();
    let policy = json!({"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [7]}},
    ]});
    h.api.put(&job("pfp", json!({"backoffLimit": 0, "podFailurePolicy": policy})));
    h.sync("pfp").await;
    h.finish_active(7);
    h.sync("pfp").await;
    let st = h.status("pfp");
    assert_eq!(st.failed, Some(0), "an ignored failure is not counted");
    assert_eq!(h.active().len(), 1, "and replaced at once, without back-off");
    assert!(h.condition("pfp", "Failed").is_none());

    h.finish_active(42);
    h.sync("pfp").await;
    let failed = h.condition("pfp", "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("PodFailurePolicy"));
    let name = h
        .pods()
        .into_iter()
        .find(|p| {
            p.status.as_ref().and_then(|s| s.container_statuses.as_ref()).is_some_and(|c| {
                c[0].state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code == 42
            })
        })
        .unwrap()
        .metadata
        .name
        .unwrap();
    assert_eq!(
        failed.message.unwrap(),
        format!(
            "Container main for pod ns/{name} failed with exit code 42 matching FailJob rule at index 0"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_index_with_fail_index_or_its_own_limit_fails_the_job_with_failed_indexes() {
    let h = Harness::new();
    let policy = json!({"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}}]});
    h.api.put(&job(
        "per",
        json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2,
               "backoffLimitPerIndex": 1, "podFailurePolicy": policy}),
    ));
    h.sync("per").await;
    let pods = h.pods();
    let index = |p: &Pod| p.metadata.annotations.as_ref().unwrap()[COMPLETION_INDEX].clone();
    let zero = pods.iter().find(|p| index(p) == "0").unwrap().metadata.name.clone().unwrap();
    let one = pods.iter().find(|p| index(p) == "1").unwrap().metadata.name.clone().unwrap();
    assert_eq!(pods[0].metadata.annotations.as_ref().unwrap()[INDEX_FAILURE_COUNT], "0");
    h.finish(&zero, 3);
    h.finish(&one, 1);
    // Two failures since the last success: 20 s of back-off.
    h.clock.advance(Duration::from_secs(20));
    h.sync("per").await;
    assert_eq!(h.status("per").failed_indexes.as_deref(), Some("0"), "FailIndex");
    let retry = h.active();
    assert_eq!(retry.len(), 1);
    assert_eq!(index(&retry[0]), "1");
    assert_eq!(retry[0].metadata.annotations.as_ref().unwrap()[INDEX_FAILURE_COUNT], "1");
    h.finish_active(1);
    h.sync("per").await;
    let st = h.status("per");
    assert_eq!(st.failed_indexes.as_deref(), Some("0-1"), "index 1 used up its one retry");
    let failed = h.condition("per", "Failed").unwrap();
    assert_eq!(
        (failed.reason.as_deref(), failed.message.as_deref()),
        (Some("FailedIndexes"), Some("Job has failed indexes"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_suspended_job_runs_nothing_and_resuming_restarts_its_clock() {
    let h = Harness::new();
    h.api.put(&job("s", json!({"suspend": true, "activeDeadlineSeconds": 60})));
    h.sync("s").await;
    assert!(h.pods().is_empty());
    let c = h.condition("s", "Suspended").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", Some("JobSuspended")));
    assert_eq!(h.status("s").start_time, None);
    h.clock.advance(Duration::from_secs(600));
    h.api.edit::<Job>("ns", "s", |j| j.spec.as_mut().unwrap().suspend = Some(false));
    h.sync("s").await;
    assert_eq!(h.active().len(), 1);
    let c = h.condition("s", "Suspended").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("JobResumed")));
    assert_eq!(h.status("s").start_time.map(|t| t.0), Some(h.clock.now()));
    assert!(h.condition("s", "FailureTarget").is_none(), "the deadline counts from the resume");

    h.api.edit::<Job>("ns", "s", |j| j.spec.as_mut().unwrap().suspend = Some(true));
    h.sync("s").await;
    assert!(h.active().is_empty(), "suspending deletes the active pods");
    assert_eq!(h.status("s").failed, Some(0));
    let reasons: Vec<String> = h.events.take().into_iter().map(|e| e.1).collect();
    assert!(
        reasons.contains(&"Suspended".to_string()) && reasons.contains(&"Resumed".to_string()),
        "{reasons:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn pods_that_cannot_be_created_get_failed_create_and_the_sync_fails_for_back_off() {
    let h = Harness::new();
    h.api.put(&job("q", json!({"parallelism": 3, "completions": 3})));
    h.deliver();
    h.api.fail_next(Verb::Create, "Pod");
    let err = h.ctrl.sync(&Key::new("ns", "q")).await.unwrap_err();
    assert!(err.to_string().contains("exceeded quota"), "{err}");
    let events = h.events.take();
    assert_eq!(events.len(), 1, "slow start: one create tried, not three");
    assert_eq!(events[0].1, "FailedCreate");
    assert!(events[0].2.starts_with("Error creating: "), "{}", events[0].2);
    h.sync("q").await;
    assert_eq!(h.pods().len(), 3, "the next sync creates them");
}

#[tokio::test(start_paused = true)]
async fn a_job_managed_by_another_controller_is_left_alone_and_orphans_lose_the_finalizer() {
    let h = Harness::new();
    h.api.put(&job("ext", json!({"managedBy": "example.com/other"})));
    h.sync("ext").await;
    assert!(h.pods().is_empty());
    assert!(h.job("ext").status.is_none());

    h.api.put(&job("gone", json!({})));
    h.sync("gone").await;
    let pod = h.pods()[0].metadata.name.clone().unwrap();
    h.api.remove::<Job>("ns", "gone");
    h.sync("gone").await;
    let p: Pod = h.api.object("ns", &pod).unwrap();
    assert!(p.metadata.finalizers.unwrap_or_default().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_success_policy_completes_an_indexed_job_early() {
    let h = Harness::new();
    h.api.put(&job(
        "leader",
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3,
               "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
    ));
    h.sync("leader").await;
    let zero = h
        .pods()
        .into_iter()
        .find(|p| p.metadata.annotations.as_ref().unwrap()[COMPLETION_INDEX] == "0")
        .unwrap();
    h.finish(zero.metadata.name.as_deref().unwrap(), 0);
    h.sync("leader").await;
    let met = h.condition("leader", "SuccessCriteriaMet").unwrap();
    assert_eq!(
        (met.reason.as_deref(), met.message.as_deref()),
        (Some("SuccessPolicy"), Some("Matched rules at index 0"))
    );
    assert!(h.active().is_empty(), "the other indexes are stopped");
    h.sync("leader").await;
    assert!(h.condition("leader", "Complete").is_some());
}
