use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;

fn view<'a>(rt: &'a PodRuntimeStatus, waiting: &'a BTreeMap<String, Waiting>) -> SyncView<'a> {
    static NO_PROBES: std::sync::LazyLock<ProbeResults> =
        std::sync::LazyLock::new(ProbeResults::default);
    SyncView { runtime: rt, waiting, probes: &NO_PROBES, failure: None }
}
use crate::runtime::status::SandboxInfo;

fn pod(policy: &str, init: &[&str], app: &[&str]) -> Pod {
    let c = |n: &&str| serde_json::json!({"name": n, "image": "busybox:1.35"});
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"restartPolicy": policy, "initContainers": init.iter().map(c).collect::<Vec<_>>(), "containers": app.iter().map(c).collect::<Vec<_>>()},
    }))
    .unwrap()
}

fn info(
    name: &str,
    state: ContainerState,
    exit: i32,
    restarts: u32,
    created: i64,
) -> ContainerInfo {
    ContainerInfo {
        id: format!("{name}-{created}"),
        name: name.into(),
        state,
        hash: String::new(),
        restart_count: restarts,
        created_at: created,
        started_at: created + 1,
        finished_at: if state == ContainerState::Exited { created + 2 } else { 0 },
        exit_code: exit,
        reason: if exit == 0 { "Completed".into() } else { "Error".into() },
        message: String::new(),
        image: String::new(),
        image_ref: "docker.io/library/busybox@sha256:x".into(),
        image_id: String::new(),
        grace_seconds: None,
        message_file: None,
        message_from_logs: false,
        log_path: String::new(),
        restart_backoff: None,
    }
}

fn rt(containers: Vec<ContainerInfo>) -> PodRuntimeStatus {
    let sb = SandboxInfo {
        id: "sb".into(),
        name: "p".into(),
        namespace: "default".into(),
        attempt: 0,
        ready: true,
        ip: Some("10.0.0.9".into()),
        created_at: 0,
        host_network: false,
    };
    let mut s = PodRuntimeStatus { uid: "u".into(), sandboxes: vec![sb], containers };
    s.sort();
    s
}

const NODE: NodeView<'static> = NodeView { runtime_name: "containerd", host_ip: Some("192.0.2.2") };

