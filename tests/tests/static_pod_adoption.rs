//! Static pods the kubelet finds running are adopted, not replaced: pods upstream's kubelet
//! v1.35 made (its `crictl inspect` output replayed into the fake runtime), and on containerd
//! our own across restarts and in-place edits; a manifest edit restarts only what upstream
//! would.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::cluster::StandaloneNode;
use e2e::eventually;
use e2e::kubelet::{Kubelet, NODE, RuntimeSide};
use e2e::require;
use fake_cri::FakeCriServer;
use proto::cri;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/upstream-kubelet-v1.35")
}

/// Container name → (id, attempt) of every container the runtime holds (the newest of a name).
fn containers(list: &[cri::Container]) -> BTreeMap<String, (String, u32)> {
    // Oldest first, so the newest of a name is the one kept.
    let mut by_age: Vec<&cri::Container> = list.iter().collect();
    by_age.sort_by_key(|c| c.created_at);
    by_age
        .into_iter()
        .map(|c| {
            let pod = &c.labels["io.kubernetes.pod.name"];
            let m = c.metadata.as_ref().unwrap();
            (format!("{pod}/{}", m.name), (c.id.clone(), m.attempt))
        })
        .collect()
}

#[tokio::test]
async fn pods_upstreams_kubelet_made_are_adopted_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
    let fake = server.runtime().clone();
    fake.add_image("docker.io/library/busybox:bars").unwrap();
    fake.add_image("docker.io/library/pause:bars").unwrap();
    fake.import_crictl(&golden().join("cri"), &|p| p).unwrap();
    let sandboxes_before: Vec<String> = fake.sandboxes().into_iter().map(|s| s.id).collect();
    let before = containers(&fake.containers());
    assert_eq!(before.len(), 5);

    let side = RuntimeSide {
        dir: dir.path().to_path_buf(),
        endpoint: server.endpoint().to_string(),
        cgroup_parent: "/".into(),
    };
    let mut kubelet = Kubelet::start_standalone_on(
        &side,
        "node-a",
        "cgroupsPerQOS: false\nenforceNodeAllocatable: []\n",
        &[],
    )
    .unwrap();
    for file in ["simple.yaml", "rich.yaml", "hostnet.yaml"] {
        let text = std::fs::read_to_string(golden().join("manifests").join(file)).unwrap();
        kubelet.write_manifest(file, &text).unwrap();
    }
    for (name, uid) in [
        ("simple-node-a", "0d763f47b8478462e226616ccca4d7ac"),
        ("rich-node-a", "edddae794c4505e1b9198c068dbd121f"),
    ] {
        let pod = eventually(&format!("{name} running"), WAIT, POLL, || kubelet.running(name))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", kubelet.log_tail(60)));
        assert_eq!(pod["metadata"]["uid"], uid, "{name} keeps the UID upstream gave it");
        for c in pod["status"]["containerStatuses"].as_array().unwrap() {
            assert_eq!(c["restartCount"], 0, "{name}: {c}");
        }
    }
    eventually("hostnet running", WAIT, POLL, || kubelet.running("hostnet-node-a")).await.unwrap();
    // A few sync rounds later nothing was replaced.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sandboxes_after: Vec<String> = fake.sandboxes().into_iter().map(|s| s.id).collect();
    assert_eq!(sandboxes_after.len(), 3, "{sandboxes_after:?}");
    for id in &sandboxes_before {
        assert!(sandboxes_after.contains(id), "sandbox {id} kept");
    }
    assert_eq!(containers(&fake.containers()), before, "no container created or replaced");
    assert_eq!(fake.calls(fake_cri::Rpc::RunPodSandbox), 0, "the kubelet ran no sandbox");
    assert_eq!(fake.calls(fake_cri::Rpc::StopContainer), 0);
    let log = kubelet.log_tail(usize::MAX);
    assert!(log.contains("by: RuntimeConfig"), "adopted by what the runtime recorded:\n{log}");
    kubelet.stop();
    server.shutdown().await.unwrap();
}

