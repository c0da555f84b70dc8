//! kuberuntime: pods through CRI.
//!
//! - [`status`]: the runtime's view of a pod, decoded from CRI labels and annotations.
//! - [`actions`]: `compute_pod_actions`, the pure plan for one sync.
//! - [`sync`]: executes the plan: sandbox, init containers one by one, app containers.
//! - [`sandbox`] and [`container`]: CRI configs from the pod spec, with the effective
//!   [`security_context`] (`runAsNonRoot` checked against the image's user).
//! - [`images`]: pulls by pull policy with ImagePullBackOff, with the credentials of
//!   [`pull_secrets`] (fetched from the apiserver) and the node's config.
//!
//! [`backoff`] counts CrashLoopBackOff; [`env`] builds a container's environment (pod fields,
//! resources, ConfigMaps and Secrets); [`volumes`] makes a container's CRI mounts from the
//! pod's volumes ([`crate::volume`]); [`logs`] reads container logs in the CRI format.

pub mod actions;
pub mod adoption;
pub mod backoff;
pub mod container;
pub mod env;
pub mod hooks;
pub mod images;
pub mod logs;
pub mod pull_secrets;
pub mod sandbox;
pub mod security_context;
pub mod status;
pub mod sync;
pub mod volumes;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::keys;
use futures::future::join_all;
use k8s_openapi::api::core::v1::{Container, Pod};
use proto::{CallError, CriClient, cri};

use crate::cm::ContainerManager;
use crate::events::{ObjectRef, Recorder};
use crate::metrics::KubeletMetrics;
use crate::pleg::timeline::PodTimeline;
use crate::volume::{self as pod_volume, TeardownError, VolumeManager};
use status::{ContainerInfo, ContainerState, PodRuntimeStatus, container_info, sandbox_info};

/// Upstream's floor on a container's stop grace period when it is restarted.
pub const MIN_GRACE: Duration = Duration::from_secs(2);
/// The floor when the pod terminates: a grace period given by a deletion is honoured down to
/// this (upstream's `calculateEffectiveGracePeriod`).
pub const MIN_TERMINATION_GRACE: Duration = Duration::from_secs(1);

/// How [`RuntimeManager::kill_pod`] stops a pod.
#[derive(Debug, Clone, Copy)]
pub struct KillOptions<'a> {
    /// The spec: preStop hooks and which containers are sidecars (stopped last). `None` for
    /// pods only the runtime knows.
    pub pod: Option<&'a Pod>,
    /// The pod's grace period; `None`: each container's own, recorded at creation.
    pub grace: Option<Duration>,
    /// Run preStop hooks (not again when a shorter grace period restarts a kill).
    pub hooks: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("pod {uid}: {source}")]
    Cri { uid: String, source: CallError },
    #[error(transparent)]
    Volumes(#[from] TeardownError),
}

/// Everything the runtime manager needs to know about the node.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub pod_logs_dir: PathBuf,
    pub root_dir: PathBuf,
    /// The node's resolver configuration (for pods with `dnsPolicy: Default`/`ClusterFirst`).
    pub resolv_conf: String,
    pub memory_capacity: u64,
    pub host_ip: Option<String>,
    /// The longest crash back-off (`crashLoopBackOff.maxContainerRestartPeriod`).
    pub restart_backoff_max: std::time::Duration,
}

/// Runs pods through a CRI runtime.
#[derive(Debug)]
pub struct RuntimeManager {
    pub cri: CriClient,
    pub config: RuntimeConfig,
    /// `containerd` in `containerd://<id>` container ids.
    pub runtime_name: String,
    /// Pod and QoS cgroups.
    pub cm: Arc<ContainerManager>,
    /// Where the runtime's events (pulls, container starts, kills, backoffs, hook failures) go.
    pub recorder: Recorder,
    restarts: Mutex<backoff::Backoff>,
    images: images::ImageManager,
    /// Pod volumes, and the objects and tokens they (and env vars) read.
    pub volumes: VolumeManager,
    /// Bounds how many pods are being created (sandbox and first containers) at once. The
    /// runtime's work per sandbox (shim, runc, CNI) is CPU-bound; a bounded pipeline brings the
    /// first pods up in a fraction of the time an unbounded burst takes, and the last no later.
    creations: tokio::sync::Semaphore,
    /// Pods and containers started, and pods' image pulls for their startup latency.
    pub metrics: Arc<KubeletMetrics>,
    /// What tells a status read earlier still holds (the PLEG's relists, and their period);
    /// `None`: every sync reads afresh.
    timeline: Option<(Arc<PodTimeline>, Duration)>,
    /// Each pod's status as a sync last read it, and when the read began.
    status_cache: Mutex<HashMap<String, (PodRuntimeStatus, Instant)>>,
}

