//! Pods another kubelet made, read from `crictl inspectp` and `crictl inspect` output
//! ([`read_crictl`]) and replayed into the fake runtime: each sandbox is run, and each container
//! created (and started, and exited with its exit code, as its state says) from the CRI config
//! the runtime recorded
//! (`info.config`: the CRI message's fields in snake case, defaults omitted). Labels,
//! annotations, command, environment, mounts, resources and namespaces are the recorded ones;
//! IDs and times are new, and a container's image is the one its status names (the recorded
//! config holds an image ID only the capturing machine had).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use proto::cri;
use serde_json::Value;

use crate::FakeRuntime;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{file}: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    #[error("{file}: {source}")]
    Json { file: PathBuf, source: serde_json::Error },
    #[error("{file}: {field} is missing")]
    Missing { file: PathBuf, field: &'static str },
    #[error("{file}: the container's sandbox {sandbox} was not imported")]
    NoSandbox { file: PathBuf, sandbox: String },
    #[error("{file}: {status}")]
    Refused { file: PathBuf, status: Box<tonic::Status> },
}

/// What an import made: the captured sandbox and container IDs → the new ones.
#[derive(Debug, Default)]
pub struct Imported {
    pub sandboxes: HashMap<String, String>,
    pub containers: HashMap<String, String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn map(v: &Value, key: &str) -> HashMap<String, String> {
    v.get(key)
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn int(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn int32(v: &Value, key: &str) -> i32 {
    i32::try_from(int(v, key)).unwrap_or(0)
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn sandbox_config(c: &Value, rewrite: &dyn Fn(String) -> String) -> cri::PodSandboxConfig {
    let meta = c.get("metadata").cloned().unwrap_or_default();
    let ns =
        at(c, &["linux", "security_context", "namespace_options"]).cloned().unwrap_or_default();
    let dns = c.get("dns_config").cloned().unwrap_or_default();
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: text(&meta, "name"),
            uid: text(&meta, "uid"),
            namespace: text(&meta, "namespace"),
            attempt: u32::try_from(int(&meta, "attempt")).unwrap_or(0),
        }),
        hostname: text(c, "hostname"),
        log_directory: rewrite(text(c, "log_directory")),
        dns_config: Some(cri::DnsConfig {
            servers: strings(&dns, "servers"),
            searches: strings(&dns, "searches"),
            options: strings(&dns, "options"),
        }),
        port_mappings: c
            .get("port_mappings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| cri::PortMapping {
                protocol: int32(p, "protocol"),
                container_port: int32(p, "container_port"),
                host_port: int32(p, "host_port"),
                host_ip: text(p, "host_ip"),
            })
            .collect(),
        labels: map(c, "labels"),
        annotations: map(c, "annotations"),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: text(at(c, &["linux"]).unwrap_or(&Value::Null), "cgroup_parent"),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: int32(&ns, "network"),
                    pid: int32(&ns, "pid"),
                    ipc: int32(&ns, "ipc"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_config(
    c: &Value,
    image: String,
    rewrite: &dyn Fn(String) -> String,
) -> cri::ContainerConfig {
    let meta = c.get("metadata").cloned().unwrap_or_default();
    let resources = at(c, &["linux", "resources"]).cloned().unwrap_or_default();
    let sc = at(c, &["linux", "security_context"]).cloned().unwrap_or_default();
    let flag = |k| sc.get(k).and_then(Value::as_bool).unwrap_or(false);
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: text(&meta, "name"),
            attempt: u32::try_from(int(&meta, "attempt")).unwrap_or(0),
        }),
        image: Some(cri::ImageSpec { image, ..Default::default() }),
        command: strings(c, "command"),
        args: strings(c, "args"),
        working_dir: text(c, "working_dir"),
        envs: c
            .get("envs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|kv| cri::KeyValue { key: text(kv, "key"), value: text(kv, "value") })
            .collect(),
        mounts: c
            .get("mounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| cri::Mount {
                container_path: text(m, "container_path"),
                host_path: rewrite(text(m, "host_path")),
                readonly: m.get("readonly").and_then(Value::as_bool).unwrap_or(false),
                ..Default::default()
            })
            .collect(),
        labels: map(c, "labels"),
        annotations: map(c, "annotations"),
        log_path: text(c, "log_path"),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                cpu_period: int(&resources, "cpu_period"),
                cpu_quota: int(&resources, "cpu_quota"),
                cpu_shares: int(&resources, "cpu_shares"),
                memory_limit_in_bytes: int(&resources, "memory_limit_in_bytes"),
                oom_score_adj: int(&resources, "oom_score_adj"),
                ..Default::default()
            }),
            security_context: Some(cri::LinuxContainerSecurityContext {
                privileged: flag("privileged"),
                readonly_rootfs: flag("readonly_rootfs"),
                no_new_privs: flag("no_new_privs"),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

fn read(file: &Path) -> Result<Value, ImportError> {
    let text = std::fs::read_to_string(file)
        .map_err(|source| ImportError::Read { file: file.into(), source })?;
    serde_json::from_str(&text).map_err(|source| ImportError::Json { file: file.into(), source })
}

/// One captured container: its ID then, its CRI config, and the state it was in.
#[derive(Debug, Clone)]
pub struct CapturedContainer {
    pub id: String,
    pub config: cri::ContainerConfig,
    /// `CONTAINER_RUNNING`, `CONTAINER_EXITED`, …, as `crictl` prints it.
    pub state: String,
    pub exit_code: i32,
}

/// One captured pod: its sandbox's ID then and CRI config, and its containers.
#[derive(Debug, Clone)]
pub struct CapturedPod {
    pub id: String,
    pub sandbox: cri::PodSandboxConfig,
    pub containers: Vec<CapturedContainer>,
}

/// Reads the `pod-*.json` (`crictl inspectp`) and `container-*.json` (`crictl inspect`) files
/// of `dir`, in name order, into the CRI configs they record. `rewrite` maps recorded host
/// paths (log directories, mount sources) to this machine's. A container's image is the one its
/// status names. Any runtime can be given them again ([`FakeRuntime::import_crictl`], or a real
/// one over CRI).
pub fn read_crictl(
    dir: &Path,
    rewrite: &dyn Fn(String) -> String,
) -> Result<Vec<CapturedPod>, ImportError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| ImportError::Read { file: dir.into(), source })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut pods: Vec<CapturedPod> = Vec::new();
    for file in files.iter().filter(|p| name(p).is_some_and(|n| n.starts_with("pod-"))) {
        let v = read(file)?;
        let missing = |field| ImportError::Missing { file: file.clone(), field };
        let id = at(&v, &["status", "id"]).and_then(Value::as_str).ok_or(missing("status.id"))?;
        let config = at(&v, &["info", "config"]).ok_or(missing("info.config"))?;
        let sandbox = sandbox_config(config, rewrite);
        pods.push(CapturedPod { id: id.to_string(), sandbox, containers: Vec::new() });
    }
    for file in files.iter().filter(|p| name(p).is_some_and(|n| n.starts_with("container-"))) {
        let v = read(file)?;
        let missing = |field| ImportError::Missing { file: file.clone(), field };
        let id = at(&v, &["status", "id"]).and_then(Value::as_str).ok_or(missing("status.id"))?;
        let sandbox = at(&v, &["info", "sandboxID"])
            .and_then(Value::as_str)
            .ok_or(missing("info.sandboxID"))?;
        let config = at(&v, &["info", "config"]).ok_or(missing("info.config"))?;
        let image = at(&v, &["status", "image", "image"])
            .and_then(Value::as_str)
            .ok_or(missing("status.image.image"))?;
        let pod = pods.iter_mut().find(|p| p.id == sandbox).ok_or_else(|| {
            ImportError::NoSandbox { file: file.clone(), sandbox: sandbox.to_string() }
        })?;
        let state = at(&v, &["status", "state"]).and_then(Value::as_str).unwrap_or_default();
        let code = at(&v, &["status", "exitCode"]).and_then(Value::as_i64).unwrap_or(0);
        pod.containers.push(CapturedContainer {
            id: id.to_string(),
            config: container_config(config, image.to_string(), rewrite),
            state: state.to_string(),
            exit_code: i32::try_from(code).unwrap_or(0),
        });
    }
    Ok(pods)
}

