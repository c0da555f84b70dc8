//! A container's CRI mounts: its `volumeMounts` over the pod's volumes (set up by
//! [`crate::volume`]; managed content read-only, `subPath` bound as it resolves now, so it does
//! not follow updates, as upstream), and the file behind its `terminationMessagePath`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_openapi::api::core::v1::Container;
use proto::cri;

use crate::volume::{PodVolumes, pod_dir};

/// Creates the file a container writes its termination message to and returns the mount that
/// puts it at `terminationMessagePath` (upstream: `<pod dir>/containers/<name>/<random>`,
/// mode 0666 so any user in the container can write it). `None` when the container asks for
/// no message path.
pub fn termination_message_mount(
    root_dir: &Path,
    uid: &str,
    c: &Container,
) -> std::io::Result<Option<cri::Mount>> {
    let Some(path) = c.termination_message_path.as_deref().filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let dir = pod_dir(root_dir, uid).join("containers").join(&c.name);
    std::fs::create_dir_all(&dir)?;
    let suffix: u32 = rand::random();
    let file = dir.join(format!("{suffix:08x}"));
    std::fs::File::create(&file)?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))?;
    Ok(Some(cri::Mount {
        container_path: path.to_string(),
        host_path: file.display().to_string(),
        ..Default::default()
    }))
}

/// Why a container's mounts cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountError {
    #[error("volumeMount {0:?}: the volume is not set up")]
    NotSetUp(String),
    #[error("volumeMount {volume:?}: subPath {sub_path:?}: {message}")]
    SubPath { volume: String, sub_path: String, message: String },
}

/// The CRI mounts of one container.
pub fn container_mounts(
    c: &Container,
    volumes: &PodVolumes,
) -> Result<Vec<cri::Mount>, MountError> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let volume =
                volumes.get(&m.name).ok_or_else(|| MountError::NotSetUp(m.name.clone()))?;
            let host = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                Some(sub) => {
                    let p = volume.path.join(sub);
                    if !p.exists() {
                        std::fs::create_dir_all(&p).map_err(|e| MountError::SubPath {
                            volume: m.name.clone(),
                            sub_path: sub.to_string(),
                            message: e.to_string(),
                        })?;
                    }
                    p
                }
                None => volume.path.clone(),
            };
            let propagation = match m.mount_propagation.as_deref() {
                Some("HostToContainer") => cri::MountPropagation::PropagationHostToContainer,
                Some("Bidirectional") => cri::MountPropagation::PropagationBidirectional,
                _ => cri::MountPropagation::PropagationPrivate,
            };
            Ok(cri::Mount {
                container_path: m.mount_path.clone(),
                host_path: host.display().to_string(),
                readonly: m.read_only.unwrap_or(false) || volume.read_only,
                propagation: propagation as i32,
                ..Default::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volume::MountedVolume;

    #[test]
    fn mounts_follow_volume_mounts_and_managed_volumes_are_read_only() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c", "image": "x:1", "volumeMounts": [
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "config", "mountPath": "/etc/app"},
                {"name": "scratch", "mountPath": "/ro", "readOnly": true},
                {"name": "config", "mountPath": "/etc/one", "subPath": "one.conf"},
            ],
        }))
        .unwrap();
        let root = tempfile::tempdir().unwrap();
        let config = root.path().join("config");
        std::fs::create_dir(&config).unwrap();
        std::fs::write(config.join("one.conf"), "x").unwrap();
        let volumes: PodVolumes = [
            (
                "scratch".to_string(),
                MountedVolume { path: root.path().join("s"), read_only: false },
            ),
            ("config".to_string(), MountedVolume { path: config.clone(), read_only: true }),
        ]
        .into();
        let mounts = container_mounts(&c, &volumes).unwrap();
        let ro: Vec<(&str, bool)> =
            mounts.iter().map(|m| (m.container_path.as_str(), m.readonly)).collect();
        assert_eq!(
            ro,
            [("/scratch", false), ("/etc/app", true), ("/ro", true), ("/etc/one", true)]
        );
        assert_eq!(mounts[3].host_path, config.join("one.conf").display().to_string());
        let missing = container_mounts(&c, &PodVolumes::new()).unwrap_err();
        assert_eq!(missing.to_string(), "volumeMount \"scratch\": the volume is not set up");
    }
}
