//! The runtime's view of one pod: its sandboxes and containers as CRI reports them, decoded
//! from the labels and annotations the kubelet put on them.

use std::collections::HashMap;

use api::keys;
use proto::cri;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

impl ContainerState {
    pub fn from_cri(state: i32) -> Self {
        match cri::ContainerState::try_from(state) {
            Ok(cri::ContainerState::ContainerCreated) => ContainerState::Created,
            Ok(cri::ContainerState::ContainerRunning) => ContainerState::Running,
            Ok(cri::ContainerState::ContainerExited) => ContainerState::Exited,
            _ => ContainerState::Unknown,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxInfo {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub attempt: u32,
    pub ready: bool,
    pub ip: Option<String>,
    pub created_at: i64,
    pub host_network: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    pub id: String,
    pub name: String,
    pub state: ContainerState,
    /// `io.kubernetes.container.hash`: the spec the container was created from.
    pub hash: String,
    pub restart_count: u32,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    /// The image as the pod spec named it.
    pub image: String,
    pub image_ref: String,
    pub image_id: String,
    /// `io.kubernetes.pod.terminationGracePeriod` at creation, for pods no source knows.
    pub grace_seconds: Option<i64>,
}

/// A pod as the runtime holds it: sandboxes and containers, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRuntimeStatus {
    pub uid: String,
    pub sandboxes: Vec<SandboxInfo>,
    pub containers: Vec<ContainerInfo>,
}

impl PodRuntimeStatus {
    /// The newest container with this name.
    pub fn container(&self, name: &str) -> Option<&ContainerInfo> {
        self.containers.iter().find(|c| c.name == name)
    }

    pub fn running(&self) -> impl Iterator<Item = &ContainerInfo> {
        self.containers.iter().filter(|c| c.state == ContainerState::Running)
    }

    /// The pod IP of the newest ready sandbox.
    pub fn ip(&self) -> Option<&str> {
        self.sandboxes.iter().find(|s| s.ready).and_then(|s| s.ip.as_deref())
    }

    pub fn sort(&mut self) {
        self.sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        self.containers.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    }
}

fn annotation<T: std::str::FromStr>(a: &HashMap<String, String>, key: &str) -> Option<T> {
    a.get(key).and_then(|v| v.parse().ok())
}

pub fn sandbox_info(s: &cri::PodSandboxStatus) -> SandboxInfo {
    let host_network = s
        .linux
        .as_ref()
        .and_then(|l| l.namespaces.as_ref())
        .and_then(|n| n.options.as_ref())
        .is_some_and(|o| o.network == cri::NamespaceMode::Node as i32);
    SandboxInfo {
        id: s.id.clone(),
        name: s.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default(),
        namespace: s.metadata.as_ref().map(|m| m.namespace.clone()).unwrap_or_default(),
        attempt: s.metadata.as_ref().map_or(0, |m| m.attempt),
        ready: s.state == cri::PodSandboxState::SandboxReady as i32,
        ip: s.network.as_ref().map(|n| n.ip.clone()).filter(|ip| !ip.is_empty()),
        created_at: s.created_at,
        host_network,
    }
}

pub fn container_info(s: &cri::ContainerStatus) -> ContainerInfo {
    let name = s
        .labels
        .get(keys::CONTAINER_NAME)
        .cloned()
        .or_else(|| s.metadata.as_ref().map(|m| m.name.clone()));
    ContainerInfo {
        id: s.id.clone(),
        name: name.unwrap_or_default(),
        state: ContainerState::from_cri(s.state),
        hash: s.annotations.get(keys::CONTAINER_HASH).cloned().unwrap_or_default(),
        restart_count: annotation(&s.annotations, keys::CONTAINER_RESTART_COUNT).unwrap_or(0),
        created_at: s.created_at,
        started_at: s.started_at,
        finished_at: s.finished_at,
        exit_code: s.exit_code,
        reason: s.reason.clone(),
        message: s.message.clone(),
        image: s
            .image
            .as_ref()
            .map(|i| i.user_specified_image.clone())
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| s.image.as_ref().map(|i| i.image.clone()).unwrap_or_default()),
        image_ref: s.image_ref.clone(),
        image_id: s.image_id.clone(),
        grace_seconds: annotation(&s.annotations, keys::POD_TERMINATION_GRACE_PERIOD),
    }
}
