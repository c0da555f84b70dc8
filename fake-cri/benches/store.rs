//! How the fake runtime's calls scale with the pods it holds, over its real socket and the real
//! client: `cargo bench -p fake-cri --bench store [-- SIZES...]` (default 100 1000 5000).
//! For each size it creates that many pods (a sandbox labelled with the pod UID, one running
//! container) and times what a kubelet asks: the whole lists (its relist), a list by pod UID per
//! pod (its status of each pod), sandbox statuses, and `ExecSync` (exec probes). A call whose
//! time grows with the size is a scan of every record. Results go to BENCHMARKS.md.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fake_cri::{FakeCriServer, FakeRuntime};
use proto::cri;
use proto::{ClientOptions, CriClient};

const IMAGE: &str = "busybox:1.35";
const UID_LABEL: &str = "io.kubernetes.pod.uid";

fn by_uid(uid: &str) -> HashMap<String, String> {
    HashMap::from([(UID_LABEL.to_string(), uid.to_string())])
}

async fn add_pod(client: &CriClient, dir: &std::path::Path, i: usize) -> (String, String) {
    let uid = format!("uid-{i:06}");
    let config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: format!("pod-{i}"),
            uid: uid.clone(),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: dir.join(&uid).display().to_string(),
        labels: by_uid(&uid),
        ..Default::default()
    };
    let sandbox = client
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .unwrap()
        .pod_sandbox_id;
    let container = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 0 }),
        image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        labels: by_uid(&uid),
        ..Default::default()
    };
    let id = client
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox.clone(),
            config: Some(container),
            sandbox_config: Some(config),
        })
        .await
        .unwrap()
        .container_id;
    client.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.unwrap();
    (sandbox, id)
}

/// Mean time per call of `n` calls, in microseconds.
fn per_call(took: Duration, n: usize) -> f64 {
    took.as_secs_f64() * 1e6 / n as f64
}

async fn size(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = FakeRuntime::new();
    runtime.add_image(IMAGE).unwrap();
    let server = FakeCriServer::start_with(runtime, &dir.path().join("cri.sock")).unwrap();
    let client = CriClient::connect(server.endpoint(), ClientOptions::default()).await.unwrap();

    let start = Instant::now();
    let mut pods = Vec::with_capacity(n);
    for i in 0..n {
        pods.push(add_pod(&client, dir.path(), i).await);
    }
    let create = per_call(start.elapsed(), n);

    let rounds = 10;
    let start = Instant::now();
    for _ in 0..rounds {
        let all = client.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await;
        assert_eq!(all.unwrap().items.len(), n);
        let all = client.list_containers(cri::ListContainersRequest { filter: None }).await;
        assert_eq!(all.unwrap().containers.len(), n);
    }
    let relist = per_call(start.elapsed(), rounds);

    let start = Instant::now();
    for i in 0..n {
        let uid = format!("uid-{i:06}");
        let filter = cri::ContainerFilter { label_selector: by_uid(&uid), ..Default::default() };
        let got = client.list_containers(cri::ListContainersRequest { filter: Some(filter) });
        assert_eq!(got.await.unwrap().containers.len(), 1);
        let filter = cri::PodSandboxFilter { label_selector: by_uid(&uid), ..Default::default() };
        let got = client.list_pod_sandbox(cri::ListPodSandboxRequest { filter: Some(filter) });
        assert_eq!(got.await.unwrap().items.len(), 1);
    }
    let by_pod = per_call(start.elapsed(), n);

    let start = Instant::now();
    for (sandbox, _) in &pods {
        let req = cri::PodSandboxStatusRequest { pod_sandbox_id: sandbox.clone(), verbose: false };
        client.pod_sandbox_status(req).await.unwrap();
    }
    let status = per_call(start.elapsed(), n);

    let execs = 1000;
    let start = Instant::now();
    for k in 0..execs {
        let (_, id) = &pods[k % n];
        let req =
            cri::ExecSyncRequest { container_id: id.clone(), cmd: vec!["true".into()], timeout: 1 };
        assert_eq!(client.exec_sync(req).await.unwrap().exit_code, 0);
    }
    let exec = per_call(start.elapsed(), execs);

    println!(
        "{n:>6} pods | create+start {create:>7.0} µs/pod | relist (both lists) {relist:>9.0} µs | \
         lists by pod UID {by_pod:>7.0} µs/pod | PodSandboxStatus {status:>5.0} µs | ExecSync {exec:>5.0} µs"
    );
    drop(client);
    server.shutdown().await.unwrap();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![100, 1000, 5000];
    }
    println!("fake-cri {} over its socket, one client", env!("CARGO_PKG_VERSION"));
    for n in sizes {
        size(n).await;
    }
}
