use super::super::status::SandboxInfo;
use super::*;

fn plan(pod: &Pod, status: &PodRuntimeStatus) -> PodActions {
    compute_pod_actions(pod, status, &ProbeResults::default())
}

fn pod(restart: &str, init: &[&str], app: &[&str]) -> Pod {
    let c = |n: &&str| serde_json::json!({"name": n, "image": "busybox:1.35"});
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {
            "restartPolicy": restart,
            "initContainers": init.iter().map(c).collect::<Vec<_>>(),
            "containers": app.iter().map(c).collect::<Vec<_>>(),
        },
    }))
    .unwrap()
}

fn sandbox(ready: bool, attempt: u32) -> SandboxInfo {
    SandboxInfo {
        id: format!("sb{attempt}"),
        name: "p".into(),
        namespace: "default".into(),
        attempt,
        ready,
        ip: Some("10.0.0.2".into()),
        created_at: i64::from(attempt),
        host_network: false,
    }
}

/// A container as the runtime reports it, made from the spec's image.
fn ctr(pod: &Pod, name: &str, state: ContainerState, exit: i32) -> ContainerInfo {
    let spec = pod.spec.as_ref().unwrap();
    let c = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .unwrap();
    ContainerInfo {
        id: format!("id-{name}"),
        name: name.into(),
        state,
        hash: String::new(),
        restart_count: 0,
        created_at: 0,
        started_at: 0,
        finished_at: 0,
        exit_code: exit,
        reason: String::new(),
        message: String::new(),
        image: c.image.clone().unwrap_or_default(),
        image_ref: String::new(),
        image_id: String::new(),
        grace_seconds: None,
        message_file: None,
        message_from_logs: false,
        log_path: String::new(),
        restart_backoff: None,
    }
}

fn status(sandboxes: Vec<SandboxInfo>, containers: Vec<ContainerInfo>) -> PodRuntimeStatus {
    PodRuntimeStatus { uid: "u".into(), sandboxes, containers }
}

use ContainerState::{Exited, Running};

#[test]
fn a_new_pod_gets_a_sandbox_and_all_its_containers() {
    let p = pod("Always", &[], &["a", "b"]);
    let a = plan(&p, &status(vec![], vec![]));
    assert_eq!((a.kill_pod, a.create_sandbox, a.attempt), (true, true, 0));
    assert_eq!(a.containers_to_start, [0, 1]);
}

#[test]
fn a_healthy_pod_needs_nothing() {
    let p = pod("Always", &[], &["a"]);
    let a = plan(&p, &status(vec![sandbox(true, 0)], vec![ctr(&p, "a", Running, 0)]));
    assert_eq!(a, PodActions { sandbox_id: Some("sb0".into()), ..PodActions::default() });
}

#[test]
fn a_dead_sandbox_is_replaced_with_the_next_attempt() {
    let p = pod("Always", &[], &["a"]);
    let a = plan(&p, &status(vec![sandbox(false, 2)], vec![ctr(&p, "a", Exited, 0)]));
    assert!(a.kill_pod && a.create_sandbox);
    assert_eq!((a.attempt, a.containers_to_start.as_slice()), (3, &[0][..]));
    let mut no_ip = sandbox(true, 0);
    no_ip.ip = None;
    assert!(plan(&p, &status(vec![no_ip], vec![])).create_sandbox);
}

#[test]
fn restart_policies_decide_what_restarts() {
    let cases = [
        ("Always", 0, vec![0usize], false),
        ("Always", 1, vec![0], false),
        ("OnFailure", 1, vec![0], false),
        ("OnFailure", 0, vec![], true),
        ("Never", 1, vec![], true),
        ("Never", 0, vec![], true),
    ];
    for (policy, exit, start, kill) in cases {
        let p = pod(policy, &[], &["a"]);
        let a = plan(&p, &status(vec![sandbox(true, 0)], vec![ctr(&p, "a", Exited, exit)]));
        assert_eq!(a.containers_to_start, start, "{policy} exit {exit}");
        assert_eq!(a.kill_pod, kill, "{policy} exit {exit}: a finished pod stops its sandbox");
    }
}

#[test]
fn a_finished_never_pod_does_not_get_a_new_sandbox() {
    let p = pod("Never", &[], &["a"]);
    let a = plan(&p, &status(vec![sandbox(false, 0)], vec![ctr(&p, "a", Exited, 0)]));
    assert!(a.kill_pod && !a.create_sandbox && a.containers_to_start.is_empty());
}

