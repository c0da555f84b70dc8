//! Pod volumes, as upstream's volume plugins under the kubelet's volume manager.
//!
//! - [`atomic_writer`]: projecting files into a volume so readers never see half an update.
//! - [`mount`]: the [`Mounter`](mount::Mounter) trait (tmpfs mounts), real and fake.
//! - [`empty_dir`] (on disk, or a tmpfs for `medium: Memory`) and [`host_path`].
//! - [`ownership`]: the pod's `fsGroup` on every volume but `hostPath`, as upstream's
//!   `SetVolumeOwnership`.
//! - [`payload`]: keys of a ConfigMap or Secret projected to files (`items`, modes, `optional`).
//! - [`config_map`] and [`downward_api`] (on disk), [`secret`] and [`projected`] (each on a
//!   tmpfs of its own, never on disk).
//!
//! [`VolumeManager::mount_pod`] sets up every volume of a pod, on each sync, so files follow
//! their objects (and a downward API volume its pod's labels and annotations);
//! [`VolumeManager::unmount_pod`] detaches the tmpfs mounts and removes the volumes. Volumes
//! live at `<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>`, as upstream's.

pub mod atomic_writer;
pub mod config_map;
pub mod downward_api;
pub mod empty_dir;
pub mod host_path;
pub mod mount;
pub mod ownership;
pub mod payload;
pub mod projected;
pub mod secret;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::fieldpath::{Allocatable, FieldPathError};
use crate::objects::{ObjectError, ObjectKey, ObjectSources};
use crate::token::{TokenError, TokenManager};
use atomic_writer::{PathError, WriteError};
use mount::Mounter;

pub const EMPTY_DIR: &str = "kubernetes.io~empty-dir";
pub const CONFIG_MAP: &str = "kubernetes.io~configmap";
pub const SECRET: &str = "kubernetes.io~secret";
pub const DOWNWARD_API: &str = "kubernetes.io~downward-api";
pub const PROJECTED: &str = "kubernetes.io~projected";

/// `<root>/pods/<uid>`, the pod's directory on the node.
pub fn pod_dir(root_dir: &Path, uid: &str) -> PathBuf {
    root_dir.join("pods").join(uid)
}

/// `<root>/pods/<uid>/volumes`: what a finished pod releases.
pub fn pod_volumes_dir(root_dir: &Path, uid: &str) -> PathBuf {
    pod_dir(root_dir, uid).join("volumes")
}

/// Why one volume could not be set up (upstream's `MountVolume.SetUp failed` reasons).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error("configmap references non-existent config key: {key}")]
    MissingConfigMapKey { object: ObjectKey, key: String },
    #[error("references non-existent secret key: {key}")]
    MissingSecretKey { object: ObjectKey, key: String },
    #[error("{object}: key {key:?} is not a valid file name: {reason}")]
    BadKey { object: ObjectKey, key: String, reason: Box<PathError> },
    #[error("items path {path:?}: {reason}")]
    BadPath { path: String, reason: PathError },
    #[error(
        "conflicting duplicate paths: {0:?} is projected twice (items or projected sources collide)"
    )]
    Collision(String),
    #[error("mode {mode:#o} of {path:?} is out of range: must be between 0 and 0777 (octal)")]
    Mode { path: String, mode: i32 },
    #[error("{path}: {source}")]
    FieldPath { path: String, source: FieldPathError },
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("mounting a tmpfs at {path}: {source}")]
    Mount { path: PathBuf, source: std::io::Error },
    #[error("hostPath type check failed: {path} is not a {kind}{}", detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    HostPathType { path: PathBuf, kind: String, detail: Option<String> },
    #[error("emptyDir medium {0:?} is not supported by this kubelet")]
    Medium(String),
    #[error("{0} volumes are not supported by this kubelet")]
    Unsupported(&'static str),
    #[error("projected source {0} is not supported by this kubelet")]
    UnsupportedProjection(&'static str),
}

impl SetupError {
    fn io<'a>(
        what: &'static str,
        path: &'a Path,
    ) -> impl FnOnce(std::io::Error) -> SetupError + 'a {
        move |source| SetupError::Io { what, path: path.to_path_buf(), source }
    }
}

/// A volume of a pod that could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("pod {pod}: volume {volume:?}: {reason}")]
pub struct VolumeError {
    /// `<namespace>/<name>`.
    pub pod: String,
    pub volume: String,
    pub reason: SetupError,
}

