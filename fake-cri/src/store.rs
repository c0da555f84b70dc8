//! Sandboxes and containers as containerd keeps them: records, the container lifecycle, the
//! list filters and the CRI views of each record.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use proto::cri;
use tokio::sync::Notify;

use crate::ipam::Ipam;
use crate::program::Program;
use crate::records::{Labelled, Records};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SandboxState {
    Ready,
    NotReady,
}

#[derive(Debug)]
pub(crate) struct Sandbox {
    pub id: String,
    pub config: cri::PodSandboxConfig,
    pub created_at: i64,
    pub state: SandboxState,
    /// The pod IP while the network is up; `None` on the host network and once stopped.
    pub ip: Option<String>,
    pub reserved_name: String,
}

/// A container's lifecycle. Only these moves exist: created → running → exited, or
/// created → exited when the start fails (containerd's `StartError`, exit code 128).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    Created,
    Running { started_at: i64 },
    Exited { started_at: i64, finished_at: i64, exit_code: i32, reason: String, message: String },
}

/// Exit code and reason containerd reports when a start fails.
pub(crate) const START_ERROR_CODE: i32 = 128;

impl Phase {
    /// The exit as containerd words it: `Completed` for 0, `Error` otherwise.
    pub(crate) fn exited(started_at: i64, finished_at: i64, exit_code: i32) -> Self {
        let reason = if exit_code == 0 { "Completed" } else { "Error" };
        Phase::Exited {
            started_at,
            finished_at,
            exit_code,
            reason: reason.to_string(),
            message: String::new(),
        }
    }