#[test]
fn a_running_pod_is_running_and_ready() {
    let s = generate(
        &pod("Always", &[], &["a"]),
        view(&rt(vec![info("a", ContainerState::Running, 0, 0, 10)]), &BTreeMap::new()),
        &NODE,
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!((s.pod_ip.as_deref(), s.host_ip.as_deref()), (Some("10.0.0.9"), Some("192.0.2.2")));
    let cs = &s.container_statuses.unwrap()[0];
    assert!(cs.ready && cs.state.as_ref().unwrap().running.is_some());
    assert_eq!(cs.container_id.as_deref(), Some("containerd://a-10"));
    let ready = s.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True");
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
}

#[test]
fn a_crash_looping_container_waits_with_its_last_exit_and_restart_count() {
    let verdicts = BTreeMap::from([(
        "a".to_string(),
        Waiting { reason: "CrashLoopBackOff".into(), message: "back-off 10s".into() },
    )]);
    let s = generate(
        &pod("Always", &[], &["a"]),
        view(&rt(vec![info("a", ContainerState::Exited, 1, 3, 10)]), &verdicts),
        &NODE,
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let cs = &s.container_statuses.unwrap()[0];
    assert_eq!(
        cs.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code, 1);
    assert_eq!(cs.restart_count, 3);
    assert!(!cs.ready);
}

#[test]
fn restarted_containers_show_the_previous_run_as_last_state() {
    let s = generate(
        &pod("Always", &[], &["a"]),
        view(
            &rt(vec![
                info("a", ContainerState::Exited, 1, 0, 10),
                info("a", ContainerState::Running, 0, 1, 20),
            ]),
            &BTreeMap::new(),
        ),
        &NODE,
    );
    let cs = &s.container_statuses.unwrap()[0];
    assert!(cs.state.as_ref().unwrap().running.is_some());
    assert_eq!(cs.restart_count, 1);
    assert_eq!(cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code, 1);
}

#[test]
fn phases_follow_restart_policy() {
    let exited = |code| rt(vec![info("a", ContainerState::Exited, code, 0, 10)]);
    let phase_of = |policy: &str, code| {
        generate(&pod(policy, &[], &["a"]), view(&exited(code), &BTreeMap::new()), &NODE)
            .phase
            .unwrap()
    };
    assert_eq!(phase_of("Never", 0), "Succeeded");
    assert_eq!(phase_of("Never", 1), "Failed");
    assert_eq!(phase_of("OnFailure", 0), "Succeeded");
    assert_eq!(phase_of("Always", 0), "Running");
    let new = generate(&pod("Always", &[], &["a"]), view(&rt(vec![]), &BTreeMap::new()), &NODE);
    assert_eq!(new.phase.as_deref(), Some("Pending"));
    let w = &new.container_statuses.unwrap()[0];
    assert_eq!(
        w.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
        Some("ContainerCreating")
    );
}

#[test]
fn init_containers_keep_the_pod_pending_and_app_containers_initializing() {
    let s = generate(
        &pod("Always", &["i"], &["a"]),
        view(&rt(vec![info("i", ContainerState::Running, 0, 0, 10)]), &BTreeMap::new()),
        &NODE,
    );
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let app = &s.container_statuses.unwrap()[0];
    assert_eq!(
        app.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
        Some("PodInitializing")
    );
    let s = generate(
        &pod("Never", &["i"], &["a"]),
        view(&rt(vec![info("i", ContainerState::Exited, 1, 0, 10)]), &BTreeMap::new()),
        &NODE,
    );
    assert_eq!(s.phase.as_deref(), Some("Failed"));
}

#[test]
fn the_manager_keeps_start_time_and_unchanged_transition_times() {
    let m = StatusManager::default();
    let p = Arc::new(pod("Always", &[], &["a"]));
    m.set_pod(p.clone());
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
    let t1 = t0 + Duration::from_secs(5);
    m.set_status("u", generate(&p, view(&rt(vec![]), &BTreeMap::new()), &NODE), t0);
    m.set_status(
        "u",
        generate(
            &p,
            view(&rt(vec![info("a", ContainerState::Running, 0, 0, 10)]), &BTreeMap::new()),
            &NODE,
        ),
        t1,
    );
    let s = m.status("u").unwrap();
    assert_eq!(s.start_time, Some(now_time(t0)));
    let conds: HashMap<_, _> =
        s.conditions.unwrap().into_iter().map(|c| (c.type_.clone(), c)).collect();
    assert_eq!(conds["PodScheduled"].last_transition_time, Some(now_time(t0)));
    assert_eq!(conds["Ready"].last_transition_time, Some(now_time(t1)));
    assert_eq!(m.pods().len(), 1);
}

fn cond(s: &PodStatus, type_: &str) -> PodCondition {
    s.conditions.clone().unwrap().into_iter().find(|c| c.type_ == type_).unwrap()
}

fn with_readiness_probe(mut p: Pod, name: &str) -> Pod {
    let probe = serde_json::from_value(serde_json::json!({"exec": {"command": ["true"]}})).unwrap();
    for c in &mut p.spec.as_mut().unwrap().containers {
        if c.name == name {
            c.readiness_probe = Some(probe);
            return p;
        }
    }
    panic!("no container {name}");
}

#[test]
fn a_failing_readiness_probe_keeps_the_pod_not_ready_until_it_succeeds() {
    let p = with_readiness_probe(pod("Always", &[], &["a"]), "a");
    let runtime = rt(vec![info("a", ContainerState::Running, 0, 0, 10)]);
    let probes = ProbeResults::default();
    let none = BTreeMap::new();
    let sync = SyncView { runtime: &runtime, waiting: &none, probes: &probes, failure: None };
    let s = generate(&p, sync, &NODE);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert!(!s.container_statuses.as_ref().unwrap()[0].ready, "no verdict yet: not ready");
    assert_eq!(s.container_statuses.as_ref().unwrap()[0].started, Some(true));
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("ContainersNotReady"))
    );
    assert_eq!(ready.message.as_deref(), Some("containers with unready status: [a]"));
    probes.set(crate::prober::ProbeUpdate {
        uid: "u".into(),
        container: "a".into(),
        container_id: "a-10".into(),
        kind: crate::prober::ProbeKind::Readiness,
        result: crate::prober::ProbeResult::Success,
    });
    let s = generate(&p, sync, &NODE);
    assert!(s.container_statuses.as_ref().unwrap()[0].ready);
    assert_eq!(cond(&s, "Ready").status, "True");
    assert_eq!(cond(&s, "ContainersReady").status, "True");
}

