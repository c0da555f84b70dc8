//! The Node authorizer and NodeRestriction with the real kubectl v1.35 against a joined
//! cluster (apiserver-lite, containerd, our kubelet as `system:node:node-a`): the kubelet runs
//! a pod with a Secret volume (so it reaches what its pod references, and only that);
//! `kubectl auth can-i --as=system:node:node-a --as-group=system:nodes` answers what the node's
//! own requests get (the Secret of its pod yes, another no, until the pod is deleted), and the
//! node's writes to another node, another node's pod status, a non-mirror pod and a mirror pod
//! naming a Secret are refused with upstream's messages.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);
const AS_NODE: [&str; 2] = ["--as=system:node:node-a", "--as-group=system:nodes"];

/// kubectl as the admin; panics with the cluster's logs when it fails.
fn admin(c: &JoinedNode, args: &[&str]) -> String {
    let r = c.api.kubectl_run(args).unwrap();
    assert!(r.ok, "{}", c.logs(&format!("kubectl {args:?}: {}", r.err)));
    r.out
}

/// kubectl impersonating the node: (succeeded, stdout, stderr).
fn as_node(c: &JoinedNode, args: &[&str]) -> (bool, String, String) {
    let mut all: Vec<&str> = AS_NODE.to_vec();
    all.extend_from_slice(args);
    let r = c.api.kubectl_run(&all).unwrap();
    (r.ok, r.out.trim().to_string(), r.err.trim().to_string())
}

/// `kubectl auth can-i <verb> <what>` as the node: `yes`, or `no` (with ` - <reason>` when
/// the authorizer gave one).
fn can_i(c: &JoinedNode, verb: &str, what: &str) -> String {
    as_node(c, &["auth", "can-i", verb, what]).1
}

/// [`can_i`]'s verdict alone.
fn verdict(c: &JoinedNode, verb: &str, what: &str) -> String {
    can_i(c, verb, what).split(' ').next().unwrap_or_default().to_string()
}

fn pod(name: &str, node: &str, secret: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "s", "secret": {"secretName": secret}}],
            "containers": [{"name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
                            "volumeMounts": [{"name": "s", "mountPath": "/etc/s"}]}],
        },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_i_as_a_node_agrees_with_what_the_node_authorizer_and_node_restriction_decide() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let c = &cluster;
    let client = c.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for s in ["used", "unused"] {
        admin(c, &["create", "secret", "generic", s, "--from-literal=k=v"]);
    }
    pods.create(&PostParams::default(), &pod("web", NODE, "used")).await.unwrap();
    // The kubelet itself reads the Secret through the graph: the pod runs with it mounted.
    eventually("web running", WAIT, POLL, || async {
        let s = pods.get("web").await.ok()?.status?.container_statuses?;
        s.iter().all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some())).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    assert_eq!(can_i(c, "get", "secret/used"), "yes");
    assert_eq!(
        can_i(c, "get", "secret/unused"),
        "no - no relationship found between node 'node-a' and this object"
    );
    assert_eq!(verdict(c, "list", "secrets"), "no");
    assert_eq!(can_i(c, "get", "pod/web"), "yes");
    assert_eq!(can_i(c, "get", "node/node-a"), "yes");
    assert_eq!(
        can_i(c, "get", "node/node-b"),
        "no - node 'node-a' cannot read 'node-b', only its own Node object"
    );
    assert_eq!(can_i(c, "create", "events"), "yes");
    assert_eq!(verdict(c, "create", "deployments.apps"), "no");
    // The requests themselves get what can-i said.
    let (ok, out, _) = as_node(c, &["get", "secret", "used", "-o", "name"]);
    assert!(ok && out == "secret/used", "{out}");
    let (ok, _, err) = as_node(c, &["get", "secret", "unused"]);
    assert!(!ok);
    assert!(
        err.contains("secrets \"unused\" is forbidden: User \"system:node:node-a\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'node-a' and this object"),
        "{err}"
    );

    // Writes the authorizer lets through, NodeRestriction narrows (can-i asks the former).
    let nodes: Api<Node> = Api::all(client.clone());
    let other: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "node-b"}})).unwrap();
    nodes.create(&PostParams::default(), &other).await.unwrap();
    assert_eq!(can_i(c, "patch", "node/node-b"), "yes");
    // kubectl patch reads the object first, which the node may not; the write itself (a PUT,
    // as `--raw` sends it) passes the authorizer and NodeRestriction refuses it.
    let labels = r#"{"metadata":{"labels":{"x":"y"}}}"#;
    let (ok, _, err) = as_node(c, &["patch", "node", "node-b", "--type=merge", "-p", labels]);
    assert!(!ok);
    assert!(err.contains("node 'node-a' cannot read 'node-b', only its own Node object"), "{err}");
    // The object as the admin reads it, PUT back by the node to `path`.
    let put = |kind: &str, name: &str, path: &str| {
        let file = c.api.dir().join(format!("{name}.json"));
        std::fs::write(&file, admin(c, &["get", kind, name, "-o", "json"])).unwrap();
        as_node(c, &["replace", "--raw", path, "-f", file.to_str().unwrap()])
    };
    let (ok, _, err) = put("node", "node-b", "/api/v1/nodes/node-b");
    assert!(!ok);
    assert!(
        err.contains("nodes \"node-b\" is forbidden: node \"node-a\" is not allowed to modify node \"node-b\""),
        "{err}"
    );
    let mut theirs = pod("theirs", "node-b", "unused");
    theirs.spec.as_mut().unwrap().volumes = None;
    theirs.spec.as_mut().unwrap().containers[0].volume_mounts = None;
    pods.create(&PostParams::default(), &theirs).await.unwrap();
    let (ok, _, err) = put("pod", "theirs", "/api/v1/namespaces/default/pods/theirs/status");
    assert!(!ok);
    assert!(
        err.contains("pods \"theirs\" is forbidden: node \"node-a\" can only update pod status for pods with spec.nodeName set to itself"),
        "{err}"
    );
    let (ok, _, err) = as_node(c, &["run", "rogue", "--image=busybox:1.35", "--restart=Never"]);
    assert!(!ok);
    assert!(
        err.contains("pods \"rogue\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"node-a\" can only create mirror pods"),
        "{err}"
    );
    let node_uid = nodes.get(NODE).await.unwrap().metadata.uid.unwrap();
    let mirror = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fake-mirror", "annotations": {"kubernetes.io/config.mirror": "h"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid, "controller": true}]},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox:1.35"}],
                 "volumes": [{"name": "s", "secret": {"secretName": "unused"}}]},
    });
    let file = c.api.dir().join("mirror.json");
    std::fs::write(&file, mirror.to_string()).unwrap();
    let (ok, _, err) = as_node(c, &["create", "-f", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("pods \"fake-mirror\" is forbidden: node \"node-a\" can not create pods that reference secrets"),
        "{err}"
    );

    // The pod goes: its Secret is no longer the node's.
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("the Secret unreachable once its pod is gone", WAIT, POLL, || async {
        (verdict(c, "get", "secret/used") == "no").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    cluster.stop().await.unwrap();
}
