use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::*;
use crate::resources::find;
use crate::serviceaccount::fake::{FakeObjects, meta};

fn node_user(name: &str) -> User {
    User {
        name: format!("system:node:{name}"),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
        ..User::default()
    }
}

/// Node `a` (UID `uid-a`) is registered; pod `d/web` is bound to `a`, `d/other` to `b`.
fn objects() -> FakeObjects {
    let objects = FakeObjects::default();
    objects.put_node(Node { metadata: meta("", "a", "uid-a"), ..Default::default() });
    for (name, node) in [("web", "a"), ("other", "b")] {
        let mut pod: Pod = serde_json::from_value(
            json!({"spec": {"nodeName": node, "containers": [{"name": "c"}]}}),
        )
        .unwrap();
        pod.metadata = meta("d", name, &format!("uid-{name}"));
        objects.put_pod(pod);
    }
    objects
}

/// A mirror pod of node `a` as our kubelet writes it, with `spec` merged in.
fn mirror(spec: Value) -> Value {
    let mut p = json!({
        "metadata": {"name": "static-a", "namespace": "d",
            "annotations": {MIRROR: "hash", "kubelet-rs.io/static-config": "[]"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "a", "uid": "uid-a", "controller": true}]},
        "spec": {"nodeName": "a", "containers": [{"name": "c", "image": "busybox"}]},
    });
    for (k, v) in spec.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    p
}

fn create(
    objects: &FakeObjects,
    user: &User,
    resource: &str,
    ns: Option<&str>,
    obj: &Value,
) -> Result<(), ApiError> {
    let group = if resource == "leases" { "coordination.k8s.io" } else { "" };
    let r = find(group, "v1", resource).unwrap();
    NodeRestriction::over(objects, user, true).admit_create(r, ns, obj)
}

fn message(r: Result<(), ApiError>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.code, 403, "{}", e.message);
    e.message
}

#[test]
fn a_node_creates_only_its_own_mirror_pods_naming_nothing() {
    let objects = objects();
    let a = node_user("a");
    let pod = |v: Value| create(&objects, &a, "pods", Some("d"), &v);
    assert!(pod(mirror(json!({}))).is_ok(), "our kubelet's mirror pod is accepted");
    let mut plain = mirror(json!({}));
    plain["metadata"]["annotations"] = json!({});
    assert_eq!(
        message(pod(plain)),
        "pods \"static-a\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"a\" can only create mirror pods"
    );
    let refused = [
        (
            json!({"nodeName": "b"}),
            "node \"a\" can only create pods with spec.nodeName set to itself",
        ),
        (
            json!({"serviceAccountName": "default"}),
            "node \"a\" can not create pods that reference a service account",
        ),
        (
            json!({"volumes": [{"name": "s", "secret": {"secretName": "tls"}}]}),
            "node \"a\" can not create pods that reference secrets",
        ),
        (
            json!({"imagePullSecrets": [{"name": "pull"}]}),
            "node \"a\" can not create pods that reference secrets",
        ),
        (
            json!({"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "conf"}}]}]}),
            "node \"a\" can not create pods that reference configmaps",
        ),
        (
            json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}),
            "node \"a\" can not create pods that reference persistentvolumeclaims",
        ),
        (
            json!({"volumes": [{"name": "b", "projected": {"sources": [{"clusterTrustBundle": {"name": "x", "path": "p"}}]}}]}),
            "node \"a\" can not create pods that reference clustertrustbundles",
        ),
        (
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]}),
            "node \"a\" can not create pods that reference resourceclaims",
        ),
    ];
    for (spec, why) in refused {
        assert_eq!(message(pod(mirror(spec))), format!("pods \"static-a\" is forbidden: {why}"));
    }
}

