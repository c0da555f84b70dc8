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
    /// Where the container's termination message is on the node (the mount at its
    /// `terminationMessagePath`).
    pub message_file: Option<String>,
    /// `terminationMessagePolicy: FallbackToLogsOnError`.
    pub message_from_logs: bool,
    /// The container's CRI log file.
    pub log_path: String,
    /// The crash back-off in force when it was started ([`keys::CONTAINER_RESTART_BACKOFF`]).
    pub restart_backoff: Option<std::time::Duration>,
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
        message_file: s.annotations.get(keys::CONTAINER_TERMINATION_MESSAGE_PATH).and_then(
            |path| s.mounts.iter().find(|m| &m.container_path == path).map(|m| m.host_path.clone()),
        ),
        message_from_logs: s
            .annotations
            .get(keys::CONTAINER_TERMINATION_MESSAGE_POLICY)
            .is_some_and(|p| p == "FallbackToLogsOnError"),
        log_path: s.log_path.clone(),
        restart_backoff: s
            .annotations
            .get(keys::CONTAINER_RESTART_BACKOFF)
            .and_then(|v| v.parse::<api::duration::GoDuration>().ok())
            .map(|d| d.0),
    }
}

/// The most of a termination message file that is read (upstream's 4 KiB).
pub const MAX_MESSAGE: u64 = 4096;
/// What `FallbackToLogsOnError` takes from the log: its last 80 lines, at most 2 KiB.
const FALLBACK_LINES: usize = 80;
const FALLBACK_BYTES: usize = 2048;

/// Adds an exited container's termination message to its status message, as upstream: the
/// file it wrote at `terminationMessagePath`, or (with `FallbackToLogsOnError`, a failure and
/// an empty file) the end of its log.
pub fn add_termination_message(info: &mut ContainerInfo) {
    if info.state != ContainerState::Exited {
        return;
    }
    let from_file = info.message_file.as_deref().map(read_message_file).unwrap_or_default();
    let message = if !from_file.is_empty() {
        from_file
    } else if info.message_from_logs && info.exit_code != 0 && info.reason != "ContainerCannotRun" {
        log_tail(std::path::Path::new(&info.log_path))
    } else {
        return;
    };
    if message.is_empty() {
        return;
    }
    if !info.message.is_empty() {
        info.message.push_str(": ");
    }
    info.message.push_str(&message);
}

fn read_message_file(path: &str) -> String {
    use std::io::Read;
    let mut buf = Vec::new();
    match std::fs::File::open(path) {
        Ok(f) => {
            if let Err(e) = f.take(MAX_MESSAGE).read_to_end(&mut buf) {
                tracing::debug!(path, error = %e, "reading a termination message");
            }
        }
        Err(e) => tracing::debug!(path, error = %e, "reading a termination message"),
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The last lines of a CRI log file's content, bounded.
fn log_tail(path: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let window: u64 = 16 * 1024;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if f.seek(SeekFrom::Start(len.saturating_sub(window))).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.take(window).read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let mut lines: Vec<&[u8]> = buf
        .split(|b| *b == b'\n')
        .filter_map(|l| super::logs::parse_cri_line(l).ok().map(|r| r.content))
        .collect();
    let skip = lines.len().saturating_sub(FALLBACK_LINES);
    lines.drain(..skip);
    let mut text = lines.join(&b'\n');
    if !text.is_empty() {
        text.push(b'\n');
    }
    let cut = text.len().saturating_sub(FALLBACK_BYTES);
    String::from_utf8_lossy(&text[cut..]).into_owned()
}
