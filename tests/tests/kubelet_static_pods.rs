//! The kubelet runs static pods on real containerd, driven only through manifest files and
//! observed through CRI, `/pods` and the pods' own network.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use e2e::cluster::StandaloneNode;
use e2e::kubelet::NODE;
use e2e::registry::http_get;
use e2e::{eventually, require};
use proto::cri;

const NGINX_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: nginx-pod
  labels:
    app: nginx
spec:
  containers:
  - name: nginx
    image: busybox-httpd:1.35
    ports:
    - containerPort: 80
";

fn sleeper(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: sleep\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n{extra}"
    )
}

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

struct Node(StandaloneNode);

impl std::ops::Deref for Node {
    type Target = StandaloneNode;
    fn deref(&self) -> &StandaloneNode {
        &self.0
    }
}

impl std::ops::DerefMut for Node {
    fn deref_mut(&mut self) -> &mut StandaloneNode {
        &mut self.0
    }
}

impl Node {
    async fn start() -> Self {
        Self(StandaloneNode::start().await.unwrap())
    }

    async fn running(&self, name: &str) -> serde_json::Value {
        self.0.running(name, WAIT, POLL).await
    }

    /// Waits until the kubelet no longer lists the pod: its worker has finished and the sync
    /// loop has handled that (a moment after the runtime is clean).
    async fn gone_from_kubelet(&self, name: &str) {
        let what = format!("{name} gone from the kubelet's pod list");
        let gone = || async { self.kubelet.pod(name).await.is_none().then_some(()) };
        if let Err(e) = eventually(&what, WAIT, POLL, gone).await {
            panic!("{e}\nkubelet log:\n{}", self.kubelet.log_tail(40));
        }
    }

    async fn containers(&self) -> Vec<cri::Container> {
        self.cri
            .list_containers(cri::ListContainersRequest { filter: None })
            .await
            .unwrap()
            .containers
    }

    /// Every sandbox and container the runtime has, for a failure message.
    async fn runtime_view(&self) -> String {
        let sandboxes: Vec<_> = self
            .sandboxes()
            .await
            .into_iter()
            .map(|s| (s.id, s.state, s.metadata.map(|m| (m.name, m.attempt)), s.created_at))
            .collect();
        let containers: Vec<_> = self
            .containers()
            .await
            .into_iter()
            .map(|c| (c.id, c.pod_sandbox_id, c.state, c.metadata.map(|m| m.attempt), c.created_at))
            .collect();
        format!("sandboxes {sandboxes:?}, containers {containers:?}")
    }

    async fn teardown(self) {
        self.0.teardown().await;
    }
}

#[tokio::test]
async fn a_static_httpd_pod_serves_http_on_its_pod_ip_and_shows_in_the_runtime_by_name() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = Node::start().await;
    n.kubelet.write_manifest("nginx.yaml", NGINX_POD).unwrap();
    let name = format!("nginx-pod-{NODE}");
    let pod = n.running(&name).await;
    let ip: std::net::IpAddr = pod["status"]["podIP"].as_str().unwrap().parse().unwrap();
    let addr = SocketAddr::new(ip, 80);
    let (code, body) = eventually("HTTP on the pod IP", WAIT, POLL, || async {
        http_get(addr, "/", Duration::from_secs(2)).ok()
    })
    .await
    .unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("It works"), "{body}");

    // What `crictl pods` shows: the static pod's name and namespace.
    let sandboxes = n.sandboxes().await;
    let meta = sandboxes[0].metadata.clone().unwrap();
    assert_eq!((meta.name.as_str(), meta.namespace.as_str()), (name.as_str(), "default"));
    assert_eq!(sandboxes[0].labels["app"], "nginx");
    let containers = n.containers().await;
    assert_eq!(containers[0].labels["io.kubernetes.container.name"], "nginx");
    assert_eq!(containers[0].labels["io.kubernetes.pod.name"], name);
    let cs = &pod["status"]["containerStatuses"][0];
    assert!(cs["containerID"].as_str().unwrap().starts_with("containerd://"));
    n.teardown().await;
}

