//! Pod status: computed from the spec and the runtime's state as upstream's
//! `generateAPIPodStatus` (phase, conditions, container statuses), kept per pod by the
//! [`StatusManager`], the one place the kubelet's pod statuses live, and written to the
//! apiserver by [`sync`], the only writer of pod status there.

pub mod manager;
pub mod sync;

pub use manager::StatusManager;

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{
    Container, ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::runtime::status::{ContainerInfo, ContainerState, PodRuntimeStatus};
use crate::runtime::sync::Waiting;

fn time(ns: i64) -> Option<Time> {
    (ns > 0).then(|| Time(jiff::Timestamp::from_nanosecond(i128::from(ns)).unwrap_or_default()))
}

pub(crate) fn now_time(now: SystemTime) -> Time {
    Time(jiff::Timestamp::try_from(now).unwrap_or_default())
}

fn terminated(c: &ContainerInfo, runtime: &str) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: c.exit_code,
        reason: Some(c.reason.clone()).filter(|r| !r.is_empty()),
        message: Some(c.message.clone()).filter(|m| !m.is_empty()),
        started_at: time(c.started_at),
        finished_at: time(c.finished_at),
        container_id: Some(format!("{runtime}://{}", c.id)),
        signal: None,
    }
}

fn waiting(reason: &str, message: Option<String>) -> ApiState {
    ApiState {
        waiting: Some(ContainerStateWaiting { reason: Some(reason.to_string()), message }),
        ..Default::default()
    }
}

/// One container's status from its instances in the runtime (newest first) and this sync's
/// verdict on it.
fn container_status(
    c: &Container,
    instances: &[&ContainerInfo],
    verdict: Option<&Waiting>,
    default_waiting: &str,
    runtime: &str,
) -> ContainerStatus {
    let latest = instances.first().copied();
    let older = instances.get(1).copied().filter(|o| o.state == ContainerState::Exited);
    let last_terminated = |i: &ContainerInfo| ApiState {
        terminated: Some(terminated(i, runtime)),
        ..Default::default()
    };
    let (state, last_state) = match (latest, verdict) {
        (Some(l), _) if l.state == ContainerState::Running => (
            ApiState {
                running: Some(ContainerStateRunning { started_at: time(l.started_at) }),
                ..Default::default()
            },
            older.map(last_terminated),
        ),
        (Some(l), Some(w)) if l.state == ContainerState::Exited => {
            (waiting(&w.reason, Some(w.message.clone())), Some(last_terminated(l)))
        }
        (Some(l), None) if l.state == ContainerState::Exited => {
            (last_terminated(l), older.map(last_terminated))
        }
        (_, Some(w)) => (
            waiting(&w.reason, Some(w.message.clone())),
            latest.filter(|l| l.state == ContainerState::Exited).map(last_terminated),
        ),
        _ => (waiting(default_waiting, None), older.map(last_terminated)),
    };
    let running = state.running.is_some();
    ContainerStatus {
        name: c.name.clone(),
        state: Some(state),
        last_state: Some(last_state.unwrap_or_default()),
        ready: running,
        started: Some(running),
        restart_count: latest.map_or(0, |l| i32::try_from(l.restart_count).unwrap_or(i32::MAX)),
        image: c.image.clone().unwrap_or_default(),
        image_id: latest.map(|l| l.image_ref.clone()).unwrap_or_default(),
        container_id: latest.map(|l| format!("{runtime}://{}", l.id)),
        ..Default::default()
    }
}

fn is_terminated_ok(s: &ContainerStatus) -> bool {
    s.state.as_ref().and_then(|s| s.terminated.as_ref()).is_some_and(|t| t.exit_code == 0)
}

fn has_terminated_last(s: &ContainerStatus) -> Option<i32> {
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref()).map(|t| t.exit_code)
}