/// Why a pod's volumes could not be released.
#[derive(Debug, thiserror::Error)]
#[error("pod {uid}: releasing {path}: {source}")]
pub struct TeardownError {
    pub uid: String,
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// A volume ready for containers to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedVolume {
    pub path: PathBuf,
    /// Managed content (ConfigMaps, Secrets, downward API, projected) is mounted read-only.
    pub read_only: bool,
}

/// The pod's volumes by name.
pub type PodVolumes = HashMap<String, MountedVolume>;

/// What [`VolumeManager::mount_pod`] set up, and what it could not.
#[derive(Debug, Default)]
pub struct MountOutcome {
    pub volumes: PodVolumes,
    pub errors: Vec<VolumeError>,
}

/// Sets up and tears down pod volumes.
#[derive(Debug)]
pub struct VolumeManager {
    pub root_dir: PathBuf,
    pub mounter: Arc<dyn Mounter>,
    pub objects: ObjectSources,
    /// Service account tokens (`None` standalone).
    pub tokens: Option<Arc<TokenManager>>,
    /// The node's allocatable CPU and memory: unset limits in downward API files, tmpfs sizes.
    pub allocatable: Allocatable,
}

/// Creates `dir` (and its parents) if needed and sets its mode.
pub(crate) fn ensure_dir(dir: &Path, mode: u32) -> Result<(), SetupError> {
    std::fs::create_dir_all(dir).map_err(SetupError::io("creating", dir))?;
    let current = std::fs::metadata(dir).map_err(SetupError::io("reading", dir))?;
    // Permission bits only: the setgid bit fsGroup ownership adds stays.
    if current.permissions().mode() & 0o777 != mode & 0o777 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .map_err(SetupError::io("setting the mode of", dir))?;
    }
    Ok(())
}

fn namespaced_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

impl VolumeManager {
    /// `<root>/pods/<uid>/volumes/<plugin>/<name>`.
    pub fn volume_dir(&self, pod: &Pod, plugin: &str, name: &str) -> PathBuf {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        pod_volumes_dir(&self.root_dir, uid).join(plugin).join(name)
    }

    /// Mounts a tmpfs of `size` at `dir` unless one is there (a restarted kubelet finds its
    /// mounts in place).
    pub(crate) fn ensure_tmpfs(&self, dir: &Path, size: Option<u64>) -> Result<(), SetupError> {
        let mounted = self.mounter.is_mount_point(dir).map_err(SetupError::io("reading", dir))?;
        if !mounted {
            self.mounter
                .mount_tmpfs(dir, size)
                .map_err(|source| SetupError::Mount { path: dir.to_path_buf(), source })?;
        }
        Ok(())
    }

    /// Sets up one volume; returns where it is.
    async fn setup(&self, pod: &Pod, v: &Volume) -> Result<MountedVolume, SetupError> {
        let managed = |path: PathBuf| MountedVolume { path, read_only: true };
        if let Some(e) = &v.empty_dir {
            let path = self.volume_dir(pod, EMPTY_DIR, &v.name);
            empty_dir::setup(self, pod, e, &path)?;
            return Ok(MountedVolume { path, read_only: false });
        }
        if let Some(h) = &v.host_path {
            let path = PathBuf::from(&h.path);
            host_path::check(&path, h.type_.as_deref().unwrap_or_default())?;
            return Ok(MountedVolume { path, read_only: false });
        }
        if let Some(source) = &v.config_map {
            let path = self.volume_dir(pod, CONFIG_MAP, &v.name);
            config_map::setup(self, pod, source, &path).await?;
            return Ok(managed(path));
        }
        if let Some(source) = &v.secret {
            let path = self.volume_dir(pod, SECRET, &v.name);
            secret::setup(self, pod, source, &path).await?;
            return Ok(managed(path));
        }
        if let Some(source) = &v.downward_api {
            let path = self.volume_dir(pod, DOWNWARD_API, &v.name);
            downward_api::setup(self, pod, source, &path)?;
            return Ok(managed(path));
        }
        if let Some(source) = &v.projected {
            let path = self.volume_dir(pod, PROJECTED, &v.name);
            projected::setup(self, pod, source, &path).await?;
            return Ok(managed(path));
        }
        let kind = [
            (v.nfs.is_some(), "nfs"),
            (v.persistent_volume_claim.is_some(), "persistentVolumeClaim"),
            (v.csi.is_some(), "csi"),
            (v.ephemeral.is_some(), "ephemeral"),
            (v.image.is_some(), "image"),
        ]
        .into_iter()
        .find_map(|(set, kind)| set.then_some(kind))
        .unwrap_or("these");
        Err(SetupError::Unsupported(kind))
    }