/// Pods created at once: twice the CPUs (measured in BENCHMARKS.md).
pub fn creation_limit() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2
}

fn filter_by_uid(uid: &str) -> HashMap<String, String> {
    HashMap::from([(keys::POD_UID.to_string(), uid.to_string())])
}

impl RuntimeManager {
    /// `secrets`: where pods' image pull secrets come from (`None`: no apiserver).
    pub fn new(
        cri: CriClient,
        config: RuntimeConfig,
        cm: Arc<ContainerManager>,
        recorder: Recorder,
        volumes: VolumeManager,
        secrets: Option<Arc<dyn pull_secrets::SecretSource>>,
        metrics: Arc<KubeletMetrics>,
    ) -> Self {
        let runtime_name = cri.version().runtime_name.clone();
        let node_keyring = crate::credentialprovider::NodeKeyring::new(
            crate::credentialprovider::node::SearchPaths::upstream(&config.root_dir),
            crate::credentialprovider::node::LIFETIME,
        );
        Self {
            cri,
            config,
            runtime_name,
            cm,
            recorder,
            restarts: Mutex::new(backoff::Backoff::restarts()),
            images: images::ImageManager::new(node_keyring, secrets).with_metrics(metrics.clone()),
            volumes,
            creations: tokio::sync::Semaphore::new(creation_limit()),
            metrics,
            timeline: None,
            status_cache: Mutex::default(),
        }
    }

    /// Syncs plan from the status read last while `timeline` (relisted every `period`) saw
    /// nothing of the pod change since, as upstream's pod workers read its pod cache.
    pub fn with_timeline(mut self, timeline: Arc<PodTimeline>, period: Duration) -> Self {
        self.timeline = Some((timeline, period));
        self
    }

