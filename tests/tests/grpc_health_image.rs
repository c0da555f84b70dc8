//! The grpc-health test image in real containerd: its server answers gRPC health checks on the
//! pod IP, a pod's `args` replace the flags, a file written through CRI exec flips the status,
//! and SIGTERM stops it at once (exit 0: as PID 1 it handles the signal).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use anyhow::{Context, ensure};
use e2e::containerd::Containerd;
use e2e::cri_suite::{self, Target};
use e2e::eventually::eventually;
use e2e::require;
use images::{GRPC_HEALTH_PORT, TestImage};
use proto::{CriClient, cri};
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

#[tokio::test]
async fn the_grpc_health_image_answers_on_the_pod_ip_and_flips_through_exec() -> anyhow::Result<()>
{
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return Ok(());
    }
    let containerd = Containerd::start(Default::default()).await?;
    containerd.import_test_images()?;
    let client = containerd.client().await?;
    let log_root = containerd.dir().join("pods");
    let target =
        Target { client: &client, cgroup_parent: containerd.cgroup_parent(), log_root: &log_root };
    let result = scenario(&target).await;
    let tail = containerd.log_tail(40);
    let leaks = containerd.stop().await;
    result.with_context(|| format!("containerd log:\n{tail}"))?;
    assert!(leaks.is_clean(), "teardown leaked: {leaks:#?}");
    Ok(())
}

async fn exec(client: &CriClient, container_id: &str, script: &str) -> anyhow::Result<()> {
    let out = client
        .exec_sync(cri::ExecSyncRequest {
            container_id: container_id.into(),
            cmd: vec!["sh".into(), "-c".into(), script.into()],
            timeout: 10,
        })
        .await?;
    ensure!(
        out.exit_code == 0,
        "{script}: exit {} {}",
        out.exit_code,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

async fn check(health: &mut HealthClient<Channel>, service: &str) -> anyhow::Result<ServingStatus> {
    let request = HealthCheckRequest { service: service.into() };
    Ok(health.check(request).await?.into_inner().status())
}

async fn scenario(t: &Target<'_>) -> anyhow::Result<()> {
    let c = t.client;
    let config = cri_suite::sandbox_config(t, "grpc", "uid-grpc");
    std::fs::create_dir_all(&config.log_directory)?;
    let sandbox_id = c
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await?
        .pod_sandbox_id;
    let ip = c
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.clone(),
            verbose: false,
        })
        .await?
        .status
        .and_then(|s| s.network)
        .map(|n| n.ip)
        .context("sandbox has no pod IP")?;
    let container_id = c
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata { name: "server".into(), attempt: 0 }),
                image: Some(cri::ImageSpec {
                    image: TestImage::GrpcHealth.reference().into(),
                    ..Default::default()
                }),
                // A pod's `args`: the image's entrypoint runs with them instead of its cmd.
                args: vec!["--service".into(), "app=NOT_SERVING".into()],
                log_path: "server/0.log".into(),
                ..Default::default()
            }),
            sandbox_config: Some(config),
        })
        .await?
        .container_id;
    c.start_container(cri::StartContainerRequest { container_id: container_id.clone() }).await?;

    let endpoint = Endpoint::from_shared(format!("http://{ip}:{GRPC_HEALTH_PORT}"))?
        .connect_timeout(Duration::from_secs(2));
    let mut health = eventually("the server to listen on the pod IP", WAIT, POLL, || async {
        endpoint.connect().await.ok().map(HealthClient::new)
    })
    .await?;
    ensure!(check(&mut health, "").await? == ServingStatus::Serving);
    ensure!(check(&mut health, "app").await? == ServingStatus::NotServing);

    exec(
        c,
        &container_id,
        "echo NOT_SERVING > /tmp/health/.new && mv /tmp/health/.new /tmp/health/default",
    )
    .await?;
    ensure!(check(&mut health, "").await? == ServingStatus::NotServing);
    exec(c, &container_id, "rm /tmp/health/default").await?;
    ensure!(check(&mut health, "").await? == ServingStatus::Serving);

    c.stop_container(&container_id, Duration::from_secs(30)).await?;
    let status = c
        .container_status(cri::ContainerStatusRequest {
            container_id: container_id.clone(),
            verbose: false,
        })
        .await?
        .status
        .context("container status")?;
    ensure!(status.exit_code == 0, "SIGTERM must end the server cleanly: {status:?}");
    c.remove_container(cri::RemoveContainerRequest { container_id }).await?;
    c.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sandbox_id.clone() }).await?;
    c.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sandbox_id }).await?;
    Ok(())
}
