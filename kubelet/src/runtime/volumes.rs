//! A container's CRI mounts: its `volumeMounts` over the pod's volumes (set up by
//! [`crate::volume`]; managed content read-only, `subPath` bound as it resolves now, so it does
//! not follow updates, as upstream), and the file behind its `terminationMessagePath`.
//!
//! A `subPath` (or a `subPathExpr`, expanded against the container's environment) is resolved
//! one component at a time inside the volume: a symlink a container planted in a shared volume
//! may point within it, never out of it (upstream's CVE-2017-1002101 check); missing
//! directories are created there, never through a link. What this does not close, upstream's
//! bind-mount of an open descriptor does: a link swapped in between the check and the
//! runtime's mount.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

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
    #[error(
        "volume {0:?} requested recursive read-only mode, but it is not supported by the container runtime"
    )]
    RecursiveReadOnly(String),
}

/// `sub` inside the volume at `base`, resolved one component at a time: an existing entry
/// (a link too) must resolve beneath the volume; a missing one is created as a directory in
/// its resolved parent.
pub fn resolve_sub_path(base: &Path, sub: &str) -> Result<PathBuf, String> {
    let base = base.canonicalize().map_err(|e| format!("resolving the volume: {e}"))?;
    let mut current = base.clone();
    for component in Path::new(sub).components() {
        let name = match component {
            Component::Normal(name) => name,
            Component::CurDir => continue,
            _ => return Err("must be a relative path without '..'".to_string()),
        };
        let next = current.join(name);
        match std::fs::symlink_metadata(&next) {
            Ok(_) => {
                let real = next.canonicalize().map_err(|e| format!("resolving {name:?}: {e}"))?;
                if !real.starts_with(&base) {
                    return Err(format!("resolves to {} outside the volume", real.display()));
                }
                current = real;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&next)
                    .map_err(|e| format!("creating {}: {e}", next.display()))?;
                current = next;
            }
            Err(e) => return Err(format!("reading {}: {e}", next.display())),
        }
    }
    Ok(current)
}

/// The CRI mounts of one container; `env` expands `subPathExpr`.
pub fn container_mounts(
    c: &Container,
    volumes: &PodVolumes,
    env: &HashMap<String, String>,
) -> Result<Vec<cri::Mount>, MountError> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let volume =
                volumes.get(&m.name).ok_or_else(|| MountError::NotSetUp(m.name.clone()))?;
            // `IfPossible` is the plain read-only mount where the runtime has no recursive one,
            // as here; `Enabled` insists on it.
            if m.recursive_read_only.as_deref() == Some("Enabled") {
                return Err(MountError::RecursiveReadOnly(m.name.clone()));
            }
            let sub = match (m.sub_path.as_deref(), m.sub_path_expr.as_deref()) {
                (Some(sub), _) if !sub.is_empty() => Some(sub.to_string()),
                (_, Some(expr)) if !expr.is_empty() => Some(super::container::expand(expr, env)),
                _ => None,
            };
            let host = match sub {
                Some(sub) => resolve_sub_path(&volume.path, &sub).map_err(|message| {
                    MountError::SubPath { volume: m.name.clone(), sub_path: sub.clone(), message }
                })?,
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
        let mounts = container_mounts(&c, &volumes, &HashMap::new()).unwrap();
        let ro: Vec<(&str, bool)> =
            mounts.iter().map(|m| (m.container_path.as_str(), m.readonly)).collect();
        assert_eq!(
            ro,
            [("/scratch", false), ("/etc/app", true), ("/ro", true), ("/etc/one", true)]
        );
        assert_eq!(mounts[3].host_path, config.join("one.conf").display().to_string());
        let missing = container_mounts(&c, &PodVolumes::new(), &HashMap::new()).unwrap_err();
        assert_eq!(missing.to_string(), "volumeMount \"scratch\": the volume is not set up");
    }

    #[test]
    fn a_sub_path_never_leaves_its_volume_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let vol = root.path().join("vol");
        std::fs::create_dir_all(vol.join("data")).unwrap();
        std::fs::create_dir_all(root.path().join("host-secret")).unwrap();
        std::os::unix::fs::symlink(root.path().join("host-secret"), vol.join("escape")).unwrap();
        std::os::unix::fs::symlink("data", vol.join("inside")).unwrap();
        let vol_real = vol.canonicalize().unwrap();

        let e = resolve_sub_path(&vol, "escape").unwrap_err();
        assert!(e.contains("outside the volume"), "{e}");
        let e = resolve_sub_path(&vol, "escape/new").unwrap_err();
        assert!(e.contains("outside the volume"), "{e}");
        assert!(!root.path().join("host-secret/new").exists(), "nothing created through the link");
        assert_eq!(resolve_sub_path(&vol, "inside").unwrap(), vol_real.join("data"));
        assert_eq!(resolve_sub_path(&vol, "a/b").unwrap(), vol_real.join("a/b"));
        assert!(vol.join("a/b").is_dir(), "missing directories are made inside");
        assert!(resolve_sub_path(&vol, "../x").is_err());
    }

    #[test]
    fn sub_path_expr_expands_the_containers_environment() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c", "image": "x:1", "volumeMounts": [
                {"name": "logs", "mountPath": "/logs", "subPathExpr": "$(POD_NAME)/app"},
            ],
        }))
        .unwrap();
        let root = tempfile::tempdir().unwrap();
        let volumes: PodVolumes = [(
            "logs".to_string(),
            MountedVolume { path: root.path().to_path_buf(), read_only: false },
        )]
        .into();
        let env = HashMap::from([("POD_NAME".to_string(), "web-1".to_string())]);
        let mounts = container_mounts(&c, &volumes, &env).unwrap();
        let want = root.path().canonicalize().unwrap().join("web-1/app");
        assert_eq!(mounts[0].host_path, want.display().to_string());
    }
}
