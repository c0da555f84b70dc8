//! `local-up`: the main job of `hack/local-up.sh`. Starts a private containerd with the offline
//! test images, runs one busybox pod through the CRI client and prints its output, then keeps
//! everything up until Ctrl-C (or, with `--once`, tears down at once). Later issues grow it into
//! a node and a cluster.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use e2e::containerd::Containerd;
use e2e::cri_suite::{BUSYBOX, Target, parse_log_line, sandbox_config};
use proto::cri;
use tokio::signal::unix::{SignalKind, signal};

const POD: &str = "hello";

async fn run_hello_pod(containerd: &Containerd) -> anyhow::Result<PathBuf> {
    let client = containerd.client().await?;
    let log_root = containerd.dir().join("pods");
    let target =
        Target { client: &client, cgroup_parent: containerd.cgroup_parent(), log_root: &log_root };
    let config = sandbox_config(&target, POD, "local-up-hello");
    std::fs::create_dir_all(&config.log_directory)?;
    let sandbox = client
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await?
        .pod_sandbox_id;
    let script = "echo hello from busybox in pod $(hostname); echo kernel $(uname -r); \
                  echo pod IP $(ip -4 -o addr show eth0 | awk '{print $4}'); exec sleep 2147483647";
    let container = client
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata { name: POD.into(), attempt: 0 }),
                image: Some(cri::ImageSpec { image: BUSYBOX.into(), ..Default::default() }),
                command: vec!["sh".into(), "-c".into(), script.into()],
                log_path: format!("{POD}/0.log"),
                labels: HashMap::from([(
                    "io.kubernetes.container.name".to_string(),
                    POD.to_string(),
                )]),
                ..Default::default()
            }),
            sandbox_config: Some(config.clone()),
        })
        .await?
        .container_id;
    client.start_container(cri::StartContainerRequest { container_id: container }).await?;
    Ok(PathBuf::from(config.log_directory).join(POD).join("0.log"))
}

/// Prints the pod's log lines as they arrive, until three are there or 10 s pass.
async fn print_output(log: &PathBuf) -> anyhow::Result<()> {
    let wait = e2e::eventually(
        "the pod's output",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async {
            let text = std::fs::read_to_string(log).ok()?;
            (text.lines().count() >= 3).then_some(text)
        },
    );
    for line in wait.await?.lines() {
        let (stream, _, text) = parse_log_line(line)?;
        println!("  [{stream}] {text}");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let once = std::env::args().any(|a| a == "--once");
    let containerd =
        Containerd::start(Default::default()).await.context("start a private containerd")?;
    let result = async {
        containerd.import_test_images()?;
        println!("containerd is up: {}", containerd.endpoint());
        let log = run_hello_pod(&containerd).await?;
        println!("pod {POD:?} is running; its output:");
        print_output(&log).await?;
        anyhow::Ok(log)
    }
    .await;
    match result {
        Ok(log) if !once => {
            let sock = containerd.endpoint().path().display().to_string();
            println!("\nTry:");
            println!("  ctr --address {sock} -n k8s.io containers ls");
            println!("  crictl --runtime-endpoint unix://{sock} pods   # if you have crictl");
            println!("  cat {}", log.display());
            println!("\nCtrl-C stops the pod and containerd and removes everything.");
            let mut term = signal(SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Ok(_) => {}
        Err(e) => {
            eprintln!("local-up failed: {e:#}\ncontainerd log:\n{}", containerd.log_tail(20));
            containerd.stop().await;
            std::process::exit(1);
        }
    }
    println!("stopping");
    let report = containerd.stop().await;
    anyhow::ensure!(report.is_clean(), "teardown left {report:#?}");
    println!("stopped; nothing left behind");
    Ok(())
}
