//! The Node authorizer and NodeRestriction over HTTP, against a real store: kubelets
//! (impersonated as `system:node:<name>` in `system:nodes`, as `kubectl --as` does) read only
//! what the pods bound to them reference, the graph following creations, deletions and
//! rebindings within a bounded poll; they write only their own Node, their pods' status and
//! mirror pods naming nothing, each refusal in upstream's words.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Client, JSON, PODS, Server, assert_status, pod};

const NODES: &str = "/api/v1/nodes";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";
const MERGE: &str = "application/merge-patch+json";

fn kubelet(s: &Server, node: &str) -> Client {
    Client::impersonating(s.addr, &format!("system:node:{node}"), &["system:nodes"])
}

/// A pod bound to `node` that mounts the Secret `secret`.
fn pod_on(name: &str, node: &str, secret: &str) -> Value {
    let mut p = pod(name);
    p["spec"]["nodeName"] = json!(node);
    p["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": secret}}]);
    p
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {"k": "dg=="}})
}

/// Polls `get` until it answers `code` (the graph follows the store's watch: milliseconds).
async fn eventually(c: &mut Client, path: &str, code: u16) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = c.send("GET", path, None, Vec::new()).await;
        if r.code == code {
            return r.body;
        }
        assert!(Instant::now() < deadline, "GET {path}: still {} {}", r.code, r.body);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn forbidden(node: &str, secret: &str) -> String {
    format!(
        "secrets \"{secret}\" is forbidden: User \"system:node:{node}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node '{node}' and this object"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_reads_only_the_secrets_of_pods_bound_to_it() {
    let s = Server::start().await;
    let mut admin = Client::new(s.addr);
    let (mut a, mut b) = (kubelet(&s, "a"), kubelet(&s, "b"));
    for name in ["used", "unused", "moving"] {
        assert_eq!(admin.json("POST", SECRETS, JSON, &secret(name)).await.code, 201);
    }
    assert_eq!(admin.json("POST", PODS, JSON, &pod_on("web", "a", "used")).await.code, 201);

    eventually(&mut a, &format!("{SECRETS}/used"), 200).await;
    let r = a.send("GET", &format!("{SECRETS}/unused"), None, Vec::new()).await;
    assert_eq!(assert_status(&r, 403, "Forbidden"), forbidden("a", "unused"));
    let r = b.send("GET", &format!("{SECRETS}/used"), None, Vec::new()).await;
    assert_eq!(assert_status(&r, 403, "Forbidden"), forbidden("b", "used"));

    // Our kubelet's object manager lists and watches each Secret by a metadata.name selector.
    let one = format!("{SECRETS}?fieldSelector=metadata.name%3Dused");
    let r = a.send("GET", &one, None, Vec::new()).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["items"][0]["metadata"]["name"], "used");
    let r = a.send("GET", &format!("{one}&watch=true&timeoutSeconds=1"), None, Vec::new()).await;
    assert_eq!(r.code, 200, "a watch of one related Secret is allowed: {}", r.body);
    let r = a.send("GET", SECRETS, None, Vec::new()).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "secrets is forbidden: User \"system:node:a\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\": No Object name found"
    );

    // A rebinding: the pod is deleted and made again on the other node.
    assert_eq!(admin.json("POST", PODS, JSON, &pod_on("mover", "b", "moving")).await.code, 201);
    eventually(&mut b, &format!("{SECRETS}/moving"), 200).await;
    eventually(&mut a, &format!("{SECRETS}/moving"), 403).await;
    let gone = admin
        .json("DELETE", &format!("{PODS}/mover"), JSON, &json!({"gracePeriodSeconds": 0}))
        .await;
    assert_eq!(gone.code, 200, "{}", gone.body);
    eventually(&mut b, &format!("{SECRETS}/moving"), 403).await;
    assert_eq!(admin.json("POST", PODS, JSON, &pod_on("mover", "a", "moving")).await.code, 201);
    eventually(&mut a, &format!("{SECRETS}/moving"), 200).await;

    // Once its pod is deleted, the Secret is no longer the node's.
    let gone =
        admin.json("DELETE", &format!("{PODS}/web"), JSON, &json!({"gracePeriodSeconds": 0})).await;
    assert_eq!(gone.code, 200, "{}", gone.body);
    let body = eventually(&mut a, &format!("{SECRETS}/used"), 403).await;
    assert_eq!(body["message"], forbidden("a", "used"));

    // kubectl auth can-i (a SubjectAccessReview) answers from the same graph.
    let can = |secret: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": "system:node:a", "groups": ["system:nodes"],
                        "resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": "default", "name": secret}}})
    };
    let sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let r = admin.json("POST", sar, JSON, &can("moving")).await;
    assert_eq!(r.body["status"]["allowed"], true, "{}", r.body);
    let r = admin.json("POST", sar, JSON, &can("used")).await;
    assert_eq!(r.body["status"]["allowed"], false, "{}", r.body);
    assert_eq!(
        r.body["status"]["reason"],
        "no relationship found between node 'a' and this object"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_writes_only_its_own_node_its_pods_status_and_clean_mirror_pods() {
    let s = Server::start().await;
    let mut admin = Client::new(s.addr);
    let (mut a, mut b) = (kubelet(&s, "a"), kubelet(&s, "b"));
    let node = |name: &str| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
    // Each node registers itself, and only itself.
    let r = a.json("POST", NODES, JSON, &node("b")).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""
    );
    let registered = a.json("POST", NODES, JSON, &node("a")).await;
    assert_eq!(registered.code, 201, "{}", registered.body);
    assert_eq!(b.json("POST", NODES, JSON, &node("b")).await.code, 201);
    let uid = registered.body["metadata"]["uid"].clone();

    let r = a
        .json("PATCH", &format!("{NODES}/b"), MERGE, &json!({"metadata": {"labels": {"x": "y"}}}))
        .await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""
    );
    let r = a.json("PATCH", &format!("{NODES}/b/status"), MERGE, &json!({"status": {}})).await;
    assert_eq!(r.code, 403, "{}", r.body);
    let taint = json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    let r = a.json("PATCH", &format!("{NODES}/a"), MERGE, &taint).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "nodes \"a\" is forbidden: node \"a\" is not allowed to modify taints"
    );
    let restricted =
        json!({"metadata": {"labels": {"node-restriction.kubernetes.io/pool": "gpu"}}});
    let r = a.json("PATCH", &format!("{NODES}/a"), MERGE, &restricted).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "nodes \"a\" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool"
    );
    let zone = json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "z1"}}});
    assert_eq!(a.json("PATCH", &format!("{NODES}/a"), MERGE, &zone).await.code, 200);
    let r = a
        .json(
            "PATCH",
            &format!("{NODES}/a/status"),
            MERGE,
            &json!({"status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!(r.code, 200, "{}", r.body);

    // Pod status: only of pods bound to the node.
    let mut theirs = pod("theirs");
    theirs["spec"]["nodeName"] = json!("b");
    assert_eq!(admin.json("POST", PODS, JSON, &theirs).await.code, 201);
    let status = json!({"status": {"phase": "Running"}});
    let r = a.json("PATCH", &format!("{PODS}/theirs/status"), MERGE, &status).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "pods \"theirs\" is forbidden: node \"a\" can only update pod status for pods with spec.nodeName set to itself"
    );
    assert_eq!(b.json("PATCH", &format!("{PODS}/theirs/status"), MERGE, &status).await.code, 200);
    let r = a.json("DELETE", &format!("{PODS}/theirs"), JSON, &json!({})).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "pods \"theirs\" is forbidden: node \"a\" can only delete pods with spec.nodeName set to itself"
    );

    // Pods: only mirror pods, owned by the node, naming no other object.
    let r = a.json("POST", PODS, JSON, &pod("rogue")).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "pods \"rogue\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"a\" can only create mirror pods"
    );
    let mut mirror = pod("static-a");
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
    mirror["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Node", "name": "a", "uid": uid, "controller": true}]);
    mirror["spec"]["nodeName"] = json!("a");
    let mut with_secret = mirror.clone();
    with_secret["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "used"}}]);
    let r = a.json("POST", PODS, JSON, &with_secret).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "pods \"static-a\" is forbidden: node \"a\" can not create pods that reference secrets"
    );
    let r = a.json("POST", PODS, JSON, &mirror).await;
    assert_eq!(r.code, 201, "{}", r.body);
    // The mirror is in the graph (the node reads it) and is the node's to delete.
    eventually(&mut a, &format!("{PODS}/static-a"), 200).await;
    let r = a
        .json("DELETE", &format!("{PODS}/static-a"), JSON, &json!({"gracePeriodSeconds": 0}))
        .await;
    assert_eq!(r.code, 200, "{}", r.body);

    // Leases: the node's own, in kube-node-lease.
    let lease = |name: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}});
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    assert_eq!(a.json("POST", leases, JSON, &lease("a")).await.code, 201);
    let r = a.json("POST", leases, JSON, &lease("b")).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "leases.coordination.k8s.io \"b\" is forbidden: can only access node lease with the same name as the requesting node"
    );
    s.stop().await;
}
