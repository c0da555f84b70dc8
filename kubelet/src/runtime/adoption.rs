//! Pods the runtime already runs when the kubelet starts, as it can read them back: what a
//! static pod's sandbox and containers were created with, from their CRI labels and
//! annotations and the runtime's verbose status (containerd's `info.config`: the CRI config
//! exactly as the kubelet that made it sent it). Read whoever made them: this build, an older
//! one, or upstream's kubelet (`crictl inspectp`/`inspect` of its pods are the test fixtures).
//!
//! [`RunningPod::matches`] says whether such a pod is what a manifest asks for, by what would
//! make upstream start it anew: host namespaces, hostname, host ports, and per container the
//! image, command, args, working directory, literal environment values, mounts, privilege,
//! read-only root and resources. What the runtime does not report is not held against it.
//! [`crate::config::identity`] decides with it whether a static pod keeps the UID it runs
//! under.

use std::collections::HashMap;

use api::keys;
use k8s_openapi::api::core::v1::{Container, Pod};
use proto::{CallError, CriClient, cri};
use serde_json::Value;

use super::container::linux_resources;
use super::sandbox::{pod_hostname, port_mappings};
use crate::cm::resources::PodCgroupPolicy;
use crate::credentialprovider::reference::normalized;

/// Why a running pod is not the manifest's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("spec.{field} differs")]
    Pod { field: &'static str },
    #[error("container {container:?} is not in the manifest")]
    UnknownContainer { container: String },
    #[error("container {container:?}: {field} differs")]
    Container { container: String, field: &'static str },
}

/// What a sandbox was created with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxRecord {
    pub host_network: bool,
    pub host_pid: bool,
    pub host_ipc: bool,
    /// From the verbose status; `None` when the runtime did not report its config.
    pub hostname: Option<String>,
    /// `(container port, host port, protocol)` of the mappings with a host port, sorted;
    /// `None` as for `hostname`.
    pub port_mappings: Option<Vec<(i32, i32, i32)>>,
}

/// What a container's CRI config said, when the runtime reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigRecord {
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub envs: HashMap<String, String>,
    /// Container path → read-only.
    pub mounts: HashMap<String, bool>,
    /// CPU shares, CFS quota, memory limit.
    pub resources: Option<(i64, i64, i64)>,
    pub privileged: bool,
    pub readonly_rootfs: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRecord {
    pub name: String,
    /// The image as the runtime names it (the user's spelling when it was recorded).
    pub image: String,
    pub config: Option<ConfigRecord>,
}

/// A pod the runtime runs: its newest ready sandbox and the newest container of each name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningPod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// [`keys::STATIC_IDENTITY`] on the sandbox (this build's or an older one's).
    pub identity: Option<String>,
    pub sandbox: SandboxRecord,
    pub containers: Vec<ContainerRecord>,
    /// The node's CFS settings (`cpuCFSQuota`, its period), by which this kubelet would size
    /// the pod's containers: their recorded resources are compared with what these give.
    pub cfs: PodCgroupPolicy,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn int(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The `config` of a CRI verbose `info` (containerd's and the fake runtime's shape: the CRI
/// message's fields in snake case, defaults omitted).
fn info_config(info: &HashMap<String, String>) -> Option<Value> {
    let v: Value = serde_json::from_str(info.get("info")?).ok()?;
    v.get("config").cloned()
}

impl SandboxRecord {
    fn from_cri(status: &cri::PodSandboxStatus, config: Option<&Value>) -> Self {
        let options = status
            .linux
            .as_ref()
            .and_then(|l| l.namespaces.as_ref())
            .and_then(|n| n.options.clone())
            .unwrap_or_default();
        let node = cri::NamespaceMode::Node as i32;
        let port_mappings = config.map(|c| {
            let mut ports: Vec<(i32, i32, i32)> = c
                .get("port_mappings")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    let n = |k| i32::try_from(int(p, k)).unwrap_or(0);
                    (n("container_port"), n("host_port"), n("protocol"))
                })
                // Upstream maps every container port; only those with a host port do anything.
                .filter(|(_, host, _)| *host > 0)
                .collect();
            ports.sort_unstable();
            ports
        });
        SandboxRecord {
            host_network: options.network == node,
            host_pid: options.pid == node,
            host_ipc: options.ipc == node,
            hostname: config.map(|c| text(c, "hostname").to_string()),
            port_mappings,
        }
    }
}

