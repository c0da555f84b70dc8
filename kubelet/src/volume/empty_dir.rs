//! `emptyDir`: a directory on the node's disk (mode 0777), or with `medium: Memory` a tmpfs
//! sized as upstream's `calculateEmptyDirMemorySize` says (the volume's `sizeLimit`, the pod's
//! memory limit or the node's allocatable memory, whichever is smallest).

use std::path::Path;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod};

use super::{SetupError, VolumeManager, ensure_dir, memory_size};

/// Creates the volume at `dir` (and mounts its tmpfs).
pub fn setup(
    vm: &VolumeManager,
    pod: &Pod,
    source: &EmptyDirVolumeSource,
    dir: &Path,
) -> Result<(), SetupError> {
    match source.medium.as_deref().unwrap_or_default() {
        "" => ensure_dir(dir, 0o777),
        "Memory" => {
            ensure_dir(dir, 0o777)?;
            let limit = source
                .size_limit
                .as_ref()
                .and_then(|q| api::quantity::Quantity::parse(&q.0).ok())
                .map(|q| q.value());
            vm.ensure_tmpfs(dir, memory_size(pod, limit, vm.allocatable))
        }
        other => Err(SetupError::Medium(other.to_string())),
    }
}
