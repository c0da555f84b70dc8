//! The real kubectl v1.35 against apiserver-lite for the workload commands the controllers
//! issue needs: Jobs and CronJobs (`create job`, `create cronjob`, `create job --from`, `get`
//! with and without `-o wide`), `scale`, the `rollout` family over ReplicaSets the test makes as
//! a Deployment controller would, `delete --cascade`, and bad input refused with upstream's
//! messages. No kubelet or controller runs: the test plays the garbage collector itself.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use e2e::apiserver::{ApiServer, KubectlRun as Run, kubectl_binary};

fn k(server: &ApiServer, args: &[&str]) -> Run {
    server.kubectl_run(args).unwrap()
}

/// Runs kubectl and requires success, returning stdout.
fn ok(server: &ApiServer, args: &[&str]) -> String {
    let r = k(server, args);
    assert!(
        r.ok,
        "kubectl {args:?} failed:\n{}\n{}\napiserver log:\n{}",
        r.out,
        r.err,
        server.log_tail(15)
    );
    r.out
}

/// Runs kubectl and requires it to fail, returning stderr.
fn fails(server: &ApiServer, args: &[&str]) -> String {
    let r = k(server, args);
    assert!(!r.ok, "kubectl {args:?} should have failed:\n{}", r.out);
    r.err
}

