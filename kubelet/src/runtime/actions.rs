//! `compute_pod_actions`: what must happen to bring a pod's runtime state to its spec. Pure, as
//! upstream's `computePodActions` (with its 1.29+ `computeInitContainerActions` for sidecars:
//! restartable init containers, `restartPolicy: Always`); `sync` executes the plan. Probe
//! verdicts are an input: a container that failed liveness or startup is killed and, per the
//! restart policy, started again.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::status::{ContainerInfo, ContainerState, PodRuntimeStatus};
use crate::prober::{ProbeKind, ProbeResult, ProbeResults, probe_grace};

/// Why a running container is stopped before its pod is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    /// Its spec changed (it is started again whatever the restart policy).
    SpecChanged,
    /// It failed its liveness or startup probe.
    Probe(ProbeKind),
    /// The runtime cannot say whether it runs: killed before it is started again.
    Unknown,
}

/// A running container to stop, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillAction {
    pub container_id: String,
    pub name: String,
    /// `None` for an init container that is not a sidecar.
    pub reason: KillReason,
    pub message: String,
    /// A grace period of its own (a probe's `terminationGracePeriodSeconds`).
    pub grace: Option<Duration>,
}

/// The plan for one sync of one pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodActions {
    /// Stop every container and sandbox first (the sandbox is replaced, or the pod is done).
    pub kill_pod: bool,
    pub create_sandbox: bool,
    /// The existing sandbox to use (when not creating one).
    pub sandbox_id: Option<String>,
    /// The attempt number of the sandbox to create.
    pub attempt: u32,
    /// Indexes into `spec.initContainers` to start, in order: the next regular init container
    /// (the start waits for it), sidecars to start or restart.
    pub init_containers_to_start: Vec<usize>,
    /// Indexes into `spec.containers` of the app containers to start.
    pub containers_to_start: Vec<usize>,
    pub containers_to_kill: Vec<KillAction>,
}

impl PodActions {
    /// Whether the plan changes nothing in the runtime.
    pub fn changes_nothing(&self) -> bool {
        !self.kill_pod
            && !self.create_sandbox
            && self.init_containers_to_start.is_empty()
            && self.containers_to_start.is_empty()
            && self.containers_to_kill.is_empty()
    }
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always")
}

fn should_restart_on_failure(pod: &Pod) -> bool {
    restart_policy(pod) != "Never"
}

fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

/// A sidecar: an init container with `restartPolicy: Always`.
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Upstream's `podSandboxChanged`: whether a new sandbox is needed, its attempt, and the
/// sandbox in use.
fn sandbox_changed(pod: &Pod, status: &PodRuntimeStatus) -> (bool, u32, Option<String>) {
    let Some(newest) = status.sandboxes.first() else { return (true, 0, None) };
    let next = newest.attempt + 1;
    let ready = status.sandboxes.iter().filter(|s| s.ready).count();
    if ready > 1 || !newest.ready {
        return (true, next, Some(newest.id.clone()));
    }
    if newest.host_network != host_network(pod) {
        return (true, next, None);
    }
    if !newest.host_network && newest.ip.is_none() {
        return (true, next, Some(newest.id.clone()));
    }
    (false, newest.attempt, Some(newest.id.clone()))
}

/// Upstream's container hash decision (1.31+, `HashContainer` over the name and image only):
/// a running container is replaced when its spec names another image. Nothing else of a
/// container can change in place (the API refuses it; a static pod whose other fields change
/// gets a new UID, [`crate::config::identity`]), so a kubelet whose defaulting or encoding
/// differs restarts nothing.
fn changed(c: &Container, s: &ContainerInfo) -> bool {
    use crate::credentialprovider::reference::normalized;
    normalized(c.image.as_deref().unwrap_or_default()) != normalized(&s.image)
}

fn init_failed(c: &ContainerInfo) -> bool {
    match c.state {
        ContainerState::Exited => c.exit_code != 0,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Running => false,
    }
}

