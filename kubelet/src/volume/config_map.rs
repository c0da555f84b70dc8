//! `configMap` volumes: the ConfigMap's keys (`data` and `binaryData`) as files on the node's
//! disk, as upstream's configmap plugin (an emptyDir it wraps), rewritten atomically whenever
//! the ConfigMap changes.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, KeyToPath, Pod};

use super::atomic_writer::{self, Payload};
use super::payload::{DEFAULT_MODE, mode, project_keys};
use super::{SetupError, VolumeManager, ensure_dir};
use crate::objects::{ObjectKey, ObjectKind};

/// The files of ConfigMap `name` (a volume's or a projected source's).
pub async fn payload(
    vm: &VolumeManager,
    pod: &Pod,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: bool,
    default_mode: u32,
) -> Result<Payload, SetupError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let key = ObjectKey::new(ObjectKind::ConfigMap, namespace, name);
    let cm = match vm.objects.config_map(pod, name).await {
        Ok(cm) => Some(cm),
        Err(e) if e.is_not_found() && optional => None,
        Err(e) => return Err(e.into()),
    };
    let mut data: BTreeMap<&str, &[u8]> = BTreeMap::new();
    if let Some(cm) = &cm {
        for (k, v) in cm.data.iter().flatten() {
            data.insert(k, v.as_bytes());
        }
        for (k, v) in cm.binary_data.iter().flatten() {
            data.insert(k, &v.0);
        }
    }
    project_keys(&key, &data, items, default_mode, optional)
}

/// Writes the volume at `dir`.
pub async fn setup(
    vm: &VolumeManager,
    pod: &Pod,
    source: &ConfigMapVolumeSource,
    dir: &Path,
) -> Result<(), SetupError> {
    let default_mode = mode(source.default_mode, DEFAULT_MODE, "defaultMode")?;
    let optional = source.optional.unwrap_or(false);
    let files =
        payload(vm, pod, &source.name, source.items.as_deref(), optional, default_mode).await?;
    ensure_dir(dir, 0o777)?;
    atomic_writer::write(dir, &files, super::ownership::fs_group(pod))?;
    Ok(())
}