impl FakeRuntime {
    /// Replays what [`read_crictl`] reads of `dir`: each sandbox run, each container created,
    /// started and exited as its captured state says. The images the containers' statuses
    /// name must be present ([`FakeRuntime::add_image`]).
    pub fn import_crictl(
        &self,
        dir: &Path,
        rewrite: &dyn Fn(String) -> String,
    ) -> Result<Imported, ImportError> {
        let mut imported = Imported::default();
        for pod in read_crictl(dir, rewrite)? {
            let refused = |s| ImportError::Refused { file: dir.join(&pod.id), status: Box::new(s) };
            let sandbox = self.run_pod_sandbox(Some(pod.sandbox.clone())).map_err(refused)?;
            for c in pod.containers {
                let req = cri::CreateContainerRequest {
                    pod_sandbox_id: sandbox.clone(),
                    config: Some(c.config),
                    sandbox_config: None,
                };
                let new = self.create_container(req).map_err(refused)?;
                if c.state != "CONTAINER_CREATED" {
                    self.start_container(&new).map_err(refused)?;
                }
                if c.state == "CONTAINER_EXITED" {
                    self.exit_container(&new, c.exit_code);
                }
                imported.containers.insert(c.id, new);
            }
            imported.sandboxes.insert(pod.id, sandbox);
        }
        Ok(imported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/upstream-kubelet-v1.35/cri")
    }

    #[tokio::test]
    async fn upstreams_pods_are_replayed_with_their_labels_configs_and_states() {
        let rt = FakeRuntime::new();
        rt.add_image("docker.io/library/busybox:bars").unwrap();
        let imported = rt.import_crictl(&golden(), &|p| p).unwrap();
        assert_eq!((imported.sandboxes.len(), imported.containers.len()), (3, 5));
        let sandboxes = rt.sandboxes();
        let rich = sandboxes.iter().find(|s| s.metadata.as_ref().unwrap().name == "rich-node-a");
        let rich = rich.unwrap();
        assert_eq!(rich.labels["io.kubernetes.pod.uid"], "edddae794c4505e1b9198c068dbd121f");
        assert_eq!(rich.annotations["kubernetes.io/config.source"], "file");
        let containers = rt.containers();
        let state = |name: &str| {
            containers
                .iter()
                .find(|c| c.metadata.as_ref().unwrap().name == name)
                .map(|c| c.state)
                .unwrap()
        };
        assert_eq!(state("init"), cri::ContainerState::ContainerExited as i32);
        assert_eq!(state("app"), cri::ContainerState::ContainerRunning as i32);
        let app = containers.iter().find(|c| c.metadata.as_ref().unwrap().name == "app").unwrap();
        let app = rt.container_status(&app.id);
        let info = app.unwrap().info["info"].clone();
        assert!(info.contains("\"GREETING\""), "the recorded config: {info}");
    }

    #[test]
    fn a_file_that_is_not_crictl_output_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("pod-x.json"), "{\"status\": {}}").unwrap();
        let err = FakeRuntime::new().import_crictl(tmp.path(), &|p| p).unwrap_err();
        assert!(err.to_string().contains("pod-x.json: status.id is missing"), "{err}");
        std::fs::write(tmp.path().join("pod-x.json"), "{").unwrap();
        let err = FakeRuntime::new().import_crictl(tmp.path(), &|p| p).unwrap_err();
        assert!(err.to_string().contains("pod-x.json"), "{err}");
    }
}
