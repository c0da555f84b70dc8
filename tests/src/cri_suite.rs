//! CRI scenarios written once and run against any runtime: real containerd and the fake.
//! Only the setup differs (the fake needs to be told what its container prints).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, ensure};
use proto::CriClient;
use proto::cri;

use crate::eventually;

/// The container the round trip runs, and what it prints.
pub const GREETER: &str = "greeter";
pub const GREETER_STDOUT: &str = "hello from busybox";
pub const GREETER_STDERR: &str = "to-stderr";
pub const BUSYBOX: &str = "docker.io/library/busybox:1.35";

/// Where the scenario runs.
#[derive(Debug)]
pub struct Target<'a> {
    pub client: &'a CriClient,
    /// Cgroup parent for the sandbox (the harness removes it at teardown).
    pub cgroup_parent: String,
    /// Directory under which pod log directories are created, as `/var/log/pods`.
    pub log_root: &'a Path,
}

fn pod_labels(name: &str, uid: &str) -> HashMap<String, String> {
    HashMap::from([
        ("io.kubernetes.pod.name".to_string(), name.to_string()),
        ("io.kubernetes.pod.namespace".to_string(), "default".to_string()),
        ("io.kubernetes.pod.uid".to_string(), uid.to_string()),
    ])
}

/// A sandbox config as the kubelet builds it, for pod `name` with `uid`.
pub fn sandbox_config(t: &Target<'_>, name: &str, uid: &str) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: name.into(),
        log_directory: log_directory(t, name, uid).display().to_string(),
        labels: pod_labels(name, uid),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: t.cgroup_parent.clone(),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: cri::NamespaceMode::Pod as i32,
                    pid: cri::NamespaceMode::Container as i32,
                    ipc: cri::NamespaceMode::Pod as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn log_directory(t: &Target<'_>, name: &str, uid: &str) -> PathBuf {
    t.log_root.join(format!("default_{name}_{uid}"))
}

/// A pod started directly through CRI, with how long each call took.
#[derive(Debug)]
pub struct StartedPod {
    pub sandbox_id: String,
    pub container_id: String,
    /// RunPodSandbox, CreateContainer, StartContainer.
    pub calls: [std::time::Duration; 3],
}

/// Creates a sandbox for pod `name` (uid `uid-<name>`) and starts one busybox container named
/// `app` in it, running `command` — the calls a kubelet makes, and nothing else.
pub async fn start_pod(t: &Target<'_>, name: &str, command: &[&str]) -> anyhow::Result<StartedPod> {
    let c = t.client;
    let config = sandbox_config(t, name, &format!("uid-{name}"));
    std::fs::create_dir_all(&config.log_directory)?;
    let at = std::time::Instant::now();
    let run =
        cri::RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: String::new() };
    let sandbox_id = c.run_pod_sandbox(run).await?.pod_sandbox_id;
    let ran = std::time::Instant::now();
    let container_id = c
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 0 }),
                image: Some(cri::ImageSpec { image: BUSYBOX.into(), ..Default::default() }),
                command: command.iter().map(|s| (*s).to_string()).collect(),
                log_path: "app/0.log".into(),
                ..Default::default()
            }),
            sandbox_config: Some(config),
        })
        .await?
        .container_id;
    let created = std::time::Instant::now();
    c.start_container(cri::StartContainerRequest { container_id: container_id.clone() }).await?;
    let calls = [ran - at, created - ran, created.elapsed()];
    Ok(StartedPod { sandbox_id, container_id, calls })
}

/// Parses one CRI log line into (stream, tag, text), checking the timestamp.
pub fn parse_log_line(line: &str) -> anyhow::Result<(&str, &str, &str)> {
    let mut parts = line.splitn(4, ' ');
    let (Some(ts), Some(stream), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
        anyhow::bail!("malformed CRI log line {line:?}");
    };
    humantime::parse_rfc3339_weak(ts).with_context(|| format!("timestamp of {line:?}"))?;
    Ok((stream, tag, parts.next().unwrap_or("")))
}

