//! Static pods of a joined kubelet, seen through the API as mirror pods (real containerd,
//! apiserver-lite, the real kubectl): the mirror appears with the upstream annotation and
//! owner, carries the static pod's current status, comes back when deleted through the API
//! while the static pod keeps running, is replaced when the manifest changes, and goes when
//! the manifest is removed.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use proto::cri;

const NODE: &str = "node-a";
const MIRROR: &str = "web-node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";
const CONFIG_HASH: &str = "kubernetes.io/config.hash";
const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";

fn manifest(version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: kube-system\n  labels:\n    \
         version: \"{version}\"\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - \
         name: httpd\n    image: busybox-httpd:1.35\n"
    )
}

fn annotation(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(key).cloned()
}

/// The mirror, once it reports the static pod running and ready.
fn running_mirror(pod: Option<Pod>) -> Option<Pod> {
    let pod = pod?;
    let s = pod.status.as_ref()?;
    let ready = s.container_statuses.as_ref()?.iter().all(|c| c.ready);
    (pod.metadata.deletion_timestamp.is_none()
        && s.phase.as_deref() == Some("Running")
        && ready
        && s.pod_ip.is_some())
    .then_some(pod)
}

/// The IDs of the running containers of the static pod, from the runtime itself.
async fn running_containers(cri: &proto::CriClient) -> Vec<String> {
    let list = cri.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap();
    let mut ids: Vec<String> = list
        .containers
        .into_iter()
        .filter(|c| c.state == cri::ContainerState::ContainerRunning as i32)
        .filter(|c| c.labels.get(POD_NAME_LABEL).map(String::as_str) == Some(MIRROR))
        .map(|c| c.id)
        .collect();
    ids.sort();
    ids
}

/// A joined node running the `web` static pod, and what the tests read it through.
struct Mirrored {
    cluster: JoinedNode,
    pods: Api<Pod>,
    nodes: Api<Node>,
    cri: proto::CriClient,
    path: std::path::PathBuf,
    /// The mirror, once running.
    mirror: Pod,
}

impl Mirrored {
    async fn start() -> Self {
        let cluster = JoinedNode::start(NODE).await.unwrap();
        let client = cluster.api.admin_client().await.unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
        let nodes: Api<Node> = Api::all(client.clone());
        let cri = cluster.containerd.client().await.unwrap();
        let path = cluster.kubelet.write_manifest("web.yaml", &manifest("1")).unwrap();
        let mirror = eventually("mirror pod running", WAIT, POLL, || async {
            running_mirror(pods.get_opt(MIRROR).await.ok()?)
        })
        .await
        .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
        Self { cluster, pods, nodes, cri, path, mirror }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_pod_is_mirrored_recreated_replaced_and_removed_through_the_api() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    // The mirror appears, annotated with the static pod's hash, owned by the Node, and shows
    // the static pod's current status.
    let Mirrored { cluster, pods, nodes, cri, path, mirror } = Mirrored::start().await;
    let api = &cluster.api;
    let logs = |what: &str| cluster.logs(what);
    let hash = annotation(&mirror, CONFIG_MIRROR).unwrap();
    assert_eq!(annotation(&mirror, CONFIG_HASH).as_deref(), Some(hash.as_str()));
    assert_eq!(annotation(&mirror, CONFIG_SOURCE).as_deref(), Some("file"));
    let node = nodes.get(NODE).await.unwrap();
    let owner = &mirror.metadata.owner_references.clone().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Node", NODE));
    assert_eq!(Some(&owner.uid), node.metadata.uid.as_ref());
    assert_ne!(mirror.metadata.uid.as_deref(), Some(hash.as_str()), "the apiserver's own UID");
    assert_eq!(mirror.spec.as_ref().unwrap().node_name.as_deref(), Some(NODE));
    let containers = running_containers(&cri).await;
    assert_eq!(containers.len(), 1, "{containers:?}");
    let out = api.kubectl(&["get", "pods", "-n", "kube-system"]).unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with(MIRROR)).unwrap_or_default();
    assert!(row.contains("1/1") && row.contains("Running"), "{table}");

