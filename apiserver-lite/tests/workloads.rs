//! Workloads as upstream's strategies keep them, over a real SQLite file: defaults, a Job's
//! generated selector and pod labels, what an update may change, and the status rules a
//! controller's writes meet.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use apiserver_lite::admission::{Admission, Plugin};
use apiserver_lite::objects::FieldValidation;
use apiserver_lite::registry::{Registry, WriteOptions};
use apiserver_lite::resources::{ResourceType, find};
use apiserver_lite::storage::Store;
use apiserver_lite::storage::sqlite::SqliteBackend;
use serde_json::{Value, json};

const W: WriteOptions = WriteOptions { dry_run: false, validation: FieldValidation::Strict };
const NS: Option<&str> = Some("default");

async fn registry(dir: &std::path::Path) -> Arc<Registry> {
    let store = Store::open(Arc::new(SqliteBackend::open(&dir.join("db")).unwrap())).unwrap();
    // No controller-manager makes `default` ServiceAccounts here: pods are admitted without
    // the ServiceAccount plugin, as upstream's integration tests run.
    let admission = Admission::default().without(Plugin::ServiceAccount);
    let r = Arc::new(Registry::new(Arc::new(store)).with_admission(admission));
    r.bootstrap().await.unwrap();
    r
}

fn res(group: &str, name: &str) -> &'static ResourceType {
    find(group, "v1", name).unwrap()
}

fn pod_spec(restart: &str) -> Value {
    json!({"restartPolicy": restart, "containers": [{"name": "c", "image": "busybox:1.35"}]})
}

fn job(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"template": {"spec": pod_spec("Never")}}})
}

