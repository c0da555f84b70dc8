//! `secret` volumes: the Secret's keys as files on a tmpfs mounted for the volume alone, so
//! secret data never touches the node's disk (upstream's secret plugin wraps a memory-backed
//! emptyDir), rewritten atomically whenever the Secret changes.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{KeyToPath, Pod, SecretVolumeSource};

use super::atomic_writer::{self, Payload};
use super::payload::{DEFAULT_MODE, mode, project_keys};
use super::{SetupError, VolumeManager, ensure_dir, memory_size};
use crate::objects::{ObjectKey, ObjectKind};

/// The files of Secret `name` (a volume's or a projected source's).
pub async fn payload(
    vm: &VolumeManager,
    pod: &Pod,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: bool,
    default_mode: u32,
) -> Result<Payload, SetupError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let key = ObjectKey::new(ObjectKind::Secret, namespace, name);
    let secret = match vm.objects.secret(pod, name).await {
        Ok(s) => Some(s),
        Err(e) if e.is_not_found() && optional => None,
        Err(e) => return Err(e.into()),
    };
    let data: BTreeMap<&str, &[u8]> = secret
        .iter()
        .flat_map(|s| s.data.iter().flatten())
        .map(|(k, v)| (k.as_str(), v.0.as_slice()))
        .collect();
    project_keys(&key, &data, items, default_mode, optional)
}

/// Mounts the volume's tmpfs at `dir` (once) and writes the Secret into it.
pub async fn setup(
    vm: &VolumeManager,
    pod: &Pod,
    source: &SecretVolumeSource,
    dir: &Path,
) -> Result<(), SetupError> {
    let default_mode = mode(source.default_mode, DEFAULT_MODE, "defaultMode")?;
    let optional = source.optional.unwrap_or(false);
    let name = source.secret_name.as_deref().unwrap_or_default();
    let files = payload(vm, pod, name, source.items.as_deref(), optional, default_mode).await?;
    ensure_dir(dir, 0o777)?;
    vm.ensure_tmpfs(dir, memory_size(pod, None, vm.allocatable))?;
    atomic_writer::write(dir, &files, super::ownership::fs_group(pod))?;
    Ok(())
}
