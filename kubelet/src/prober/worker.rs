//! One probe of one container of one pod, as upstream's prober `worker`: a task that probes
//! every `periodSeconds` after `initialDelaySeconds`, applies `successThreshold` and
//! `failureThreshold`, and records each verdict change in [`ProbeResults`]. It reads the
//! container's state from the status manager, so it probes only what runs; a probe never
//! blocks another (each worker is its own task) nor a pod worker.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus, Probe};
use rand::Rng;
use tokio_util::sync::CancellationToken;

use super::results::{ProbeKind, ProbeResult, ProbeUpdate};
use super::{Handler, Outcome, ProberContext};
use crate::events::ObjectRef;
use crate::metrics::prober::{ProbeLabels, ProbeOutcome};

/// Upstream's defaults.
const DEFAULT_PERIOD: i32 = 10;
const DEFAULT_TIMEOUT: i32 = 1;
const DEFAULT_THRESHOLD_FAILURE: i32 = 3;
const DEFAULT_THRESHOLD_SUCCESS: i32 = 1;
/// Tries of a probe that cannot run (`Unknown`) before its result is thrown away.
const MAX_TRIES: usize = 3;

/// What a worker probes.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    pub pod: Arc<Pod>,
    pub container: Container,
    pub kind: ProbeKind,
    pub probe: Probe,
}

impl ProbeTarget {
    fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    pub fn period(&self) -> Duration {
        secs(self.probe.period_seconds.unwrap_or(DEFAULT_PERIOD))
    }

    pub fn timeout(&self) -> Duration {
        secs(self.probe.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT))
    }

    fn failure_threshold(&self) -> u32 {
        positive(self.probe.failure_threshold.unwrap_or(DEFAULT_THRESHOLD_FAILURE))
    }

    fn success_threshold(&self) -> u32 {
        positive(self.probe.success_threshold.unwrap_or(DEFAULT_THRESHOLD_SUCCESS))
    }

    /// What its events are about: the probed container.
    fn object(&self) -> ObjectRef {
        ObjectRef::container(&self.pod, &self.container.name)
    }

    /// Its series' labels in the prober's metrics.
    pub fn labels(&self) -> ProbeLabels {
        let meta = &self.pod.metadata;
        ProbeLabels {
            probe_type: self.kind.title(),
            container: self.container.name.clone(),
            pod: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            pod_uid: self.uid().to_string(),
        }
    }
}

fn secs(s: i32) -> Duration {
    Duration::from_secs(u64::try_from(s.max(1)).unwrap_or(1))
}

fn positive(n: i32) -> u32 {
    u32::try_from(n.max(1)).unwrap_or(1)
}

/// The worker's memory between probes.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    container_id: Option<String>,
    last: Option<ProbeResult>,
    run: u32,
    /// A liveness or startup failure was recorded: wait for a new container.
    pub(crate) on_hold: bool,
}

/// The container's status by name, app or init.
fn container_status<'a>(status: &'a PodStatus, name: &str) -> Option<&'a ContainerStatus> {
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
}

/// The runtime's ID in a `containerd://<id>` container ID.
pub fn runtime_id(container_id: &str) -> &str {
    container_id.split_once("://").map_or(container_id, |(_, id)| id)
}

/// Probes until `stop`, or until the container will never run again.
pub async fn run(target: ProbeTarget, ctx: Arc<ProberContext>, stop: CancellationToken) {
    let period = target.period();
    // After a kubelet restart every worker starts at once: spread the first probes.
    if ctx.started.elapsed() < period {
        let jitter = period.mul_f64(rand::rng().random::<f64>());
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(jitter) => {}
        }
    }
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut memory = Memory::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = ticker.tick() => {}
        }
        let keep_going = tokio::select! {
            () = stop.cancelled() => false,
            go = probe_once(&target, &ctx, &mut memory) => go,
        };
        if !keep_going {
            break;
        }
    }
    if let Some(id) = &memory.container_id {
        ctx.results.remove(target.kind, id);
    }
    ctx.metrics.prober.forget(&target.labels());
}