#[test]
fn a_changed_image_restarts_the_container() {
    let p = pod("Always", &[], &["a"]);
    let mut c = ctr(&p, "a", Running, 0);
    c.image = "other:2".into();
    let a = plan(&p, &status(vec![sandbox(true, 0)], vec![c]));
    assert_eq!(a.containers_to_start, [0]);
    assert_eq!(a.containers_to_kill.len(), 1);
    assert!(a.containers_to_kill[0].message.contains("definition changed"));
}

#[test]
fn what_the_runtime_spells_differently_or_records_no_hash_for_is_not_a_change() {
    // Upstream's containers carry upstream's hash and containerd's spelling of the image;
    // an older build's carry another hash: none of it restarts a container.
    let p = pod("Always", &[], &["a"]);
    let mut c = ctr(&p, "a", Running, 0);
    c.hash = "4b3e9274".into();
    c.image = format!("docker.io/library/{}", c.image);
    let a = plan(&p, &status(vec![sandbox(true, 0)], vec![c]));
    assert!(a.containers_to_kill.is_empty() && a.containers_to_start.is_empty(), "{a:?}");
}

#[test]
fn init_containers_run_one_at_a_time_in_order() {
    let p = pod("Always", &["i0", "i1"], &["a"]);
    let fresh = plan(&p, &status(vec![], vec![]));
    assert_eq!(
        (fresh.init_containers_to_start.as_slice(), fresh.containers_to_start.len()),
        (&[0][..], 0)
    );
    let sb = || vec![sandbox(true, 0)];
    let running = plan(&p, &status(sb(), vec![ctr(&p, "i0", Running, 0)]));
    assert_eq!(
        running.init_containers_to_start,
        Vec::<usize>::new(),
        "wait for the running init container"
    );
    assert!(running.containers_to_start.is_empty() && !running.kill_pod);
    let first_done = plan(&p, &status(sb(), vec![ctr(&p, "i0", Exited, 0)]));
    assert_eq!(first_done.init_containers_to_start, [1]);
    let all_done =
        plan(&p, &status(sb(), vec![ctr(&p, "i1", Exited, 0), ctr(&p, "i0", Exited, 0)]));
    assert_eq!(
        (all_done.init_containers_to_start.as_slice(), all_done.containers_to_start.as_slice()),
        (&[][..], &[0][..])
    );
}

#[test]
fn a_failed_init_container_is_retried_or_fails_the_pod() {
    let sb = || vec![sandbox(true, 0)];
    let p = pod("Always", &["i0"], &["a"]);
    let a = plan(&p, &status(sb(), vec![ctr(&p, "i0", Exited, 1)]));
    assert_eq!(a.init_containers_to_start, [0]);
    let p = pod("Never", &["i0"], &["a"]);
    let a = plan(&p, &status(sb(), vec![ctr(&p, "i0", Exited, 1)]));
    assert!(a.kill_pod && a.init_containers_to_start.is_empty());
}

/// A pod whose init containers named `s*` are sidecars.
fn sidecar_pod(restart: &str, init: &[&str], app: &[&str]) -> Pod {
    let mut p = pod(restart, init, app);
    for c in p.spec.as_mut().unwrap().init_containers.iter_mut().flatten() {
        if c.name.starts_with('s') {
            c.restart_policy = Some("Always".into());
        }
    }
    p
}

fn probed(pod: &mut Pod, name: &str, kind: ProbeKind) {
    let spec = pod.spec.as_mut().unwrap();
    let c = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
        .find(|c| c.name == name)
        .unwrap();
    let probe = serde_json::from_value(serde_json::json!({"exec": {"command": ["true"]}})).unwrap();
    match kind {
        ProbeKind::Liveness => c.liveness_probe = Some(probe),
        ProbeKind::Readiness => c.readiness_probe = Some(probe),
        ProbeKind::Startup => c.startup_probe = Some(probe),
    }
}

fn verdict(results: &ProbeResults, id: &str, kind: ProbeKind, result: ProbeResult) {
    results.set(crate::prober::ProbeUpdate {
        uid: "u".into(),
        container: String::new(),
        container_id: id.into(),
        kind,
        result,
    });
}

#[test]
fn a_running_sidecar_lets_the_next_init_container_and_then_the_app_start() {
    let p = sidecar_pod("Always", &["s0", "i1"], &["a"]);
    let sb = || vec![sandbox(true, 0)];
    let a = plan(&p, &status(sb(), vec![ctr(&p, "s0", Running, 0)]));
    assert_eq!(a.init_containers_to_start, [1], "the sidecar runs: next init container");
    assert!(a.containers_to_start.is_empty());
    let a = plan(&p, &status(sb(), vec![ctr(&p, "i1", Exited, 0), ctr(&p, "s0", Running, 0)]));
    assert_eq!(a.containers_to_start, [0], "initialized: the app starts beside the sidecar");
    assert!(a.init_containers_to_start.is_empty());
    let only_sidecar = sidecar_pod("Always", &["s0"], &["a"]);
    let a = plan(&only_sidecar, &status(sb(), vec![ctr(&only_sidecar, "s0", Running, 0)]));
    assert_eq!((a.init_containers_to_start.len(), a.containers_to_start.as_slice()), (0, &[0][..]));
}