fn pod(image: &str, label: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {{tier: {label}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: a\n    image: {image}\n    command: [sleep, \"3600\"]\n  - name: b\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n"
    )
}

#[tokio::test]
async fn an_in_place_edit_restarts_only_the_changed_image_and_a_restart_keeps_everything() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut n = StandaloneNode::start().await.unwrap();
    let name = format!("web-{NODE}");
    let list = |n: &StandaloneNode| {
        let cri = n.cri.clone();
        async move {
            let req = cri::ListContainersRequest::default();
            containers(&cri.list_containers(req).await.unwrap().containers)
        }
    };
    n.kubelet.write_manifest("web.yaml", &pod("busybox:1.35", "one")).unwrap();
    let first = n.running(&name, WAIT, POLL).await;
    let uid = first["metadata"]["uid"].as_str().unwrap().to_string();
    let sandboxes = n.sandboxes().await;
    assert_eq!(sandboxes.len(), 1);
    let before = list(&n).await;

    // A label: nothing restarts, the pod keeps its UID.
    n.kubelet.write_manifest("web.yaml", &pod("busybox:1.35", "two")).unwrap();
    eventually("the new label shown", WAIT, POLL, || async {
        n.kubelet.pod(&name).await.filter(|p| p["metadata"]["labels"]["tier"] == "two")
    })
    .await
    .unwrap_or_else(|e| n.fail(e));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(list(&n).await, before, "a label restarts nothing");
    assert_eq!(n.kubelet.pod(&name).await.unwrap()["metadata"]["uid"], uid.as_str());

    // An image: only that container restarts, in the same sandbox.
    n.kubelet.write_manifest("web.yaml", &pod("busybox-httpd:1.35", "two")).unwrap();
    // Replaced and started: a kubelet stopped between the create and the start would find a
    // container never started, which it (as upstream's) starts anew.
    let after = eventually("container a replaced and running", WAIT, POLL, || async {
        let all = n.cri.list_containers(cri::ListContainersRequest::default()).await.ok()?;
        let running = |id: &str| {
            all.containers
                .iter()
                .any(|c| c.id == id && c.state == cri::ContainerState::ContainerRunning as i32)
        };
        let now = containers(&all.containers);
        let replaced: Vec<_> =
            now.values().filter(|(id, _)| !before.values().any(|(b, _)| b == id)).collect();
        (replaced.len() == 1 && running(&replaced[0].0)).then_some(now)
    })
    .await
    .unwrap_or_else(|e| n.fail(e));
    let b = format!("{name}/b");
    assert_eq!(after[&b], before[&b], "container b untouched");
    let p = n.running(&name, WAIT, POLL).await;
    assert_eq!(p["metadata"]["uid"], uid.as_str());
    let now_sandboxes = n.sandboxes().await;
    assert_eq!(now_sandboxes.len(), 1);
    assert_eq!(now_sandboxes[0].id, sandboxes[0].id, "the sandbox is kept");

    // A restart of the kubelet: the edited pod runs under a UID its content does not give;
    // its recorded identity keeps it, and nothing restarts.
    let running_before = list(&n).await;
    n.kubelet.stop();
    n.kubelet.restart().unwrap();
    let again = n.running(&name, WAIT, POLL).await;
    assert_eq!(again["metadata"]["uid"], uid.as_str(), "adopted after the restart");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let running_after = list(&n).await;
    if running_after != running_before {
        n.fail(format!(
            "a kubelet restart restarts nothing: {running_before:?} → {running_after:?}"
        ));
    }
    assert!(n.kubelet.log_tail(usize::MAX).contains("by: RecordedIdentity"));
    n.teardown().await;
}

#[tokio::test]
async fn a_kubelet_killed_while_a_manifest_is_invalid_comes_back_running_its_last_good_pod() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut n = StandaloneNode::start().await.unwrap();
    let name = format!("web-{NODE}");
    n.kubelet.write_manifest("web.yaml", &pod("busybox:1.35", "one")).unwrap();
    let first = n.running(&name, WAIT, POLL).await;
    let uid = first["metadata"]["uid"].as_str().unwrap().to_string();
    let req = || cri::ListContainersRequest::default();
    let before = containers(&n.cri.list_containers(req()).await.unwrap().containers);
    // The checkpoint is written once the version is accepted.
    let checkpoints = n.kubelet.root_dir().join("static-pod-checkpoints");
    eventually("the checkpoint", WAIT, POLL, || async {
        (std::fs::read_dir(&checkpoints).ok()?.count() == 1).then_some(())
    })
    .await
    .unwrap_or_else(|e| n.fail(e));

    n.kubelet.kill9();
    n.kubelet
        .write_manifest("web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n")
        .unwrap();
    n.kubelet.restart().unwrap();
    let report = eventually("the rejection reported", WAIT, POLL, || async {
        let m = n.kubelet.get("/manifests").await?;
        m.as_array()?.iter().find(|r| r["state"] == "rejected").cloned()
    })
    .await
    .unwrap_or_else(|e| n.fail(e));
    assert_eq!(report["runningPreviousVersion"], true, "{report}");
    assert!(report["reason"].as_str().unwrap().contains("web.yaml"), "{report}");
    let again = n.running(&name, WAIT, POLL).await;
    assert_eq!(again["metadata"]["uid"], uid.as_str(), "the last good pod, not a new one");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = containers(&n.cri.list_containers(req()).await.unwrap().containers);
    assert_eq!(after, before, "its containers were not restarted");
    n.teardown().await;
}

