//! `compute_pod_actions`: what must happen to bring a pod's runtime state to its spec. Pure, as
//! upstream's `computePodActions`; `sync` executes the plan.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::container::container_hash;
use super::status::{ContainerInfo, ContainerState, PodRuntimeStatus};

/// A running container to stop, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillAction {
    pub container_id: String,
    pub name: String,
    pub message: String,
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
    /// Index into `spec.initContainers` of the init container to start next.
    pub next_init_container: Option<usize>,
    /// Indexes into `spec.containers` of the app containers to start.
    pub containers_to_start: Vec<usize>,
    pub containers_to_kill: Vec<KillAction>,
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

fn init_failed(c: &ContainerInfo) -> bool {
    match c.state {
        ContainerState::Exited => c.exit_code != 0,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Running => false,
    }
}

/// Upstream's `findNextInitContainerToRun`: the last failed init container's status, the next
/// init container to run, and whether initialization is done.
fn next_init_container<'a>(
    pod: &Pod,
    status: &'a PodRuntimeStatus,
) -> (Option<&'a ContainerInfo>, Option<usize>, bool) {
    let Some(spec) = pod.spec.as_ref() else { return (None, None, true) };
    let init: &[Container] = spec.init_containers.as_deref().unwrap_or_default();
    if init.is_empty() {
        return (None, None, true);
    }
    if spec
        .containers
        .iter()
        .any(|c| status.container(&c.name).is_some_and(|s| s.state == ContainerState::Running))
    {
        return (None, None, true);
    }
    for (i, c) in init.iter().enumerate().rev() {
        if let Some(s) = status.container(&c.name).filter(|s| init_failed(s)) {
            return (Some(s), Some(i), false);
        }
    }
    for (i, c) in init.iter().enumerate().rev() {
        match status.container(&c.name).map(|s| s.state) {
            None => continue,
            Some(ContainerState::Running) => return (None, None, false),
            Some(ContainerState::Exited) if i == init.len() - 1 => return (None, None, true),
            Some(ContainerState::Exited) => return (None, Some(i + 1), false),
            Some(_) => continue,
        }
    }
    (None, Some(0), false)
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

/// Computes the plan for `pod` given what the runtime holds for it.
pub fn compute_pod_actions(pod: &Pod, status: &PodRuntimeStatus) -> PodActions {
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
        if to_start.is_empty() && next_init_container(pod, status).2 {
            actions.create_sandbox = false;
            return actions;
        }
        if spec.init_containers.as_ref().is_some_and(|i| !i.is_empty()) {
            actions.next_init_container = Some(0);
            return actions;
        }
        actions.containers_to_start = to_start;
        return actions;
    }

    let (last_init, next, done) = next_init_container(pod, status);
    if !done {
        if let Some(next) = next {
            if last_init.is_some() && !should_restart_on_failure(pod) {
                actions.kill_pod = true;
            } else {
                if let Some(s) = last_init.filter(|s| s.state == ContainerState::Unknown) {
                    actions.containers_to_kill.push(KillAction {
                        container_id: s.id.clone(),
                        name: s.name.clone(),
                        message:
                            "Init container is in unknown state, try killing it before restart"
                                .into(),
                    });
                }
                actions.next_init_container = Some(next);
            }
        }
        return actions;
    }

    let mut keep = 0;
    for (i, c) in spec.containers.iter().enumerate() {
        let s = status.container(&c.name);
        match s {
            Some(s) if s.state == ContainerState::Running => {
                if s.hash != container_hash(c) {
                    actions.containers_to_kill.push(KillAction {
                        container_id: s.id.clone(),
                        name: c.name.clone(),
                        message: format!(
                            "Container {} definition changed, will be restarted",
                            c.name
                        ),
                    });
                    actions.containers_to_start.push(i);
                } else {
                    keep += 1;
                }
            }
            _ => {
                if should_restart(c, pod, status) {
                    actions.containers_to_start.push(i);
                    if let Some(s) = s.filter(|s| s.state == ContainerState::Unknown) {
                        actions.containers_to_kill.push(KillAction {
                            container_id: s.id.clone(),
                            name: c.name.clone(),
                            message: "Container is in unknown state, try killing it before restart"
                                .into(),
                        });
                    }
                }
            }
        }
    }
    if keep == 0 && actions.containers_to_start.is_empty() {
        actions.kill_pod = true;
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::super::status::SandboxInfo;
    use super::*;

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

    /// A container as the runtime reports it; `hash` matches the spec unless `stale`.
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
            hash: container_hash(c),
            restart_count: 0,
            created_at: 0,
            started_at: 0,
            finished_at: 0,
            exit_code: exit,
            reason: String::new(),
            message: String::new(),
            image: String::new(),
            image_ref: String::new(),
            image_id: String::new(),
            grace_seconds: None,
        }
    }

    fn status(sandboxes: Vec<SandboxInfo>, containers: Vec<ContainerInfo>) -> PodRuntimeStatus {
        PodRuntimeStatus { uid: "u".into(), sandboxes, containers }
    }

    use ContainerState::{Exited, Running};

    #[test]
    fn a_new_pod_gets_a_sandbox_and_all_its_containers() {
        let p = pod("Always", &[], &["a", "b"]);
        let a = compute_pod_actions(&p, &status(vec![], vec![]));
        assert_eq!((a.kill_pod, a.create_sandbox, a.attempt), (true, true, 0));
        assert_eq!(a.containers_to_start, [0, 1]);
    }

    #[test]
    fn a_healthy_pod_needs_nothing() {
        let p = pod("Always", &[], &["a"]);
        let a = compute_pod_actions(
            &p,
            &status(vec![sandbox(true, 0)], vec![ctr(&p, "a", Running, 0)]),
        );
        assert_eq!(a, PodActions { sandbox_id: Some("sb0".into()), ..PodActions::default() });
    }

    #[test]
    fn a_dead_sandbox_is_replaced_with_the_next_attempt() {
        let p = pod("Always", &[], &["a"]);
        let a = compute_pod_actions(
            &p,
            &status(vec![sandbox(false, 2)], vec![ctr(&p, "a", Exited, 0)]),
        );
        assert!(a.kill_pod && a.create_sandbox);
        assert_eq!((a.attempt, a.containers_to_start.as_slice()), (3, &[0][..]));
        let mut no_ip = sandbox(true, 0);
        no_ip.ip = None;
        assert!(compute_pod_actions(&p, &status(vec![no_ip], vec![])).create_sandbox);
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
            let a = compute_pod_actions(
                &p,
                &status(vec![sandbox(true, 0)], vec![ctr(&p, "a", Exited, exit)]),
            );
            assert_eq!(a.containers_to_start, start, "{policy} exit {exit}");
            assert_eq!(a.kill_pod, kill, "{policy} exit {exit}: a finished pod stops its sandbox");
        }
    }

    #[test]
    fn a_finished_never_pod_does_not_get_a_new_sandbox() {
        let p = pod("Never", &[], &["a"]);
        let a = compute_pod_actions(
            &p,
            &status(vec![sandbox(false, 0)], vec![ctr(&p, "a", Exited, 0)]),
        );
        assert!(a.kill_pod && !a.create_sandbox && a.containers_to_start.is_empty());
    }

    #[test]
    fn a_changed_spec_restarts_the_container() {
        let p = pod("Always", &[], &["a"]);
        let mut c = ctr(&p, "a", Running, 0);
        c.hash = "stale".into();
        let a = compute_pod_actions(&p, &status(vec![sandbox(true, 0)], vec![c]));
        assert_eq!(a.containers_to_start, [0]);
        assert_eq!(a.containers_to_kill.len(), 1);
        assert!(a.containers_to_kill[0].message.contains("definition changed"));
    }

    #[test]
    fn init_containers_run_one_at_a_time_in_order() {
        let p = pod("Always", &["i0", "i1"], &["a"]);
        let fresh = compute_pod_actions(&p, &status(vec![], vec![]));
        assert_eq!((fresh.next_init_container, fresh.containers_to_start.len()), (Some(0), 0));
        let sb = || vec![sandbox(true, 0)];
        let running = compute_pod_actions(&p, &status(sb(), vec![ctr(&p, "i0", Running, 0)]));
        assert_eq!(running.next_init_container, None, "wait for the running init container");
        assert!(running.containers_to_start.is_empty() && !running.kill_pod);
        let first_done = compute_pod_actions(&p, &status(sb(), vec![ctr(&p, "i0", Exited, 0)]));
        assert_eq!(first_done.next_init_container, Some(1));
        let all_done = compute_pod_actions(
            &p,
            &status(sb(), vec![ctr(&p, "i1", Exited, 0), ctr(&p, "i0", Exited, 0)]),
        );
        assert_eq!(
            (all_done.next_init_container, all_done.containers_to_start.as_slice()),
            (None, &[0][..])
        );
    }

    #[test]
    fn a_failed_init_container_is_retried_or_fails_the_pod() {
        let sb = || vec![sandbox(true, 0)];
        let p = pod("Always", &["i0"], &["a"]);
        let a = compute_pod_actions(&p, &status(sb(), vec![ctr(&p, "i0", Exited, 1)]));
        assert_eq!(a.next_init_container, Some(0));
        let p = pod("Never", &["i0"], &["a"]);
        let a = compute_pod_actions(&p, &status(sb(), vec![ctr(&p, "i0", Exited, 1)]));
        assert!(a.kill_pod && a.next_init_container.is_none());
    }
}
