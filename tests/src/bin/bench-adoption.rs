//! `bench-adoption`: how long a starting kubelet takes to adopt 110 running static pods, from
//! its start to every pod reported Running (all containers ready) in `/pods` with no container
//! restarted. Run by `hack/bench-adoption.sh` (release builds); figures go to BENCHMARKS.md.
//!
//! - ours, on containerd: 110 static pods started by this kubelet, which is then killed
//!   (SIGKILL) and started again, `--runs` times;
//! - upstream's, on the fake runtime: 110 copies of the pod upstream's kubelet v1.35 made from
//!   `simple.yaml` (`testdata/upstream-kubelet-v1.35`, renamed per copy, upstream's UIDs kept)
//!   replayed into a fresh fake runtime each run, then a kubelet started with the 110
//!   manifests: every pod is adopted by what the runtime recorded (its UID is not ours).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use e2e::cluster::StandaloneNode;
use e2e::kubelet::{Kubelet, RuntimeSide};
use e2e::measure::summary;
use fake_cri::FakeCriServer;
use proto::cri;

const PODS: usize = 110;
const POLL: Duration = Duration::from_millis(20);
const LIMIT: Duration = Duration::from_secs(120);

fn sleeper(i: usize) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n"
    )
}

/// Waits until `/pods` shows `n` pods Running with every container ready and none restarted.
async fn all_running(kubelet: &Kubelet, n: usize) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if let Some(list) = kubelet.get("/pods").await {
            let items = list["items"].as_array().cloned().unwrap_or_default();
            let running = items
                .iter()
                .filter(|p| p["status"]["phase"] == "Running")
                .filter(|p| {
                    p["status"]["containerStatuses"].as_array().is_some_and(|cs| {
                        cs.iter().all(|c| c["ready"] == true && c["restartCount"] == 0)
                    })
                })
                .count();
            if running == n {
                return Ok(());
            }
        }
        anyhow::ensure!(start.elapsed() < LIMIT, "{n} pods not running within {LIMIT:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// The kubelet's CRI calls so far by operation (`kubelet_runtime_operations_total`), what its
/// start spends its time on.
async fn runtime_calls(kubelet: &Kubelet) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], kubelet.port()));
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else { return String::new() };
    let request = b"GET /metrics HTTP/1.0\r\nHost: kubelet\r\n\r\n";
    let mut text = String::new();
    if s.write_all(request).await.is_err() || s.read_to_string(&mut text).await.is_err() {
        return String::new();
    }
    let mut total = 0.0;
    let mut by_op = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("kubelet_runtime_operations_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else { continue };
        let n: f64 = value.parse().unwrap_or(0.0);
        total += n;
        let op = labels.split('"').nth(1).unwrap_or_default();
        by_op.push(format!("{op} {n}"));
    }
    format!("{total} ({})", by_op.join(", "))
}

async fn container_ids(cri: &proto::CriClient) -> anyhow::Result<Vec<String>> {
    let list = cri.list_containers(cri::ListContainersRequest::default()).await?;
    let mut ids: Vec<String> = list.containers.into_iter().map(|c| c.id).collect();
    ids.sort();
    Ok(ids)
}

async fn ours(runs: usize) -> anyhow::Result<()> {
    let mut node = StandaloneNode::start().await?;
    for i in 0..PODS {
        node.kubelet.write_manifest(&format!("p{i}.yaml"), &sleeper(i))?;
    }
    all_running(&node.kubelet, PODS).await?;
    let before = container_ids(&node.cri).await?;
    let mut took = Vec::new();
    for _ in 0..runs {
        node.kubelet.kill9();
        let start = Instant::now();
        node.kubelet.restart()?;
        all_running(&node.kubelet, PODS).await?;
        took.push(start.elapsed().as_secs_f64() * 1000.0);
        println!("  CRI calls by then: {}", runtime_calls(&node.kubelet).await);
        anyhow::ensure!(container_ids(&node.cri).await? == before, "a container was replaced");
    }
    summary(&format!("ours, containerd, {PODS} pods: start → all Running"), took);
    node.teardown().await;
    Ok(())
}

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/upstream-kubelet-v1.35")
}

/// 110 copies of upstream's `simple` pod under `dir`: `crictl inspect` files for the runtime
/// and the manifests.
fn upstream_copies(dir: &Path) -> anyhow::Result<(PathBuf, Vec<(String, String)>)> {
    let cri = dir.join("cri");
    std::fs::create_dir_all(&cri)?;
    let pod = std::fs::read_to_string(golden().join("cri/pod-simple-node-a.json"))?;
    let container = std::fs::read_to_string(golden().join("cri/container-simple-node-a_c.json"))?;
    let manifest = std::fs::read_to_string(golden().join("manifests/simple.yaml"))?;
    let (uid, sandbox) = ("0d763f47b8478462e226616ccca4d7ac", "d3dd4524d0007");
    let mut manifests = Vec::new();
    for i in 0..PODS {
        let copy = |text: &str| {
            text.replace("simple-node-a", &format!("simple{i}-node-a"))
                .replace(uid, &format!("{uid:.24}{i:08x}"))
                .replace(sandbox, &format!("{sandbox}{i:04x}"))
        };
        std::fs::write(cri.join(format!("pod-{i:03}.json")), copy(&pod))?;
        std::fs::write(cri.join(format!("container-{i:03}.json")), copy(&container))?;
        let name = format!("simple{i}");
        manifests.push((
            format!("{name}.yaml"),
            manifest.replace("name: simple", &format!("name: {name}")),
        ));
    }
    Ok((cri, manifests))
}

async fn upstream(runs: usize) -> anyhow::Result<()> {
    let mut took = Vec::new();
    for _ in 0..runs {
        let dir = tempfile::tempdir()?;
        let (cri_dir, manifests) = upstream_copies(dir.path())?;
        let server = FakeCriServer::start(&dir.path().join("cri.sock"))?;
        let fake = server.runtime().clone();
        fake.add_image("docker.io/library/busybox:bars")?;
        fake.import_crictl(&cri_dir, &|p| p).context("replaying upstream's pods")?;
        let side = RuntimeSide {
            dir: dir.path().to_path_buf(),
            endpoint: server.endpoint().to_string(),
            cgroup_parent: "/".into(),
        };
        // The manifests are in place before the kubelet starts, as on a node switching kubelets.
        let manifest_dir = dir.path().join("kubelet-node-a/manifests");
        std::fs::create_dir_all(&manifest_dir)?;
        for (file, text) in &manifests {
            std::fs::write(manifest_dir.join(file), text)?;
        }
        let start = Instant::now();
        let mut kubelet = Kubelet::start_standalone_on(
            &side,
            "node-a",
            "cgroupsPerQOS: false\nenforceNodeAllocatable: []\n",
            &[],
        )?;
        let result = all_running(&kubelet, PODS).await;
        let elapsed = start.elapsed().as_secs_f64() * 1000.0;
        let calls = runtime_calls(&kubelet).await;
        let sandboxes = fake.calls(fake_cri::Rpc::RunPodSandbox);
        kubelet.stop();
        server.shutdown().await?;
        result?;
        anyhow::ensure!(sandboxes == 0, "the kubelet ran {sandboxes} sandboxes: not adopted");
        took.push(elapsed);
        println!("  CRI calls by then: {calls}");
    }
    summary(&format!("upstream's, fake runtime, {PODS} pods: start → all Running"), took);
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let runs = usize::try_from(e2e::measure::flag(&args, "--runs", 10u64)).unwrap_or(10);
    upstream(runs).await?;
    ours(runs).await
}