#[tokio::test]
async fn editing_replaces_the_pod_deleting_stops_it_within_grace_and_a_dotfile_rename_removes_it() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = Node::start().await;
    let name = format!("web-{NODE}");
    let file = n.kubelet.write_manifest("web.yaml", &sleeper("web", "")).unwrap();
    let first = n.running(&name).await;
    let first_uid = first["metadata"]["uid"].as_str().unwrap().to_string();

    // Edit: a new pod (new UID) replaces the old, whose sandbox goes.
    n.kubelet
        .write_manifest(
            "web.yaml",
            &sleeper("web", "    env:\n    - {name: EDITED, value: \"1\"}\n"),
        )
        .unwrap();
    let second = eventually("the edited pod running", WAIT, POLL, || async {
        n.kubelet.running(&name).await.filter(|p| p["metadata"]["uid"] != first_uid.as_str())
    })
    .await
    .unwrap();
    let second_uid = second["metadata"]["uid"].as_str().unwrap().to_string();
    eventually("only the new sandbox left", WAIT, POLL, || async {
        let s = n.sandboxes().await;
        (s.len() == 1 && s[0].labels["io.kubernetes.pod.uid"] == second_uid).then_some(())
    })
    .await
    .unwrap();

    // Rename to a dotfile: ignored, so the pod goes, from the runtime and then from the
    // kubelet's list (the worker reports its end to the sync loop after the runtime is clean).
    std::fs::rename(&file, n.kubelet.manifests().join(".web.yaml")).unwrap();
    eventually("removed after the rename", WAIT, POLL, || async {
        n.sandboxes().await.is_empty().then_some(())
    })
    .await
    .unwrap();
    n.gone_from_kubelet(&name).await;

    // Delete: `sleep` as PID 1 ignores SIGTERM, so the 2 s grace period runs out; then the
    // containers and the sandbox are gone from the runtime at once.
    let file = n.kubelet.write_manifest("web.yaml", &sleeper("web", "")).unwrap();
    n.running(&name).await;
    let started = Instant::now();
    std::fs::remove_file(&file).unwrap();
    eventually("containers and sandbox removed", WAIT, Duration::from_millis(50), || async {
        (n.sandboxes().await.is_empty() && n.containers().await.is_empty()).then_some(())
    })
    .await
    .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(6),
        "stopped within the grace period, then removed: {took:?}"
    );
    n.gone_from_kubelet(&name).await;
    n.teardown().await;
}

#[tokio::test]
async fn a_malformed_manifest_beside_a_good_one_is_reported_by_file_and_touches_nothing() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = Node::start().await;
    n.kubelet.write_manifest("good.yaml", &sleeper("good", "")).unwrap();
    let good = n.running(&format!("good-{NODE}")).await;
    let ids: Vec<String> = n.containers().await.into_iter().map(|c| c.id).collect();
    n.kubelet.write_manifest("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n    ports:\n    - containerPort: eighty\n").unwrap();
    let report = eventually("the rejection", WAIT, POLL, || async {
        let m = n.kubelet.get("/manifests").await?;
        m.as_array()?
            .iter()
            .find(|r| {
                r["file"].as_str().is_some_and(|f| f.ends_with("broken.yaml"))
                    && r["state"] == "rejected"
            })
            .cloned()
    })
    .await
    .unwrap();
    let reason = report["reason"].as_str().unwrap();
    assert!(
        reason.contains("broken.yaml")
            && reason.contains("spec.containers[0].ports[0].containerPort"),
        "{reason}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = n.kubelet.running(&format!("good-{NODE}")).await.unwrap();
    assert_eq!(still["metadata"]["uid"], good["metadata"]["uid"]);
    let now: Vec<String> = n.containers().await.into_iter().map(|c| c.id).collect();
    assert_eq!(now, ids, "the good pod's containers are untouched");
    n.teardown().await;
}