fn crasher(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: busybox:1.35\n    command: [sh, -c, \"sleep 0.2; exit 1\"]\n"
    )
}

/// The newest container of pod `pod`: its attempt and the back-off it was started under.
async fn newest(n: &StandaloneNode, pod: &str) -> Option<(u32, String)> {
    let list = n.cri.list_containers(cri::ListContainersRequest::default()).await.ok()?;
    list.containers
        .iter()
        .filter(|c| c.labels["io.kubernetes.pod.name"] == pod)
        .map(|c| {
            let backoff = c.annotations.get("kubelet-rs.io/restart-backoff").cloned();
            (c.metadata.as_ref().map_or(0, |m| m.attempt), backoff.unwrap_or_default())
        })
        .max()
}

#[tokio::test]
async fn a_pods_own_crash_back_off_is_followed_and_survives_a_kubelet_restart() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut n = StandaloneNode::start().await.unwrap();
    let (fast, slow) = (format!("fast-{NODE}"), format!("slow-{NODE}"));
    let annotations =
        "kubelet-rs.io/crash-loop-backoff-initial: 1s, kubelet-rs.io/crash-loop-backoff-max: 5s";
    n.kubelet.write_manifest("fast.yaml", &crasher("fast", annotations)).unwrap();
    n.kubelet.write_manifest("slow.yaml", &crasher("slow", "")).unwrap();
    // The first restart is immediate, then 1s, 2s, 4s, 5s, 5s: each container records the
    // delay it was started under.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let mut seen: Vec<(u32, String)> = Vec::new();
    while seen.iter().filter(|(_, b)| b == "5s").count() < 2 {
        if std::time::Instant::now() > deadline {
            n.fail(format!("the fast pod never reached its 5s maximum twice: {seen:?}"));
        }
        if let Some((attempt, backoff)) = newest(&n, &fast).await
            && seen.last().is_none_or(|(a, _)| *a != attempt)
        {
            seen.push((attempt, backoff));
        }
        tokio::time::sleep(POLL).await;
    }
    let delays: Vec<&str> = seen.iter().map(|(_, b)| b.as_str()).collect();
    assert_eq!(delays, ["", "1s", "2s", "4s", "5s", "5s"], "attempts: {seen:?}");
    // Meanwhile the default pod waits upstream's 10 s, then 20 s.
    let (_, slow_backoff) = newest(&n, &slow).await.unwrap();
    assert!(["10s", "20s", "40s"].contains(&slow_backoff.as_str()), "{slow_backoff}");

    // A kubelet restart: the next restart of the fast pod counts on from 5 s, not from 1 s.
    let (before, _) = newest(&n, &fast).await.unwrap();
    n.kubelet.kill9();
    n.kubelet.restart().unwrap();
    let (_, after) = eventually("a restart after the kubelet's", WAIT, POLL, || async {
        newest(&n, &fast).await.filter(|(a, _)| *a > before)
    })
    .await
    .unwrap_or_else(|e| n.fail(e));
    assert_eq!(after, "5s", "the back-off survived the kubelet's restart");
    n.teardown().await;
}

