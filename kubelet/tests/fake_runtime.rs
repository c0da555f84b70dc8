//! The whole kubelet against the fake CRI runtime: manifests in, pods in the runtime and in
//! `/pods` out. Hermetic: temp dirs, a real unix socket, no root.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_cri::{FakeCriServer, FakeRuntime, Match, OnSigterm, Program, Rpc};
use kubelet::config::kubelet_config::KubeletConfig;
use kubelet::eviction::Thresholds;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const NODE: &str = "node-a";

struct Node {
    dir: tempfile::TempDir,
    fake: FakeCriServer,
    port: u16,
    stop: CancellationToken,
    kubelet: tokio::task::JoinHandle<()>,
    /// Changes this test makes to the kubelet's configuration.
    tune: fn(&mut KubeletConfig),
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn manifest(name: &str, image: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 3\n{extra}  containers:\n  - name: app\n    image: {image}\n"
    )
}

impl Node {
    async fn start(runtime: FakeRuntime) -> Self {
        Self::start_tuned(runtime, |_| {}).await
    }

    async fn start_tuned(runtime: FakeRuntime, tune: fn(&mut KubeletConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["manifests", "root", "logs"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        runtime.add_image("busybox:1.35").unwrap();
        let fake = FakeCriServer::start_with(runtime, &dir.path().join("cri.sock")).unwrap();
        let port = free_port();
        let stop = CancellationToken::new();
        let kubelet = Self::spawn_kubelet(dir.path(), port, stop.clone(), tune);
        Self { dir, fake, port, stop, kubelet, tune }
    }

    fn spawn_kubelet(
        dir: &Path,
        port: u16,
        stop: CancellationToken,
        tune: fn(&mut KubeletConfig),
    ) -> tokio::task::JoinHandle<()> {
        let mut config = KubeletConfig {
            node_name: NODE.into(),
            static_pod_path: Some(dir.join("manifests")),
            static_config_path: Some(dir.join("static-config")),
            container_runtime_endpoint: format!("unix://{}", dir.join("cri.sock").display()),
            pod_logs_dir: dir.join("logs"),
            root_dir: dir.join("root"),
            // Hermetic: the kubelet touches no cgroup of the host (as hollow nodes run).
            cgroup_root: "/kubelet-rs-test".into(),
            cgroups_per_qos: false,
            enforce_node_allocatable: Some(Vec::new()),
            // Nor does it evict by the host's figures: a nearly full disk on the machine running
            // the tests would have the eviction manager reclaim the pods' dead containers.
            eviction_hard: host_independent_eviction(),
            address: [127, 0, 0, 1].into(),
            read_only_port: port,
            port: 0,
            healthz_port: 0,
            file_check_frequency: Duration::from_secs(60),
            ..KubeletConfig::default()
        };
        tune(&mut config);
        tokio::spawn(async move { kubelet::run(config, stop).await.unwrap() })
    }

    /// SIGKILL-like: drops the kubelet task at once, then starts a new kubelet.
    async fn restart_kubelet_abruptly(&mut self) {
        self.kubelet.abort();
        let _ = (&mut self.kubelet).await;
        self.stop = CancellationToken::new();
        self.port = free_port();
        self.kubelet =
            Self::spawn_kubelet(self.dir.path(), self.port, self.stop.clone(), self.tune);
    }

    fn write(&self, file: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join("manifests").join(file);
        let tmp = self.dir.path().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        path
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes()).await.ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        serde_json::from_str(buf.split_once("\r\n\r\n")?.1).ok()
    }

    async fn pod(&self, name: &str) -> Option<Value> {
        let list = self.get("/pods").await?;
        list["items"].as_array()?.iter().find(|p| p["metadata"]["name"] == name).cloned()
    }

    async fn eventually<T>(&self, what: &str, mut probe: impl AsyncFnMut(&Self) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(v) = probe(self).await {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn sandbox_names(&self) -> Vec<String> {
        self.fake.runtime().sandboxes().into_iter().map(|s| s.metadata.unwrap().name).collect()
    }

    async fn shutdown(self) {
        self.stop.cancel();
        self.kubelet.await.unwrap();
        self.fake.shutdown().await.unwrap();
    }
}

/// `evictionHard` with only a memory threshold no test host comes near (an unnamed signal has
/// none, as upstream).
fn host_independent_eviction() -> Thresholds {
    let hard = BTreeMap::from([("memory.available".to_string(), "1Mi".to_string())]);
    Thresholds::parse(&hard, false).unwrap()
}

async fn running(n: &Node, name: &str) -> Option<Value> {
    n.pod(name).await.filter(|p| {
        p["status"]["phase"] == "Running" && p["status"]["containerStatuses"][0]["ready"] == true
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_runs_is_replaced_on_edit_and_stops_when_removed() {
    let n = Node::start(FakeRuntime::new()).await;
    let file = n.write("web.yaml", &manifest("web", "busybox:1.35", ""));
    let pod = n.eventually("web running", async |n| running(n, "web-node-a").await).await;
    assert_eq!(pod["metadata"]["namespace"], "default");
    assert_eq!(pod["metadata"]["annotations"]["kubernetes.io/config.source"], "file");
    assert!(pod["status"]["podIP"].as_str().unwrap().starts_with("10.88."));
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(n.sandbox_names(), ["web-node-a"]);

    n.write("web.yaml", &manifest("web", "busybox:1.35", "  hostname: edited\n"));
    let new = n
        .eventually("the edited pod", async |n| {
            n.pod("web-node-a").await.filter(|p| p["metadata"]["uid"] != uid.as_str())
        })
        .await;
    let new_uid = new["metadata"]["uid"].as_str().unwrap().to_string();
    // One sandbox left, and it is the new pod's (one sandbox alone could also be the old pod's,
    // before the new one is created).
    n.eventually("only the new pod's sandbox", async |n| {
        let sandboxes = n.fake.runtime().sandboxes();
        (sandboxes.len() == 1 && sandboxes[0].labels["io.kubernetes.pod.uid"] == new_uid)
            .then_some(())
    })
    .await;

    std::fs::remove_file(&file).unwrap();
    n.eventually("everything removed", async |n| {
        (n.fake.runtime().sandboxes().is_empty()
            && n.fake.runtime().containers().is_empty()
            && n.pod("web-node-a").await.is_none())
        .then_some(())
    })
    .await;
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_manifest_is_reported_and_disturbs_nothing() {
    let n = Node::start(FakeRuntime::new()).await;
    n.write("good.yaml", &manifest("good", "busybox:1.35", ""));
    n.eventually("good running", async |n| running(n, "good-node-a").await).await;
    n.write(
        "bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers:\n  - name: c\n",
    );
    n.write("notes.txt", "not a manifest");
    let reports = n
        .eventually("the rejection and the ignored file reported", async |n| {
            let m = n.get("/manifests").await?;
            let reported = |file: &str, state: &str| {
                m.as_array().is_some_and(|a| {
                    a.iter().any(|r| {
                        r["file"].as_str().is_some_and(|f| f.ends_with(file)) && r["state"] == state
                    })
                })
            };
            (reported("bad.yaml", "rejected") && reported("notes.txt", "ignored"))
                .then_some(m.clone())
        })
        .await;
    let bad = reports
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["file"].as_str().unwrap().ends_with("bad.yaml"))
        .unwrap();
    assert!(
        bad["reason"].as_str().unwrap().contains("spec.containers[0].image: Required value"),
        "{bad}"
    );
    let txt = reports
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["file"].as_str().unwrap().ends_with("notes.txt"))
        .unwrap();
    assert_eq!(txt["state"], "ignored");
    let events = n.get("/events").await.unwrap();
    assert!(
        events.as_array().unwrap().iter().any(|e| e["reason"] == "FailedManifest"
            && e["object"].as_str().unwrap().contains("bad.yaml"))
    );
    assert!(running(&n, "good-node-a").await.is_some());
    assert_eq!(n.sandbox_names(), ["good-node-a"]);
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_container_is_restarted_with_backoff_and_counted() {
    let runtime = FakeRuntime::new();
    runtime.set_program(
        Match::ContainerName("app".into()),
        Program { exit: Some((Duration::from_millis(50), 1)), ..Program::default() },
    );
    let n = Node::start(runtime).await;
    n.write("crash.yaml", &manifest("crash", "busybox:1.35", ""));
    let pod = n
        .eventually("CrashLoopBackOff", async |n| {
            n.pod("crash-node-a").await.filter(|p| {
                p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                    == "CrashLoopBackOff"
            })
        })
        .await;
    let cs = &pod["status"]["containerStatuses"][0];
    assert_eq!(cs["restartCount"], 1, "restarted once at once, then backing off: {cs}");
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 1);
    assert!(cs["state"]["waiting"]["message"].as_str().unwrap().contains("back-off 10s"), "{cs}");
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_of_a_pod_nothing_happened_to_asks_the_runtime_nothing_and_a_change_is_seen() {
    let runtime = FakeRuntime::new();
    runtime.set_program(
        Match::ContainerName("app".into()),
        Program { exit: Some((Duration::from_secs(7), 0)), ..Program::default() },
    );
    // Resyncs a little slower than the relists (1 s), so that each finds one since.
    let n = Node::start_tuned(runtime, |c| c.sync_frequency = Duration::from_millis(1200)).await;
    n.write("quiet.yaml", &manifest("quiet", "busybox:1.35", ""));
    n.eventually("running", async |n| running(n, "quiet-node-a").await).await;
    // The start settled (its last change relisted and read), then two resyncs.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let statuses = || {
        let r = n.fake.runtime();
        (
            r.calls(Rpc::PodSandboxStatus),
            r.calls(Rpc::ContainerStatus),
            r.calls(Rpc::ListContainers),
        )
    };
    let before = statuses();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = statuses();
    assert_eq!((after.0, after.1), (before.0, before.1), "resyncs plan from the status read last");
    assert!(after.2 > before.2, "the PLEG relists meanwhile");
    // The container exits: the PLEG sees it, the next sync reads afresh and restarts it.
    n.eventually("restarted", async |n| {
        n.pod("quiet-node-a")
            .await
            .filter(|p| p["status"]["containerStatuses"][0]["restartCount"] == 1)
    })
    .await;
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_policies_never_and_on_failure_are_honoured() {
    let runtime = FakeRuntime::new();
    runtime.set_program(Match::Any, Program::prints_and_exits(&["done"], 0));
    runtime
        .set_program(Match::ContainerName("fails".into()), Program::prints_and_exits(&["oops"], 3));
    let n = Node::start(runtime).await;
    let two = |policy: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {}\nspec:\n  restartPolicy: {policy}\n  containers:\n  - name: ok\n    image: busybox:1.35\n  - name: fails\n    image: busybox:1.35\n",
            policy.to_lowercase()
        )
    };
    n.write("never.yaml", &two("Never"));
    n.write("onfailure.yaml", &two("OnFailure"));
    let never = n
        .eventually("never: Failed", async |n| {
            n.pod("never-node-a").await.filter(|p| p["status"]["phase"] == "Failed")
        })
        .await;
    for cs in never["status"]["containerStatuses"].as_array().unwrap() {
        assert_eq!(cs["restartCount"], 0, "Never restarts nothing: {cs}");
    }
    let on_failure = n
        .eventually("onfailure: the failing one restarted", async |n| {
            let p = n.pod("onfailure-node-a").await?;
            let cs = p["status"]["containerStatuses"].as_array()?.clone();
            cs.iter()
                .any(|c| c["name"] == "fails" && c["restartCount"].as_i64().is_some_and(|r| r >= 1))
                .then_some(cs)
        })
        .await;
    let ok = on_failure.iter().find(|c| c["name"] == "ok").unwrap();
    assert_eq!(
        (ok["restartCount"].as_i64(), ok["state"]["terminated"]["exitCode"].as_i64()),
        (Some(0), Some(0)),
        "a succeeded container stays done: {ok}"
    );
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_in_order_before_app_containers() {
    let runtime = FakeRuntime::new();
    runtime
        .set_program(Match::ContainerName("init-1".into()), Program::prints_and_exits(&["one"], 0));
    runtime
        .set_program(Match::ContainerName("init-2".into()), Program::prints_and_exits(&["two"], 0));
    let n = Node::start(runtime.clone()).await;
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: init\nspec:\n  initContainers:\n  - name: init-1\n    image: busybox:1.35\n  - name: init-2\n    image: busybox:1.35\n  containers:\n  - name: app\n    image: busybox:1.35\n";
    n.write("init.yaml", text);
    n.eventually("init: Running", async |n| running(n, "init-node-a").await).await;
    let mut created: Vec<(i64, String)> = runtime
        .containers()
        .into_iter()
        .map(|c| (c.created_at, c.metadata.unwrap().name))
        .collect();
    created.sort();
    let order: Vec<&str> = created.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(order, ["init-1", "init-2", "app"]);
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_killed_and_restarted_adopts_running_pods_without_restarts() {
    let runtime = FakeRuntime::new();
    let mut n = Node::start(runtime.clone()).await;
    for i in 0..10 {
        n.write(&format!("p{i}.yaml"), &manifest(&format!("p{i}"), "busybox:1.35", ""));
    }
    for i in 0..10 {
        n.eventually("all running", async |n| running(n, &format!("p{i}-node-a")).await).await;
    }
    let before: Vec<String> = runtime.containers().into_iter().map(|c| c.id).collect();
    let starts = runtime.calls(fake_cri::Rpc::StartContainer);
    n.restart_kubelet_abruptly().await;
    for i in 0..10 {
        n.eventually("adopted", async |n| running(n, &format!("p{i}-node-a")).await).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await; // a few syncs and housekeeping rounds
    let mut after: Vec<String> = runtime.containers().into_iter().map(|c| c.id).collect();
    let mut before = before;
    before.sort();
    after.sort();
    assert_eq!(after, before, "the same containers, none restarted");
    assert_eq!(runtime.calls(fake_cri::Rpc::StartContainer), starts);
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_manifest_stops_its_pod_within_the_grace_period() {
    let runtime = FakeRuntime::new();
    runtime
        .set_program(Match::Any, Program { on_sigterm: OnSigterm::Ignore, ..Program::default() });
    let n = Node::start(runtime.clone()).await;
    let file = n.write("slow.yaml", &manifest("slow", "busybox:1.35", ""));
    n.eventually("slow running", async |n| running(n, "slow-node-a").await).await;
    let started = Instant::now();
    std::fs::remove_file(file).unwrap();
    n.eventually("gone", async |n| n.fake.runtime().sandboxes().is_empty().then_some(())).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(6),
        "the 3 s grace period is honoured: {took:?}"
    );
    n.shutdown().await;
}

/// The id of the newest container named `name`.
fn container_id(runtime: &FakeRuntime, name: &str) -> Option<String> {
    runtime
        .containers()
        .into_iter()
        .filter(|c| c.metadata.as_ref().is_some_and(|m| m.name == name))
        .max_by_key(|c| c.created_at)
        .map(|c| c.id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_runs_beside_the_app_and_is_restarted_when_it_exits() {
    let runtime = FakeRuntime::new();
    let n = Node::start(runtime.clone()).await;
    let extra =
        "  initContainers:\n  - name: side\n    image: busybox:1.35\n    restartPolicy: Always\n";
    n.write("web.yaml", &manifest("web", "busybox:1.35", extra));
    n.eventually("web running with its sidecar", async |n| {
        let p = running(n, "web-node-a").await?;
        (p["status"]["initContainerStatuses"][0]["ready"] == true).then_some(())
    })
    .await;
    let side = container_id(&runtime, "side").unwrap();
    assert!(runtime.exit_container(&side, 0));
    n.eventually("the sidecar restarted", async |n| {
        let p = n.pod("web-node-a").await?;
        let s = &p["status"]["initContainerStatuses"][0];
        (s["restartCount"] == 1 && s["state"]["running"].is_object()).then_some(())
    })
    .await;
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_probes_decide_readiness_and_a_failed_liveness_probe_restarts() {
    let runtime = FakeRuntime::new();
    let healthy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = healthy.clone();
    runtime.set_exec_handler(move |_container, cmd| fake_cri::ExecOutcome {
        exit_code: i32::from(cmd == ["check"] && !flag.load(std::sync::atomic::Ordering::SeqCst)),
        ..Default::default()
    });
    let n = Node::start(runtime.clone()).await;
    let probe = |kind: &str| {
        format!(
            "    {kind}:\n      exec:\n        command: [check]\n      periodSeconds: 1\n      failureThreshold: 1\n"
        )
    };
    let extra = format!(
        "  containers:\n  - name: app\n    image: busybox:1.35\n{}",
        probe("readinessProbe")
    );
    let text = manifest("ready", "busybox:1.35", "")
        .replace("  containers:\n  - name: app\n    image: busybox:1.35\n", &extra);
    n.write("ready.yaml", &text);
    n.eventually("running, not ready", async |n| {
        let p = n.pod("ready-node-a").await?;
        let c = &p["status"]["containerStatuses"][0];
        (c["state"]["running"].is_object() && c["started"] == true && c["ready"] == false)
            .then_some(())
    })
    .await;
    healthy.store(true, std::sync::atomic::Ordering::SeqCst);
    n.eventually("ready", async |n| running(n, "ready-node-a").await).await;

    let live = text.replace("readinessProbe", "livenessProbe").replace("name: ready", "name: live");
    n.write("live.yaml", &live);
    n.eventually("live running", async |n| running(n, "live-node-a").await).await;
    healthy.store(false, std::sync::atomic::Ordering::SeqCst);
    let p = n
        .eventually("restarted after the liveness failure", async |n| {
            let p = n.pod("live-node-a").await?;
            (p["status"]["containerStatuses"][0]["restartCount"] == 1).then_some(p)
        })
        .await;
    let last = &p["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert!(last.is_object(), "the killed container is the last state: {p}");
    let events = n.get("/events").await.unwrap();
    let said =
        |reason: &str, text: &str| {
            events.as_array().unwrap().iter().any(|e| {
                e["reason"] == reason && e["message"].as_str().unwrap_or("").contains(text)
            })
        };
    assert!(said("Unhealthy", "Liveness probe failed"), "{events}");
    assert!(said("Killing", "Container app failed liveness probe, will be restarted"), "{events}");
    n.shutdown().await;
}

/// The `/events` entries about `pod` with `reason`, as (fieldPath, message).
async fn events_of(n: &Node, pod: &str, reason: &str) -> Vec<(String, String)> {
    let events = n.get("/events").await.unwrap_or_default();
    let object = format!("pod/default/{pod}");
    events
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["object"] == object.as_str() && e["reason"] == reason)
        .map(|e| {
            let field = e["fieldPath"].as_str().unwrap_or_default().to_string();
            (field, e["message"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_start_pulls_and_crash_loop_are_told_in_upstreams_events() {
    let runtime = FakeRuntime::new();
    runtime.set_program(
        Match::ContainerName("crasher".into()),
        Program { exit: Some((Duration::from_millis(50), 1)), ..Program::default() },
    );
    runtime.refuse_pulls_of("missing:1").unwrap();
    let n = Node::start(runtime).await;
    n.write("web.yaml", &manifest("web", "busybox:1.35", ""));
    n.write("pulled.yaml", &manifest("pulled", "other:2", ""));
    n.write("absent.yaml", &manifest("absent", "missing:1", ""));
    let missing = n.dir.path().join("not-there");
    let volume = format!(
        "  volumes:\n  - name: data\n    hostPath:\n      path: {}\n      type: Directory\n",
        missing.display()
    );
    n.write("mount.yaml", &manifest("mount", "busybox:1.35", &volume));
    n.write(
        "crash.yaml",
        &manifest("crash", "busybox:1.35", "").replace("- name: app", "- name: crasher"),
    );
    let app = "spec.containers{app}".to_string();
    n.eventually("web started", async |n| {
        (!events_of(n, "web-node-a", "Started").await.is_empty()).then_some(())
    })
    .await;
    assert_eq!(
        events_of(&n, "web-node-a", "Pulled").await,
        [(
            app.clone(),
            "Container image \"busybox:1.35\" already present on machine and can be accessed by the pod".into()
        )]
    );
    assert_eq!(
        events_of(&n, "web-node-a", "Created").await,
        [(app.clone(), "Container created".into())]
    );
    assert_eq!(
        events_of(&n, "web-node-a", "Started").await,
        [(app.clone(), "Container started".into())]
    );

    // An image that is not there is pulled, and says so.
    let pulled = n
        .eventually("other:2 pulled", async |n| events_of(n, "pulled-node-a", "Pulled").await.pop())
        .await;
    assert_eq!(
        events_of(&n, "pulled-node-a", "Pulling").await,
        [(app.clone(), "Pulling image \"other:2\"".into())]
    );
    assert!(
        pulled.1.starts_with("Successfully pulled image \"other:2\" in ")
            && pulled.1.contains(" including waiting). Image size: ")
            && pulled.1.ends_with(" bytes."),
        "{pulled:?}"
    );

    // One that cannot be pulled: Failed twice (the pull, then the container), then BackOff.
    let failed = n
        .eventually("missing:1 failed", async |n| {
            let f = events_of(n, "absent-node-a", "Failed").await;
            (f.len() >= 2).then_some(f)
        })
        .await;
    assert!(failed[0].1.starts_with("Failed to pull image \"missing:1\": "), "{failed:?}");
    assert_eq!(failed[1], (app.clone(), "Error: ErrImagePull".into()));

    // A volume that cannot be set up.
    let mount = n
        .eventually("FailedMount", async |n| {
            events_of(n, "mount-node-a", "FailedMount").await.pop()
        })
        .await;
    assert!(
        mount.0.is_empty()
            && mount.1.starts_with("MountVolume.SetUp failed for volume \"data\" : "),
        "{mount:?}"
    );

    // A crashing container backs off, as upstream words it.
    let backoff = n
        .eventually("BackOff", async |n| events_of(n, "crash-node-a", "BackOff").await.pop())
        .await;
    let crash = running(&n, "crash-node-a").await.or(n.pod("crash-node-a").await).unwrap();
    let uid = crash["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(
        backoff,
        (
            "spec.containers{crasher}".into(),
            format!(
                "Back-off restarting failed container crasher in pod crash-node-a_default({uid})"
            )
        )
    );

    // Removing a manifest stops its containers, each with a Killing event.
    std::fs::remove_file(n.dir.path().join("manifests/web.yaml")).unwrap();
    let killing =
        n.eventually("Killing", async |n| events_of(n, "web-node-a", "Killing").await.pop()).await;
    assert_eq!(killing, (app, "Stopping container app".into()));
    n.shutdown().await;
}
