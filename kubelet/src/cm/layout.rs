//! Where the kubelet's cgroups are, by driver, as upstream's `CgroupName` and its two forms:
//! - cgroupfs (`ToCgroupfs`): `<cgroupRoot>/kubepods[/<qos>]/pod<uid>`;
//! - systemd (`ToSystemd`): the components joined by `-` into one slice, expanded into its
//!   ancestors (runc's `ExpandSlice`): `[kubepods, burstable, pod<uid>]` is
//!   `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice`, each
//!   component's `-` escaped as `_`. `cgroupRoot` is then a slice (`/`, `foo.slice` or its
//!   expansion `/foo.slice`), read back into components as upstream's
//!   `ParseSystemdToCgroupName`.
//!
//! Either way a name is the cgroup's path under the hierarchy, what the cgroupfs is written
//! through, what cAdvisor-style stats read, and what the CRI is handed as a sandbox's
//! `cgroup_parent` (upstream hands containerd the expanded systemd path too; its runc
//! options take the last slice).

use api::qos::QosClass;

/// `cgroupDriver`: who makes the kubelet's cgroups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CgroupDriver {
    /// The kubelet writes the cgroup filesystem itself.
    #[default]
    Cgroupfs,
    /// systemd makes each cgroup as a transient slice (see [`super::systemd`]).
    Systemd,
}

impl CgroupDriver {
    /// `cgroupDriver` as written; `None` for a value that is neither.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "cgroupfs" => Some(Self::Cgroupfs),
            "systemd" => Some(Self::Systemd),
            _ => None,
        }
    }
}

const SLICE: &str = ".slice";

/// A slice name refused by [`expand_slice`], with runc's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid slice name: {0}")]
pub struct SliceError(pub String);

/// runc's `ExpandSlice`: `a-b-c.slice` is `/a.slice/a-b.slice/a-b-c.slice`; `-.slice` is `/`.
pub fn expand_slice(slice: &str) -> Result<String, SliceError> {
    let refuse = || SliceError(slice.to_string());
    let name = slice.strip_suffix(SLICE).filter(|n| !n.is_empty()).ok_or_else(refuse)?;
    if slice.contains('/') {
        return Err(refuse());
    }
    if name == "-" {
        return Ok("/".into());
    }
    let (mut path, mut prefix) = (String::new(), String::new());
    for component in name.split('-') {
        if component.is_empty() {
            return Err(refuse());
        }
        path.push('/');
        path.push_str(&prefix);
        path.push_str(component);
        path.push_str(SLICE);
        prefix.push_str(component);
        prefix.push('-');
    }
    Ok(path)
}

/// Upstream's `CgroupName.ToSystemd`: the components as one expanded slice; none is `/`.
pub fn to_systemd(components: &[String]) -> String {
    if components.iter().all(String::is_empty) {
        return "/".into();
    }
    let joined: Vec<String> = components.iter().map(|c| c.replace('-', "_")).collect();
    let slice = format!("{}{SLICE}", joined.join("-"));
    // Components are the kubelet's own (kubepods, a QoS class, pod<uid>) under a root that
    // parsed: an empty one is the only way to fail, and the root refuses those.
    expand_slice(&slice).unwrap_or(slice)
}

/// Upstream's `ParseSystemdToCgroupName`: the last slice of a path, back into components.
pub fn parse_systemd(name: &str) -> Vec<String> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let base = base.strip_suffix(SLICE).unwrap_or(base);
    base.split('-').map(|part| part.replace('_', "-")).collect()
}

/// Checks `cgroupRoot` for the systemd driver: `/` or a slice, as a name or expanded (its
/// last slice is what counts, as upstream's `ParseSystemdToCgroupName`).
pub fn check_systemd_root(root: &str) -> Result<(), SliceError> {
    let base = root.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    if base.is_empty() {
        return Ok(());
    }
    expand_slice(base).map(drop)
}