fn causes(e: &apiserver_lite::errors::ApiError) -> Vec<String> {
    e.details.as_ref().unwrap()["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn a_job_gets_upstreams_defaults_and_a_selector_for_its_own_pods() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;
    let jobs = res("batch", "jobs");
    let (j, _) = r.create(jobs, NS, job("pi"), W).await.unwrap();
    let uid = j["metadata"]["uid"].as_str().unwrap();
    let spec = &j["spec"];
    assert_eq!(
        (spec["parallelism"].as_i64(), spec["completions"].as_i64(), spec["backoffLimit"].as_i64()),
        (Some(1), Some(1), Some(6))
    );
    assert_eq!(
        (
            spec["completionMode"].as_str(),
            spec["suspend"].as_bool(),
            spec["manualSelector"].as_bool(),
            spec["podReplacementPolicy"].as_str()
        ),
        (Some("NonIndexed"), Some(false), Some(false), Some("TerminatingOrFailed"))
    );
    assert_eq!(
        spec["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    let want = json!({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi",
                      "controller-uid": uid, "job-name": "pi"});
    assert_eq!(spec["template"]["metadata"]["labels"], want);
    assert_eq!(j["metadata"]["labels"], want, "a Job carries its template's labels");
    assert_eq!(
        spec["template"]["spec"]["dnsPolicy"], "ClusterFirst",
        "the pod template is defaulted"
    );
    assert_eq!(j["status"], json!({}));

    // Parallelism without completions leaves completions unset; per-index backoff lifts the
    // Job-wide limit.
    let mut parallel = job("work-queue");
    parallel["spec"]["parallelism"] = json!(3);
    let (p, _) = r.create(jobs, NS, parallel, W).await.unwrap();
    assert_eq!(
        (p["spec"]["completions"].as_i64(), p["spec"]["parallelism"].as_i64()),
        (None, Some(3))
    );
    let mut indexed = job("indexed");
    indexed["spec"].as_object_mut().unwrap().extend(
        json!({"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1})
            .as_object()
            .unwrap()
            .clone(),
    );
    let (i, _) = r.create(jobs, NS, indexed, W).await.unwrap();
    assert_eq!(i["spec"]["backoffLimit"], i64::from(i32::MAX));

    // A manual selector is the user's, and must match the template.
    let mut manual = job("manual");
    manual["spec"]["manualSelector"] = json!(true);
    manual["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
    let err = r.create(jobs, NS, manual.clone(), W).await.unwrap_err();
    assert!(
        causes(&err).contains(&"spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`".to_string()),
        "{:?}",
        causes(&err)
    );
    manual["spec"]["template"]["metadata"] = json!({"labels": {"app": "x"}});
    let (m, _) = r.create(jobs, NS, manual, W).await.unwrap();
    assert_eq!(m["spec"]["selector"], json!({"matchLabels": {"app": "x"}}));
}

#[tokio::test]
async fn a_jobs_template_selector_and_completions_never_change_and_its_status_moves_forward() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;
    let jobs = res("batch", "jobs");
    let (j, _) = r.create(jobs, NS, job("pi"), W).await.unwrap();
    let mut changed = j.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.36");
    changed["spec"]["completions"] = json!(2);
    let err = r.update(jobs, NS, "pi", None, changed, W).await.unwrap_err();
    let c = causes(&err);
    assert!(
        c.iter().any(|c| c.starts_with("spec.template: Invalid value: {")
            && c.ends_with("field is immutable")),
        "{c:?}"
    );
    assert!(
        c.contains(&"spec.completions: Invalid value: 2: field is immutable".to_string()),
        "{c:?}"
    );
    // What may change does, and bumps the generation.
    let mut parallel = j.clone();
    parallel["spec"]["parallelism"] = json!(2);
    let (p, _) = r.update(jobs, NS, "pi", None, parallel, W).await.unwrap();
    assert_eq!(p["metadata"]["generation"], 2);

    // Status: the controller's write must be whole.
    let status = |s: Value| {
        let mut o = r.get(jobs, NS, "pi").unwrap();
        o["status"] = s;
        o
    };
    let complete = json!({"type": "Complete", "status": "True"});
    let err = r
        .update(
            jobs,
            NS,
            "pi",
            Some("status"),
            status(json!({"succeeded": 1, "conditions": [complete]})),
            W,
        )
        .await
        .unwrap_err();
    let c = causes(&err);
    for want in [
        "status.completionTime: Required value: completionTime is required for Complete jobs",
        "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        "status.startTime: Required value: startTime is required for finished job",
    ] {
        assert!(c.contains(&want.to_string()), "{want} missing from {c:?}");
    }
    let done = json!({"succeeded": 1, "startTime": "2024-01-01T00:00:00Z", "completionTime": "2024-01-01T00:00:05Z",
                      "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, complete]});
    r.update(jobs, NS, "pi", Some("status"), status(done), W).await.unwrap();
    let back = json!({"succeeded": 0, "startTime": "2024-01-01T00:00:00Z", "completionTime": "2024-01-01T00:00:05Z",
                      "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]});
    let err = r.update(jobs, NS, "pi", Some("status"), status(back), W).await.unwrap_err();
    let c = causes(&err);
    assert!(
        c.contains(
            &"status.succeeded: Invalid value: 0: cannot decrease the succeeded counter"
                .to_string()
        ),
        "{c:?}"
    );
    assert!(c.contains(&"status.conditions: Invalid value: cannot disable the terminal Complete=True condition".to_string()), "{c:?}");
}

#[tokio::test]
async fn a_cronjob_gets_upstreams_defaults_and_its_schedule_and_zone_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;
    let cronjobs = res("batch", "cronjobs");
    let cj = |schedule: &str| {
        json!({"metadata": {"name": "tick"}, "spec": {"schedule": schedule,
               "jobTemplate": {"spec": {"template": {"spec": pod_spec("OnFailure")}}}}})
    };
    let (c, _) = r.create(cronjobs, NS, cj("*/1 * * * *"), W).await.unwrap();
    let spec = &c["spec"];
    assert_eq!(
        (
            spec["concurrencyPolicy"].as_str(),
            spec["suspend"].as_bool(),
            spec["successfulJobsHistoryLimit"].as_i64(),
            spec["failedJobsHistoryLimit"].as_i64()
        ),
        (Some("Allow"), Some(false), Some(3), Some(1))
    );
    let template = &spec["jobTemplate"]["spec"];
    assert!(template.get("backoffLimit").is_none(), "the Jobs it makes get the Job defaults");
    assert_eq!(template["template"]["spec"]["schedulerName"], "default-scheduler");

    let mut zoned = cj("0 9 * * mon-fri");
    zoned["metadata"]["name"] = json!("zoned");
    zoned["spec"]["timeZone"] = json!("Europe/Paris");
    r.create(cronjobs, NS, zoned, W).await.unwrap();
    let cases = [
        (
            "61 * * * *",
            None,
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
        ),
        (
            "@weekly",
            Some("Mars/Olympus"),
            "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
        ),
        (
            "@weekly",
            Some("local"),
            "spec.timeZone: Invalid value: \"local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ),
        (
            "TZ=UTC 0 * * * *",
            None,
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ),
    ];
    for (i, (schedule, tz, want)) in cases.into_iter().enumerate() {
        let mut bad = cj(schedule);
        bad["metadata"]["name"] = json!(format!("bad-{i}"));
        if let Some(tz) = tz {
            bad["spec"]["timeZone"] = json!(tz);
        }
        let err = r.create(cronjobs, NS, bad, W).await.unwrap_err();
        assert!(causes(&err).contains(&want.to_string()), "{want} not in {:?}", causes(&err));
    }
}

#[tokio::test]
async fn apps_workloads_get_upstreams_defaults_and_keep_their_selector() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec("Always")});
    let body = |name: &str| json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}});
    let deploys = res("apps", "deployments");
    let (d, _) = r.create(deploys, NS, body("web"), W).await.unwrap();
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    assert_eq!(
        (
            d["spec"]["replicas"].as_i64(),
            d["spec"]["revisionHistoryLimit"].as_i64(),
            d["spec"]["progressDeadlineSeconds"].as_i64()
        ),
        (Some(1), Some(10), Some(600))
    );
    let rs = res("apps", "replicasets");
    let (s, _) = r.create(rs, NS, body("web-1"), W).await.unwrap();
    assert_eq!(s["spec"]["replicas"], 1);
    assert!(s["spec"].get("revisionHistoryLimit").is_none(), "ReplicaSets have none");
    let ds = res("apps", "daemonsets");
    let (a, _) = r.create(ds, NS, body("agent"), W).await.unwrap();
    assert_eq!(
        a["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})
    );
    assert_eq!(a["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "1");
    let mut on_delete = body("agent-2");
    on_delete["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let (o, _) = r.create(ds, NS, on_delete, W).await.unwrap();
    assert_eq!(o["spec"]["updateStrategy"], json!({"type": "OnDelete"}));

    // A changed template bumps the DaemonSet's template generation; a changed selector is
    // refused on all three.
    let mut newer = a.clone();
    newer["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.36");
    let (n, _) = r.update(ds, NS, "agent", None, newer, W).await.unwrap();
    assert_eq!(n["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "2");
    for (res, name, obj) in [(deploys, "web", d), (rs, "web-1", s), (ds, "agent", n)] {
        let mut moved = obj.clone();
        moved["spec"]["selector"] = json!({"matchLabels": {"app": "web", "tier": "x"}});
        moved["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
        let err = r.update(res, NS, name, None, moved, W).await.unwrap_err();
        assert_eq!(
            causes(&err),
            [
                "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"x\"}}: field is immutable"
            ],
            "{}",
            res.name
        );
    }
    // A Deployment's annotations are part of what is wanted: a change bumps its generation.
    let mut annotated = r.get(deploys, NS, "web").unwrap();
    annotated["metadata"]["annotations"] = json!({"kubernetes.io/change-cause": "v2"});
    let (a2, _) = r.update(deploys, NS, "web", None, annotated, W).await.unwrap();
    assert_eq!(a2["metadata"]["generation"], 2);
}
