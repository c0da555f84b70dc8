//! `downwardAPI` volumes: the pod's metadata (name, namespace, uid, labels, annotations) and
//! its containers' requests and limits as files on the node's disk, as upstream's plugin;
//! rewritten atomically on each sync, so a label or annotation change reaches the files.

use std::path::Path;

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, DownwardAPIVolumeSource, Pod};

use super::atomic_writer::{self, FileProjection, Payload};
use super::payload::{DEFAULT_MODE, insert, item_path, mode};
use super::{SetupError, VolumeManager, ensure_dir};
use crate::fieldpath::{self, Allocatable};

/// The files of a downward API volume or projected source.
pub fn payload(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    allocatable: Allocatable,
) -> Result<Payload, SetupError> {
    let mut files = Payload::new();
    for item in items {
        let path = item_path(&item.path)?;
        let mode = mode(item.mode, default_mode, &item.path)?;
        let failed = |source| SetupError::FieldPath { path: item.path.clone(), source };
        let value = if let Some(f) = &item.field_ref {
            fieldpath::metadata_field(pod, &f.field_path).map_err(failed)?
        } else if let Some(r) = &item.resource_field_ref {
            let name = r.container_name.as_deref().unwrap_or_default();
            let container = fieldpath::find_container(pod, name).map_err(failed)?;
            fieldpath::container_resource(r, container, allocatable).map_err(failed)?
        } else {
            String::new()
        };
        insert(&mut files, path, FileProjection { data: value.into_bytes(), mode })?;
    }
    Ok(files)
}

/// Writes the volume at `dir`.
pub fn setup(
    vm: &VolumeManager,
    pod: &Pod,
    source: &DownwardAPIVolumeSource,
    dir: &Path,
) -> Result<(), SetupError> {
    let default_mode = mode(source.default_mode, DEFAULT_MODE, "defaultMode")?;
    let items = source.items.as_deref().unwrap_or_default();
    let files = payload(pod, items, default_mode, vm.allocatable)?;
    ensure_dir(dir, 0o777)?;
    atomic_writer::write(dir, &files, super::ownership::fs_group(pod))?;
    Ok(())
}
