//! Probes, as upstream's `prober`: a worker per (pod, container, probe kind) runs the probe's
//! handler on its period and records verdict changes in [`ProbeResults`]; the sync loop takes
//! the changes (`SyncLoopEvent::ProbeResults`) and syncs the pod, whose plan kills containers
//! that failed liveness or startup and whose status shows readiness.
//!
//! - [`worker`]: one probe's loop (delays, thresholds, on-hold after a failure).
//! - [`results`]: verdicts by container ID, and the change queue.
//! - Handlers, one room each: [`exec`] (CRI `ExecSync`), [`http`] (`httpGet`, also used by
//!   lifecycle hooks), [`tcp`] (`tcpSocket`), [`grpc`] (`grpc.health.v1`).

pub mod exec;
pub mod grpc;
pub mod http;
mod outcome;
pub mod results;
pub mod tcp;
pub mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Pod, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proto::CriClient;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use outcome::{MAX_OUTPUT, Outcome};
pub use results::{ProbeKind, ProbeResult, ProbeResults, ProbeUpdate};
use worker::ProbeTarget;

use crate::events::Recorder;
use crate::metrics::KubeletMetrics;
use crate::status::StatusManager;

/// Why a probe or hook cannot be aimed at anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("couldn't find port: {port:?} in container {container:?}")]
    PortName { port: String, container: String },
    #[error("port {port} in container {container:?} is out of range 1-65535")]
    PortRange { port: i32, container: String },
    #[error("the pod has no IP yet")]
    NoPodIp,
    #[error("the probe has no handler")]
    NoHandler,
}

/// A port given by number or by the name of one of the container's ports.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, ResolveError> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => match name.parse::<i32>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| p.container_port)
                .ok_or_else(|| ResolveError::PortName {
                    port: name.clone(),
                    container: container.name.clone(),
                })?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| ResolveError::PortRange { port: number, container: container.name.clone() })
}

/// Where an `httpGet` action goes: its host, or the pod's IP.
pub fn http_target(
    action: &HTTPGetAction,
    container: &Container,
    pod_ip: Option<&str>,
) -> Result<http::Target, ResolveError> {
    let host = match action.host.as_deref().filter(|h| !h.is_empty()) {
        Some(h) => h.to_string(),
        None => pod_ip.ok_or(ResolveError::NoPodIp)?.to_string(),
    };
    let path = action.path.as_deref().unwrap_or_default();
    Ok(http::Target {
        scheme: if action.scheme.as_deref() == Some("HTTPS") {
            http::Scheme::Https
        } else {
            http::Scheme::Http
        },
        host,
        port: resolve_port(&action.port, container)?,
        path: if path.starts_with('/') { path.to_string() } else { format!("/{path}") },
        headers: action
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
    })
}

/// A probe's handler, aimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    Exec { container_id: String, command: Vec<String> },
    Http(http::Target),
    Tcp { host: String, port: u16 },
    Grpc { host: String, port: u16, service: String },
}

impl Handler {
    /// Aims `target`'s probe at the container `container_id` of a pod with IP `pod_ip`.
    pub fn resolve(
        target: &ProbeTarget,
        pod_ip: Option<&str>,
        container_id: &str,
    ) -> Result<Self, ResolveError> {
        let p: &Probe = &target.probe;
        let c = &target.container;
        let host = |explicit: Option<&str>| -> Result<String, ResolveError> {
            match explicit.filter(|h| !h.is_empty()) {
                Some(h) => Ok(h.to_string()),
                None => pod_ip.map(str::to_string).ok_or(ResolveError::NoPodIp),
            }
        };
        if let Some(e) = &p.exec {
            return Ok(Handler::Exec {
                container_id: container_id.to_string(),
                command: e.command.clone().unwrap_or_default(),
            });
        }
        if let Some(h) = &p.http_get {
            return Ok(Handler::Http(http_target(h, c, pod_ip)?));
        }
        if let Some(t) = &p.tcp_socket {
            return Ok(Handler::Tcp {
                host: host(t.host.as_deref())?,
                port: resolve_port(&t.port, c)?,
            });
        }
        if let Some(g) = &p.grpc {
            return Ok(Handler::Grpc {
                host: host(None)?,
                port: resolve_port(&IntOrString::Int(g.port), c)?,
                service: g.service.clone().unwrap_or_default(),
            });
        }
        Err(ResolveError::NoHandler)
    }