/// Creates a sandbox and a busybox container, starts it, reads its stdout and stderr from the
/// CRI log file, then stops and removes both and checks they are gone.
pub async fn print_read_log_and_remove(t: &Target<'_>) -> anyhow::Result<()> {
    let c = t.client;
    let uid = format!("uid-{}", rand::random::<u32>());
    let config = sandbox_config(t, "roundtrip", &uid);
    std::fs::create_dir_all(&config.log_directory)?; // the kubelet creates it, not the runtime
    let sandbox_id = c
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await?
        .pod_sandbox_id;
    let status = c
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.clone(),
            verbose: false,
        })
        .await?
        .status
        .context("sandbox status")?;
    ensure!(
        status.state == cri::PodSandboxState::SandboxReady as i32,
        "sandbox not ready: {status:?}"
    );
    let ip = status.network.map(|n| n.ip).unwrap_or_default();
    ensure!(ip.parse::<std::net::Ipv4Addr>().is_ok(), "sandbox has no pod IP: {ip:?}");

    let mut labels = pod_labels("roundtrip", &uid);
    labels.insert("io.kubernetes.container.name".into(), GREETER.into());
    let container_id = c
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata { name: GREETER.into(), attempt: 0 }),
                image: Some(cri::ImageSpec { image: BUSYBOX.into(), ..Default::default() }),
                command: vec!["sh".into(), "-c".into()],
                args: vec![format!("echo {GREETER_STDOUT}; echo {GREETER_STDERR} >&2")],
                log_path: format!("{GREETER}/0.log"),
                labels,
                ..Default::default()
            }),
            sandbox_config: Some(config.clone()),
        })
        .await?
        .container_id;
    c.start_container(cri::StartContainerRequest { container_id: container_id.clone() }).await?;

    let status = eventually(
        "the greeter to exit",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            let s = c
                .container_status(cri::ContainerStatusRequest {
                    container_id: container_id.clone(),
                    verbose: false,
                })
                .await
                .ok()?
                .status?;
            (s.state == cri::ContainerState::ContainerExited as i32).then_some(s)
        },
    )
    .await?;
    ensure!(status.exit_code == 0, "greeter exited {}: {status:?}", status.exit_code);
    ensure!(status.reason == "Completed", "reason {:?}", status.reason);
    // containerd records startedAt after the start call returns, so for a container that exits
    // at once finishedAt can precede it by a few microseconds: only creation bounds both.
    ensure!(
        status.started_at >= status.created_at && status.finished_at >= status.created_at,
        "timestamps {status:?}"
    );
    let log_path = PathBuf::from(&status.log_path);
    ensure!(
        log_path == Path::new(&config.log_directory).join(GREETER).join("0.log"),
        "log path {log_path:?}"
    );

    // The runtime's log writer may lag the exit by a moment.
    let lines = eventually(
        "both log lines",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async {
            let text = std::fs::read_to_string(&log_path).ok()?;
            let lines: Vec<(String, String, String)> = text
                .lines()
                .filter_map(|l| parse_log_line(l).ok())
                .map(|(s, tag, t)| (s.to_string(), tag.to_string(), t.to_string()))
                .collect();
            (lines.len() >= 2).then_some(lines)
        },
    )
    .await?;
    let has = |stream: &str, text: &str| {
        lines.iter().any(|(s, tag, t)| s == stream && tag == "F" && t == text)
    };
    ensure!(has("stdout", GREETER_STDOUT), "stdout line missing in {lines:?}");
    ensure!(has("stderr", GREETER_STDERR), "stderr line missing in {lines:?}");

    c.stop_container(&container_id, Duration::from_secs(2)).await?;
    c.remove_container(cri::RemoveContainerRequest { container_id: container_id.clone() }).await?;
    c.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sandbox_id.clone() }).await?;
    c.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sandbox_id.clone() })
        .await?;

    let by_uid = HashMap::from([("io.kubernetes.pod.uid".to_string(), uid.clone())]);
    let left = c
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                label_selector: by_uid.clone(),
                ..Default::default()
            }),
        })
        .await?;
    ensure!(left.containers.is_empty(), "containers left: {:?}", left.containers);
    let left = c
        .list_pod_sandbox(cri::ListPodSandboxRequest {
            filter: Some(cri::PodSandboxFilter { label_selector: by_uid, ..Default::default() }),
        })
        .await?;
    ensure!(left.items.is_empty(), "sandboxes left: {:?}", left.items);
    // Removing again is not an error (CRI removals are idempotent).
    c.remove_container(cri::RemoveContainerRequest { container_id }).await?;
    c.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sandbox_id }).await?;
    Ok(())
}