/// Where pod cgroups go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLayout {
    /// `cgroupRoot` (`/` by default).
    pub root: String,
    /// `cgroupsPerQOS`: each pod gets its own cgroup under `kubepods[/<qos>]`. Without it
    /// pods get none: they share `root`, which the kubelet never touches.
    pub per_qos: bool,
    pub driver: CgroupDriver,
}

impl CgroupLayout {
    /// cgroupfs: the root path without its trailing `/`.
    fn root(&self) -> &str {
        self.root.trim_end_matches('/')
    }

    /// systemd: the root's components (none for `/`).
    fn root_components(&self) -> Vec<String> {
        match self.root().rsplit('/').next() {
            None | Some("" | "-.slice") => Vec::new(),
            Some(_) => parse_systemd(self.root()),
        }
    }

    /// The cgroup `below` the root (`kubepods`, then a QoS class, then `pod<uid>`).
    fn name(&self, below: &[&str]) -> String {
        match self.driver {
            CgroupDriver::Cgroupfs => {
                let mut path = self.root().to_string();
                for part in below {
                    path.push('/');
                    path.push_str(part);
                }
                if path.is_empty() { "/".into() } else { path }
            }
            CgroupDriver::Systemd => {
                let mut components = self.root_components();
                components.extend(below.iter().map(|p| (*p).to_string()));
                to_systemd(&components)
            }
        }
    }

    /// The root as a cgroup name (its existence is checked at start).
    pub fn root_cgroup(&self) -> String {
        self.name(&[])
    }

    /// `<cgroupRoot>/kubepods`, the cgroup every pod is under (upstream's node allocatable
    /// cgroup).
    pub fn kubepods(&self) -> String {
        self.name(&["kubepods"])
    }

    /// A QoS class's cgroup: `kubepods` itself for Guaranteed pods.
    pub fn qos_cgroup(&self, qos: QosClass) -> String {
        match qos.cgroup_dir() {
            Some(dir) => self.name(&["kubepods", dir]),
            None => self.kubepods(),
        }
    }

    /// The cgroup parent of a pod's sandbox and containers: its own pod cgroup, or `cgroupRoot`
    /// itself without `cgroupsPerQOS`.
    pub fn pod_cgroup(&self, qos: QosClass, uid: &str) -> String {
        if !self.per_qos {
            return self.root_cgroup();
        }
        let pod = format!("pod{uid}");
        match qos.cgroup_dir() {
            Some(dir) => self.name(&["kubepods", dir, &pod]),
            None => self.name(&["kubepods", &pod]),
        }
    }

    /// The pod UID a child cgroup of `kubepods` or a QoS cgroup is named for (`pod<uid>`, or
    /// `…-pod<uid with - as _>.slice`); `None` for another child.
    pub fn pod_uid(&self, child: &str) -> Option<String> {
        let last = match self.driver {
            CgroupDriver::Cgroupfs => child.to_string(),
            CgroupDriver::Systemd => {
                child.strip_suffix(SLICE)?;
                parse_systemd(child).pop()?
            }
        };
        last.strip_prefix("pod").filter(|uid| !uid.is_empty()).map(str::to_string)
    }

    /// A container's cgroup under its pod's, as the runtime names it: `<pod>/<id>` (cgroupfs),
    /// or the scope among `children` (the pod's) that the runtime's systemd driver named
    /// `<prefix>-<id>.scope` (containerd's `cri-containerd`, CRI-O's `crio`), containerd's when
    /// none is there.
    pub fn container_cgroup(&self, pod: &str, id: &str, children: &[String]) -> String {
        let pod = pod.trim_end_matches('/');
        match self.driver {
            CgroupDriver::Cgroupfs => format!("{pod}/{id}"),
            CgroupDriver::Systemd => {
                let scope = children.iter().find(|c| {
                    c.strip_suffix(".scope")
                        .and_then(|n| n.strip_suffix(id))
                        .is_some_and(|prefix| prefix.ends_with('-'))
                });
                match scope {
                    Some(scope) => format!("{pod}/{scope}"),
                    None => format!("{pod}/cri-containerd-{id}.scope"),
                }
            }
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

#[cfg(test)]
mod tests;
