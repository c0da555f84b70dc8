//! kuberuntime: pods through CRI.
//!
//! - [`status`]: the runtime's view of a pod, decoded from CRI labels and annotations.
//! - [`actions`]: `compute_pod_actions`, the pure plan for one sync.
//! - [`sync`]: executes the plan: sandbox, init containers one by one, app containers.
//! - [`sandbox`] and [`container`]: CRI configs from the pod spec.
//! - [`images`]: pulls by pull policy with ImagePullBackOff.
//!
//! [`backoff`] counts CrashLoopBackOff; [`volumes`] prepares emptyDir and hostPath; [`logs`]
//! reads container logs in the CRI format.

pub mod actions;
pub mod backoff;
pub mod container;
pub mod images;
pub mod logs;
pub mod sandbox;
pub mod status;
pub mod sync;
pub mod volumes;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::keys;
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use proto::{CallError, CriClient, cri};

use crate::cm::{CgroupLayout, Cgroups};
use crate::events::{ObjectRef, Recorder};
use status::{ContainerState, PodRuntimeStatus, container_info, sandbox_info};

/// Upstream's floor on a container's stop grace period.
pub const MIN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("pod {uid}: {source}")]
    Cri { uid: String, source: CallError },
}

/// Everything the runtime manager needs to know about the node.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub pod_logs_dir: PathBuf,
    pub root_dir: PathBuf,
    pub cgroups: CgroupLayout,
    /// The node's resolver configuration (for pods with `dnsPolicy: Default`/`ClusterFirst`).
    pub resolv_conf: String,
    pub memory_capacity: u64,
    pub host_ip: Option<String>,
}

/// Runs pods through a CRI runtime.
#[derive(Debug)]
pub struct RuntimeManager {
    pub cri: CriClient,
    pub config: RuntimeConfig,
    /// `containerd` in `containerd://<id>` container ids.
    pub runtime_name: String,
    cgroupfs: Arc<dyn Cgroups>,
    restarts: Mutex<backoff::Backoff>,
    images: images::ImageManager,
    /// Bounds how many pods are being created (sandbox and first containers) at once. The
    /// runtime's work per sandbox (shim, runc, CNI) is CPU-bound; a bounded pipeline brings the
    /// first pods up in a fraction of the time an unbounded burst takes, and the last no later.
    creations: tokio::sync::Semaphore,
    /// Where the runtime's events (pulls, container starts, kills, backoffs) go.
    pub recorder: Recorder,
}

/// Pods created at once: twice the CPUs (measured in BENCHMARKS.md).
pub fn creation_limit() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2
}

fn filter_by_uid(uid: &str) -> HashMap<String, String> {
    HashMap::from([(keys::POD_UID.to_string(), uid.to_string())])
}

impl RuntimeManager {
    pub fn new(cri: CriClient, config: RuntimeConfig, cgroupfs: Arc<dyn Cgroups>) -> Self {
        let runtime_name = cri.version().runtime_name.clone();
        Self {
            cri,
            config,
            runtime_name,
            cgroupfs,
            restarts: Mutex::new(backoff::Backoff::restarts()),
            images: images::ImageManager::default(),
            creations: tokio::sync::Semaphore::new(creation_limit()),
            recorder: Recorder::default(),
        }
    }

