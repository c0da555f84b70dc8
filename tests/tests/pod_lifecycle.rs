//! What a pod's lifecycle fields do, on real containerd with a joined kubelet and the real
//! kubectl: probes (exec, httpGet, tcpSocket, grpc; readiness, liveness, startup), lifecycle
//! hooks, sidecars, graceful termination that a shorter grace period shortens,
//! `activeDeadlineSeconds`, and the STATUS strings `kubectl get pods` shows for each state.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;
use std::time::{Duration, Instant};

use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);

struct Cluster {
    node: JoinedNode,
    pods: Api<Pod>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A pod spec on this node; `spec` is merged over `nodeName` and a 30 s grace period.
fn pod(name: &str, spec: Value) -> Pod {
    let mut full = json!({"nodeName": NODE, "terminationGracePeriodSeconds": 30});
    for (k, v) in spec.as_object().unwrap() {
        full[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": full,
    }))
    .unwrap()
}

impl Cluster {
    async fn start() -> Option<Self> {
        if !require::real_runtime(require::CONTAINERD_TOOLS) {
            return None;
        }
        let node = JoinedNode::start(NODE).await.unwrap();
        let pods = Api::namespaced(node.api.admin_client().await.unwrap(), "default");
        Some(Self { node, pods })
    }

    async fn create(&self, p: Pod) {
        self.pods.create(&PostParams::default(), &p).await.unwrap();
    }

    /// Waits until `check` holds for pod `name`; fails with the logs otherwise.
    async fn until<T>(&self, what: &str, name: &str, check: impl Fn(&Pod) -> Option<T>) -> T {
        eventually(what, WAIT, POLL, || async {
            let p = self.pods.get(name).await.ok()?;
            check(&p)
        })
        .await
        .unwrap_or_else(|e| {
            let last = self.kubectl(&["get", "pod", name, "-o", "yaml"]);
            panic!("{}\nthe pod:\n{last}", self.node.logs(&e.to_string()))
        })
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = self.node.api.kubectl(args).unwrap();
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    }

    /// `kubectl get pods` as name → (READY, STATUS).
    fn table(&self) -> HashMap<String, (String, String)> {
        let out = self.node.api.kubectl(&["get", "pods", "--no-headers"]).unwrap();
        text(&out.stdout)
            .lines()
            .filter_map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                Some((
                    cols.first()?.to_string(),
                    (cols.get(1)?.to_string(), cols.get(2)?.to_string()),
                ))
            })
            .collect()
    }

    /// Waits until `kubectl get pods` shows `status` (and `ready`, if given) for `name`.
    async fn shows(&self, name: &str, ready: Option<&str>, status: &str) {
        eventually(&format!("{name} {status}"), WAIT, POLL, || async {
            let row = self.table().remove(name)?;
            (row.1 == status && ready.is_none_or(|r| row.0 == r)).then_some(())
        })
        .await
        .unwrap_or_else(|e| {
            let table = self.kubectl(&["get", "pods", "-o", "wide"]);
            let pod = self.kubectl(&["get", "pod", name, "-o", "yaml"]);
            panic!("{}\n{table}\n{pod}", self.node.logs(&e.to_string()))
        });
    }

    /// Waits until `kubectl get events` for pod `name` contains every string in `want`.
    async fn events_show(&self, name: &str, want: &[&str]) {
        let selector = format!("involvedObject.name={name}");
        let args = ["get", "events", "--field-selector", selector.as_str()];
        eventually(&format!("{name}'s events"), WAIT, POLL, || async {
            let out = self.kubectl(&args);
            want.iter().all(|w| out.contains(w)).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: want {want:?}, got:\n{}", self.kubectl(&args)));
    }

    fn exec(&self, pod: &str, container: &str, script: &str) {
        let out = self
            .node
            .api
            .kubectl(&["exec", pod, "-c", container, "--", "sh", "-c", script])
            .unwrap();
        assert!(out.status.success(), "exec in {pod}: {}", text(&out.stderr));
    }

    async fn stop(self) {
        self.node.stop().await.unwrap();
    }
}

fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let s = p.status.as_ref()?;
    s.container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
}

fn condition(p: &Pod, type_: &str) -> Option<String> {
    let c = p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)?;
    Some(c.status.clone())
}

