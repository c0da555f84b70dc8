//! `local-up`: the main job of `hack/local-up.sh`. Starts a private containerd with the offline
//! test images and our kubelet on a copy of `examples/manifests` (the seed's `nginx-pod`), waits
//! for the pod to serve, prints how to look at everything, and keeps it all up until Ctrl-C
//! (with `--once`, tears down right away). Later issues add the control plane.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use e2e::containerd::Containerd;
use e2e::kubelet::Kubelet;
use e2e::registry::http_get;
use tokio::signal::unix::{SignalKind, signal};

/// The read-only port local-up asks for (upstream's conventional 10255), if free.
const READ_ONLY_PORT: u16 = 10255;
const NODE: &str = "local-node";

fn examples_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/manifests")
}

async fn bring_up(containerd: &Containerd) -> anyhow::Result<Kubelet> {
    containerd.import_test_images()?;
    let port =
        std::net::TcpListener::bind(("127.0.0.1", READ_ONLY_PORT)).ok().map(|_| READ_ONLY_PORT);
    let kubelet = Kubelet::start_with(containerd, NODE, port)?;
    for entry in std::fs::read_dir(examples_dir()).context("examples/manifests")? {
        let entry = entry?;
        std::fs::copy(entry.path(), kubelet.manifests().join(entry.file_name()))?;
    }
    Ok(kubelet)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let once = std::env::args().any(|a| a == "--once");
    let containerd =
        Containerd::start(Default::default()).await.context("start a private containerd")?;
    let kubelet = match bring_up(&containerd).await {
        Ok(k) => k,
        Err(e) => {
            eprintln!("local-up failed: {e:#}\ncontainerd log:\n{}", containerd.log_tail(20));
            containerd.stop().await;
            std::process::exit(1);
        }
    };
    let name = format!("nginx-pod-{NODE}");
    println!("containerd: {}", containerd.endpoint());
    println!("kubelet:    node {NODE}, read-only API on 127.0.0.1:{}", kubelet.port());
    let pod = e2e::eventually(
        "nginx-pod running",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || kubelet.running(&name),
    )
    .await;
    let pod = match pod {
        Ok(p) => p,
        Err(e) => {
            eprintln!("local-up failed: {e}\nkubelet log:\n{}", kubelet.log_tail(30));
            drop(kubelet);
            containerd.stop().await;
            std::process::exit(1);
        }
    };
    let ip = pod["status"]["podIP"].as_str().unwrap_or_default().to_string();
    let page = match ip.parse() {
        Ok(ip) => http_get(std::net::SocketAddr::new(ip, 80), "/", Duration::from_secs(2))
            .map(|(_, b)| b)
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    println!("pod {name} is Running on {ip}; it serves: {}", page.trim());
    let sock = containerd.endpoint().path().display().to_string();
    println!("\nTry:");
    println!(
        "  curl -s http://127.0.0.1:{}/pods             # the kubelet's PodList",
        kubelet.port()
    );
    println!(
        "  curl -s http://127.0.0.1:{}/manifests        # what each manifest file became",
        kubelet.port()
    );
    println!("  curl http://{ip}/");
    println!("  crictl --runtime-endpoint unix://{sock} pods   # where crictl is installed");
    println!("  ctr --address {sock} -n k8s.io containers ls");
    println!("  drop manifests into {}", kubelet.manifests().display());
    let code = if once {
        0
    } else {
        println!("\nCtrl-C stops the kubelet, the pods and containerd, and removes everything.");
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        0
    };
    println!("stopping");
    drop(kubelet);
    let report = containerd.stop().await;
    anyhow::ensure!(report.is_clean(), "teardown left {report:#?}");
    println!("stopped; nothing left behind");
    std::process::exit(code);
}