    pub async fn run(&self, cri: &CriClient, timeout: Duration) -> Outcome {
        match self {
            Handler::Exec { container_id, command } => {
                exec::probe(cri, container_id, command, timeout).await
            }
            Handler::Http(target) => http::probe(target, timeout).await,
            Handler::Tcp { host, port } => tcp::probe(host, *port, timeout).await,
            Handler::Grpc { host, port, service } => {
                grpc::probe(host, *port, service, timeout).await
            }
        }
    }
}

/// What every probe worker shares.
#[derive(Debug)]
pub struct ProberContext {
    pub cri: CriClient,
    pub statuses: Arc<StatusManager>,
    pub results: Arc<ProbeResults>,
    pub recorder: Recorder,
    /// When the prober started (the first probes after a restart are spread over a period).
    pub started: Instant,
    /// `prober_probe_total` and `prober_probe_duration_seconds`.
    pub metrics: Arc<KubeletMetrics>,
}

/// The containers that are probed: app containers and sidecars (restartable init containers).
pub fn probed_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    spec.into_iter().flat_map(|s| {
        s.containers.iter().chain(
            s.init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always")),
        )
    })
}

fn probe_of(c: &Container, kind: ProbeKind) -> Option<&Probe> {
    match kind {
        ProbeKind::Liveness => c.liveness_probe.as_ref(),
        ProbeKind::Readiness => c.readiness_probe.as_ref(),
        ProbeKind::Startup => c.startup_probe.as_ref(),
    }
}

impl ProbeResults {
    /// Whether `c` (running as `id`) is ready: its readiness probe succeeded, or it has none.
    pub fn ready(&self, c: &Container, id: &str) -> bool {
        c.readiness_probe.is_none()
            || self.get(ProbeKind::Readiness, id) == Some(ProbeResult::Success)
    }

    /// Whether `c` (running as `id`) has started: its startup probe succeeded, or it has none.
    pub fn started(&self, c: &Container, id: &str) -> bool {
        c.startup_probe.is_none() || self.get(ProbeKind::Startup, id) == Some(ProbeResult::Success)
    }

    /// The probe `c` (running as `id`) failed that calls for a restart: liveness or startup.
    pub fn failed(&self, c: &Container, id: &str) -> Option<ProbeKind> {
        [ProbeKind::Liveness, ProbeKind::Startup].into_iter().find(|&kind| {
            probe_of(c, kind).is_some() && self.get(kind, id) == Some(ProbeResult::Failure)
        })
    }
}

/// The probe grace period for a kill after `kind` failed: the probe's own
/// `terminationGracePeriodSeconds` where set (upstream 1.28+).
pub fn probe_grace(c: &Container, kind: ProbeKind) -> Option<Duration> {
    let secs = probe_of(c, kind)?.termination_grace_period_seconds?;
    Some(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

/// Starts and stops probe workers as pods come and go (upstream's prober `manager`).
#[derive(Debug)]
pub struct ProbeManager {
    ctx: Arc<ProberContext>,
    pods: HashMap<String, CancellationToken>,
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl ProbeManager {
    pub fn new(ctx: Arc<ProberContext>, stop: CancellationToken) -> Self {
        Self { ctx, pods: HashMap::new(), tracker: TaskTracker::new(), stop }
    }

    /// Starts a worker for each probe of the pod's containers (once per pod).
    pub fn add_pod(&mut self, pod: &Arc<Pod>) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.pods.contains_key(&uid) {
            return;
        }
        let token = self.stop.child_token();
        let mut any = false;
        for c in probed_containers(pod) {
            for kind in ProbeKind::ALL {
                let Some(probe) = probe_of(c, kind) else { continue };
                any = true;
                let target = ProbeTarget {
                    pod: pod.clone(),
                    container: c.clone(),
                    kind,
                    probe: probe.clone(),
                };
                self.tracker.spawn(worker::run(target, self.ctx.clone(), token.clone()));
            }
        }
        if any {
            self.pods.insert(uid, token);
        }
    }

    /// Stops the pod's workers (they forget their verdicts as they go).
    pub fn remove_pod(&mut self, uid: &str) {
        if let Some(token) = self.pods.remove(uid) {
            token.cancel();
        }
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Stops every worker and waits for them.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests;