/// Upstream's `getPhase`.
pub fn phase(pod: &Pod, init: &[ContainerStatus], app: &[ContainerStatus]) -> &'static str {
    let policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always");
    let (mut pending_init, mut failed_init) = (0, 0);
    for s in init {
        let st = s.state.clone().unwrap_or_default();
        if st.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = st.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else {
            match has_terminated_last(s) {
                Some(code) if code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        }
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for s in app {
        let st = s.state.clone().unwrap_or_default();
        if st.running.is_some() {
            running += 1;
        } else if let Some(t) = st.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if has_terminated_last(s).is_some() {
            stopped += 1;
        } else {
            waiting += 1;
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if pending_init > 0 || waiting > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    if stopped > 0 {
        return match policy {
            "Always" => "Running",
            _ if stopped == succeeded => "Succeeded",
            "Never" => "Failed",
            _ => "Running",
        };
    }
    "Pending"
}

/// Everything status generation reads besides the pod and runtime state.
#[derive(Debug, Clone)]
pub struct NodeView<'a> {
    pub runtime_name: &'a str,
    pub host_ip: Option<&'a str>,
}

/// The API status of `pod` given its runtime state and the last sync's container verdicts.
pub fn generate(
    pod: &Pod,
    rt: &PodRuntimeStatus,
    verdicts: &BTreeMap<String, Waiting>,
    node: &NodeView<'_>,
) -> PodStatus {
    let spec = pod.spec.clone().unwrap_or_default();
    let by_name = |name: &str| rt.containers.iter().filter(|c| c.name == name).collect::<Vec<_>>();
    let init_specs = spec.init_containers.clone().unwrap_or_default();
    let init: Vec<ContainerStatus> = init_specs
        .iter()
        .map(|c| {
            container_status(
                c,
                &by_name(&c.name),
                verdicts.get(&c.name),
                "PodInitializing",
                node.runtime_name,
            )
        })
        .collect();
    let init_done = init.iter().all(is_terminated_ok);
    let app_default = if init_done { "ContainerCreating" } else { "PodInitializing" };
    let app: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            container_status(
                c,
                &by_name(&c.name),
                verdicts.get(&c.name),
                app_default,
                node.runtime_name,
            )
        })
        .collect();
    let phase = phase(pod, &init, &app);
    let terminal = phase == "Succeeded" || phase == "Failed";
    let unready: Vec<&str> = app.iter().filter(|s| !s.ready).map(|s| s.name.as_str()).collect();
    let cond =
        |type_: &str, ok: bool, reason: Option<&str>, message: Option<String>| PodCondition {
            type_: type_.to_string(),
            status: if ok { "True" } else { "False" }.to_string(),
            reason: if ok { None } else { reason.map(str::to_string) },
            message: if ok { None } else { message },
            ..Default::default()
        };
    let not_ready_reason = if terminal { "PodCompleted" } else { "ContainersNotReady" };
    let not_ready_msg =
        (!terminal).then(|| format!("containers with unready status: [{}]", unready.join(" ")));
    let ip = rt.ip().map(str::to_string);
    let sandbox_ready = rt.sandboxes.iter().any(|s| s.ready);
    let conditions = vec![
        cond("PodReadyToStartContainers", sandbox_ready, None, None),
        cond(
            "Initialized",
            init_done || terminal,
            Some("ContainersNotInitialized"),
            Some("containers with incomplete status: [init]".into()).filter(|_| !init_done),
        ),
        cond(
            "Ready",
            unready.is_empty() && !terminal,
            Some(not_ready_reason),
            not_ready_msg.clone(),
        ),
        cond(
            "ContainersReady",
            unready.is_empty() && !terminal,
            Some(not_ready_reason),
            not_ready_msg,
        ),
        cond("PodScheduled", true, None, None),
    ];
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: node.host_ip.map(str::to_string),
        host_ips: node.host_ip.map(|ip| vec![HostIP { ip: ip.to_string() }]),
        pod_ip: ip.clone(),
        pod_ips: ip.map(|ip| vec![PodIP { ip }]),
        qos_class: Some(api::qos::pod_qos(&spec).as_str().to_string()),
        container_statuses: Some(app),
        init_container_statuses: (!init.is_empty()).then_some(init),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
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

    const NODE: NodeView<'static> =
        NodeView { runtime_name: "containerd", host_ip: Some("192.0.2.2") };

    #[test]
    fn a_running_pod_is_running_and_ready() {
        let s = generate(
            &pod("Always", &[], &["a"]),
            &rt(vec![info("a", ContainerState::Running, 0, 0, 10)]),
            &BTreeMap::new(),
            &NODE,
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(
            (s.pod_ip.as_deref(), s.host_ip.as_deref()),
            (Some("10.0.0.9"), Some("192.0.2.2"))
        );
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
            &rt(vec![info("a", ContainerState::Exited, 1, 3, 10)]),
            &verdicts,
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
            &rt(vec![
                info("a", ContainerState::Exited, 1, 0, 10),
                info("a", ContainerState::Running, 0, 1, 20),
            ]),
            &BTreeMap::new(),
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
            generate(&pod(policy, &[], &["a"]), &exited(code), &BTreeMap::new(), &NODE)
                .phase
                .unwrap()
        };
        assert_eq!(phase_of("Never", 0), "Succeeded");
        assert_eq!(phase_of("Never", 1), "Failed");
        assert_eq!(phase_of("OnFailure", 0), "Succeeded");
        assert_eq!(phase_of("Always", 0), "Running");
        let new = generate(&pod("Always", &[], &["a"]), &rt(vec![]), &BTreeMap::new(), &NODE);
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
            &rt(vec![info("i", ContainerState::Running, 0, 0, 10)]),
            &BTreeMap::new(),
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
            &rt(vec![info("i", ContainerState::Exited, 1, 0, 10)]),
            &BTreeMap::new(),
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
        m.set_status("u", generate(&p, &rt(vec![]), &BTreeMap::new(), &NODE), t0);
        m.set_status(
            "u",
            generate(
                &p,
                &rt(vec![info("a", ContainerState::Running, 0, 0, 10)]),
                &BTreeMap::new(),
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
}