#[test]
fn a_mirror_pod_must_be_owned_by_the_registered_node_as_its_controller() {
    let objects = objects();
    let a = node_user("a");
    let with_owners = |owners: Value| {
        let mut p = mirror(json!({}));
        p["metadata"]["ownerReferences"] = owners;
        create(&objects, &a, "pods", Some("d"), &p)
    };
    let owner = |f: Value| {
        let mut o = json!({"apiVersion": "v1", "kind": "Node", "name": "a", "uid": "uid-a", "controller": true});
        for (k, v) in f.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    let cases = [
        (json!([]), "node \"a\" can only create pods with an owner reference set to itself"),
        (
            json!([owner(json!({})), owner(json!({"name": "b"}))]),
            "node \"a\" can only create pods with a single owner reference set to itself",
        ),
        (
            json!([owner(json!({"name": "b"}))]),
            "node \"a\" can only create pods with an owner reference set to itself",
        ),
        (
            json!([owner(json!({"kind": "Pod"}))]),
            "node \"a\" can only create pods with an owner reference set to itself",
        ),
        (
            json!([owner(json!({"apiVersion": "apps/v1"}))]),
            "node \"a\" can only create pods with an owner reference set to itself",
        ),
        (
            json!([owner(json!({"controller": false}))]),
            "node \"a\" can only create pods with a controller owner reference set to itself",
        ),
        (
            json!([owner(json!({"blockOwnerDeletion": true}))]),
            "node \"a\" must not set blockOwnerDeletion on an owner reference",
        ),
        (json!([owner(json!({"uid": "stale"}))]), "node a UID mismatch: expected stale got uid-a"),
    ];
    for (owners, why) in cases {
        assert_eq!(message(with_owners(owners)), format!("pods \"static-a\" is forbidden: {why}"));
    }
    // A node that is not registered has no UID to match: upstream's NotFound.
    let c = node_user("c");
    let mut p = mirror(json!({"nodeName": "c"}));
    p["metadata"]["ownerReferences"][0]["name"] = json!("c");
    let e = create(&objects, &c, "pods", Some("d"), &p).unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (404, "nodes \"c\" not found"));
}

#[test]
fn pods_bound_elsewhere_are_neither_deleted_nor_given_status() {
    let objects = objects();
    let a = node_user("a");
    let pods = &crate::resources::PODS;
    let nr = NodeRestriction::over(&objects, &a, true);
    assert!(nr.admit_delete(pods, Some("d"), "web").is_ok());
    assert_eq!(
        message(nr.admit_delete(pods, Some("d"), "other")),
        "pods \"other\" is forbidden: node \"a\" can only delete pods with spec.nodeName set to itself"
    );
    let e = nr.admit_delete(pods, Some("d"), "gone").unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (404, "pods \"gone\" not found"));
    let on = |node: &str, labels: Value| json!({"metadata": {"name": "p", "labels": labels}, "spec": {"nodeName": node}});
    let status =
        |old: &Value, new: &Value| nr.admit_update(pods, Some("d"), "p", Some("status"), old, new);
    assert!(status(&on("a", json!({"app": "x"})), &on("a", json!({"app": "x"}))).is_ok());
    assert_eq!(
        message(status(&on("b", json!({})), &on("b", json!({})))),
        "pods \"p\" is forbidden: node \"a\" can only update pod status for pods with spec.nodeName set to itself"
    );
    assert_eq!(
        message(status(&on("a", json!({"app": "x"})), &on("a", json!({"app": "y"})))),
        "pods \"p\" is forbidden: node \"a\" cannot update labels through pod status"
    );
    // A pod with no node at all is nobody's.
    let unbound = json!({"metadata": {"name": "p"}, "spec": {}});
    assert!(status(&unbound, &unbound).is_err());
    assert_eq!(
        message(nr.admit_update(
            pods,
            Some("d"),
            "p",
            None,
            &on("a", json!({})),
            &on("a", json!({}))
        )),
        "pods \"p\" is forbidden: unexpected operation \"UPDATE\", node \"a\" can only create and delete mirror pods"
    );
    assert_eq!(
        message(nr.admit_update(
            pods,
            Some("d"),
            "p",
            Some("binding"),
            &on("a", json!({})),
            &on("a", json!({}))
        )),
        "pods \"p\" is forbidden: unexpected pod subresource \"binding\", only 'status' and 'eviction' are allowed"
    );
}