fn succeeded(c: &Container, status: &PodRuntimeStatus) -> bool {
    status.container(&c.name).is_some_and(|s| s.state == ContainerState::Exited && s.exit_code == 0)
}

/// Upstream's `ShouldContainerBeRestarted`.
pub fn should_restart(c: &Container, pod: &Pod, status: &PodRuntimeStatus) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(s) = status.container(&c.name) else { return true };
    match s.state {
        ContainerState::Running => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited => match restart_policy(pod) {
            "Never" => false,
            "OnFailure" => s.exit_code != 0,
            _ => true,
        },
    }
}

fn kill(
    s: &ContainerInfo,
    reason: KillReason,
    message: String,
    grace: Option<Duration>,
) -> KillAction {
    KillAction { container_id: s.id.clone(), name: s.name.clone(), reason, message, grace }
}

/// Upstream's `computeInitContainerActions`: fills the init containers to start (and sidecars
/// to kill) and says whether the pod is initialized, so app containers may run.
fn init_container_actions(
    pod: &Pod,
    status: &PodRuntimeStatus,
    probes: &ProbeResults,
    actions: &mut PodActions,
) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return true };
    let init: &[Container] = spec.init_containers.as_deref().unwrap_or_default();
    if init.is_empty() {
        return true;
    }
    // An app container that was created or runs means initialization finished once, even if
    // the init containers' records are gone.
    let mut initialized = spec.containers.iter().any(|c| {
        status
            .container(&c.name)
            .is_some_and(|s| matches!(s.state, ContainerState::Created | ContainerState::Running))
    });
    let mut previously_initialized = initialized;
    let restart_on_failure = should_restart_on_failure(pod);
    let mut to_start = Vec::new();
    // Backwards: the last init container that ran says where initialization stands; sidecars
    // before it are kept running.
    for (i, c) in init.iter().enumerate().rev() {
        let sidecar = is_sidecar(c);
        let Some(s) = status.container(&c.name) else {
            if previously_initialized && sidecar {
                to_start.push(i);
            }
            continue;
        };
        if previously_initialized && !sidecar {
            continue; // after initialization only sidecars matter
        }
        match s.state {
            ContainerState::Created => to_start.push(i),
            ContainerState::Running if !sidecar => {} // wait for it to finish
            ContainerState::Running => 'sidecar: {
                if c.startup_probe.is_some() {
                    match probes.get(ProbeKind::Startup, &s.id) {
                        Some(ProbeResult::Success) => {}
                        Some(ProbeResult::Failure) => {
                            let message = format!("Init container {} failed startup probe", c.name);
                            let grace = probe_grace(c, ProbeKind::Startup);
                            actions.containers_to_kill.push(kill(
                                s,
                                KillReason::Probe(ProbeKind::Startup),
                                message,
                                grace,
                            ));
                            to_start.push(i);
                            break 'sidecar;
                        }
                        // Not started yet: the next init container waits.
                        _ => break 'sidecar,
                    }
                }
                if i == init.len() - 1 {
                    initialized = true;
                } else if !previously_initialized {
                    to_start.push(i + 1);
                }
                if changed(c, s) {
                    let message = format!("Init container {} definition changed", c.name);
                    actions.containers_to_kill.push(kill(
                        s,
                        KillReason::SpecChanged,
                        message,
                        None,
                    ));
                    to_start.push(i);
                } else if c.liveness_probe.is_some()
                    && probes.get(ProbeKind::Liveness, &s.id) == Some(ProbeResult::Failure)
                {
                    let message = format!("Init container {} failed liveness probe", c.name);
                    let grace = probe_grace(c, ProbeKind::Liveness);
                    actions.containers_to_kill.push(kill(
                        s,
                        KillReason::Probe(ProbeKind::Liveness),
                        message,
                        grace,
                    ));
                    to_start.push(i);
                }
            }
            ContainerState::Exited if sidecar => to_start.push(i),
            ContainerState::Exited => {
                if init_failed(s) {
                    if !restart_on_failure {
                        actions.kill_pod = true;
                        actions.init_containers_to_start.clear();
                        return false;
                    }
                    to_start.push(i);
                } else if i == init.len() - 1 {
                    initialized = true;
                } else {
                    to_start.push(i + 1);
                }
            }
            ContainerState::Unknown => {
                if !sidecar && !restart_on_failure {
                    actions.kill_pod = true;
                    actions.init_containers_to_start.clear();
                    return false;
                }
                let message =
                    "Init container is in \"unknown\" state, try killing it before restart".into();
                actions.containers_to_kill.push(kill(s, KillReason::Unknown, message, None));
                to_start.push(i);
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized {
        to_start.push(0);
    }
    to_start.reverse();
    to_start.dedup();
    actions.init_containers_to_start = to_start;
    initialized
}

/// Computes the plan for `pod` given what the runtime holds for it and the probes' verdicts.
pub fn compute_pod_actions(
    pod: &Pod,
    status: &PodRuntimeStatus,
    probes: &ProbeResults,
) -> PodActions {
    let Some(spec) = pod.spec.as_ref() else { return PodActions::default() };
    let (create_sandbox, attempt, sandbox_id) = sandbox_changed(pod, status);
    let mut actions = PodActions {
        kill_pod: create_sandbox,
        create_sandbox,
        sandbox_id,
        attempt,
        ..PodActions::default()
    };
    if create_sandbox {
        if !should_restart_on_failure(pod) && attempt != 0 && !status.containers.is_empty() {
            actions.create_sandbox = false;
            return actions;
        }
        let to_start: Vec<usize> = spec
            .containers
            .iter()
            .enumerate()
            .filter(|(_, c)| !(restart_policy(pod) == "OnFailure" && succeeded(c, status)))
            .map(|(i, _)| i)
            .collect();
        if to_start.is_empty() {
            actions.create_sandbox = false;
            return actions;
        }
        if spec.init_containers.as_ref().is_some_and(|i| !i.is_empty()) {
            actions.init_containers_to_start = vec![0];
            return actions;
        }
        actions.containers_to_start = to_start;
        return actions;
    }

    let initialized = init_container_actions(pod, status, probes, &mut actions);
    if actions.kill_pod || !initialized {
        return actions;
    }

    let mut keep = 0;
    for (i, c) in spec.containers.iter().enumerate() {
        let s = status.container(&c.name);
        let Some(s) = s.filter(|s| s.state == ContainerState::Running) else {
            if should_restart(c, pod, status) {
                actions.containers_to_start.push(i);
                if let Some(s) = s.filter(|s| s.state == ContainerState::Unknown) {
                    let message =
                        "Container is in \"unknown\" state, try killing it before restart".into();
                    actions.containers_to_kill.push(kill(s, KillReason::Unknown, message, None));
                }
            }
            continue;
        };
        let (reason, mut message, mut restart) = if changed(c, s) {
            let message = format!("Container {} definition changed", c.name);
            (KillReason::SpecChanged, message, true)
        } else if let Some(kind) = probes.failed(c, &s.id) {
            let message = format!("Container {} failed {} probe", c.name, kind.lower());
            (KillReason::Probe(kind), message, should_restart_on_failure(pod))
        } else {
            keep += 1;
            continue;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            restart = false;
        }
        if restart {
            message.push_str(", will be restarted");
            actions.containers_to_start.push(i);
        }
        let grace = match reason {
            KillReason::Probe(kind) => probe_grace(c, kind),
            _ => None,
        };
        actions.containers_to_kill.push(kill(s, reason, message, grace));
    }
    if keep == 0 && actions.containers_to_start.is_empty() {
        // Nothing of the pod's own work runs or will: it is done, sidecars included.
        actions.kill_pod = true;
        actions.init_containers_to_start.clear();
    }
    actions
}

#[cfg(test)]
mod tests;