    /// Sets up every volume of the pod (again on each sync: files follow their sources).
    /// A volume that fails does not keep the others from being set up.
    pub async fn mount_pod(&self, pod: &Pod) -> MountOutcome {
        let mut out = MountOutcome::default();
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            match self.setup(pod, v).await {
                Ok(mounted) => {
                    out.volumes.insert(v.name.clone(), mounted);
                }
                Err(reason) => out.errors.push(VolumeError {
                    pod: namespaced_name(pod),
                    volume: v.name.clone(),
                    reason,
                }),
            }
        }
        out
    }

    /// Detaches every tmpfs under the pod's volumes, then removes them, and forgets the pod's
    /// tokens. Nothing is removed under a mount that could not be detached.
    pub fn unmount_pod(&self, uid: &str) -> Result<(), TeardownError> {
        let dir = pod_volumes_dir(&self.root_dir, uid);
        let fail = |path: &Path| {
            let uid = uid.to_string();
            let path = path.to_path_buf();
            move |source| TeardownError { uid, path, source }
        };
        let plugins = match std::fs::read_dir(&dir) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(fail(&dir)(e)),
        };
        for plugin in plugins {
            let plugin = plugin.map_err(fail(&dir))?.path();
            if !plugin.is_dir() {
                continue;
            }
            for volume in std::fs::read_dir(&plugin).map_err(fail(&plugin))? {
                let volume = volume.map_err(fail(&plugin))?.path();
                if self.mounter.is_mount_point(&volume).map_err(fail(&volume))? {
                    self.mounter.unmount(&volume).map_err(fail(&volume))?;
                    tracing::debug!(uid, volume = %volume.display(), "unmounted");
                }
            }
        }
        std::fs::remove_dir_all(&dir).map_err(fail(&dir))?;
        if let Some(tokens) = &self.tokens {
            tokens.forget_pod(uid);
        }
        Ok(())
    }
}

/// The pod's memory limit, when every container has one (upstream's pod cgroup limit): the app
/// containers' and sidecars' limits summed, or the largest regular init container's if more.
pub fn pod_memory_limit(pod: &Pod) -> Option<i128> {
    let spec = pod.spec.as_ref()?;
    let limit = |c: &k8s_openapi::api::core::v1::Container| {
        let q = c.resources.as_ref()?.limits.as_ref()?.get("memory")?;
        api::quantity::Quantity::parse(&q.0).ok().map(|q| q.value()).filter(|v| *v > 0)
    };
    let inits = spec.init_containers.iter().flatten();
    let (sidecars, regular): (Vec<_>, Vec<_>) =
        inits.partition(|c| crate::runtime::actions::is_sidecar(c));
    let mut running = 0i128;
    for c in spec.containers.iter().chain(sidecars) {
        running += limit(c)?;
    }
    let mut largest_init = 0i128;
    for c in regular {
        largest_init = largest_init.max(limit(c)?);
    }
    Some(running.max(largest_init))
}

/// Upstream's `calculateEmptyDirMemorySize`: the node's allocatable memory, or the pod's memory
/// limit if smaller, or the volume's `sizeLimit` if smaller still.
pub fn memory_size(pod: &Pod, size_limit: Option<i128>, allocatable: Allocatable) -> Option<u64> {
    // Unknown allocatable memory (0): no bound from the node.
    let unbounded = i128::from(u64::MAX);
    let mut size = if allocatable.memory_bytes > 0 { allocatable.memory_bytes } else { unbounded };
    if let Some(pod_limit) = pod_memory_limit(pod).filter(|l| *l > 0 && *l <= size) {
        size = pod_limit;
    }
    if let Some(limit) = size_limit.filter(|l| *l > 0 && *l <= size) {
        size = limit;
    }
    u64::try_from(size).ok().filter(|s| *s > 0 && i128::from(*s) < unbounded)
}

#[cfg(test)]
mod tests;
