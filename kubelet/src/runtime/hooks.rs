//! Lifecycle hooks, as upstream's `lifecycle` handler runner: `postStart` runs right after
//! `StartContainer` (the container does not count as started until it returns, and a failing
//! hook kills it); `preStop` runs before `StopContainer`, bounded by the grace period, whose
//! rest goes to the stop. Handlers: `exec` (CRI `ExecSync`), `httpGet` (any answer is success;
//! only a failed exchange fails, as upstream), `sleep`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};
use tokio::time::Instant;

use super::RuntimeManager;
use crate::events::ObjectRef;
use crate::prober::{self, Outcome};

/// The `User-Agent` of hook requests, as upstream's `kube-lifecycle/<major.minor>`.
pub const USER_AGENT: &str = "kube-lifecycle/1.35";

/// Which hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    PostStart,
    PreStop,
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

impl RuntimeManager {
    /// Runs `handler` for container `c` (runtime ID `id`) of `pod`, within `budget` if given.
    /// The error is upstream's message (it may hold the command's output: it goes to the log
    /// and the container's status, never to an event).
    pub async fn run_hook(
        &self,
        pod: &Pod,
        c: &Container,
        id: &str,
        handler: &LifecycleHandler,
        pod_ip: Option<&str>,
        budget: Option<Duration>,
    ) -> Result<(), String> {
        let bounded = |d: Duration| budget.map_or(d, |b| d.min(b));
        if let Some(exec) = &handler.exec {
            let command = exec.command.clone().unwrap_or_default();
            // Upstream runs postStart commands without a timeout; ours ends with the budget, or
            // after a day at most.
            let timeout = bounded(Duration::from_secs(24 * 3600));
            return match prober::exec::probe(&self.cri, id, &command, timeout).await {
                Outcome::Success(_) | Outcome::Warning(_) => Ok(()),
                Outcome::Failure(out) | Outcome::Unknown(out) => Err(format!(
                    "Exec lifecycle hook ({command:?}) for Container {:?} in Pod {:?} failed - error: command failed, message: {out:?}",
                    c.name,
                    pod_name(pod)
                )),
            };
        }
        if let Some(get) = &handler.http_get {
            let path = get.path.clone().unwrap_or_default();
            let fail = |e: String| {
                format!(
                    "HTTP lifecycle hook ({path}) for Container {:?} in Pod {:?} failed - error: {e}",
                    c.name,
                    pod_name(pod)
                )
            };
            let mut target =
                prober::http_target(get, c, pod_ip).map_err(|e| fail(e.to_string()))?;
            if !target.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("User-Agent")) {
                target.headers.push(("User-Agent".into(), USER_AGENT.into()));
            }
            let timeout = bounded(Duration::from_secs(24 * 3600));
            return prober::http::status(&target, timeout).await.map(|_| ()).map_err(fail);
        }
        if let Some(sleep) = &handler.sleep {
            let wanted = Duration::from_secs(u64::try_from(sleep.seconds).unwrap_or(0));
            tokio::time::sleep(bounded(wanted)).await;
            return Ok(());
        }
        Err(format!(
            "Cannot run handler: no handler for Container {:?} in Pod {:?}",
            c.name,
            pod_name(pod)
        ))
    }

    /// Runs `c`'s preStop hook within `grace`; returns how long it took. A failure is logged
    /// and reported (`FailedPreStopHook`); the stop goes on either way.
    pub(crate) async fn run_pre_stop(
        &self,
        pod: &Pod,
        c: &Container,
        id: &str,
        grace: Duration,
    ) -> Duration {
        let Some(handler) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) else {
            return Duration::ZERO;
        };
        let started = Instant::now();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let pod_ip = if handler.http_get.is_some() {
            self.pod_status(uid).await.ok().and_then(|s| s.ip().map(str::to_string))
        } else {
            None
        };
        let run = self.run_hook(pod, c, id, handler, pod_ip.as_deref(), Some(grace));
        match tokio::time::timeout(grace, run).await {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                tracing::warn!(pod = %pod_name(pod), container = %c.name, "{message}");
                let object = ObjectRef::container(pod, &c.name);
                self.recorder.warning(&object, "FailedPreStopHook", "PreStopHook failed");
            }
            Err(_) => {
                tracing::info!(pod = %pod_name(pod), container = %c.name, ?grace, "preStop hook not completed in the grace period");
            }
        }
        started.elapsed()
    }
}
