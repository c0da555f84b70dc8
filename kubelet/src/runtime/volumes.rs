//! Volumes a static pod can use without an API server: `emptyDir` (a directory under the
//! kubelet's root) and `hostPath` (with upstream's type checks). Mounts become CRI mounts.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use proto::cri;

/// `<root>/pods/<uid>`, the pod's directory on the node.
pub fn pod_dir(root_dir: &Path, uid: &str) -> PathBuf {
    root_dir.join("pods").join(uid)
}

/// `<root>/pods/<uid>/volumes`: what a finished pod releases.
pub fn pod_volumes_dir(root_dir: &Path, uid: &str) -> PathBuf {
    pod_dir(root_dir, uid).join("volumes")
}

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

/// Why a volume cannot be set up (upstream reports these as `CreateContainerConfigError` or
/// `FailedMount`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("volume {volume:?}: {reason}")]
pub struct VolumeError {
    pub volume: String,
    pub reason: String,
}

/// Creates what the pod's volumes need and returns each volume's host path.
pub fn prepare(pod: &Pod, root_dir: &Path) -> Result<HashMap<String, PathBuf>, VolumeError> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let mut out = HashMap::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let err = |reason: String| VolumeError { volume: v.name.clone(), reason };
        let path = if v.empty_dir.is_some() {
            let dir = pod_dir(root_dir, uid).join("volumes/kubernetes.io~empty-dir").join(&v.name);
            std::fs::create_dir_all(&dir)
                .map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
                .map_err(|e| err(e.to_string()))?;
            dir
        } else if let Some(h) = &v.host_path {
            let path = PathBuf::from(&h.path);
            check_host_path(&path, h.type_.as_deref().unwrap_or_default()).map_err(err)?;
            path
        } else {
            return Err(err(
                "only emptyDir and hostPath volumes are supported for static pods".into()
            ));
        };
        out.insert(v.name.clone(), path);
    }
    Ok(out)
}

fn check_host_path(path: &Path, kind: &str) -> Result<(), String> {
    let meta = std::fs::metadata(path);
    let show = path.display();
    match (kind, &meta) {
        ("", _) => Ok(()),
        ("DirectoryOrCreate", Err(_)) => std::fs::create_dir_all(path)
            .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)))
            .map_err(|e| format!("creating directory {show}: {e}")),
        ("DirectoryOrCreate" | "Directory", Ok(m)) if m.is_dir() => Ok(()),
        ("FileOrCreate", Err(_)) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| format!("creating file {show}: {e}")),
        ("FileOrCreate" | "File", Ok(m)) if m.is_file() => Ok(()),
        ("Socket", Ok(m)) if m.file_type().is_socket() => Ok(()),
        ("CharDevice", Ok(m)) if m.file_type().is_char_device() => Ok(()),
        ("BlockDevice", Ok(m)) if m.file_type().is_block_device() => Ok(()),
        (kind, Err(e)) => Err(format!("hostPath type check failed: {show} is not a {kind}: {e}")),
        (kind, Ok(_)) => Err(format!("hostPath type check failed: {show} is not a {kind}")),
    }
}

/// The CRI mounts of one container.
pub fn container_mounts(
    c: &Container,
    volumes: &HashMap<String, PathBuf>,
) -> Result<Vec<cri::Mount>, VolumeError> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let host = volumes.get(&m.name).ok_or_else(|| VolumeError {
                volume: m.name.clone(),
                reason: "not prepared".into(),
            })?;
            let host = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                Some(sub) => {
                    let p = host.join(sub);
                    if !p.exists() {
                        std::fs::create_dir_all(&p).map_err(|e| VolumeError {
                            volume: m.name.clone(),
                            reason: format!("subPath {sub}: {e}"),
                        })?;
                    }
                    p
                }
                None => host.clone(),
            };
            let propagation = match m.mount_propagation.as_deref() {
                Some("HostToContainer") => cri::MountPropagation::PropagationHostToContainer,
                Some("Bidirectional") => cri::MountPropagation::PropagationBidirectional,
                _ => cri::MountPropagation::PropagationPrivate,
            };
            Ok(cri::Mount {
                container_path: m.mount_path.clone(),
                host_path: host.display().to_string(),
                readonly: m.read_only.unwrap_or(false),
                propagation: propagation as i32,
                ..Default::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_dirs_and_host_paths_are_prepared_and_mounted() {
        let root = tempfile::tempdir().unwrap();
        let host = root.path().join("host-data");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "data", "hostPath": {"path": host, "type": "DirectoryOrCreate"}},
                ],
                "containers": [{"name": "c", "image": "x:1", "volumeMounts": [
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "data", "mountPath": "/data", "readOnly": true},
                ]}],
            },
        }))
        .unwrap();
        let volumes = prepare(&pod, root.path()).unwrap();
        assert!(
            volumes["scratch"].ends_with("pods/u1/volumes/kubernetes.io~empty-dir/scratch")
                && volumes["scratch"].is_dir()
        );
        assert!(host.is_dir());
        let mounts = container_mounts(&pod.spec.as_ref().unwrap().containers[0], &volumes).unwrap();
        assert_eq!(mounts[1].container_path, "/data");
        assert!(mounts[1].readonly);
    }

    #[test]
    fn host_path_types_are_checked() {
        let root = tempfile::tempdir().unwrap();
        assert!(
            check_host_path(&root.path().join("missing"), "Directory")
                .unwrap_err()
                .contains("is not a Directory")
        );
        assert!(check_host_path(root.path(), "File").is_err());
        assert!(
            check_host_path(&root.path().join("f"), "FileOrCreate").is_ok()
                && root.path().join("f").is_file()
        );
    }
}