    // Deleted through the API (kubectl's graceful delete): the kubelet confirms, creates a
    // new mirror, and the static pod's container keeps running untouched. Not with kubectl's
    // wait: it GETs the object, then lists and watches it by name until a DELETED event, and
    // a kubelet that deletes and recreates the mirror between the two (as upstream's does,
    // in one sync) leaves it watching the new mirror forever.
    let out = api
        .kubectl(&["delete", "pod", MIRROR, "-n", "kube-system", "--wait=false"])
        .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let old_uid = mirror.metadata.uid.clone();
    let again = eventually("mirror pod recreated", WAIT, POLL, || async {
        let p = running_mirror(pods.get_opt(MIRROR).await.ok()?)?;
        (p.metadata.uid != old_uid).then_some(p)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert_eq!(annotation(&again, CONFIG_MIRROR).as_deref(), Some(hash.as_str()));
    assert_eq!(running_containers(&cri).await, containers, "the static pod was not restarted");
    let restarts = again.status.unwrap().container_statuses.unwrap()[0].restart_count;
    assert_eq!(restarts, 0);

    // A changed label replaces the mirror with one showing it; the static pod keeps its UID
    // (the mirror's `config.mirror`) and its container (upstream would replace both).
    std::fs::write(&path, manifest("2")).unwrap();
    let replaced = eventually("mirror pod replaced", WAIT, POLL, || async {
        let p = running_mirror(pods.get_opt(MIRROR).await.ok()?)?;
        (p.metadata.labels.as_ref()?.get("version")? == "2").then_some(p)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert_eq!(annotation(&replaced, CONFIG_MIRROR).as_deref(), Some(hash.as_str()));
    assert_eq!(annotation(&replaced, CONFIG_MIRROR), annotation(&replaced, CONFIG_HASH));
    assert_eq!(running_containers(&cri).await, containers, "a label restarts nothing");

    // A removed manifest: the static pod stops and its mirror goes.
    std::fs::remove_file(&path).unwrap();
    eventually("mirror pod deleted", WAIT, POLL, || async {
        pods.get_opt(MIRROR).await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    eventually("static pod stopped", WAIT, POLL, || async {
        running_containers(&cri).await.is_empty().then_some(())
    })
    .await
    .unwrap();

    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_is_registered_again_and_its_mirror_pods_follow_the_new_node() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let Mirrored { cluster, pods, nodes, cri, mirror, .. } = Mirrored::start().await;
    let api = &cluster.api;
    let logs = |what: &str| cluster.logs(what);
    let old_node = nodes.get(NODE).await.unwrap().metadata.uid.unwrap();
    let containers = running_containers(&cri).await;

    // Without kubectl's wait, which can miss a deletion the kubelet follows at once with a
    // registration (see above).
    let out = api
        .kubectl(&["delete", "node", NODE, "--wait=false"])
        .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let new_node = eventually("the node registered again", WAIT, POLL, || async {
        let uid = nodes.get_opt(NODE).await.ok()??.metadata.uid?;
        (uid != old_node).then_some(uid)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    let again = eventually("the mirror owned by the new node", WAIT, POLL, || async {
        let p = running_mirror(pods.get_opt(MIRROR).await.ok()?)?;
        let owner = p.metadata.owner_references.clone()?.into_iter().next()?;
        (owner.uid == new_node).then_some(p)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert_ne!(again.metadata.uid, mirror.metadata.uid, "a new mirror object");
    assert_eq!(running_containers(&cri).await, containers, "the static pod kept running");
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_static_pods_mirror_shows_why_it_waits() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "kube-system");
    let logs = |what: &str| cluster.logs(what);
    let late = manifest("1").replace("name: web", "name: late").replace(
        "    image: busybox-httpd:1.35\n",
        "    image: busybox-httpd:1.35\n    readinessProbe: {exec: {command: [\"false\"]}, periodSeconds: 1}\n",
    );
    cluster.kubelet.write_manifest("late.yaml", &late).unwrap();
    let after = manifest("1")
        .replace("  name: web\n", "  name: web\n  annotations: {kubelet-rs.io/after: late}\n");
    cluster.kubelet.write_manifest("web.yaml", &after).unwrap();
    let waiting = eventually("the mirror showing the wait", WAIT, POLL, || async {
        let p = pods.get_opt(MIRROR).await.ok()??;
        let s = p.status?.container_statuses?.into_iter().next()?.state?.waiting?;
        (s.reason.as_deref() == Some("WaitingForDependencies")).then_some(s)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains(&format!("kube-system/late-{NODE}")), "{message}");
    cluster.stop().await.unwrap();
}
