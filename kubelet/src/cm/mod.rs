//! Container manager: pod cgroups; [`allocatable`]: what pods may have of the node.
//!
//! Pod cgroups. Pods live under `<cgroupRoot>/kubepods[/<qos>]/pod<uid>` as
//! upstream's cgroupfs driver names them; the runtime creates the directories when it starts
//! containers in them, the kubelet removes a pod's directories once the pod is gone.
//!
//! With `cgroupsPerQOS: false` there are no pod cgroups, as upstream's `podContainerManagerNoop`:
//! every sandbox's cgroup parent is `cgroupRoot` itself and the kubelet never removes a cgroup
//! (hollow nodes run this way, unprivileged).
//!
//! Cgroup files are reached through [`Cgroups`], rooted at a path (`/sys/fs/cgroup` in
//! production, a temp dir in tests). Both v1 (one hierarchy per controller) and v2 (one unified
//! hierarchy) layouts are handled: every hierarchy under the root that holds the pod's path is
//! cleaned.

pub mod allocatable;

use std::path::{Path, PathBuf};

use api::qos::QosClass;

/// Where pod cgroups go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLayout {
    /// `cgroupRoot` (`/` by default).
    pub root: String,
    /// `cgroupsPerQOS`: each pod gets its own cgroup under `kubepods[/<qos>]`. Without it
    /// pods get none: they share `root`, which the kubelet never touches.
    pub per_qos: bool,
}

impl CgroupLayout {
    /// The cgroup parent of a pod's sandbox and containers: its own pod cgroup, or `cgroupRoot`
    /// itself without `cgroupsPerQOS`.
    pub fn pod_cgroup(&self, qos: QosClass, uid: &str) -> String {
        let root = self.root.trim_end_matches('/');
        if !self.per_qos {
            return if root.is_empty() { "/".to_string() } else { root.to_string() };
        }
        match qos.cgroup_dir() {
            Some(dir) => format!("{root}/kubepods/{dir}/pod{uid}"),
            None => format!("{root}/kubepods/pod{uid}"),
        }
    }

    /// Every place a pod's own cgroup may be (its QoS is unknown for pods found only in the
    /// runtime): what removing the pod removes. None without `cgroupsPerQOS`.
    pub fn all_pod_cgroups(&self, uid: &str) -> Vec<String> {
        if !self.per_qos {
            return Vec::new();
        }
        [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort]
            .iter()
            .map(|q| self.pod_cgroup(*q, uid))
            .collect()
    }
}

/// The cgroup filesystem boundary.
pub trait Cgroups: Send + Sync + std::fmt::Debug {
    /// Removes the cgroup at `path` (relative to each hierarchy) and its children, deepest
    /// first; missing is fine.
    fn remove(&self, path: &str) -> std::io::Result<()>;
}

/// cgroupfs mounted at `mount_root` (`/sys/fs/cgroup`).
#[derive(Debug, Clone)]
pub struct CgroupFs {
    pub mount_root: PathBuf,
}

impl CgroupFs {
    /// The hierarchies: each controller directory on v1, the root itself on v2.
    fn hierarchies(&self) -> Vec<PathBuf> {
        if self.mount_root.join("cgroup.controllers").exists() {
            return vec![self.mount_root.clone()];
        }
        std::fs::read_dir(&self.mount_root)
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default()
    }
}

fn remove_tree(dir: &Path) -> std::io::Result<()> {
    let mut dirs = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        if let Ok(entries) = std::fs::read_dir(&dirs[i]) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        i += 1;
    }
    for d in dirs.iter().rev() {
        match std::fs::remove_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("removing cgroup {}: {e}", d.display()),
                ));
            }
        }
    }
    Ok(())
}

impl Cgroups for CgroupFs {
    fn remove(&self, path: &str) -> std::io::Result<()> {
        let rel = path.trim_start_matches('/');
        let mut first_error = None;
        for h in self.hierarchies() {
            let dir = h.join(rel);
            if dir.is_dir()
                && let Err(e) = remove_tree(&dir)
            {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_pod_cgroups_like_upstream_cgroupfs() {
        let l = CgroupLayout { root: "/".into(), per_qos: true };
        assert_eq!(l.pod_cgroup(QosClass::Guaranteed, "u1"), "/kubepods/podu1");
        assert_eq!(l.pod_cgroup(QosClass::Burstable, "u1"), "/kubepods/burstable/podu1");
        assert_eq!(l.pod_cgroup(QosClass::BestEffort, "u1"), "/kubepods/besteffort/podu1");
        let custom = CgroupLayout { root: "/e2e-abc/".into(), per_qos: true };
        assert_eq!(
            custom.pod_cgroup(QosClass::BestEffort, "u"),
            "/e2e-abc/kubepods/besteffort/podu"
        );
    }

    #[test]
    fn without_cgroups_per_qos_pods_share_the_root_and_no_cgroup_is_removed() {
        let flat = CgroupLayout { root: "/x/".into(), per_qos: false };
        assert_eq!(flat.pod_cgroup(QosClass::Burstable, "u"), "/x");
        assert_eq!(flat.pod_cgroup(QosClass::Guaranteed, "u"), "/x");
        assert_eq!(
            CgroupLayout { root: "/".into(), per_qos: false }.pod_cgroup(QosClass::BestEffort, "u"),
            "/"
        );
        assert!(flat.all_pod_cgroups("u").is_empty(), "nothing of the kubelet's to remove");
    }

    #[test]
    fn removes_a_pod_cgroup_in_every_v1_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        for ctl in ["cpu", "memory"] {
            std::fs::create_dir_all(root.path().join(ctl).join("kubepods/besteffort/podu1/ctr"))
                .unwrap();
        }
        std::fs::create_dir_all(root.path().join("pids")).unwrap();
        let fs = CgroupFs { mount_root: root.path().to_path_buf() };
        fs.remove("/kubepods/besteffort/podu1").unwrap();
        assert!(!root.path().join("cpu/kubepods/besteffort/podu1").exists());
        assert!(!root.path().join("memory/kubepods/besteffort/podu1").exists());
        assert!(root.path().join("cpu/kubepods/besteffort").exists(), "the QoS level stays");
        fs.remove("/kubepods/besteffort/podu1").unwrap();
    }

    #[test]
    fn uses_the_unified_hierarchy_on_v2() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu memory").unwrap();
        std::fs::create_dir_all(root.path().join("kubepods/podu1")).unwrap();
        CgroupFs { mount_root: root.path().to_path_buf() }.remove("kubepods/podu1").unwrap();
        assert!(!root.path().join("kubepods/podu1").exists());
    }
}
