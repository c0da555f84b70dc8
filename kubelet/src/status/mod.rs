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

use crate::prober::ProbeResults;
use crate::runtime::actions::is_sidecar;
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
/// verdict on it; `ready` and `started` are filled by [`probe_view`].
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
    ContainerStatus {
        name: c.name.clone(),
        state: Some(state),
        last_state: Some(last_state.unwrap_or_default()),
        ready: false,
        started: Some(false),
        restart_count: latest.map_or(0, |l| i32::try_from(l.restart_count).unwrap_or(i32::MAX)),
        image: c.image.clone().unwrap_or_default(),
        image_id: latest.map(|l| l.image_ref.clone()).unwrap_or_default(),
        container_id: latest.map(|l| format!("{runtime}://{}", l.id)),
        ..Default::default()
    }
}

/// Upstream's prober `UpdatePodStatus`: `started` (running, and its startup probe succeeded
/// if it has one) and `ready` (started, and its readiness probe succeeded if it has one; a
/// regular init container is ready once it succeeded).
fn probe_view(s: &mut ContainerStatus, c: &Container, regular_init: bool, probes: &ProbeResults) {
    let running = s.state.as_ref().is_some_and(|st| st.running.is_some());
    let id = s.container_id.as_deref().map(crate::prober::worker::runtime_id).unwrap_or_default();
    if regular_init {
        s.started = Some(running);
        s.ready = s
            .state
            .as_ref()
            .and_then(|st| st.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0);
        return;
    }
    let started = running && probes.started(c, id);
    s.started = Some(started);
    s.ready = started && probes.ready(c, id);
}

fn is_terminated_ok(s: &ContainerStatus) -> bool {
    s.state.as_ref().and_then(|s| s.terminated.as_ref()).is_some_and(|t| t.exit_code == 0)
}

fn has_terminated_last(s: &ContainerStatus) -> Option<i32> {
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref()).map(|t| t.exit_code)
}

fn state_of(s: &ContainerStatus) -> ApiState {
    s.state.clone().unwrap_or_default()
}

/// Upstream's `getPhase` (1.29+, sidecars counted apart from regular init containers).
pub fn phase(
    pod: &Pod,
    init: &[(ContainerStatus, bool)],
    app: &[ContainerStatus],
    initialized_before: bool,
) -> &'static str {
    let policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always");
    let (mut pending_init, mut pending_sidecars, mut failed_init) = (0, 0, 0);
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for (s, sidecar) in init {
        let st = state_of(s);
        if *sidecar {
            if st.running.is_some() {
                if s.started != Some(true) {
                    pending_sidecars += 1;
                }
                running += 1;
            } else if st.terminated.is_none() && has_terminated_last(s).is_none() {
                pending_sidecars += 1;
                waiting += 1;
            }
            continue;
        }
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
    for s in app {
        let st = state_of(s);
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
    if pending_init > 0 || (pending_sidecars > 0 && !initialized_before) || waiting > 0 {
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

/// Whether a status is final: the pod will never run again.
pub fn is_terminal(status: &PodStatus) -> bool {
    matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// Why the kubelet itself failed a pod (`status.reason`/`message`), e.g. its
/// `activeDeadlineSeconds` passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFailure {
    pub reason: String,
    pub message: String,
    /// For a disruption (an eviction: `TerminationByKubelet`), the reason of the
    /// `DisruptionTarget` condition the pod gets, with the same message, as upstream's.
    pub disruption: Option<String>,
}

/// The pod condition upstream sets on a pod the kubelet disrupts.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// Everything status generation reads besides the pod and runtime state.
#[derive(Debug, Clone)]
pub struct NodeView<'a> {
    pub runtime_name: &'a str,
    pub host_ip: Option<&'a str>,
}

/// What one sync produced, as status generation reads it.
#[derive(Debug, Clone, Copy)]
pub struct SyncView<'a> {
    pub runtime: &'a PodRuntimeStatus,
    pub waiting: &'a BTreeMap<String, Waiting>,
    pub probes: &'a ProbeResults,
    pub failure: Option<&'a PodFailure>,
}

/// Go's `%s` of a string slice: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    }
}