impl ConfigRecord {
    fn from_value(c: &Value) -> Self {
        let envs = c
            .get("envs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|kv| (text(kv, "key").to_string(), text(kv, "value").to_string()))
            .collect();
        let mounts = c
            .get("mounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| {
                let readonly = m.get("readonly").and_then(Value::as_bool).unwrap_or(false);
                (text(m, "container_path").to_string(), readonly)
            })
            .collect();
        let linux = c.get("linux");
        let resources = linux
            .and_then(|l| l.get("resources"))
            .map(|r| (int(r, "cpu_shares"), int(r, "cpu_quota"), int(r, "memory_limit_in_bytes")));
        let sc = linux.and_then(|l| l.get("security_context"));
        let flag = |k| sc.and_then(|s| s.get(k)).and_then(Value::as_bool).unwrap_or(false);
        ConfigRecord {
            command: strings(c, "command"),
            args: strings(c, "args"),
            working_dir: text(c, "working_dir").to_string(),
            envs,
            mounts,
            resources,
            privileged: flag("privileged"),
            readonly_rootfs: flag("readonly_rootfs"),
        }
    }
}

impl ContainerRecord {
    pub fn from_cri(status: &cri::ContainerStatus, info: &HashMap<String, String>) -> Self {
        let decoded = super::status::container_info(status);
        ContainerRecord {
            name: decoded.name,
            image: decoded.image,
            config: info_config(info).as_ref().map(ConfigRecord::from_value),
        }
    }

    fn matches(&self, c: &Container, pod: &Pod, cfs: &PodCgroupPolicy) -> Result<(), Mismatch> {
        let differs = |field| Mismatch::Container { container: self.name.clone(), field };
        if normalized(&self.image) != normalized(c.image.as_deref().unwrap_or_default()) {
            return Err(differs("image"));
        }
        let Some(cfg) = &self.config else { return Ok(()) };
        // `$(VAR)` references are expanded against an environment this check does not
        // rebuild: such strings are not compared.
        let same = |spec: &Option<Vec<String>>, recorded: &[String]| {
            let spec: &[String] = spec.as_deref().unwrap_or_default();
            spec.iter().any(|s| s.contains("$(")) || spec == recorded
        };
        if !same(&c.command, &cfg.command) {
            return Err(differs("command"));
        }
        if !same(&c.args, &cfg.args) {
            return Err(differs("args"));
        }
        if c.working_dir.as_deref().unwrap_or_default() != cfg.working_dir {
            return Err(differs("workingDir"));
        }
        for e in c.env.iter().flatten() {
            let recorded = cfg.envs.get(&e.name);
            let ok = match (&e.value_from, e.value.as_deref()) {
                (Some(_), _) => recorded.is_some(),
                (None, Some(v)) if v.contains("$(") => recorded.is_some(),
                (None, v) => recorded.map(String::as_str) == Some(v.unwrap_or_default()),
            };
            if !ok {
                return Err(differs("env"));
            }
        }
        for m in c.volume_mounts.iter().flatten() {
            if cfg.mounts.get(&m.mount_path) != Some(&m.read_only.unwrap_or(false)) {
                return Err(differs("volumeMounts"));
            }
        }
        let sc = c.security_context.as_ref();
        if sc.and_then(|s| s.privileged).unwrap_or(false) != cfg.privileged {
            return Err(differs("securityContext.privileged"));
        }
        if sc.and_then(|s| s.read_only_root_filesystem).unwrap_or(false) != cfg.readonly_rootfs {
            return Err(differs("securityContext.readOnlyRootFilesystem"));
        }
        if let Some((shares, quota, memory)) = cfg.resources {
            let qos = pod.spec.as_ref().map_or(api::qos::QosClass::BestEffort, api::qos::pod_qos);
            // A pod started under other CFS settings than this node's is not adopted (it is
            // restarted with this node's).
            let want = linux_resources(c, qos, 0, cfs);
            if (want.cpu_shares, want.cpu_quota, want.memory_limit_in_bytes)
                != (shares, quota, memory)
            {
                return Err(differs("resources"));
            }
        }
        Ok(())
    }
}