#[tokio::test]
async fn a_failing_container_restarts_with_growing_backoff_and_init_containers_run_in_order() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = Node::start().await;
    let crash = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crash\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: fail\n    image: busybox:1.35\n    command: [sh, -c, \"echo failing; exit 1\"]\n";
    n.kubelet.write_manifest("crash.yaml", crash).unwrap();
    let init = "apiVersion: v1
kind: Pod
metadata:
  name: ordered
spec:
  restartPolicy: Never
  volumes:
  - name: work
    emptyDir: {}
  initContainers:
  - name: first
    image: busybox:1.35
    command: [sh, -c, \"echo first >> /work/order\"]
    volumeMounts: [{name: work, mountPath: /work}]
  - name: second
    image: busybox:1.35
    command: [sh, -c, \"sleep 1; echo second >> /work/order\"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: app
    image: busybox:1.35
    command: [sh, -c, \"echo app >> /work/order; cat /work/order\"]
    volumeMounts: [{name: work, mountPath: /work}]
";
    n.kubelet.write_manifest("ordered.yaml", init).unwrap();
    let name = format!("crash-{NODE}");
    let restart_count = |p: &serde_json::Value| {
        p["status"]["containerStatuses"][0]["restartCount"].as_i64().unwrap_or(0)
    };
    let started = Instant::now();
    let p = eventually("the first restart", WAIT, POLL, || async {
        n.kubelet.pod(&name).await.filter(|p| restart_count(p) >= 1)
    })
    .await
    .unwrap();
    let first = started.elapsed();
    let waiting = eventually("CrashLoopBackOff", WAIT, POLL, || async {
        n.kubelet.pod(&name).await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        })
    })
    .await
    .unwrap();
    assert!(
        waiting["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1,
        "{waiting}"
    );
    let p2 = eventually("the second restart", WAIT, POLL, || async {
        n.kubelet.pod(&name).await.filter(|p| restart_count(p) >= 2)
    })
    .await
    .unwrap();
    let second = started.elapsed();
    assert!(first < Duration::from_secs(5), "the first restart is immediate: {first:?}");
    assert!(second - first >= Duration::from_secs(9), "then a 10 s back-off: {:?}", second - first);
    assert_eq!(p["status"]["phase"], "Running", "Always: a crash-looping pod stays Running");
    assert_eq!(restart_count(&p2), 2);

    // Never: the pod ran its init containers in order, then the app, and succeeded.
    let ordered = eventually("ordered: Succeeded", WAIT, POLL, || async {
        n.kubelet
            .pod(&format!("ordered-{NODE}"))
            .await
            .filter(|p| p["status"]["phase"] == "Succeeded")
    })
    .await
    .unwrap();
    let uid = ordered["metadata"]["uid"].as_str().unwrap();
    let log = std::fs::read_to_string(
        n.kubelet.logs_dir().join(format!("default_ordered-{NODE}_{uid}/app/0.log")),
    )
    .unwrap();
    let lines: Vec<&str> = log.lines().map(|l| l.splitn(4, ' ').nth(3).unwrap()).collect();
    assert_eq!(lines, ["first", "second", "app"]);
    for c in ordered["status"]["initContainerStatuses"].as_array().unwrap() {
        assert_eq!(c["state"]["terminated"]["exitCode"], 0, "{c}");
    }
    n.teardown().await;
}

#[tokio::test]
async fn a_kubelet_killed_with_sigkill_and_restarted_restarts_no_container() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut n = Node::start().await;
    for i in 0..10 {
        n.kubelet.write_manifest(&format!("p{i}.yaml"), &sleeper(&format!("p{i}"), "")).unwrap();
    }
    for i in 0..10 {
        n.running(&format!("p{i}-{NODE}")).await;
    }
    let ids = |cs: Vec<cri::Container>| {
        let mut v: Vec<(String, i32)> = cs.into_iter().map(|c| (c.id, c.state)).collect();
        v.sort();
        v
    };
    let before = ids(n.containers().await);
    assert_eq!(before.len(), 10);
    n.kubelet.kill9();
    n.kubelet.restart().unwrap();
    for i in 0..10 {
        let p = n.running(&format!("p{i}-{NODE}")).await;
        assert_eq!(p["status"]["containerStatuses"][0]["restartCount"], 0);
    }
    tokio::time::sleep(Duration::from_secs(4)).await; // syncs and housekeeping run
    assert_eq!(ids(n.containers().await), before, "the same containers, still running");

    // A clean stop (SIGTERM) leaves the pods running too.
    let status = n.kubelet.stop().unwrap();
    assert!(status.success(), "SIGTERM is a clean exit: {status:?}");
    assert_eq!(ids(n.containers().await), before);
    n.teardown().await;
}

#[tokio::test]
async fn containers_that_died_while_the_kubelet_was_down_are_restarted_with_counts() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut n = Node::start().await;
    n.kubelet.write_manifest("p.yaml", &sleeper("p", "")).unwrap();
    let name = format!("p-{NODE}");
    n.running(&name).await;
    n.kubelet.kill9();
    let runtime_view = n.runtime_view().await;
    let containers = n.containers().await;
    assert_eq!(containers.len(), 1, "one container for the pod's one: {runtime_view}");
    n.cri.stop_container(&containers[0].id, Duration::ZERO).await.unwrap();
    n.kubelet.restart().unwrap();
    let restarted = eventually("restarted with count 1", WAIT, POLL, || async {
        n.kubelet
            .running(&name)
            .await
            .filter(|p| p["status"]["containerStatuses"][0]["restartCount"] == 1)
    })
    .await;
    let p = match restarted {
        Ok(p) => p,
        Err(e) => panic!(
            "{e}\npod: {:#}\nbefore the restart: {runtime_view}\nnow: {}\nkubelet log:\n{}",
            n.kubelet.pod(&name).await.unwrap_or_default()["status"],
            n.runtime_view().await,
            n.kubelet.log_tail(60)
        ),
    };
    assert_eq!(p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 137);
    n.teardown().await;
}

