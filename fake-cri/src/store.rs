//! Sandboxes and containers as containerd keeps them: records, the container lifecycle, the
//! list filters and the CRI views of each record.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use proto::cri;
use tokio::sync::Notify;

use crate::program::Program;

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

/// Everything the runtime holds, behind one lock.
#[derive(Debug, Default)]
pub(crate) struct Store {
    pub sandboxes: BTreeMap<String, Sandbox>,
    pub containers: BTreeMap<String, Container>,
    /// Reserved names (containerd refuses a second sandbox or container with the same name).
    pub names: HashMap<String, String>,
    pub next_ip: u32,
}

/// Resolves an id or a unique id prefix, as containerd's truncated-id index does.
pub(crate) fn resolve<'a, V>(map: &'a BTreeMap<String, V>, id: &str) -> Option<&'a str> {
    if id.is_empty() {
        return None;
    }
    let mut hits = map.range(id.to_string()..).take_while(|(k, _)| k.starts_with(id));
    match (hits.next(), hits.next()) {
        (Some((k, _)), None) => Some(k.as_str()),
        _ => None,
    }
}

fn labels_match(selector: &HashMap<String, String>, labels: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl Store {
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
            match resolve(&self.sandboxes, &f.id) {
                Some(id) => Some(id),
                None => return Vec::new(),
            }
        };
        self.sandboxes
            .values()
            .filter(|s| id.is_none_or(|id| s.id == id))
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
        let id = match (f.id.is_empty(), resolve(&self.containers, &f.id)) {
            (true, _) => None,
            (false, Some(id)) => Some(id),
            (false, None) => return Vec::new(),
        };
        let sandbox =
            match (f.pod_sandbox_id.is_empty(), resolve(&self.sandboxes, &f.pod_sandbox_id)) {
                (true, _) => None,
                (false, Some(id)) => Some(id),
                (false, None) => return Vec::new(),
            };
        self.containers
            .values()
            .filter(|c| id.is_none_or(|id| c.id == id))
            .filter(|c| sandbox.is_none_or(|s| c.sandbox_id == s))
            .filter(|c| f.state.as_ref().is_none_or(|st| st.state == c.phase.cri_state() as i32))
            .filter(|c| labels_match(&f.label_selector, &c.config.labels))
            .map(Container::to_cri)
            .collect()
    }

    /// Statuses of a sandbox's containers, for events and `PodSandboxStatus`.
    pub(crate) fn container_statuses(&self, sandbox_id: &str) -> Vec<cri::ContainerStatus> {
        self.containers
            .values()
            .filter(|c| c.sandbox_id == sandbox_id)
            .map(Container::to_status)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_takes_exact_ids_and_unique_prefixes_only() {
        let mut m = BTreeMap::new();
        m.insert("abc123".to_string(), ());
        m.insert("abd456".to_string(), ());
        assert_eq!(resolve(&m, "abc123"), Some("abc123"));
        assert_eq!(resolve(&m, "abc"), Some("abc123"));
        assert_eq!(resolve(&m, "ab"), None, "ambiguous prefix");
        assert_eq!(resolve(&m, "zz"), None);
        assert_eq!(resolve(&m, ""), None);
    }

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