    /// The same manager, recording its events with `recorder`.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = recorder;
        self
    }

    fn err(uid: &str) -> impl FnOnce(CallError) -> RuntimeError + '_ {
        move |source| RuntimeError::Cri { uid: uid.to_string(), source }
    }

    /// Everything the runtime holds for pod `uid`, newest first.
    pub async fn pod_status(&self, uid: &str) -> Result<PodRuntimeStatus, RuntimeError> {
        let sandboxes = self
            .cri
            .list_pod_sandbox(cri::ListPodSandboxRequest {
                filter: Some(cri::PodSandboxFilter {
                    label_selector: filter_by_uid(uid),
                    ..Default::default()
                }),
            })
            .await
            .map_err(Self::err(uid))?
            .items;
        let containers = self
            .cri
            .list_containers(cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    label_selector: filter_by_uid(uid),
                    ..Default::default()
                }),
            })
            .await
            .map_err(Self::err(uid))?
            .containers;
        let sandbox_statuses = join_all(sandboxes.iter().map(|s| {
            self.cri.pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: s.id.clone(),
                verbose: false,
            })
        }));
        let container_statuses = join_all(containers.iter().map(|c| {
            self.cri.container_status(cri::ContainerStatusRequest {
                container_id: c.id.clone(),
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
                Ok(r) => status.containers.extend(r.status.as_ref().map(container_info)),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::err(uid)(e)),
            }
        }
        status.sort();
        Ok(status)
    }

    /// Stops the given running containers concurrently, each with its grace (at least 2 s).
    async fn stop_containers(
        &self,
        uid: &str,
        ids: Vec<(String, Duration)>,
    ) -> Result<(), RuntimeError> {
        let results = join_all(
            ids.iter().map(|(id, grace)| self.cri.stop_container(id, (*grace).max(MIN_GRACE))),
        )
        .await;
        for r in results {
            match r {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::err(uid)(e)),
            }
        }
        Ok(())
    }

    /// Stops every container of the pod (gracefully), then its sandboxes. Works from runtime
    /// state alone, so it also stops pods no source knows: with no `grace` given, each container
    /// gets the grace period recorded on it at creation. With the `pod`, each stop is recorded
    /// as upstream's `Killing` event.
    pub async fn kill_pod(
        &self,
        pod: Option<&Pod>,
        uid: &str,
        grace: Option<Duration>,
    ) -> Result<(), RuntimeError> {
        let status = self.pod_status(uid).await?;
        if let Some(pod) = pod {
            for c in status.running() {
                let message = format!("Stopping container {}", c.name);
                self.recorder.normal(&ObjectRef::container(pod, &c.name), "Killing", message);
            }
        }
        let default =
            Duration::from_secs(api::defaults::DEFAULT_TERMINATION_GRACE_PERIOD.unsigned_abs());
        let running: Vec<(String, Duration)> = status
            .running()
            .map(|c| {
                let own = c.grace_seconds.map(|s| Duration::from_secs(s.unsigned_abs()));
                (c.id.clone(), grace.or(own).unwrap_or(default))
            })
            .collect();
        self.stop_containers(uid, running).await?;
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

    /// Removes everything of a terminated pod: containers, sandboxes, logs, its directory and
    /// its cgroup. Upstream leaves this to garbage collection a minute later; we do it at once.
    pub async fn remove_pod(&self, uid: &str) -> Result<(), RuntimeError> {
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
            let logs = self.config.pod_logs_dir.join(format!("{}_{}_{uid}", s.namespace, s.name));
            remove_dir_logged(&logs);
        }
        remove_dir_logged(&volumes::pod_dir(&self.config.root_dir, uid));
        for cgroup in self.config.cgroups.all_pod_cgroups(uid) {
            if let Err(e) = self.cgroupfs.remove(&cgroup) {
                tracing::warn!(uid, error = %e, "removing the pod cgroup");
            }
        }
        Ok(())
    }

    /// Removes exited containers older than the newest one of each name (which status needs
    /// for `lastState`), as upstream's container GC keeps one dead container per name.
    async fn prune_dead_containers(&self, status: &PodRuntimeStatus) {
        let mut seen = std::collections::HashSet::new();
        for c in &status.containers {
            let newest = seen.insert(c.name.as_str());
            if !newest
                && c.state == ContainerState::Exited
                && let Err(e) = self
                    .cri
                    .remove_container(cri::RemoveContainerRequest { container_id: c.id.clone() })
                    .await
            {
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

fn remove_dir_logged(dir: &std::path::Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "removing a pod directory"),
    }
}