    fn lock_status_cache(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (PodRuntimeStatus, Instant)>> {
        self.status_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The pod's status for a sync to plan from: the one read last if the PLEG has seen
    /// nothing of the pod change since (see [`crate::pleg::timeline`]), else read afresh.
    pub async fn pod_status_for_sync(&self, uid: &str) -> Result<PodRuntimeStatus, RuntimeError> {
        let Some((timeline, period)) = &self.timeline else { return self.pod_status(uid).await };
        if let Some((status, read)) = self.lock_status_cache().get(uid)
            && timeline.unchanged_since(uid, *read, Instant::now(), *period)
        {
            return Ok(status.clone());
        }
        let read = Instant::now();
        let status = self.pod_status(uid).await?;
        self.lock_status_cache().insert(uid.to_string(), (status.clone(), read));
        Ok(status)
    }

    /// Drops the status kept for a pod that is gone.
    pub fn forget_status(&self, uid: &str) {
        self.lock_status_cache().remove(uid);
    }

    fn err(uid: &str) -> impl FnOnce(CallError) -> RuntimeError + '_ {
        move |source| RuntimeError::Cri { uid: uid.to_string(), source }
    }

    /// Everything the runtime holds for pod `uid`, newest first.
    pub async fn pod_status(&self, uid: &str) -> Result<PodRuntimeStatus, RuntimeError> {
        let sandboxes = self
            .cri
            .list_pod_sandbox_brief(cri::ListPodSandboxRequest {
                filter: Some(cri::PodSandboxFilter {
                    label_selector: filter_by_uid(uid),
                    ..Default::default()
                }),
            })
            .await
            .map_err(Self::err(uid))?;
        let containers = self
            .cri
            .list_containers_brief(cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    label_selector: filter_by_uid(uid),
                    ..Default::default()
                }),
            })
            .await
            .map_err(Self::err(uid))?;
        let sandbox_statuses = join_all(sandboxes.iter().map(|s| {
            self.cri.pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: s.id.to_string(),
                verbose: false,
            })
        }));
        let container_statuses = join_all(containers.iter().map(|c| {
            self.cri.container_status(cri::ContainerStatusRequest {
                container_id: c.id.to_string(),
                verbose: false,
            })
        }));
        let (sandbox_statuses, container_statuses) =
            tokio::join!(sandbox_statuses, container_statuses);
        let mut status = PodRuntimeStatus { uid: uid.to_string(), ..Default::default() };
        // An item removed between the list and its status call is simply gone.
        for s in sandbox_statuses {
            match s {
                Ok(r) => status.sandboxes.extend(r.status.as_ref().map(sandbox_info)),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::err(uid)(e)),
            }
        }
        for c in container_statuses {
            match c {
                Ok(r) => status.containers.extend(r.status.as_ref().map(|s| {
                    let mut info = container_info(s);
                    status::add_termination_message(&mut info);
                    info
                })),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::err(uid)(e)),
            }
        }
        status.sort();
        Ok(status)
    }

    /// Stops one running container: its preStop hook first (when `hooks` and the spec has
    /// one), bounded by `grace`, then `StopContainer` with what is left of it (at least
    /// `floor`).
    async fn stop_container(
        &self,
        pod: Option<&Pod>,
        spec: Option<&Container>,
        c: &ContainerInfo,
        grace: Duration,
        hooks: bool,
        floor: Duration,
    ) -> Result<(), RuntimeError> {
        let uid = pod.and_then(|p| p.metadata.uid.as_deref()).unwrap_or_default();
        let mut left = grace;
        if let (true, Some(pod), Some(spec)) = (hooks, pod, spec) {
            left = left.saturating_sub(self.run_pre_stop(pod, spec, &c.id, grace).await);
        }
        match self.cri.stop_container(&c.id, left.max(floor)).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Self::err(uid)(e)),
        }
    }

    /// Stops every container of the pod, then its sandboxes, as upstream's `killPod`: app
    /// containers (and anything the spec does not name) together, each with its preStop hook
    /// and grace period; then sidecars one at a time in reverse order with what is left of the
    /// pod's grace; then the sandboxes. Works from runtime state alone too, so it also stops pods
    /// no source knows: with no `grace` given, each container gets the grace period recorded on
    /// it at creation. With the pod, each stop is recorded as upstream's `Killing` event.
    pub async fn kill_pod(&self, uid: &str, opts: &KillOptions<'_>) -> Result<(), RuntimeError> {
        self.forget_status(uid);
        let status = self.pod_status(uid).await?;
        if let Some(pod) = opts.pod {
            for c in status.running() {
                let message = format!("Stopping container {}", c.name);
                self.recorder.normal(&ObjectRef::container(pod, &c.name), "Killing", message);
            }
        }
        let default =
            Duration::from_secs(api::defaults::DEFAULT_TERMINATION_GRACE_PERIOD.unsigned_abs());
        let grace_of = |c: &ContainerInfo| {
            let own = c.grace_seconds.map(|s| Duration::from_secs(s.unsigned_abs()));
            opts.grace.or(own).unwrap_or(default)
        };
        let spec = opts.pod.and_then(|p| p.spec.as_ref());
        let sidecars: Vec<&Container> = spec
            .into_iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .filter(|c| actions::is_sidecar(c))
            .collect();
        let find = |name: &str| {
            spec.into_iter()
                .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
                .find(|c| c.name == name)
        };
        let started = tokio::time::Instant::now();
        let (late, first): (Vec<&ContainerInfo>, Vec<&ContainerInfo>) =
            status.running().partition(|c| sidecars.iter().any(|s| s.name == c.name));
        let results = join_all(first.iter().map(|c| {
            self.stop_container(
                opts.pod,
                find(&c.name),
                c,
                grace_of(c),
                opts.hooks,
                MIN_TERMINATION_GRACE,
            )
        }))
        .await;
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
        for sidecar in sidecars.iter().rev() {
            for c in late.iter().filter(|c| c.name == sidecar.name) {
                let left = grace_of(c).saturating_sub(started.elapsed());
                self.stop_container(
                    opts.pod,
                    Some(sidecar),
                    c,
                    left,
                    opts.hooks,
                    MIN_TERMINATION_GRACE,
                )
                .await?;
            }
        }
        for s in status.sandboxes.iter().filter(|s| s.ready) {
            match self
                .cri
                .stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: s.id.clone() })
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::err(uid)(e)),
            }
        }
        Ok(())
    }

    /// Releases what a finished pod (phase `Succeeded`/`Failed`) holds besides its container
    /// records and logs, as upstream's `SyncTerminatedPod`: its volumes and cgroup (its sandbox
    /// was stopped when it finished). The containers go when the pod is removed.
    pub fn release_pod(&self, uid: &str) {
        if let Err(e) = self.volumes.unmount_pod(uid) {
            tracing::warn!(uid, error = %e, "releasing the pod's volumes; retried when it is removed");
        }
        self.cm.remove_pod(uid);
    }

    /// Removes everything of a terminated pod: containers, sandboxes, logs, its directory and
    /// its cgroup. Upstream leaves this to garbage collection a minute later; we do it at once.
    pub async fn remove_pod(&self, uid: &str) -> Result<(), RuntimeError> {
        self.forget_status(uid);
        let status = self.pod_status(uid).await?;
        for c in &status.containers {
            self.cri
                .remove_container(cri::RemoveContainerRequest { container_id: c.id.clone() })
                .await
                .map_err(Self::err(uid))?;
        }
        for s in &status.sandboxes {
            self.cri
                .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: s.id.clone() })
                .await
                .map_err(Self::err(uid))?;
            let logs = self.config.pod_logs_dir.join(sandbox::pod_log_dir_name(
                &s.namespace,
                &s.name,
                uid,
            ));
            remove_dir_logged(&logs);
        }
        self.volumes.unmount_pod(uid)?;
        remove_dir_logged(&pod_volume::pod_dir(&self.config.root_dir, uid));
        self.cm.remove_pod(uid);
        Ok(())
    }

    /// Removes exited containers but the newest exited one of each name (which status needs
    /// for `lastState` and `kubectl logs --previous`), as upstream's container GC keeps one
    /// dead container per name; each with its log files, rotated ones included (upstream's
    /// `removeContainerLog`).
    async fn prune_dead_containers(&self, status: &PodRuntimeStatus) {
        for c in prunable(status) {
            if let Err(e) = remove_container_and_logs(&self.cri, &c.id, &c.log_path).await {
                tracing::debug!(container = %c.id, error = %e, "removing an old dead container");
            }
        }
    }

    /// Housekeeping of the backoff tables.
    pub fn gc(&self) {
        self.restarts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .gc(std::time::SystemTime::now());
        self.images.gc();
    }
}