#[test]
fn readiness_gates_hold_ready_until_their_conditions_are_true() {
    let mut p = pod("Always", &[], &["a"]);
    p.spec.as_mut().unwrap().readiness_gates = Some(vec![
        serde_json::from_value(serde_json::json!({"conditionType": "example.com/lb"})).unwrap(),
    ]);
    let runtime = rt(vec![info("a", ContainerState::Running, 0, 0, 10)]);
    let s = generate(&p, view(&runtime, &BTreeMap::new()), &NODE);
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("ReadinessGatesNotReady"))
    );
    assert_eq!(
        ready.message.as_deref(),
        Some("corresponding condition of pod readiness gate \"example.com/lb\" does not exist.")
    );
    assert_eq!(cond(&s, "ContainersReady").status, "True");
    p.status = Some(PodStatus {
        conditions: Some(vec![PodCondition {
            type_: "example.com/lb".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    assert_eq!(
        cond(&generate(&p, view(&runtime, &BTreeMap::new()), &NODE), "Ready").status,
        "True"
    );
}

fn sidecar_pod(policy: &str) -> Pod {
    let mut p = pod(policy, &["side"], &["a"]);
    p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].restart_policy =
        Some("Always".into());
    p
}

#[test]
fn a_running_sidecar_counts_as_initialized_and_in_readiness() {
    let p = sidecar_pod("Always");
    let s = generate(
        &p,
        view(
            &rt(vec![
                info("side", ContainerState::Running, 0, 0, 10),
                info("a", ContainerState::Running, 0, 0, 20),
            ]),
            &BTreeMap::new(),
        ),
        &NODE,
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(cond(&s, "Initialized").status, "True");
    assert_eq!(cond(&s, "Ready").status, "True");
    let side = &s.init_container_statuses.as_ref().unwrap()[0];
    assert!(side.ready && side.started == Some(true));

    let only_sidecar = generate(
        &p,
        view(&rt(vec![info("side", ContainerState::Exited, 1, 0, 10)]), &BTreeMap::new()),
        &NODE,
    );
    let init = cond(&only_sidecar, "Initialized");
    assert_eq!(init.message.as_deref(), Some("containers with incomplete status: [side]"));
}

#[test]
fn a_job_pod_with_a_sidecar_succeeds_once_the_sidecar_is_stopped() {
    let p = sidecar_pod("Never");
    let done_app = info("a", ContainerState::Exited, 0, 0, 20);
    let running = generate(
        &p,
        view(
            &rt(vec![info("side", ContainerState::Running, 0, 0, 10), done_app.clone()]),
            &BTreeMap::new(),
        ),
        &NODE,
    );
    assert_eq!(running.phase.as_deref(), Some("Running"), "the sidecar still runs");
    let stopped = generate(
        &p,
        view(
            &rt(vec![info("side", ContainerState::Exited, 137, 0, 10), done_app]),
            &BTreeMap::new(),
        ),
        &NODE,
    );
    assert_eq!(stopped.phase.as_deref(), Some("Succeeded"));
    assert!(is_terminal(&stopped));
    assert_eq!(cond(&stopped, "Ready").reason.as_deref(), Some("PodCompleted"));
}

#[test]
fn a_failure_of_the_kubelets_own_makes_the_pod_failed_with_its_reason() {
    let runtime = rt(vec![info("a", ContainerState::Exited, 137, 0, 10)]);
    let failure = PodFailure {
        reason: "DeadlineExceeded".into(),
        message: "Pod was active on the node longer than the specified deadline".into(),
        disruption: None,
    };
    let none = BTreeMap::new();
    let probes = ProbeResults::default();
    let sync =
        SyncView { runtime: &runtime, waiting: &none, probes: &probes, failure: Some(&failure) };
    let s = generate(&pod("Always", &[], &["a"]), sync, &NODE);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(cond(&s, "ContainersReady").reason.as_deref(), Some("PodFailed"));
    let conditions = s.conditions.as_deref().unwrap_or_default();
    assert!(conditions.iter().all(|c| c.type_ != "DisruptionTarget"), "not a disruption");
}

#[test]
fn an_evicted_pod_gets_the_disruption_target_condition_with_the_eviction_message() {
    let runtime = rt(vec![info("a", ContainerState::Exited, 137, 0, 10)]);
    let message =
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. ";
    let failure = PodFailure {
        reason: "Evicted".into(),
        message: message.into(),
        disruption: Some("TerminationByKubelet".into()),
    };
    let none = BTreeMap::new();
    let probes = ProbeResults::default();
    let sync =
        SyncView { runtime: &runtime, waiting: &none, probes: &probes, failure: Some(&failure) };
    let s = generate(&pod("Always", &[], &["a"]), sync, &NODE);
    assert_eq!((s.phase.as_deref(), s.reason.as_deref()), (Some("Failed"), Some("Evicted")));
    let first = &s.conditions.as_deref().unwrap_or_default()[0];
    assert_eq!(
        (
            first.type_.as_str(),
            first.status.as_str(),
            first.reason.as_deref(),
            first.message.as_deref()
        ),
        ("DisruptionTarget", "True", Some("TerminationByKubelet"), Some(message))
    );
}