fn running(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_some_and(|s| s.running.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_decide_readiness_and_restarts() {
    let Some(c) = Cluster::start().await else { return };
    let httpd = "busybox-httpd:1.35";
    // httpGet readiness: /ready.html is missing (404) until the test writes it.
    c.create(pod(
        "ready-http",
        json!({"containers": [{"name": "web", "image": httpd,
        "readinessProbe": {"httpGet": {"path": "/ready.html", "port": 80}, "periodSeconds": 1}}]}),
    ))
    .await;
    // exec liveness: fails once /tmp/alive is gone; the container is then restarted.
    c.create(pod(
        "live-exec",
        json!({"terminationGracePeriodSeconds": 2, "containers": [{"name": "app",
        "image": "busybox:1.35", "command": ["sh", "-c", "touch /tmp/alive; exec sleep 3600"],
        "livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1,
            "failureThreshold": 2}}]}),
    ))
    .await;
    // tcpSocket startup probe: the server listens only after 6 s; the liveness probe, which
    // would fail at once, waits for the startup probe, so nothing restarts.
    c.create(pod(
        "startup-tcp",
        json!({"containers": [{"name": "web", "image": httpd,
        "command": ["sh", "-c", "sleep 6; exec httpd -f -p 80 -h /var/www"],
        "startupProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1, "failureThreshold": 30},
        "livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1, "failureThreshold": 1}}]}),
    ))
    .await;
    // grpc readiness against the test image's health server.
    c.create(pod(
        "ready-grpc",
        json!({"containers": [{"name": "health", "image": "grpc-health:1.0",
        "readinessProbe": {"grpc": {"port": 9090}, "periodSeconds": 1}}]}),
    ))
    .await;

    // Readiness false keeps the pod 0/1 with Ready=False; a later success flips it.
    c.until("ready-http running", "ready-http", |p| {
        container(p, "web").filter(|s| running(s)).map(|_| ())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await; // several failed probes
    let p = c.pods.get("ready-http").await.unwrap();
    assert_eq!(condition(&p, "Ready").as_deref(), Some("False"));
    assert!(!container(&p, "web").unwrap().ready);
    assert_eq!(c.table()["ready-http"], ("0/1".to_string(), "Running".to_string()));
    c.exec("ready-http", "web", "echo ok > /var/www/ready.html");
    c.until("ready-http ready", "ready-http", |p| (condition(p, "Ready")? == "True").then_some(()))
        .await;
    c.shows("ready-http", Some("1/1"), "Running").await;

    // Liveness: the restart is counted and the last state says the container was killed.
    c.until("live-exec running", "live-exec", |p| {
        container(p, "app").filter(|s| running(s)).map(|_| ())
    })
    .await;
    c.exec("live-exec", "app", "rm /tmp/alive");
    let restarted = c
        .until("live-exec restarted", "live-exec", |p| {
            let s = container(p, "app")?;
            (s.restart_count >= 1 && running(s)).then(|| s.clone())
        })
        .await;
    let last = restarted.last_state.unwrap().terminated.unwrap();
    assert_eq!(last.exit_code, 137, "killed after the failed probe: {last:?}");
    // What `kubectl get events` shows for both: the probe failures and the kill, with reasons.
    c.events_show(
        "live-exec",
        &[
            "Unhealthy",
            "Liveness probe failed",
            "Killing",
            "Container app failed liveness probe, will be restarted",
        ],
    )
    .await;
    c.events_show(
        "ready-http",
        &["Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404"],
    )
    .await;

    // Startup gates liveness: started once the server listens, never restarted.
    let s = c
        .until("startup-tcp started", "startup-tcp", |p| {
            container(p, "web").filter(|s| s.started == Some(true)).cloned()
        })
        .await;
    assert_eq!(s.restart_count, 0, "liveness waited for the startup probe");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let p = c.pods.get("startup-tcp").await.unwrap();
    assert_eq!(container(&p, "web").unwrap().restart_count, 0);
    assert_eq!(condition(&p, "Ready").as_deref(), Some("True"));

    // grpc: ready while SERVING, not ready once the server says NOT_SERVING.
    c.until("ready-grpc ready", "ready-grpc", |p| (condition(p, "Ready")? == "True").then_some(()))
        .await;
    c.exec(
        "ready-grpc",
        "health",
        "mkdir -p /tmp/health && echo NOT_SERVING > /tmp/health/.t && mv /tmp/health/.t /tmp/health/default",
    );
    c.until("ready-grpc not ready", "ready-grpc", |p| {
        (condition(p, "Ready")? == "False").then_some(())
    })
    .await;

    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_hooks_run_around_the_container() {
    let Some(c) = Cluster::start().await else { return };
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    // postStart: the container is reported started only after the hook wrote its marker.
    c.create(pod("post-start", json!({"containers": [{"name": "app", "image": "busybox:1.35",
        "command": ["sleep", "3600"],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "sleep 2; echo hooked > /tmp/post-start"]}}}}]})))
        .await;
    // A failing postStart kills the container, which is then restarted.
    c.create(pod(
        "post-start-fails",
        json!({"terminationGracePeriodSeconds": 2, "containers": [{"name": "app",
        "image": "busybox:1.35", "command": ["sleep", "3600"],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 3"]}}}}]}),
    ))
    .await;
    // preStop: runs before the stop and delays it, but never past the grace period.
    c.create(pod("pre-stop", json!({"terminationGracePeriodSeconds": 10,
        "volumes": [{"name": "host", "hostPath": {"path": host_dir}}],
        "containers": [{"name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
            "volumeMounts": [{"name": "host", "mountPath": "/host"}],
            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo ran > /host/pre-stop; sleep 3"]}}}}]})))
        .await;
    c.create(pod(
        "pre-stop-hangs",
        json!({"terminationGracePeriodSeconds": 3, "containers": [{"name": "app",
        "image": "busybox:1.35", "command": ["sleep", "3600"],
        "lifecycle": {"preStop": {"sleep": {"seconds": 3}}}}]}),
    ))
    .await;

    c.until("post-start started", "post-start", |p| {
        container(p, "app").filter(|s| s.started == Some(true)).map(|_| ())
    })
    .await;
    c.exec("post-start", "app", "test \"$(cat /tmp/post-start)\" = hooked");

    let s = c
        .until("post-start-fails restarted", "post-start-fails", |p| {
            container(p, "app").filter(|s| s.restart_count >= 1).cloned()
        })
        .await;
    assert!(s.started != Some(true) || s.restart_count >= 1, "{s:?}");
    c.events_show("post-start-fails", &["FailedPostStartHook", "Killing"]).await;

    for name in ["pre-stop", "pre-stop-hangs"] {
        c.until("running", name, |p| container(p, "app").filter(|s| running(s)).map(|_| ())).await;
    }
    let started = Instant::now();
    c.pods.delete("pre-stop", &DeleteParams::default()).await.unwrap();
    eventually("pre-stop gone", WAIT, POLL, || async {
        c.pods.get_opt("pre-stop").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap();
    let took = started.elapsed();
    assert_eq!(std::fs::read_to_string(host.path().join("pre-stop")).unwrap(), "ran\n");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "preStop delayed the stop: {took:?}"
    );

    // A preStop that would take longer than the grace period is cut off by it.
    let started = Instant::now();
    c.pods.delete("pre-stop-hangs", &DeleteParams::default()).await.unwrap();
    eventually("pre-stop-hangs gone", WAIT, POLL, || async {
        c.pods.get_opt("pre-stop-hangs").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "bounded by the 3 s grace: {:?}",
        started.elapsed()
    );

    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_run_beside_the_app_restart_and_end_with_it() {
    let Some(c) = Cluster::start().await else { return };
    c.create(pod(
        "with-sidecar",
        json!({"terminationGracePeriodSeconds": 2,
        "initContainers": [{"name": "side", "image": "busybox:1.35", "restartPolicy": "Always",
            "command": ["sh", "-c", "until [ -f /tmp/stop ]; do sleep 0.2; done"]}],
        "containers": [{"name": "app", "image": "busybox-httpd:1.35"}]}),
    ))
    .await;
    c.create(pod("job-with-sidecar", json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
        "initContainers": [{"name": "side", "image": "busybox:1.35", "restartPolicy": "Always",
            "command": ["sleep", "3600"]}],
        "containers": [{"name": "job", "image": "busybox:1.35", "command": ["sh", "-c", "sleep 2; echo done"]}]})))
        .await;

    c.shows("with-sidecar", Some("2/2"), "Running").await;
    // The sidecar exits: it is restarted, whatever the pod's restart policy.
    c.exec("with-sidecar", "side", "touch /tmp/stop");
    c.until("sidecar restarted", "with-sidecar", |p| {
        container(p, "side").filter(|s| s.restart_count >= 1 && running(s)).map(|_| ())
    })
    .await;
    c.shows("with-sidecar", Some("2/2"), "Running").await;

    // A restartPolicy: Never pod whose app succeeded completes, its sidecar stopped.
    c.shows("job-with-sidecar", None, "Completed").await;
    let p = c.pods.get("job-with-sidecar").await.unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Succeeded"));
    assert!(!running(container(&p, "side").unwrap()), "the sidecar was stopped");

    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_grace_period_ends_a_termination_in_progress_and_deadlines_fail_pods() {
    let Some(c) = Cluster::start().await else { return };
    // sleep as PID 1 ignores SIGTERM: only the grace period's SIGKILL stops it.
    c.create(pod(
        "stubborn",
        json!({"terminationGracePeriodSeconds": 30,
        "containers": [{"name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"]}]}),
    ))
    .await;
    c.create(pod(
        "deadline",
        json!({"activeDeadlineSeconds": 4, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"]}]}),
    ))
    .await;
    c.until("stubborn running", "stubborn", |p| {
        container(p, "app").filter(|s| running(s)).map(|_| ())
    })
    .await;
    let out = c.kubectl(&["delete", "pod", "stubborn", "--wait=false"]);
    assert!(out.contains("deleted"), "{out}");
    c.shows("stubborn", None, "Terminating").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(c.pods.get_opt("stubborn").await.unwrap().is_some(), "the 30 s grace is running");
    let started = Instant::now();
    let out = c.kubectl(&["delete", "pod", "stubborn", "--grace-period=1"]);
    assert!(out.contains("deleted"), "{out}");
    eventually("stubborn gone", WAIT, POLL, || async {
        c.pods.get_opt("stubborn").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "the second delete shortened the termination: {took:?}");

    let p = c
        .until("deadline failed", "deadline", |p| {
            (p.status.as_ref()?.phase.as_deref()? == "Failed").then(|| p.clone())
        })
        .await;
    let s = p.status.unwrap();
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );

    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pods_reads_as_upstream_in_each_state() {
    let Some(c) = Cluster::start().await else { return };
    let bb = "busybox:1.35";
    c.create(pod(
        "init-progress",
        json!({"initContainers": [
            {"name": "i0", "image": bb, "command": ["true"]},
            {"name": "i1", "image": bb, "command": ["sleep", "3600"]}],
        "containers": [{"name": "app", "image": bb, "command": ["sleep", "3600"]}]}),
    ))
    .await;
    c.create(pod(
        "init-crash",
        json!({"initContainers": [{"name": "i0", "image": bb, "command": ["sh", "-c", "exit 1"]}],
        "containers": [{"name": "app", "image": bb, "command": ["sleep", "3600"]}]}),
    ))
    .await;
    c.create(pod(
        "initializing",
        json!({"initContainers": [{"name": "i0", "image": bb, "command": ["true"]}],
        "containers": [{"name": "app", "image": bb, "command": ["sleep", "3600"],
            "lifecycle": {"postStart": {"exec": {"command": ["sleep", "20"]}}}}]}),
    ))
    .await;
    // One container done, one running and ready, the pod not Ready (a gate nobody sets).
    c.create(pod(
        "not-ready",
        json!({"restartPolicy": "OnFailure",
        "readinessGates": [{"conditionType": "example.com/never"}],
        "containers": [
            {"name": "done", "image": bb, "command": ["true"]},
            {"name": "waits", "image": bb, "command": ["sleep", "3600"]}]}),
    ))
    .await;
    c.create(pod(
        "completed",
        json!({"restartPolicy": "Never",
        "containers": [{"name": "app", "image": bb, "command": ["true"]}]}),
    ))
    .await;
    c.create(pod(
        "crashing",
        json!({"containers": [{"name": "app", "image": bb, "command": ["sh", "-c", "exit 2"]}]}),
    ))
    .await;
    c.shows("init-progress", Some("0/1"), "Init:1/2").await;
    c.shows("init-crash", Some("0/1"), "Init:CrashLoopBackOff").await;
    c.shows("initializing", Some("0/1"), "PodInitializing").await;
    c.shows("not-ready", Some("1/2"), "NotReady").await;
    c.shows("completed", Some("0/1"), "Completed").await;
    c.shows("crashing", Some("0/1"), "CrashLoopBackOff").await;
    c.stop().await;
}
