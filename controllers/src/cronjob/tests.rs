//! The CronJob controller against the fake apiserver with a fake clock: minutes pass by
//! moving the clock, never by sleeping.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::clock::FakeClock;
use crate::events::MemoryRecorder;
use crate::fake::FakeApi;
use crate::metrics::QueueMetrics;

struct Harness {
    api: Arc<FakeApi>,
    cron_jobs: Arc<Informer<CronJob>>,
    jobs: Arc<Informer<Job>>,
    ctrl: Arc<CronJobController<FakeApi>>,
    events: Arc<MemoryRecorder>,
    clock: Arc<FakeClock>,
}

fn t0() -> jiff::Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

impl Harness {
    fn new() -> Self {
        let api = Arc::new(FakeApi::default());
        let (cron_jobs, jobs) = (Arc::new(Informer::default()), Arc::new(Informer::default()));
        let events = Arc::new(MemoryRecorder::default());
        let clock = Arc::new(FakeClock::new(t0()));
        let ctrl = Arc::new(CronJobController {
            client: api.clone(),
            recorder: events.clone(),
            cron_jobs: cron_jobs.cache(),
            jobs: jobs.cache(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
            clock: clock.clone(),
        });
        ctrl.register(&cron_jobs, &jobs);
        Self { api, cron_jobs, jobs, ctrl, events, clock }
    }

    async fn sync(&self, name: &str) {
        self.api.deliver(&self.cron_jobs);
        self.api.deliver(&self.jobs);
        self.ctrl.sync(&Key::new("ns", name)).await.unwrap();
        self.api.deliver(&self.cron_jobs);
        self.api.deliver(&self.jobs);
    }

    /// Moves the clock to `hh:mm:ss` on the first day and syncs.
    async fn at(&self, name: &str, time: &str) {
        self.clock.set(format!("2026-01-01T{time}Z").parse().unwrap());
        self.sync(name).await;
    }

    fn job_names(&self) -> Vec<String> {
        let mut n: Vec<String> = self.api.list::<Job>().into_iter().map(|j| j.name_any()).collect();
        n.sort();
        n
    }

    fn status(&self, name: &str) -> CronJobStatus {
        self.api.object::<CronJob>("ns", name).unwrap().status.unwrap_or_default()
    }

    /// The Job finishes (`Complete` or `Failed`) at the clock's time.
    fn finish(&self, job: &str, complete: bool) {
        let now = self.clock.now().to_string();
        self.api.edit::<Job>("ns", job, |j| {
            j.status = Some(
                serde_json::from_value(json!({
                    "startTime": now,
                    "completionTime": if complete { json!(now) } else { json!(null) },
                    "conditions": [{"type": if complete { "Complete" } else { "Failed" },
                        "status": "True", "lastTransitionTime": now}]
                }))
                .unwrap(),
            );
        });
    }

    fn reasons(&self) -> Vec<String> {
        self.events.take().into_iter().map(|e| e.1).collect()
    }
}

fn cron_job(name: &str, schedule: &str, extra: serde_json::Value) -> CronJob {
    let mut spec = json!({
        "schedule": schedule,
        "concurrencyPolicy": "Allow",
        "jobTemplate": {"metadata": {"labels": {"app": name}}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.35"}]}}}}
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": t0().to_string()},
        "spec": spec,
    }))
    .unwrap()
}

/// `<name>-<minutes since the epoch>` of `hh:mm` on the first day.
fn job_at(name: &str, hhmm: &str) -> String {
    job_name(name, format!("2026-01-01T{hhmm}:00Z").parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_cron_job_every_minute_creates_a_job_each_minute_and_keeps_its_history_limit() {
    let h = Harness::new();
    h.api.put(&cron_job("every", "* * * * *", json!({"successfulJobsHistoryLimit": 2})));
    h.at("every", "00:00:30").await;
    assert!(h.job_names().is_empty(), "nothing due before 00:01");

    h.at("every", "00:01:02").await;
    let first = job_at("every", "00:01");
    assert_eq!(h.job_names(), std::slice::from_ref(&first));
    assert_eq!(first, format!("every-{}", (t0().as_second() + 60) / 60));
    let job: Job = h.api.object("ns", &first).unwrap();
    assert_eq!(
        job.metadata.annotations.clone().unwrap()[SCHEDULED_TIMESTAMP],
        "2026-01-01T00:01:00+00:00"
    );
    assert_eq!(job.metadata.labels.clone().unwrap()["app"], "every");
    let owner = controller_of(&job.metadata).unwrap();
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("CronJob", "every"));
    let st = h.status("every");
    assert_eq!(st.active.as_ref().map(Vec::len), Some(1));
    assert_eq!(st.last_schedule_time.map(|t| t.0.to_string()), Some("2026-01-01T00:01:00Z".into()));
    assert_eq!(h.reasons(), ["SuccessfulCreate"]);

    h.at("every", "00:01:40").await;
    assert_eq!(h.job_names().len(), 1, "one Job per scheduled time");

    for minute in 2..=5 {
        let prev = job_at("every", &format!("00:{:02}", minute - 1));
        h.finish(&prev, true);
        h.at("every", &format!("00:{minute:02}:01")).await;
    }
    let st = h.status("every");
    assert_eq!(st.active.unwrap()[0].name.as_deref(), Some(job_at("every", "00:05").as_str()));
    assert_eq!(
        st.last_successful_time.map(|t| t.0.to_string()),
        Some("2026-01-01T00:04:01Z".into()),
        "the 00:04 run finished at 00:04:01"
    );
    assert_eq!(
        h.job_names(),
        [job_at("every", "00:03"), job_at("every", "00:04"), job_at("every", "00:05")],
        "two finished Jobs kept, the older ones deleted"
    );
    assert!(h.reasons().contains(&"SawCompletedJob".to_string()));
}

#[tokio::test(start_paused = true)]
async fn forbid_skips_a_run_while_one_is_active_and_replace_replaces_it() {
    let h = Harness::new();
    h.api.put(&cron_job("f", "* * * * *", json!({"concurrencyPolicy": "Forbid"})));
    h.at("f", "00:01:00").await;
    h.reasons();
    h.at("f", "00:02:00").await;
    assert_eq!(h.job_names(), [job_at("f", "00:01")], "the 00:02 run is skipped");
    assert_eq!(h.reasons(), ["JobAlreadyActive"]);
    h.finish(&job_at("f", "00:01"), true);
    h.at("f", "00:03:00").await;
    assert_eq!(h.job_names().len(), 2, "free again at 00:03");

    h.api.put(&cron_job("r", "* * * * *", json!({"concurrencyPolicy": "Replace"})));
    h.at("r", "00:01:00").await;
    h.at("r", "00:02:00").await;
    let names: Vec<String> = h.job_names().into_iter().filter(|n| n.starts_with("r-")).collect();
    assert_eq!(names, [job_at("r", "00:02")], "the 00:01 run was deleted");
    assert_eq!(h.status("r").active.unwrap().len(), 1);
    let log = h.api.take_actions();
    assert!(
        log.iter().any(|a| a == &format!("delete Job ns/{} Background", job_at("r", "00:01"))),
        "{log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn missed_schedules_start_only_the_latest_run_unless_past_the_starting_deadline() {
    let h = Harness::new();
    h.api.put(&cron_job("late", "* * * * *", json!({})));
    h.at("late", "00:05:30").await;
    assert_eq!(h.job_names(), [job_at("late", "00:05")], "five missed: only the latest runs");

    h.api.put(&cron_job("strict", "* * * * *", json!({"startingDeadlineSeconds": 10})));
    h.reasons();
    h.at("strict", "00:07:30").await;
    assert!(!h.job_names().iter().any(|n| n.starts_with("strict-")), "00:07 was 30 s ago > 10 s");
    assert_eq!(h.reasons(), ["MissSchedule"]);
    h.at("strict", "00:08:05").await;
    assert!(h.job_names().contains(&job_at("strict", "00:08")), "within the deadline");
}

#[tokio::test(start_paused = true)]
async fn more_than_a_hundred_missed_times_are_reported_and_the_latest_runs() {
    let h = Harness::new();
    h.api.put(&cron_job("old", "* * * * *", json!({})));
    h.clock.set("2026-01-03T00:00:30Z".parse().unwrap());
    h.sync("old").await;
    let reasons = h.reasons();
    assert!(reasons.contains(&"TooManyMissedTimes".to_string()), "{reasons:?}");
    assert_eq!(h.job_names(), [job_name("old", "2026-01-03T00:00:00Z".parse().unwrap())]);
}

#[tokio::test(start_paused = true)]
async fn a_suspended_cron_job_starts_nothing_and_a_time_zone_moves_the_schedule() {
    let h = Harness::new();
    h.api.put(&cron_job("s", "* * * * *", json!({"suspend": true})));
    h.at("s", "00:03:00").await;
    assert!(h.job_names().is_empty());

    h.api.put(&cron_job("tokyo", "0 9 * * *", json!({"timeZone": "Asia/Tokyo"})));
    h.clock.set("2026-01-01T23:59:00Z".parse().unwrap());
    h.sync("tokyo").await;
    assert!(h.job_names().is_empty());
    h.clock.advance(Duration::from_secs(61));
    h.sync("tokyo").await;
    let name = job_name("tokyo", "2026-01-02T00:00:00Z".parse().unwrap());
    assert_eq!(h.job_names(), std::slice::from_ref(&name));
    let job: Job = h.api.object("ns", &name).unwrap();
    assert_eq!(job.metadata.annotations.unwrap()[SCHEDULED_TIMESTAMP], "2026-01-02T09:00:00+09:00");
}

#[tokio::test(start_paused = true)]
async fn failed_jobs_beyond_the_failed_history_limit_are_deleted() {
    let h = Harness::new();
    h.api.put(&cron_job("f", "* * * * *", json!({})));
    for minute in 1..=3 {
        h.at("f", &format!("00:{minute:02}:00")).await;
        h.finish(&job_at("f", &format!("00:{minute:02}")), false);
        h.clock.advance(Duration::from_secs(1));
        h.sync("f").await;
    }
    assert_eq!(h.job_names(), [job_at("f", "00:03")], "failedJobsHistoryLimit defaults to 1");
    assert_eq!(h.status("f").active, None);
    assert_eq!(h.status("f").last_successful_time, None);
}

#[tokio::test(start_paused = true)]
async fn the_next_run_is_requeued_for_its_time() {
    let h = Harness::new();
    h.api.put(&cron_job("q", "*/5 * * * *", json!({})));
    h.at("q", "00:01:00").await;
    let queue = h.ctrl.queue.clone();
    for _ in queue.queued() {
        let k = queue.get().await.unwrap();
        queue.done(&k);
    }
    let delays = tokio::spawn(queue.clone().run_delays(tokio_util::sync::CancellationToken::new()));
    tokio::time::sleep(Duration::from_secs(239)).await;
    assert!(queue.queued().is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(queue.queued(), [Key::new("ns", "q")], "requeued for 00:05");
    delays.abort();
}