/// One tick (upstream's `doProbe`); false when the worker should stop.
pub(crate) async fn probe_once(
    target: &ProbeTarget,
    ctx: &ProberContext,
    memory: &mut Memory,
) -> bool {
    let Some(status) = ctx.statuses.status(target.uid()) else {
        return true; // not synced yet
    };
    let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    if terminal {
        return false;
    }
    let Some(c) = container_status(&status, &target.container.name) else { return true };
    let Some(id) = c.container_id.as_deref().map(runtime_id).filter(|id| !id.is_empty()) else {
        return true;
    };
    if memory.container_id.as_deref() != Some(id) {
        if let Some(old) = memory.container_id.take() {
            ctx.results.remove(target.kind, &old);
        }
        memory.container_id = Some(id.to_string());
        memory.on_hold = false;
        memory.last = None;
        memory.run = 0;
        record(target, ctx, id, target.kind.initial());
    }
    if memory.on_hold {
        return true;
    }
    let state = c.state.clone().unwrap_or_default();
    let Some(running) = state.running else {
        record(target, ctx, id, ProbeResult::Failure);
        let never_again = state.terminated.is_some()
            && target.pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("Never");
        return !never_again;
    };
    let initial_delay = Duration::from_secs(
        u64::try_from(target.probe.initial_delay_seconds.unwrap_or(0).max(0)).unwrap_or(0),
    );
    if let Some(started_at) = running.started_at {
        let since = jiff::Timestamp::now().duration_since(started_at.0);
        if since.as_secs() < i64::try_from(initial_delay.as_secs()).unwrap_or(i64::MAX) {
            return true;
        }
    }
    let started = c.started.unwrap_or(false);
    match (target.kind, started) {
        (ProbeKind::Startup, true) => return true,
        (ProbeKind::Liveness | ProbeKind::Readiness, false) => return true,
        _ => {}
    }
    let handler = match Handler::resolve(target, status.pod_ip.as_deref(), id) {
        Ok(h) => h,
        Err(e) => {
            ctx.recorder.warning(
                &target.object(),
                "Unhealthy",
                format!("{} probe errored and resulted in unknown state: {e}", target.kind.title()),
            );
            return true;
        }
    };
    let probing = std::time::Instant::now();
    let mut outcome = Outcome::Unknown(String::new());
    for _ in 0..MAX_TRIES {
        outcome = handler.run(&ctx.cri, target.timeout()).await;
        if !matches!(outcome, Outcome::Unknown(_)) {
            break;
        }
    }
    let title = target.kind.title();
    let result = match &outcome {
        Outcome::Success(_) => ProbeResult::Success,
        Outcome::Warning(w) => {
            ctx.recorder.warning(
                &target.object(),
                "ProbeWarning",
                format!("{title} probe warning: {w}"),
            );
            ProbeResult::Success
        }
        Outcome::Failure(f) => {
            ctx.recorder.warning(
                &target.object(),
                "Unhealthy",
                format!("{title} probe failed: {f}"),
            );
            ProbeResult::Failure
        }
        Outcome::Unknown(e) => {
            ctx.recorder.warning(
                &target.object(),
                "Unhealthy",
                format!("{title} probe errored and resulted in unknown state: {e}"),
            );
            return true; // thrown away (and not counted), as upstream
        }
    };
    let counted = match result {
        ProbeResult::Success => ProbeOutcome::Successful,
        ProbeResult::Failure => ProbeOutcome::Failed,
        ProbeResult::Unknown => ProbeOutcome::Unknown,
    };
    let took = probing.elapsed().as_secs_f64();
    ctx.metrics.prober.record(&target.labels(), counted, took);
    if memory.last == Some(result) {
        memory.run = memory.run.saturating_add(1);
    } else {
        memory.last = Some(result);
        memory.run = 1;
    }
    let below = match result {
        ProbeResult::Failure => memory.run < target.failure_threshold(),
        ProbeResult::Success => memory.run < target.success_threshold(),
        ProbeResult::Unknown => true,
    };
    if below {
        return true;
    }
    record(target, ctx, id, result);
    if result == ProbeResult::Failure
        && matches!(target.kind, ProbeKind::Liveness | ProbeKind::Startup)
    {
        // The container will be restarted: probe its successor, not it.
        memory.on_hold = true;
        memory.run = 0;
    }
    true
}

fn record(target: &ProbeTarget, ctx: &ProberContext, id: &str, result: ProbeResult) {
    ctx.results.set(ProbeUpdate {
        uid: target.uid().to_string(),
        container: target.container.name.clone(),
        container_id: id.to_string(),
        kind: target.kind,
        result,
    });
}
