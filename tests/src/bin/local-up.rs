//! `local-up`: the main job of `hack/local-up.sh`. A one-node cluster on this machine: a private
//! containerd with the offline test images, apiserver-lite (SQLite, TLS, a fresh PKI), the
//! scheduler, the controller-manager, and our kubelet joined to it with a copy of
//! `examples/manifests` as its static pods. Then the seed's flow: `kubectl create -f
//! examples/manifests/nginx-pod.yaml` → scheduled → `nginx-pod 1/1 Running`, serving HTTP; and
//! a Deployment: `kubectl create deployment web --image=busybox-httpd:1.35 --replicas=2` →
//! `web 2/2`. Prints how to look at everything and keeps it up until Ctrl-C (with `--once`,
//! tears down right away).
//!
//! With `--etcd`: a private etcd (Debian's) instead of SQLite, and two apiservers on it sharing
//! one PKI: kubectl, the scheduler and the controller-manager talk to the first, the kubelet to
//! the second, so every step of the flow crosses from one apiserver to the other.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use e2e::apiserver::ApiServer;
use e2e::containerd::Containerd;
use e2e::controllers::ControllerManager;
use e2e::etcd::EtcdCluster;
use e2e::kubelet::Kubelet;
use e2e::registry::http_get;
use e2e::scheduler::Scheduler;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kube::Api;
use tokio::signal::unix::{SignalKind, signal};

const NODE: &str = "local-node";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/manifests")
}

/// Everything local-up started; dropped in reverse order of start.
struct Cluster {
    kubelet: Kubelet,
    controllers: ControllerManager,
    scheduler: Scheduler,
    /// With `--etcd`: the second apiserver (the kubelet's).
    peer: Option<ApiServer>,
    api: ApiServer,
    etcd: Option<EtcdCluster>,
}

async fn bring_up(containerd: &Containerd, with_etcd: bool) -> anyhow::Result<Cluster> {
    containerd.import_test_images()?;
    let etcd = with_etcd.then(|| EtcdCluster::start(1)).transpose().context("start etcd")?;
    let servers = etcd.as_ref().map(EtcdCluster::servers_flag);
    let mut flags = vec![e2e::apiserver::SERVICE_ACCOUNTS];
    flags.extend(servers.as_deref());
    let api = ApiServer::start_for_nodes_with(&[NODE], &flags).context("start apiserver-lite")?;
    let peer = match etcd {
        Some(_) => Some(api.start_peer(&[]).context("start the second apiserver-lite")?),
        None => None,
    };
    let scheduler = Scheduler::start(&api, &[]).context("start the scheduler")?;
    let controllers =
        ControllerManager::start(&api, &[]).context("start the controller-manager")?;
    let kubelet_api = peer.as_ref().unwrap_or(&api);
    let kubelet = Kubelet::start_joined(containerd, NODE, &kubelet_api.node_kubeconfig(NODE)?)?;
    for entry in std::fs::read_dir(examples_dir()).context("examples/manifests")? {
        let entry = entry?;
        std::fs::copy(entry.path(), kubelet.manifests().join(entry.file_name()))?;
    }
    Ok(Cluster { kubelet, controllers, scheduler, peer, api, etcd })
}

/// The pod once it is Running with every container ready and an IP.
fn running(pod: Pod) -> Option<(Pod, String)> {
    let s = pod.status.as_ref()?;
    let ready = s.container_statuses.as_ref()?.iter().all(|c| c.ready);
    let ip = s.pod_ip.clone()?;
    (s.phase.as_deref() == Some("Running") && ready).then_some((pod, ip))
}

/// The seed's flow through the API, and what the user sees of it.
async fn seed_flow(c: &Cluster) -> anyhow::Result<()> {
    let client = c.api.admin_client().await?;
    // The ServiceAccount admission plugin refuses pods until the controller-manager has made
    // the namespace's `default` account (and the token volume needs `kube-root-ca.crt`), as
    // on a freshly started upstream cluster.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    e2e::eventually("the default ServiceAccount and kube-root-ca.crt", WAIT, POLL, || async {
        accounts.get("default").await.ok()?;
        config_maps.get("kube-root-ca.crt").await.ok()
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let manifest = examples_dir().join("nginx-pod.yaml");
    let out = c.api.kubectl(&["create", "-f", &manifest.display().to_string()])?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    print!(
        "$ kubectl create -f examples/manifests/nginx-pod.yaml\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (pod, ip) = e2e::eventually("nginx-pod Running 1/1", WAIT, POLL, || async {
        running(pods.get("nginx-pod").await.ok()?)
    })
    .await?;
    let mirror = format!("nginx-pod-{NODE}");
    e2e::eventually("the static pod's mirror Running", WAIT, POLL, || async {
        running(pods.get(&mirror).await.ok()?)
    })
    .await?;
    // The ServiceAccount admission plugin gave the pod its token volume, which the kubelet
    // filled with a token it requested for the pod, the cluster CA and the namespace.
    let args = ["exec", "nginx-pod", "--", "ls", "/var/run/secrets/kubernetes.io/serviceaccount"];
    let out = c.api.kubectl(&args)?;
    let listing = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        ["ca.crt", "namespace", "token"].iter().all(|f| listing.lines().any(|l| l == *f)),
        "the service account volume of nginx-pod holds {listing:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    print!("$ kubectl {}\n{listing}", args.join(" "));
    let out = c.api.kubectl(&["get", "pods", "-o", "wide"])?;
    print!("$ kubectl get pods -o wide\n{}", String::from_utf8_lossy(&out.stdout));
    let page = match ip.parse() {
        Ok(ip) => http_get(std::net::SocketAddr::new(ip, 80), "/", Duration::from_secs(2))
            .map(|(_, b)| b)
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
    println!(
        "pod nginx-pod was scheduled to {node}, is Running on {ip}; it serves: {}",
        page.trim()
    );
    deployment_flow(c).await
}

