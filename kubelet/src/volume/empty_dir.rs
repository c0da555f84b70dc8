//! `emptyDir`: a directory on the node's disk (mode 0777), or with `medium: Memory` a tmpfs
//! sized as upstream's `calculateEmptyDirMemorySize` says (the volume's `sizeLimit`, the pod's
//! memory limit or the node's allocatable memory, whichever is smallest). With an `fsGroup`,
//! the new volume is the group's (setgid, group-writable), so what the pod writes is too; an
//! emptyDir starts empty, so `fsGroupChangePolicy` (`Always` or `OnRootMismatch`) makes no
//! difference: the root is checked on each sync and the tree walked only when it lacks the
//! group.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod};

use super::{SetupError, VolumeManager, ensure_dir, memory_size, ownership};

/// Creates the volume at `dir` (and mounts its tmpfs).
pub fn setup(
    vm: &VolumeManager,
    pod: &Pod,
    source: &EmptyDirVolumeSource,
    dir: &Path,
) -> Result<(), SetupError> {
    match source.medium.as_deref().unwrap_or_default() {
        "" => ensure_dir(dir, 0o777)?,
        "Memory" => {
            ensure_dir(dir, 0o777)?;
            let limit = source
                .size_limit
                .as_ref()
                .and_then(|q| api::quantity::Quantity::parse(&q.0).ok())
                .map(|q| q.value());
            vm.ensure_tmpfs(dir, memory_size(pod, limit, vm.allocatable))?;
        }
        other => return Err(SetupError::Medium(other.to_string())),
    }
    let Some(gid) = ownership::fs_group(pod) else { return Ok(()) };
    let root = std::fs::metadata(dir).map_err(SetupError::io("reading", dir))?;
    if root.gid() != gid || root.permissions().mode() & 0o2000 == 0 {
        ownership::apply(dir, gid, false).map_err(|(path, source)| SetupError::Io {
            what: "setting the fsGroup ownership of",
            path,
            source,
        })?;
    }
    Ok(())
}