#[test]
fn a_node_evicts_only_pods_bound_to_it() {
    let objects = objects();
    let a = node_user("a");
    let nr = NodeRestriction::over(&objects, &a, true);
    let eviction = |name: &str| json!({"metadata": {"name": name, "namespace": "d"}});
    assert!(nr.admit_eviction("d", "web", &eviction("web")).is_ok());
    assert_eq!(
        message(nr.admit_eviction("d", "other", &eviction("other"))),
        "pods \"other\" is forbidden: node a can only evict pods with spec.nodeName set to itself"
    );
    // The body's name when the path has none.
    assert!(nr.admit_eviction("d", "", &eviction("web")).is_ok());
    assert_eq!(
        message(nr.admit_eviction("d", "", &json!({"metadata": {}}))),
        "pods \"Unknown\" is forbidden: could not determine pod from request data"
    );
    let missing = nr.admit_eviction("d", "gone", &eviction("gone")).unwrap_err();
    assert_eq!((missing.code, missing.message.as_str()), (404, "pods \"gone\" not found"));
    // Anyone else passes untouched.
    let admin = User { name: "admin".into(), ..User::default() };
    let nr = NodeRestriction::over(&objects, &admin, true);
    assert!(nr.admit_eviction("d", "other", &eviction("other")).is_ok());
}

#[test]
fn a_node_writes_only_its_own_node_keeping_taints_and_restricted_labels() {
    let objects = objects();
    let a = node_user("a");
    let nodes = &crate::resources::NODES;
    let nr = NodeRestriction::over(&objects, &a, true);
    let node = |name: &str, labels: Value, taints: Value| json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}});
    let ours = json!({"kubernetes.io/hostname": "a", "kubernetes.io/os": "linux", "node.kubernetes.io/exclude-from-external-load-balancers": "", "example.com/team": "x"});
    assert!(nr.admit_create(nodes, None, &node("a", ours.clone(), json!([]))).is_ok());
    assert_eq!(
        message(nr.admit_create(nodes, None, &node("b", json!({}), json!([])))),
        "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""
    );
    assert_eq!(
        message(nr.admit_create(
            nodes,
            None,
            &node("a", json!({"node-restriction.kubernetes.io/pool": "x", "node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": "a"}), json!([]))
        )),
        "nodes \"a\" is forbidden: node \"a\" is not allowed to set the following labels: node-restriction.kubernetes.io/pool, node-role.kubernetes.io/control-plane"
    );
    let mut with_source = node("a", json!({}), json!([]));
    with_source["spec"]["configSource"] =
        json!({"configMap": {"name": "c", "namespace": "kube-system", "kubeletConfigKey": "k"}});
    assert_eq!(
        message(nr.admit_create(nodes, None, &with_source)),
        "nodes \"a\" is forbidden: node \"a\" is not allowed to create pods with a non-nil configSource"
    );
    let taint = json!([{"key": "k", "effect": "NoSchedule"}]);
    let old = node("a", ours.clone(), taint.clone());
    let update = |sub: Option<&str>, new: &Value| nr.admit_update(nodes, None, "a", sub, &old, new);
    assert!(update(Some("status"), &old).is_ok());
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("z");
    assert!(update(None, &relabelled).is_ok(), "kubelet labels are the node's");
    assert_eq!(
        message(update(None, &node("a", ours.clone(), json!([])))),
        "nodes \"a\" is forbidden: node \"a\" is not allowed to modify taints"
    );
    let mut restricted = old.clone();
    restricted["metadata"]["labels"]["sub.node-restriction.kubernetes.io/x"] = json!("y");
    assert_eq!(
        message(update(None, &restricted)),
        "nodes \"a\" is forbidden: is not allowed to modify labels: sub.node-restriction.kubernetes.io/x"
    );
    let mut sourced = old.clone();
    sourced["spec"]["configSource"] =
        json!({"configMap": {"name": "c", "namespace": "kube-system", "kubeletConfigKey": "k"}});
    assert_eq!(
        message(update(None, &sourced)),
        "nodes \"a\" is forbidden: node \"a\" is not allowed to update configSource to a new non-nil configSource"
    );
    assert_eq!(
        message(nr.admit_update(nodes, None, "b", Some("status"), &old, &old)),
        "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""
    );
}