impl RunningPod {
    /// `namespace/name`, as [`crate::mirror::full_name`] spells a pod's.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether this pod is what `pod` (decoded, defaulted, named for the node) asks for.
    pub fn matches(&self, pod: &Pod) -> Result<(), Mismatch> {
        let Some(spec) = pod.spec.as_ref() else { return Ok(()) };
        let s = &self.sandbox;
        let host = |v: Option<bool>| v.unwrap_or(false);
        if s.host_network != host(spec.host_network) {
            return Err(Mismatch::Pod { field: "hostNetwork" });
        }
        if s.host_pid != host(spec.host_pid) {
            return Err(Mismatch::Pod { field: "hostPID" });
        }
        if s.host_ipc != host(spec.host_ipc) {
            return Err(Mismatch::Pod { field: "hostIPC" });
        }
        if let Some(hostname) = &s.hostname {
            let want = if s.host_network { String::new() } else { pod_hostname(pod) };
            if *hostname != want {
                return Err(Mismatch::Pod { field: "hostname" });
            }
        }
        if let Some(recorded) = &s.port_mappings {
            let mut want: Vec<(i32, i32, i32)> = port_mappings(pod)
                .iter()
                .map(|p| (p.container_port, p.host_port, p.protocol))
                .collect();
            want.sort_unstable();
            if *recorded != want {
                return Err(Mismatch::Pod { field: "containers[*].ports" });
            }
        }
        let all: Vec<&Container> =
            spec.init_containers.iter().flatten().chain(spec.containers.iter()).collect();
        for record in &self.containers {
            let Some(c) = all.iter().find(|c| c.name == record.name) else {
                return Err(Mismatch::UnknownContainer { container: record.name.clone() });
            };
            record.matches(c, pod, &self.cfs)?;
        }
        Ok(())
    }
}

/// The pods of `source` the runtime runs: each ready sandbox with that
/// `kubernetes.io/config.source`, read verbosely with its containers, to be judged under the
/// node's CFS settings `cfs`.
pub async fn running_pods(
    cri: &CriClient,
    source: &str,
    cfs: PodCgroupPolicy,
) -> Result<Vec<RunningPod>, CallError> {
    let ready = cri::PodSandboxFilter {
        state: Some(cri::PodSandboxStateValue { state: cri::PodSandboxState::SandboxReady as i32 }),
        ..Default::default()
    };
    let sandboxes =
        cri.list_pod_sandbox(cri::ListPodSandboxRequest { filter: Some(ready) }).await?.items;
    // The newest ready sandbox of each pod.
    let mut newest: HashMap<String, cri::PodSandbox> = HashMap::new();
    for s in sandboxes {
        if s.annotations.get(keys::CONFIG_SOURCE).map(String::as_str) != Some(source) {
            continue;
        }
        let Some(uid) = s.labels.get(keys::POD_UID).cloned() else { continue };
        if newest.get(&uid).is_none_or(|n| n.created_at < s.created_at) {
            newest.insert(uid, s);
        }
    }
    // One listing for every pod's containers, not one per sandbox.
    let mut by_sandbox: HashMap<String, Vec<cri::Container>> = HashMap::new();
    if !newest.is_empty() {
        let all = cri.list_containers(cri::ListContainersRequest { filter: None }).await?;
        for c in all.containers {
            by_sandbox.entry(c.pod_sandbox_id.clone()).or_default().push(c);
        }
    }
    let mut pods = Vec::new();
    for (uid, s) in newest {
        let status = match cri
            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: s.id.clone(),
                verbose: true,
            })
            .await
        {
            Ok(r) => r,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        let Some(sandbox_status) = status.status.as_ref() else { continue };
        let config = info_config(&status.info);
        let mut newest_container: HashMap<String, (i64, ContainerRecord)> = HashMap::new();
        for c in by_sandbox.remove(&s.id).unwrap_or_default() {
            let r = match cri
                .container_status(cri::ContainerStatusRequest {
                    container_id: c.id.clone(),
                    verbose: true,
                })
                .await
            {
                Ok(r) => r,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            let Some(cs) = r.status.as_ref() else { continue };
            let record = ContainerRecord::from_cri(cs, &r.info);
            if newest_container.get(&record.name).is_none_or(|(at, _)| *at < cs.created_at) {
                newest_container.insert(record.name.clone(), (cs.created_at, record));
            }
        }
        let meta = sandbox_status.metadata.clone().unwrap_or_default();
        let mut containers: Vec<ContainerRecord> =
            newest_container.into_values().map(|(_, r)| r).collect();
        containers.sort_by(|a, b| a.name.cmp(&b.name));
        pods.push(RunningPod {
            uid,
            namespace: meta.namespace,
            name: meta.name,
            identity: s.annotations.get(keys::STATIC_IDENTITY).cloned(),
            sandbox: SandboxRecord::from_cri(sandbox_status, config.as_ref()),
            containers,
            cfs,
        });
    }
    pods.sort_by_key(RunningPod::full_name);
    Ok(pods)
}

#[cfg(test)]
mod tests;