/// The exited containers of `status` but the newest of each name (it lists newest first).
fn prunable(status: &PodRuntimeStatus) -> impl Iterator<Item = &ContainerInfo> {
    let mut seen = std::collections::HashSet::new();
    status
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Exited)
        .filter(move |c| !seen.insert(c.name.as_str()))
}

/// Whether a sync would remove dead containers of the pod.
fn has_dead_containers_to_prune(status: &PodRuntimeStatus) -> bool {
    prunable(status).next().is_some()
}

/// Removes a container and then its log files, rotated ones included (upstream's
/// `removeContainer` with `removeContainerLog`); `log_path` empty when it has none. A log that
/// cannot be removed is logged: the container is gone either way.
pub async fn remove_container_and_logs(
    cri: &CriClient,
    id: &str,
    log_path: &str,
) -> Result<(), CallError> {
    cri.remove_container(cri::RemoveContainerRequest { container_id: id.to_string() }).await?;
    if !log_path.is_empty()
        && let Err(e) = crate::logs::rotate::remove_all(Path::new(log_path))
    {
        tracing::warn!(container = id, error = %e, "removing a dead container's logs");
    }
    Ok(())
}

fn remove_dir_logged(dir: &std::path::Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "removing a pod directory"),
    }
}

#[cfg(test)]
mod tests;