#[tokio::test]
async fn the_default_max_pods_of_110_static_pods_all_reach_running() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = Node::start().await;
    for i in 0..110 {
        n.kubelet
            .write_manifest(&format!("p{i:03}.yaml"), &sleeper(&format!("p{i:03}"), ""))
            .unwrap();
    }
    let all = eventually(
        "110 pods running",
        Duration::from_secs(300),
        Duration::from_millis(500),
        || async {
            let list = n.kubelet.get("/pods").await?;
            let items = list["items"].as_array()?;
            let running = items.iter().filter(|p| p["status"]["phase"] == "Running").count();
            (running == 110).then_some(items.len())
        },
    )
    .await;
    let all = match all {
        Ok(a) => a,
        Err(e) => panic!("{e}\n{}", n.kubelet.log_tail(40)),
    };
    assert_eq!(all, 110);
    let names: HashMap<String, i32> =
        n.sandboxes().await.into_iter().map(|s| (s.metadata.unwrap().name, s.state)).collect();
    assert_eq!(names.len(), 110);
    // One more is refused. A static pod is critical, so upstream's kubelet first looks for pods
    // to preempt for it; every other pod is static too, so none may go, and the rejection is
    // its UnexpectedAdmissionError naming the pod slot it lacks.
    n.kubelet.write_manifest("p110.yaml", &sleeper("p110", "")).unwrap();
    let refused = eventually("the 111th refused", WAIT, POLL, || async {
        n.kubelet
            .pod(&format!("p110-{NODE}"))
            .await
            .filter(|p| p["status"]["reason"] == "UnexpectedAdmissionError")
    })
    .await
    .unwrap();
    assert_eq!(refused["status"]["phase"], "Failed");
    assert_eq!(
        refused["status"]["message"],
        "Pod was rejected: Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: pods, q: 1), ]"
    );
    n.teardown().await;
}
