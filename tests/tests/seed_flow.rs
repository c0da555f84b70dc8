//! The seed's flow, end to end on real containerd, using only the API (kube-rs and the real
//! kubectl): `kubectl create -f examples/manifests/nginx-pod.yaml` → the scheduler binds it → the
//! kubelet runs it → `nginx-pod 1/1 Running`, serving HTTP on its pod IP; `kubectl logs` shows
//! what it wrote, `kubectl exec` runs a command in it, and `kubectl delete` removes the
//! container and the object.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::registry::http_get;
use e2e::scheduler::Scheduler;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use proto::cri;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn condition_time(pod: &Pod, type_: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == type_ && c.status == "True")?;
    c.last_transition_time.as_ref().map(|t| t.0)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_pod_is_created_scheduled_run_logged_execed_and_deleted_through_the_api() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let api = &cluster.api;
    let scheduler = Scheduler::start(api, &[]).unwrap();
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await.unwrap(), "default");
    let logs =
        |what: &str| format!("{}\nscheduler:\n{}", cluster.logs(what), scheduler.log_tail(10));
    let nodes =
        kube::Api::<k8s_openapi::api::core::v1::Node>::all(api.admin_client().await.unwrap());
    eventually("node registered", WAIT, POLL, || async { nodes.get_opt(NODE).await.ok()? })
        .await
        .unwrap();

    // The seed's command, with the seed's manifest (no nodeName: the scheduler picks the node).
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/manifests/nginx-pod.yaml");
    let out = api.kubectl(&["create", "-f", &manifest.display().to_string()]).unwrap();
    assert_eq!(text(&out.stdout).trim(), "pod/nginx-pod created", "{}", text(&out.stderr));
    let pod = eventually("nginx-pod Running 1/1", WAIT, POLL, || async {
        let p = pods.get("nginx-pod").await.ok()?;
        let s = p.status.as_ref()?;
        let ready = s.container_statuses.as_ref()?.iter().all(|c| c.ready);
        (s.phase.as_deref() == Some("Running") && ready && s.pod_ip.is_some()).then_some(p)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert_eq!(
        pod.spec.as_ref().unwrap().node_name.as_deref(),
        Some(NODE),
        "bound by the scheduler"
    );
    // Within 5 s, by the cluster's own record: creation to the Ready condition's transition
    // (both whole seconds, so this allows at most 5 s plus the rounding of the two).
    let created = pod.metadata.creation_timestamp.as_ref().unwrap().0;
    let ready_at = condition_time(&pod, "Ready").unwrap();
    let took = ready_at.duration_since(created).as_secs();
    assert!(took <= 5, "created {created}, Ready {ready_at}: {took} s");
    assert!(condition_time(&pod, "PodScheduled").is_some(), "{:?}", pod.status);

    let out = api.kubectl(&["get", "pods"]).unwrap();
    let table = text(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("nginx-pod ")).unwrap_or_default();
    assert!(row.contains("1/1") && row.contains("Running"), "{table}");

    // It serves HTTP on its pod IP, and its log (httpd -v writes each request to stderr) says so.
    let ip: std::net::IpAddr =
        pod.status.as_ref().unwrap().pod_ip.as_ref().unwrap().parse().unwrap();
    let (code, body) = eventually("HTTP on the pod IP", WAIT, POLL, || async {
        http_get(SocketAddr::new(ip, 80), "/", Duration::from_secs(2)).ok()
    })
    .await
    .unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("It works"), "{body}");
    let log = eventually("kubectl logs shows the request", WAIT, POLL, || async {
        let out = api.kubectl(&["logs", "nginx-pod"]).ok()?;
        let log = text(&out.stdout);
        (out.status.success() && log.contains("response:200")).then_some(log)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert!(!log.trim().is_empty());

    // kubectl exec runs a command in the container (it sees the page httpd serves).
    let out = api.kubectl(&["exec", "nginx-pod", "--", "cat", "/var/www/index.html"]).unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("It works"), "{}", text(&out.stdout));

    // kubectl delete: the kubelet stops the container, confirms, and the object goes. (httpd
    // as PID 1 ignores SIGTERM, so a short grace period keeps the test short.)
    let out = api.kubectl(&["delete", "pod", "nginx-pod", "--grace-period=3"]).unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(pods.get_opt("nginx-pod").await.unwrap().is_none(), "kubectl delete waits for it");
    let cri = cluster.containerd.client().await.unwrap();
    let running = cri
        .list_containers(cri::ListContainersRequest { filter: None })
        .await
        .unwrap()
        .containers
        .into_iter()
        .filter(|c| c.state == cri::ContainerState::ContainerRunning as i32)
        .count();
    assert_eq!(running, 0, "the container was stopped before the deletion was confirmed");

    drop(scheduler);
    cluster.stop().await.unwrap();
}
