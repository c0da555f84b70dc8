//! Container manager, as upstream's `pkg/kubelet/cm` with the cgroupfs driver:
//! - [`CgroupLayout`]: where the kubelet's cgroups are: `<cgroupRoot>/kubepods[/<qos>]/pod<uid>`;
//! - [`cgroupfs`]: the [`Cgroups`] boundary and the cgroup v1/v2 filesystem behind it;
//! - [`resources`]: what a cgroup is given (shares, quota, memory and process limits), for a pod
//!   and for amounts such as allocatable;
//! - [`node_config`]: `enforceNodeAllocatable`, `qosReserved`, the CFS and pod PID settings;
//! - [`manager`]: [`ContainerManager`], which makes, sizes and removes them;
//! - [`allocatable`]: what pods may have of the node.
//!
//! With `cgroupsPerQOS: false` there are no pod cgroups, as upstream's `podContainerManagerNoop`:
//! every sandbox's cgroup parent is `cgroupRoot` itself and the kubelet never touches a cgroup
//! (hollow nodes run this way, unprivileged).
//!
//! `cgroupDriver: systemd` is refused at start (see ARCHITECTURE.md): this kubelet does not
//! make systemd slices.

pub mod allocatable;
pub mod cgroupfs;
pub mod manager;
pub mod node_config;
pub mod resources;

pub use cgroupfs::{CgroupFs, Cgroups};
pub use manager::ContainerManager;

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
    fn root(&self) -> &str {
        self.root.trim_end_matches('/')
    }

    /// `<cgroupRoot>/kubepods`, the cgroup every pod is under (upstream's node allocatable
    /// cgroup).
    pub fn kubepods(&self) -> String {
        format!("{}/kubepods", self.root())
    }

    /// A QoS class's cgroup: `kubepods` itself for Guaranteed pods.
    pub fn qos_cgroup(&self, qos: QosClass) -> String {
        match qos.cgroup_dir() {
            Some(dir) => format!("{}/{dir}", self.kubepods()),
            None => self.kubepods(),
        }
    }

    /// The cgroup parent of a pod's sandbox and containers: its own pod cgroup, or `cgroupRoot`
    /// itself without `cgroupsPerQOS`.
    pub fn pod_cgroup(&self, qos: QosClass, uid: &str) -> String {
        if !self.per_qos {
            return if self.root().is_empty() { "/".to_string() } else { self.root().to_string() };
        }
        format!("{}/pod{uid}", self.qos_cgroup(qos))
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
}