#[test]
fn leases_and_tokens_are_the_nodes_own() {
    let objects = objects();
    let a = node_user("a");
    let lease = |ns: &str, name: &str| json!({"metadata": {"name": name, "namespace": ns}});
    assert!(
        create(&objects, &a, "leases", Some("kube-node-lease"), &lease("kube-node-lease", "a"))
            .is_ok()
    );
    assert_eq!(
        message(create(
            &objects,
            &a,
            "leases",
            Some("kube-node-lease"),
            &lease("kube-node-lease", "b")
        )),
        "leases.coordination.k8s.io \"b\" is forbidden: can only access node lease with the same name as the requesting node"
    );
    assert_eq!(
        message(create(&objects, &a, "leases", Some("default"), &lease("default", "a"))),
        "leases.coordination.k8s.io \"a\" is forbidden: can only access leases in the \"kube-node-lease\" system namespace"
    );
    let sa = &crate::resources::SERVICE_ACCOUNTS;
    let nr = NodeRestriction::over(&objects, &a, true);
    let token = |bound: Value| {
        let req: TokenRequest =
            serde_json::from_value(json!({"spec": {"audiences": [], "boundObjectRef": bound}}))
                .unwrap();
        nr.admit_token(sa, "d", "default", &req)
    };
    assert!(
        token(json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "uid-web"})).is_ok()
    );
    let refused = [
        (json!(null), "node requested token not bound to a pod"),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "name": "web", "uid": "u"}),
            "node requested token not bound to a pod",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "name": "web"}),
            "node requested token with a pod binding without a uid",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "old"}),
            "the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "uid-other"}),
            "node requested token bound to a pod scheduled on a different node",
        ),
    ];
    for (bound, why) in refused {
        assert_eq!(
            message(token(bound)),
            format!("serviceaccounts \"default\" is forbidden: {why}")
        );
    }
    let e =
        token(json!({"apiVersion": "v1", "kind": "Pod", "name": "gone", "uid": "u"})).unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (404, "pods \"gone\" not found"));
}

#[test]
fn others_pass_and_a_nameless_node_or_a_disabled_plugin_are_handled() {
    let objects = objects();
    let pods = &crate::resources::PODS;
    let plain = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    let alice = User { name: "alice".into(), ..User::default() };
    assert!(
        NodeRestriction::over(&objects, &alice, true).admit_create(pods, Some("d"), &plain).is_ok()
    );
    let nameless = node_user("");
    assert_eq!(
        message(NodeRestriction::over(&objects, &nameless, true).admit_create(
            pods,
            Some("d"),
            &plain
        )),
        "pods \"p\" is forbidden: could not determine node from user \"system:node:\""
    );
    let a = node_user("a");
    assert!(
        NodeRestriction::over(&objects, &a, false).admit_create(pods, Some("d"), &plain).is_ok()
    );
    // Upstream's name for an object that has none yet.
    let generated = json!({"metadata": {"generateName": "p-"}, "spec": {}});
    assert_eq!(
        message(NodeRestriction::over(&objects, &a, true).admit_create(
            pods,
            Some("d"),
            &generated
        )),
        "pods \"p-\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"a\" can only create mirror pods"
    );
    // A body that is no pod is a bad request, not a refusal.
    let e = NodeRestriction::over(&objects, &a, true)
        .admit_create(pods, Some("d"), &json!({"spec": {"containers": "many"}}))
        .unwrap_err();
    assert_eq!(e.code, 400, "{}", e.message);
}