#[test]
fn a_sidecar_with_a_startup_probe_holds_the_next_init_container_until_it_succeeds() {
    let mut p = sidecar_pod("Always", &["s0"], &["a"]);
    probed(&mut p, "s0", ProbeKind::Startup);
    let st = status(vec![sandbox(true, 0)], vec![ctr(&p, "s0", Running, 0)]);
    let results = ProbeResults::default();
    let a = compute_pod_actions(&p, &st, &results);
    assert!(a.containers_to_start.is_empty() && a.init_containers_to_start.is_empty());
    verdict(&results, "id-s0", ProbeKind::Startup, ProbeResult::Success);
    assert_eq!(compute_pod_actions(&p, &st, &results).containers_to_start, [0]);
    verdict(&results, "id-s0", ProbeKind::Startup, ProbeResult::Failure);
    let a = compute_pod_actions(&p, &st, &results);
    assert_eq!(a.init_containers_to_start, [0], "restarted");
    assert_eq!(a.containers_to_kill[0].message, "Init container s0 failed startup probe");
}

#[test]
fn an_exited_sidecar_restarts_whatever_the_restart_policy() {
    let p = sidecar_pod("Never", &["s0"], &["a"]);
    let a = plan(
        &p,
        &status(vec![sandbox(true, 0)], vec![ctr(&p, "a", Running, 0), ctr(&p, "s0", Exited, 1)]),
    );
    assert_eq!(a.init_containers_to_start, [0]);
    assert!(!a.kill_pod);
}

#[test]
fn a_job_pod_with_a_sidecar_is_done_when_its_app_containers_are() {
    let p = sidecar_pod("Never", &["s0"], &["a"]);
    let a = plan(
        &p,
        &status(vec![sandbox(true, 0)], vec![ctr(&p, "a", Exited, 0), ctr(&p, "s0", Running, 0)]),
    );
    assert!(a.kill_pod, "the sidecar is stopped with the pod");
    assert!(a.init_containers_to_start.is_empty() && a.containers_to_start.is_empty());
}

#[test]
fn a_failed_liveness_probe_kills_and_restarts_per_policy() {
    for (policy, restarted) in [("Always", true), ("OnFailure", true), ("Never", false)] {
        let mut p = pod(policy, &[], &["a", "b"]);
        probed(&mut p, "a", ProbeKind::Liveness);
        let spec = p.spec.as_mut().unwrap();
        spec.containers[0].liveness_probe.as_mut().unwrap().termination_grace_period_seconds =
            Some(5);
        let st = status(
            vec![sandbox(true, 0)],
            vec![ctr(&p, "a", Running, 0), ctr(&p, "b", Running, 0)],
        );
        let results = ProbeResults::default();
        verdict(&results, "id-a", ProbeKind::Liveness, ProbeResult::Success);
        assert!(compute_pod_actions(&p, &st, &results).containers_to_kill.is_empty());
        verdict(&results, "id-a", ProbeKind::Liveness, ProbeResult::Failure);
        let a = compute_pod_actions(&p, &st, &results);
        let k = &a.containers_to_kill[0];
        assert_eq!(k.reason, KillReason::Probe(ProbeKind::Liveness));
        assert_eq!(k.grace, Some(Duration::from_secs(5)), "the probe's own grace period");
        if restarted {
            assert_eq!(k.message, "Container a failed liveness probe, will be restarted");
            assert_eq!(a.containers_to_start, [0]);
        } else {
            assert_eq!(k.message, "Container a failed liveness probe");
            assert!(a.containers_to_start.is_empty() && !a.kill_pod, "b keeps the pod going");
        }
    }
}

#[test]
fn a_verdict_for_a_container_without_that_probe_is_ignored() {
    let p = pod("Always", &[], &["a"]);
    let st = status(vec![sandbox(true, 0)], vec![ctr(&p, "a", Running, 0)]);
    let results = ProbeResults::default();
    verdict(&results, "id-a", ProbeKind::Liveness, ProbeResult::Failure);
    assert!(compute_pod_actions(&p, &st, &results).containers_to_kill.is_empty());
}