/// A Deployment through the controller-manager: `web 2/2`.
async fn deployment_flow(c: &Cluster) -> anyhow::Result<()> {
    let client = c.api.admin_client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let args = ["create", "deployment", "web", "--image=busybox-httpd:1.35", "--replicas=2"];
    let out = c.api.kubectl(&args)?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl create deployment: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    print!("\n$ kubectl {}\n{}", args.join(" "), String::from_utf8_lossy(&out.stdout));
    e2e::eventually("deployment web 2/2", WAIT, POLL, || async {
        let s = deployments.get("web").await.ok()?.status?;
        (s.ready_replicas == Some(2) && s.available_replicas == Some(2)).then_some(())
    })
    .await?;
    let out = c.api.kubectl(&["get", "deployments,replicasets,pods", "-l", "app=web"])?;
    print!(
        "$ kubectl get deployments,replicasets,pods -l app=web\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(())
}

fn print_help(containerd: &Containerd, c: &Cluster) {
    let kubectl = e2e::apiserver::kubectl_binary()
        .map_or_else(|_| "kubectl".to_string(), |p| p.display().to_string());
    let sock = containerd.endpoint().path().display().to_string();
    match (&c.etcd, &c.peer) {
        (Some(etcd), Some(peer)) => {
            println!(
                "\napiserver-lite: https://127.0.0.1:{} and https://127.0.0.1:{} (the kubelet's), both on etcd {}",
                c.api.port(),
                peer.port(),
                etcd.endpoints().join(",")
            );
            println!(
                "                 the same objects through either: kubectl -s https://127.0.0.1:{} get pods",
                peer.port()
            );
        }
        _ => println!(
            "\napiserver-lite: https://127.0.0.1:{} (SQLite under {})",
            c.api.port(),
            c.api.dir().display()
        ),
    }
    println!("kubelet:        node {NODE}, static pods from {}", c.kubelet.manifests().display());
    println!("containerd:     {}", containerd.endpoint());
    println!("\nTry:");
    println!("  export KUBECONFIG={}", c.api.kubeconfig().display());
    println!("  {kubectl} get nodes,pods -A -o wide");
    println!("  {kubectl} scale deployment web --replicas=3");
    println!(
        "  {kubectl} set env deployment/web VERSION=2 && {kubectl} rollout status deployment/web"
    );
    println!("  {kubectl} rollout undo deployment/web");
    println!(
        "  {kubectl} delete pod nginx-pod-{NODE}    # a mirror pod: the kubelet brings it back"
    );
    println!("  {kubectl} get events");
    println!("  ctr --address {sock} -n k8s.io containers ls");
    println!("  drop manifests into {}", c.kubelet.manifests().display());
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let once = std::env::args().any(|a| a == "--once");
    let with_etcd = std::env::args().any(|a| a == "--etcd");
    let containerd =
        Containerd::start(Default::default()).await.context("start a private containerd")?;
    let cluster = match bring_up(&containerd, with_etcd).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("local-up failed: {e:#}\ncontainerd log:\n{}", containerd.log_tail(20));
            containerd.stop().await;
            std::process::exit(1);
        }
    };
    if let Err(e) = seed_flow(&cluster).await {
        eprintln!(
            "local-up failed: {e:#}\nkubelet log:\n{}\nscheduler log:\n{}\ncontroller-manager log:\n{}\napiserver log:\n{}",
            cluster.kubelet.log_tail(30),
            cluster.scheduler.log_tail(10),
            cluster.controllers.log_tail(20),
            cluster.api.log_tail(10)
        );
        drop(cluster);
        containerd.stop().await;
        std::process::exit(1);
    }
    print_help(&containerd, &cluster);
    if !once {
        println!(
            "\nCtrl-C stops the kubelet, the pods, the controller-manager, the scheduler, the apiserver and containerd, and removes everything."
        );
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    println!("stopping");
    let Cluster { kubelet, controllers, scheduler, peer, api, etcd } = cluster;
    drop(kubelet);
    drop(controllers);
    drop(scheduler);
    drop(peer);
    drop(api);
    drop(etcd);
    let report = containerd.stop().await;
    anyhow::ensure!(report.is_clean(), "teardown left {report:#?}");
    println!("stopped; nothing left behind");
    Ok(())
}