/// The API status of `pod` given what its last sync found.
pub fn generate(pod: &Pod, sync: SyncView<'_>, node: &NodeView<'_>) -> PodStatus {
    let spec = pod.spec.clone().unwrap_or_default();
    let rt = sync.runtime;
    let by_name = |name: &str| rt.containers.iter().filter(|c| c.name == name).collect::<Vec<_>>();
    let init_specs = spec.init_containers.clone().unwrap_or_default();
    let init: Vec<(ContainerStatus, bool)> = init_specs
        .iter()
        .map(|c| {
            let mut s = container_status(
                c,
                &by_name(&c.name),
                sync.waiting.get(&c.name),
                "PodInitializing",
                node.runtime_name,
            );
            probe_view(&mut s, c, !is_sidecar(c), sync.probes);
            (s, is_sidecar(c))
        })
        .collect();
    let incomplete: Vec<&str> = init
        .iter()
        .filter(
            |(s, sidecar)| {
                if *sidecar { s.started != Some(true) } else { !is_terminated_ok(s) }
            },
        )
        .map(|(s, _)| s.name.as_str())
        .collect();
    // Upstream: app containers of a pod with init containers wait as `PodInitializing` until
    // they are created, whether or not initialization has finished.
    let app_default = if init.is_empty() { "ContainerCreating" } else { "PodInitializing" };
    let app: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            let mut s = container_status(
                c,
                &by_name(&c.name),
                sync.waiting.get(&c.name),
                app_default,
                node.runtime_name,
            );
            probe_view(&mut s, c, false, sync.probes);
            s
        })
        .collect();
    // An app container that ran means initialization finished once.
    let initialized_before = app.iter().any(|s| {
        let st = state_of(s);
        st.running.is_some() || st.terminated.is_some() || has_terminated_last(s).is_some()
    });
    let phase = match sync.failure {
        Some(_) => "Failed",
        None => phase(pod, &init, &app, initialized_before),
    };
    let initialized = incomplete.is_empty() || initialized_before || phase == "Succeeded";
    let unready: Vec<&str> = init
        .iter()
        .filter(|(_, sidecar)| *sidecar)
        .map(|(s, _)| s)
        .chain(app.iter())
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let containers_ready = match phase {
        "Succeeded" => condition("ContainersReady", false, Some("PodCompleted"), None),
        "Failed" => condition("ContainersReady", false, Some("PodFailed"), None),
        _ if !unready.is_empty() => condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(format!("containers with unready status: {}", go_list(&unready))),
        ),
        _ => condition("ContainersReady", true, None, None),
    };
    let ready = if containers_ready.status != "True" {
        PodCondition { type_: "Ready".into(), ..containers_ready.clone() }
    } else {
        match readiness_gates(pod) {
            Some(message) => {
                condition("Ready", false, Some("ReadinessGatesNotReady"), Some(message))
            }
            None => condition("Ready", true, None, None),
        }
    };
    let ip = rt.ip().map(str::to_string);
    let sandbox_ready = rt.sandboxes.iter().any(|s| s.ready);
    let initialized_condition = if phase == "Succeeded" {
        condition("Initialized", true, Some("PodCompleted"), None)
    } else if initialized {
        condition("Initialized", true, None, None)
    } else {
        condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!("containers with incomplete status: {}", go_list(&incomplete))),
        )
    };
    // A disruption's condition first, as upstream copies it ahead of the kubelet's own.
    let disruption = sync.failure.and_then(|f| {
        let reason = f.disruption.as_deref()?;
        Some(condition(DISRUPTION_TARGET, true, Some(reason), Some(f.message.clone())))
    });
    let conditions = disruption.into_iter().chain([
        condition("PodReadyToStartContainers", sandbox_ready, None, None),
        initialized_condition,
        ready,
        containers_ready,
        condition("PodScheduled", true, None, None),
    ]);
    let conditions: Vec<PodCondition> = conditions.collect();
    let init: Vec<ContainerStatus> = init.into_iter().map(|(s, _)| s).collect();
    PodStatus {
        phase: Some(phase.to_string()),
        reason: sync.failure.map(|f| f.reason.clone()),
        message: sync.failure.map(|f| f.message.clone()),
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

/// Upstream's readiness-gate check against the conditions other components set on the pod
/// (the API copy): `None` when every gate's condition is `True`.
fn readiness_gates(pod: &Pod) -> Option<String> {
    let gates = pod.spec.as_ref()?.readiness_gates.as_ref()?;
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let messages: Vec<String> = gates
        .iter()
        .filter_map(|g| {
            let found = conditions.into_iter().flatten().find(|c| c.type_ == g.condition_type);
            match found {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {:?} does not exist.",
                    g.condition_type
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {:?} is not \"True\", but {}",
                    g.condition_type, c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    (!messages.is_empty()).then(|| messages.join(", "))
}

#[cfg(test)]
mod tests;