/// A table's rows, each split on whitespace.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// Polls `probe` every 100 ms for up to `within`.
fn wait_until(what: &str, within: Duration, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !probe() {
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// kubectl started in the background (for a delete that waits); killed if the test fails
/// before it is waited for.
struct Background(Option<Child>);

impl Background {
    fn wait(mut self) -> std::process::Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(server: &ApiServer, args: &[&str]) -> Background {
    let child = std::process::Command::new(kubectl_binary().unwrap())
        .args(args)
        .env("KUBECONFIG", server.kubeconfig())
        .env("HOME", server.dir().join("home"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Background(Some(child))
}

#[test]
fn kubectl_creates_and_lists_jobs_and_cronjobs() {
    let server = ApiServer::start().unwrap();
    assert_eq!(
        ok(&server, &["create", "job", "x", "--image=busybox:1.35"]),
        "job.batch/x created\n"
    );
    assert_eq!(
        ok(
            &server,
            &["create", "cronjob", "tick", "--image=busybox:1.35", "--schedule=*/1 * * * *"]
        ),
        "cronjob.batch/tick created\n"
    );
    assert_eq!(
        ok(&server, &["create", "job", "y", "--from=cronjob/tick"]),
        "job.batch/y created\n"
    );
    let owner = ok(
        &server,
        &[
            "get",
            "job",
            "y",
            "-o",
            "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.annotations}",
        ],
    );
    assert!(
        owner.starts_with("CronJob/tick ") && owner.contains("cronjob.kubernetes.io/instantiate"),
        "{owner}"
    );
    let uid = ok(&server, &["get", "job", "x", "-o", "jsonpath={.metadata.uid}"]);
    let selector = ok(&server, &["get", "job", "x", "-o", "jsonpath={.spec.selector.matchLabels}"]);
    assert_eq!(selector, format!("{{\"batch.kubernetes.io/controller-uid\":\"{uid}\"}}"));
    let labels = ok(
        &server,
        &[
            "get",
            "job",
            "x",
            "-o",
            "jsonpath={.spec.template.metadata.labels.job-name} {.spec.backoffLimit} {.spec.template.spec.restartPolicy}",
        ],
    );
    assert_eq!(labels, "x 6 Never");

    let both = rows(&ok(&server, &["get", "jobs,cronjobs"]));
    assert_eq!(both[0], ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]);
    assert_eq!(&both[1][..3], ["job.batch/x", "Running", "0/1"]);
    let cj_header = both.iter().position(|r| r[0] == "NAME" && r.len() > 5).unwrap();
    assert_eq!(
        both[cj_header].join(" "),
        "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE"
    );
    assert_eq!(
        &both[cj_header + 1][..7],
        ["cronjob.batch/tick", "*/1", "*", "*", "*", "*", "<none>"]
    );
    let wide = rows(&ok(&server, &["get", "jobs", "-o", "wide"]));
    assert_eq!(
        wide[0],
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    );
    // DURATION is empty until the Job starts: read the wide cells from the end.
    let x = &wide[1];
    assert_eq!(&x[x.len() - 3..x.len() - 1], ["x", "busybox:1.35"]);
    assert_eq!(x[x.len() - 1], format!("batch.kubernetes.io/controller-uid={uid}"));
    let cj_wide = ok(&server, &["get", "cj", "-o", "wide"]);
    assert!(
        cj_wide.lines().next().unwrap().ends_with("CONTAINERS   IMAGES         SELECTOR"),
        "{cj_wide}"
    );

    // Bad input is refused as upstream words it.
    let err = fails(
        &server,
        &["create", "cronjob", "bad", "--image=busybox:1.35", "--schedule=61 * * * *"],
    );
    assert!(
        err.contains("CronJob \"bad\" is invalid: spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"),
        "{err}"
    );
    let err = fails(
        &server,
        &["create", "cronjob", "bad", "--image=busybox:1.35", "--schedule=@fortnightly"],
    );
    assert!(err.contains("unrecognized descriptor: @fortnightly"), "{err}");
    let zone = server.dir().join("zone.yaml");
    std::fs::write(
        &zone,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: mars\nspec:\n  schedule: \"@hourly\"\n  timeZone: Mars/Olympus\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: c\n            image: busybox:1.35\n",
    )
    .unwrap();
    let err = fails(&server, &["create", "-f", zone.to_str().unwrap()]);
    assert!(
        err.contains(
            "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"
        ),
        "{err}"
    );
    // kubectl's Job generator asks for Never; a manifest asking for Always is refused.
    let manifest = server.dir().join("always.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: always\nspec:\n  template:\n    spec:\n      restartPolicy: Always\n      containers:\n      - name: c\n        image: busybox:1.35\n",
    )
    .unwrap();
    let err = fails(&server, &["create", "-f", manifest.to_str().unwrap()]);
    assert!(
        err.contains("spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""),
        "{err}"
    );

    // The other generators whose protobuf bodies this server converts.
    assert_eq!(
        ok(&server, &["create", "service", "clusterip", "web", "--tcp=80:8080"]),
        "service/web created\n"
    );
    assert_eq!(
        ok(&server, &["get", "service", "web", "-o", "jsonpath={.spec.ports[0].targetPort}"]),
        "8080"
    );

    // kubectl deletes Jobs in the background by default: gone at once, no orphaning warning.
    let r = k(&server, &["delete", "job", "x"]);
    assert!(r.ok && !r.err.contains("child pods are preserved"), "{}\n{}", r.out, r.err);
    assert!(fails(&server, &["get", "job", "x"]).contains("NotFound"));
}

/// A ReplicaSet of `deploy` at `revision`, as the Deployment controller makes them.
fn replica_set(deploy_uid: &str, revision: u32, image: &str, hash: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-{hash}
  labels: {{app: web, pod-template-hash: \"{hash}\"}}
  annotations: {{deployment.kubernetes.io/revision: \"{revision}\"}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: Deployment, name: web, uid: {deploy_uid}, controller: true, blockOwnerDeletion: true}}
spec:
  replicas: 0
  selector:
    matchLabels: {{app: web, pod-template-hash: \"{hash}\"}}
  template:
    metadata:
      labels: {{app: web, pod-template-hash: \"{hash}\"}}
    spec:
      containers:
      - name: busybox
        image: {image}
"
    )
}

#[test]
fn kubectl_scales_and_rolls_deployments_and_deletes_with_each_cascade() {
    let server = ApiServer::start().unwrap();
    assert_eq!(
        ok(&server, &["create", "deployment", "web", "--image=busybox:1.36", "--replicas=2"]),
        "deployment.apps/web created\n"
    );
    assert_eq!(
        ok(&server, &["scale", "deployment", "web", "--replicas=3"]),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(ok(&server, &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "3");
    let uid = ok(&server, &["get", "deployment", "web", "-o", "jsonpath={.metadata.uid}"]);
    let file = server.dir().join("rs.yaml");
    let both =
        [replica_set(&uid, 1, "busybox:1.35", "old"), replica_set(&uid, 2, "busybox:1.36", "new")];
    std::fs::write(&file, both.join("---\n")).unwrap();
    let created = ok(&server, &["create", "-f", file.to_str().unwrap()]);
    assert_eq!(created, "replicaset.apps/web-old created\nreplicaset.apps/web-new created\n");
    assert_eq!(
        ok(&server, &["scale", "rs", "web-old", "--replicas=1"]),
        "replicaset.apps/web-old scaled\n"
    );

    let history = rows(&ok(&server, &["rollout", "history", "deployment", "web"]));
    assert_eq!(history[0], ["deployment.apps/web"]);
    assert_eq!(history[1], ["REVISION", "CHANGE-CAUSE"]);
    assert_eq!(history[2..], [vec!["1", "<none>"], vec!["2", "<none>"]]);
    let one = ok(&server, &["rollout", "history", "deployment", "web", "--revision=1"]);
    assert!(one.contains("Image:") && one.contains("busybox:1.35"), "{one}");

    assert_eq!(
        ok(&server, &["rollout", "pause", "deployment", "web"]),
        "deployment.apps/web paused\n"
    );
    assert_eq!(ok(&server, &["get", "deployment", "web", "-o", "jsonpath={.spec.paused}"]), "true");
    let err = fails(&server, &["rollout", "undo", "deployment", "web"]);
    assert!(err.contains("you cannot rollback a paused deployment"), "{err}");
    assert_eq!(
        ok(&server, &["rollout", "resume", "deployment", "web"]),
        "deployment.apps/web resumed\n"
    );
    assert_eq!(ok(&server, &["get", "deployment", "web", "-o", "jsonpath={.spec.paused}"]), "");
    assert_eq!(
        ok(&server, &["rollout", "undo", "deployment", "web"]),
        "deployment.apps/web rolled back\n"
    );
    let image = ok(
        &server,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image} {.spec.template.metadata.labels}",
        ],
    );
    assert_eq!(
        image, "busybox:1.35 {\"app\":\"web\"}",
        "the template of revision 1, without its hash label"
    );
    assert_eq!(
        ok(&server, &["rollout", "restart", "deployment", "web"]),
        "deployment.apps/web restarted\n"
    );
    let restarted = ok(
        &server,
        &["get", "deployment", "web", "-o", "jsonpath={.spec.template.metadata.annotations}"],
    );
    assert!(restarted.contains("kubectl.kubernetes.io/restartedAt"), "{restarted}");

    // A ReplicaSet whose selector does not match its template, and a Deployment that may
    // neither surge nor go unavailable, are refused.
    let bad = server.dir().join("bad.yaml");
    std::fs::write(
        &bad,
        replica_set(&uid, 3, "busybox:1.35", "bad").replace(
            "labels: {app: web, pod-template-hash: \"bad\"}\n    spec",
            "labels: {app: other}\n    spec",
        ),
    )
    .unwrap();
    let err = fails(&server, &["create", "-f", bad.to_str().unwrap()]);
    assert!(err.contains("spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"), "{err}");
    let err = fails(
        &server,
        &[
            "patch",
            "deployment",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":0}}}}"#,
        ],
    );
    assert!(err.contains("spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"), "{err}");

    // --cascade=orphan: the Deployment waits with the orphan finalizer; the garbage collector
    // (this test) removes it, and the deletion completes.
    let r = k(&server, &["delete", "deployment", "web", "--cascade=orphan", "--wait=false"]);
    assert!(r.ok, "{}", r.err);
    assert_eq!(
        ok(&server, &["get", "deployment", "web", "-o", "jsonpath={.metadata.finalizers}"]),
        "[\"orphan\"]"
    );
    assert!(
        !ok(&server, &["get", "deployment", "web", "-o", "jsonpath={.metadata.deletionTimestamp}"])
            .is_empty()
    );
    ok(
        &server,
        &[
            "patch",
            "deployment",
            "web",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    assert!(fails(&server, &["get", "deployment", "web"]).contains("NotFound"));

    // --cascade=foreground: kubectl waits until the object is gone, which it is once the
    // foregroundDeletion finalizer is removed.
    ok(&server, &["create", "deployment", "fg", "--image=busybox:1.35"]);
    let waiting =
        spawn(&server, &["delete", "deployment", "fg", "--cascade=foreground", "--timeout=60s"]);
    wait_until("the foregroundDeletion finalizer", Duration::from_secs(20), || {
        k(&server, &["get", "deployment", "fg", "-o", "jsonpath={.metadata.finalizers}"]).out
            == "[\"foregroundDeletion\"]"
    });
    ok(
        &server,
        &[
            "patch",
            "deployment",
            "fg",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    );
    let out = waiting.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "deployment.apps \"fg\" deleted from default namespace\n"
    );

    // --cascade=background: gone at once.
    ok(&server, &["create", "deployment", "bg", "--image=busybox:1.35"]);
    assert_eq!(
        ok(&server, &["delete", "deployment", "bg", "--cascade=background"]),
        "deployment.apps \"bg\" deleted from default namespace\n"
    );
    // The ReplicaSets the Deployment owned are still there: deleting dependents is the
    // garbage collector's work, which does not run here.
    assert_eq!(rows(&ok(&server, &["get", "rs", "-o", "name"])).len(), 2);
}