    pub(crate) fn cri_state(&self) -> cri::ContainerState {
        match self {
            Phase::Created => cri::ContainerState::ContainerCreated,
            Phase::Running { .. } => cri::ContainerState::ContainerRunning,
            Phase::Exited { .. } => cri::ContainerState::ContainerExited,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Container {
    pub id: String,
    pub sandbox_id: String,
    pub config: cri::ContainerConfig,
    /// The image id the reference resolved to at create time.
    pub image_id: String,
    /// A repo digest of the image if it has one, else its id (what containerd reports).
    pub image_ref: String,
    pub created_at: i64,
    pub phase: Phase,
    pub log_path: Option<PathBuf>,
    pub reserved_name: String,
    pub program: Program,
    /// What it has used, as a test set it (`FakeRuntime::set_usage`).
    pub usage: crate::stats::Usage,
    /// Woken whenever the container leaves `Running`.
    pub exited: Arc<Notify>,
}

impl Container {
    pub(crate) fn name(&self) -> &str {
        self.config.metadata.as_ref().map_or("", |m| m.name.as_str())
    }

    pub(crate) fn to_cri(&self) -> cri::Container {
        cri::Container {
            id: self.id.clone(),
            pod_sandbox_id: self.sandbox_id.clone(),
            metadata: self.config.metadata.clone(),
            image: self.config.image.clone(),
            image_ref: self.image_ref.clone(),
            state: self.phase.cri_state() as i32,
            created_at: self.created_at,
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            image_id: self.image_id.clone(),
        }
    }

    pub(crate) fn to_status(&self) -> cri::ContainerStatus {
        let (started_at, finished_at, exit_code, reason, message) = match &self.phase {
            Phase::Created => (0, 0, 0, String::new(), String::new()),
            Phase::Running { started_at } => (*started_at, 0, 0, String::new(), String::new()),
            Phase::Exited { started_at, finished_at, exit_code, reason, message } => {
                (*started_at, *finished_at, *exit_code, reason.clone(), message.clone())
            }
        };
        cri::ContainerStatus {
            id: self.id.clone(),
            metadata: self.config.metadata.clone(),
            state: self.phase.cri_state() as i32,
            created_at: self.created_at,
            started_at,
            finished_at,
            exit_code,
            image: self.config.image.clone(),
            image_ref: self.image_ref.clone(),
            reason,
            message,
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            mounts: self.config.mounts.clone(),
            log_path: self.log_path.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            resources: None,
            image_id: self.image_id.clone(),
            user: None,
        }
    }
}

impl Sandbox {
    pub(crate) fn cri_state(&self) -> cri::PodSandboxState {
        match self.state {
            SandboxState::Ready => cri::PodSandboxState::SandboxReady,
            SandboxState::NotReady => cri::PodSandboxState::SandboxNotready,
        }
    }

    pub(crate) fn host_network(&self) -> bool {
        self.config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.as_ref())
            .is_some_and(|n| n.network == cri::NamespaceMode::Node as i32)
    }

    pub(crate) fn to_cri(&self) -> cri::PodSandbox {
        cri::PodSandbox {
            id: self.id.clone(),
            metadata: self.config.metadata.clone(),
            state: self.cri_state() as i32,
            created_at: self.created_at,
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            runtime_handler: String::new(),
        }
    }

    pub(crate) fn to_status(&self) -> cri::PodSandboxStatus {
        let namespace_options = self
            .config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.clone());
        cri::PodSandboxStatus {
            id: self.id.clone(),
            metadata: self.config.metadata.clone(),
            state: self.cri_state() as i32,
            created_at: self.created_at,
            network: Some(cri::PodSandboxNetworkStatus {
                ip: self.ip.clone().unwrap_or_default(),
                additional_ips: Vec::new(),
            }),
            linux: Some(cri::LinuxPodSandboxStatus {
                namespaces: Some(cri::Namespace { options: namespace_options }),
            }),
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            runtime_handler: String::new(),
        }
    }
}

impl Labelled for Sandbox {
    fn labels(&self) -> &HashMap<String, String> {
        &self.config.labels
    }
}

impl Labelled for Container {
    fn labels(&self) -> &HashMap<String, String> {
        &self.config.labels
    }
}

/// Everything the runtime holds, behind one lock. Records are added and removed only through
/// its methods, which keep the reserved names, the indexes and the pod addresses in step.
#[derive(Debug, Default)]
pub(crate) struct Store {
    pub sandboxes: Records<Sandbox>,
    pub containers: Records<Container>,
    /// Each sandbox's containers, so a sandbox's work never walks every container.
    by_sandbox: HashMap<String, BTreeSet<String>>,
    /// Reserved names (containerd refuses a second sandbox or container with the same name).
    pub names: HashMap<String, String>,
    pub ipam: Ipam,
}

fn labels_match(selector: &HashMap<String, String>, labels: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl Store {
    pub(crate) fn add_sandbox(&mut self, sandbox: Sandbox) {
        self.names.insert(sandbox.reserved_name.clone(), sandbox.id.clone());
        self.sandboxes.insert(sandbox.id.clone(), sandbox);
    }

    /// Takes a sandbox's network down: its address goes back to the pool.
    pub(crate) fn release_ip(&mut self, sandbox_id: &str) {
        if let Some(ip) = self.sandboxes.get_mut(sandbox_id).and_then(|s| s.ip.take()) {
            self.ipam.release(&ip);
        }
    }

    /// Removes a sandbox record (its containers must be gone first) and frees its name.
    pub(crate) fn remove_sandbox(&mut self, id: &str) -> Option<Sandbox> {
        self.release_ip(id);
        let s = self.sandboxes.remove(id)?;
        self.names.remove(&s.reserved_name);
        self.by_sandbox.remove(id);
        Some(s)
    }

    pub(crate) fn add_container(&mut self, c: Container) {
        self.names.insert(c.reserved_name.clone(), c.id.clone());
        self.by_sandbox.entry(c.sandbox_id.clone()).or_default().insert(c.id.clone());
        self.containers.insert(c.id.clone(), c);
    }

    pub(crate) fn remove_container(&mut self, id: &str) -> Option<Container> {
        let c = self.containers.remove(id)?;
        self.names.remove(&c.reserved_name);
        if let Some(ids) = self.by_sandbox.get_mut(&c.sandbox_id) {
            ids.remove(id);
        }
        Some(c)
    }

    /// The ids of a sandbox's containers, in id order.
    pub(crate) fn container_ids_of(&self, sandbox_id: &str) -> Vec<String> {
        self.by_sandbox.get(sandbox_id).map(|ids| ids.iter().cloned().collect()).unwrap_or_default()
    }

    fn containers_of<'a>(&'a self, sandbox_id: &str) -> impl Iterator<Item = &'a Container> + 'a {
        self.by_sandbox
            .get(sandbox_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.containers.get(id))
    }

    pub(crate) fn list_sandboxes(
        &self,
        filter: Option<&cri::PodSandboxFilter>,
    ) -> Vec<cri::PodSandbox> {
        let Some(f) = filter else {
            return self.sandboxes.values().map(Sandbox::to_cri).collect();
        };
        let id = if f.id.is_empty() {
            None
        } else {
            match self.sandboxes.resolve(&f.id) {
                Some(id) => Some(id),
                None => return Vec::new(),
            }
        };
        let candidates: Box<dyn Iterator<Item = &Sandbox>> = match id {
            Some(id) => Box::new(self.sandboxes.get(id).into_iter()),
            None => self.sandboxes.matching(&f.label_selector),
        };
        candidates
            .filter(|s| f.state.as_ref().is_none_or(|st| st.state == s.cri_state() as i32))
            .filter(|s| labels_match(&f.label_selector, &s.config.labels))
            .map(Sandbox::to_cri)
            .collect()
    }

    pub(crate) fn list_containers(
        &self,
        filter: Option<&cri::ContainerFilter>,
    ) -> Vec<cri::Container> {
        let Some(f) = filter else {
            return self.containers.values().map(Container::to_cri).collect();
        };
        let id = match (f.id.is_empty(), self.containers.resolve(&f.id)) {
            (true, _) => None,
            (false, Some(id)) => Some(id),
            (false, None) => return Vec::new(),
        };
        let sandbox = match (f.pod_sandbox_id.is_empty(), self.sandboxes.resolve(&f.pod_sandbox_id))
        {
            (true, _) => None,
            (false, Some(id)) => Some(id),
            (false, None) => return Vec::new(),
        };
        // The narrowest way in: the id, else the sandbox's containers, else the labels.
        let candidates: Box<dyn Iterator<Item = &Container>> = match (id, sandbox) {
            (Some(id), _) => Box::new(self.containers.get(id).into_iter()),
            (None, Some(s)) => Box::new(self.containers_of(s)),
            (None, None) => self.containers.matching(&f.label_selector),
        };
        candidates
            .filter(|c| sandbox.is_none_or(|s| c.sandbox_id == s))
            .filter(|c| f.state.as_ref().is_none_or(|st| st.state == c.phase.cri_state() as i32))
            .filter(|c| labels_match(&f.label_selector, &c.config.labels))
            .map(Container::to_cri)
            .collect()
    }

    /// Statuses of a sandbox's containers, for events and `PodSandboxStatus`.
    pub(crate) fn container_statuses(&self, sandbox_id: &str) -> Vec<cri::ContainerStatus> {
        self.containers_of(sandbox_id).map(Container::to_status).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_reason_follows_exit_code() {
        assert!(
            matches!(Phase::exited(1, 2, 0), Phase::Exited { reason, .. } if reason == "Completed")
        );
        assert!(
            matches!(Phase::exited(1, 2, 3), Phase::Exited { reason, .. } if reason == "Error")
        );
    }
}