fn ordered(name: &str, after: &str, ready_after: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{kubelet-rs.io/after: \"{after}\"}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n    readinessProbe:\n      exec: {{command: [\"true\"]}}\n      initialDelaySeconds: {ready_after}\n      periodSeconds: 1\n"
    )
}

/// When pod `name`'s container started, as the kubelet reports it (RFC 3339).
fn started_at(pod: &serde_json::Value) -> jiff::Timestamp {
    pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn ready_at(pod: &serde_json::Value) -> jiff::Timestamp {
    let conditions = pod["status"]["conditions"].as_array().unwrap();
    let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
    ready["lastTransitionTime"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn static_pods_start_in_their_declared_order_and_a_cycle_is_reported() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = StandaloneNode::start().await.unwrap();
    // Written last first: c after b after a, a Ready 3 s after it starts.
    n.kubelet.write_manifest("c.yaml", &ordered("c", "b", 0)).unwrap();
    n.kubelet.write_manifest("b.yaml", &ordered("b", "a", 2)).unwrap();
    n.kubelet.write_manifest("a.yaml", &ordered("a", "", 3)).unwrap();
    n.kubelet.write_manifest("d.yaml", &ordered("d", "e", 0)).unwrap();
    n.kubelet.write_manifest("e.yaml", &ordered("e", "d", 0)).unwrap();
    n.kubelet.write_manifest("f.yaml", &ordered("f", "nobody", 0)).unwrap();
    let held = eventually("b held while a is not Ready", WAIT, POLL, || async {
        let b = n.kubelet.pod(&format!("b-{NODE}")).await?;
        let waiting = &b["status"]["containerStatuses"][0]["state"]["waiting"];
        (waiting["reason"] == "WaitingForDependencies").then(|| waiting.clone())
    })
    .await
    .unwrap_or_else(|e| n.fail(e));
    assert!(held["message"].as_str().unwrap().contains(&format!("default/a-{NODE}")), "{held}");
    let c = n.running(&format!("c-{NODE}"), WAIT, POLL).await;
    let b = n.kubelet.running(&format!("b-{NODE}")).await.unwrap();
    let a = n.kubelet.running(&format!("a-{NODE}")).await.unwrap();
    assert!(started_at(&b) >= ready_at(&a), "b started once a was Ready:\n{a}\n{b}");
    assert!(started_at(&c) >= ready_at(&b), "c started once b was Ready:\n{b}\n{c}");
    // The cycle's pods start anyway; the cycle and the unknown name are reported per file.
    n.running(&format!("d-{NODE}"), WAIT, POLL).await;
    n.running(&format!("e-{NODE}"), WAIT, POLL).await;
    let reports = n.kubelet.get("/manifests").await.unwrap();
    let reason = |file: &str| {
        reports
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["file"].as_str().unwrap().ends_with(file))
            .unwrap()["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(reason("d.yaml").contains("a cycle"), "{reports}");
    assert!(reason("f.yaml").contains("nobody"), "{reports}");
    let f = n.kubelet.pod(&format!("f-{NODE}")).await.unwrap();
    assert_eq!(
        f["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
        "WaitingForDependencies"
    );

    // A dependency's restart does not restart its dependents.
    let b_container = b["status"]["containerStatuses"][0]["containerID"].clone();
    n.kubelet
        .write_manifest(
            "a.yaml",
            &ordered("a", "", 3).replace("busybox:1.35", "busybox-httpd:1.35"),
        )
        .unwrap();
    eventually("a restarted", WAIT, POLL, || async {
        let a2 = n.kubelet.running(&format!("a-{NODE}")).await?;
        (a2["status"]["containerStatuses"][0]["containerID"]
            != a["status"]["containerStatuses"][0]["containerID"])
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| n.fail(e));
    let b2 = n.kubelet.pod(&format!("b-{NODE}")).await.unwrap();
    assert_eq!(b2["status"]["containerStatuses"][0]["containerID"], b_container, "b kept running");
    n.teardown().await;
}

/// Upstream's pods, replayed into a real containerd from their `crictl inspect` output (the
/// image swapped for the test image, host paths moved under this kubelet's dirs), then adopted.
#[tokio::test]
async fn pods_another_kubelet_made_on_containerd_are_adopted_by_what_containerd_recorded() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let containerd = e2e::containerd::Containerd::start(Default::default()).await.unwrap();
    containerd.import_test_images().unwrap();
    let cri = containerd.client().await.unwrap();
    let kubelet_dir = containerd.dir().join("kubelet-node-a");
    let (root, logs) = (kubelet_dir.join("root"), kubelet_dir.join("logs"));
    let rewrite = |p: String| {
        p.replace("<capture-dir>/root", &root.display().to_string())
            .replace("/var/log/pods", &logs.display().to_string())
    };
    let mut captured = fake_cri::read_crictl(&golden().join("cri"), &rewrite).unwrap();
    const IMAGE: &str = "docker.io/library/busybox:1.35";
    for pod in &mut captured {
        let linux = pod.sandbox.linux.as_mut().unwrap();
        let recorded = linux.cgroup_parent.clone();
        linux.cgroup_parent = format!("{}{recorded}", containerd.cgroup_parent());
        std::fs::create_dir_all(&pod.sandbox.log_directory).unwrap();
        let sandbox = cri
            .run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(pod.sandbox.clone()),
                runtime_handler: String::new(),
            })
            .await
            .unwrap()
            .pod_sandbox_id;
        // Init containers first, as they ran.
        pod.containers.sort_by_key(|c| c.state != "CONTAINER_EXITED");
        for c in &mut pod.containers {
            c.config.image.as_mut().unwrap().image = IMAGE.into();
            for m in &c.config.mounts {
                let path = Path::new(&m.host_path);
                if !path.starts_with(&root) {
                    continue;
                }
                if m.container_path == "/work" {
                    std::fs::create_dir_all(path).unwrap();
                } else {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(path, "").unwrap();
                }
            }
            let req = cri::CreateContainerRequest {
                pod_sandbox_id: sandbox.clone(),
                config: Some(c.config.clone()),
                sandbox_config: Some(pod.sandbox.clone()),
            };
            let id = cri.create_container(req).await.unwrap().container_id;
            cri.start_container(cri::StartContainerRequest { container_id: id.clone() })
                .await
                .unwrap();
            if c.state == "CONTAINER_EXITED" {
                // The init container: wait for it to finish, as it had.
                eventually("the init container done", WAIT, POLL, || async {
                    let req =
                        cri::ContainerStatusRequest { container_id: id.clone(), verbose: false };
                    let s = cri.container_status(req).await.ok()?.status?;
                    (s.state == cri::ContainerState::ContainerExited as i32).then_some(())
                })
                .await
                .unwrap();
            }
        }
    }
    let req = || cri::ListContainersRequest::default();
    let before = containers(&cri.list_containers(req()).await.unwrap().containers);
    assert_eq!(before.len(), 5, "{before:?}");

    let side = RuntimeSide {
        dir: containerd.dir().to_path_buf(),
        endpoint: containerd.endpoint().to_string(),
        cgroup_parent: containerd.cgroup_parent(),
    };
    let mut kubelet = Kubelet::start_standalone_on(&side, "node-a", "", &[]).unwrap();
    for file in ["simple.yaml", "rich.yaml", "hostnet.yaml"] {
        let text = std::fs::read_to_string(golden().join("manifests").join(file)).unwrap();
        kubelet.write_manifest(file, &text.replace("busybox:bars", "busybox:1.35")).unwrap();
    }
    for (name, uid) in [
        ("simple-node-a", "0d763f47b8478462e226616ccca4d7ac"),
        ("rich-node-a", "edddae794c4505e1b9198c068dbd121f"),
        ("hostnet-node-a", ""),
    ] {
        let pod = eventually(&format!("{name} running"), WAIT, POLL, || kubelet.running(name))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", kubelet.log_tail(80)));
        if !uid.is_empty() {
            assert_eq!(pod["metadata"]["uid"], uid, "{name} keeps its UID");
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = containers(&cri.list_containers(req()).await.unwrap().containers);
    assert_eq!(after, before, "no container created or replaced\n{}", kubelet.log_tail(80));
    let sandboxes =
        cri.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await.unwrap();
    assert_eq!(sandboxes.items.len(), 3, "no sandbox replaced");
    kubelet.stop();
    let report = containerd.stop().await;
    assert!(report.is_clean(), "teardown leaked: {report:#?}");
}
