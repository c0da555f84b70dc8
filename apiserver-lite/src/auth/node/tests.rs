use serde_json::json;

use super::*;
use crate::auth::User;

fn node_user(name: &str) -> User {
    User {
        name: format!("system:node:{name}"),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
        ..User::default()
    }
}

/// Pod `d/web` on node `a` uses Secret `tls`, ConfigMap `conf`, account `runner`, claim `data`.
fn authorizer() -> NodeAuthorizer {
    let graph = Arc::new(Graph::default());
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "d"},
        "spec": {"nodeName": "a", "serviceAccountName": "runner",
                 "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "conf"}}]}],
                 "volumes": [{"name": "s", "secret": {"secretName": "tls"}},
                             {"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]},
    }))
    .unwrap();
    graph.set_pod("d", "web", graph::pod_edges(&pod));
    NodeAuthorizer::new(graph)
}

struct Ask<'a> {
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    ns: &'a str,
    name: &'a str,
    selector: &'a str,
}

fn ask<'a>(verb: &'a str, resource: &'a str, ns: &'a str, name: &'a str) -> Ask<'a> {
    Ask { verb, group: "", resource, sub: "", ns, name, selector: "" }
}

fn decide(n: &NodeAuthorizer, user: &User, q: &Ask<'_>) -> Decision {
    let r = ResourceAttributes {
        group: q.group,
        resource: q.resource,
        subresource: q.sub,
        namespace: q.ns,
        name: q.name,
        field_selector: q.selector,
    };
    n.decide(&Attributes { user, verb: q.verb, target: Target::Resource(r) })
}

const UNRELATED: &str = "no relationship found between node 'a' and this object";

#[test]
fn a_node_reads_what_its_pods_reference_and_nothing_else() {
    let n = authorizer();
    let a = node_user("a");
    let table: Vec<(Ask<'_>, Decision)> = vec![
        (ask("get", "secrets", "d", "tls"), allow()),
        (ask("list", "secrets", "d", "tls"), allow()),
        (ask("watch", "configmaps", "d", "conf"), allow()),
        (ask("get", "serviceaccounts", "d", "runner"), allow()),
        (ask("get", "persistentvolumeclaims", "d", "data"), allow()),
        (ask("get", "secrets", "d", "other"), no(UNRELATED)),
        (ask("get", "secrets", "e", "tls"), no(UNRELATED)),
        (ask("get", "configmaps", "d", "tls"), no(UNRELATED)),
        (ask("list", "secrets", "d", ""), no("No Object name found")),
        (ask("update", "secrets", "d", "tls"), no("can only read resources of this type")),
        (ask("get", "secrets", "", "tls"), no("can only read namespaced object of this type")),
        (
            Ask { sub: "status", ..ask("get", "configmaps", "d", "conf") },
            no("cannot read subresource"),
        ),
        (
            ask("list", "persistentvolumeclaims", "d", "data"),
            no("can only get individual resources of this type"),
        ),
        (ask("get", "persistentvolumes", "", "pv-1"), no(UNRELATED)),
        (
            ask("update", "serviceaccounts", "d", "runner"),
            no("can only get individual service accounts or create service account tokens"),
        ),
        (Ask { sub: "token", ..ask("create", "serviceaccounts", "d", "runner") }, allow()),
        (Ask { sub: "token", ..ask("create", "serviceaccounts", "d", "default") }, no(UNRELATED)),
        (
            Ask { sub: "token", ..ask("create", "serviceaccounts", "d", "") },
            no("can only create tokens for individual service accounts"),
        ),
        (
            Ask { group: "storage.k8s.io", ..ask("get", "volumeattachments", "", "va") },
            no(UNRELATED),
        ),
        (
            Ask { group: "resource.k8s.io", ..ask("get", "resourceclaims", "d", "gpu") },
            no(UNRELATED),
        ),
    ];
    for (q, want) in table {
        assert_eq!(
            decide(&n, &a, &q),
            want,
            "{} {}/{} {}/{}",
            q.verb,
            q.resource,
            q.sub,
            q.ns,
            q.name
        );
    }
    // Another node reaches none of it.
    let b = node_user("b");
    let d = decide(&n, &b, &ask("get", "secrets", "d", "tls"));
    assert_eq!(d, no("no relationship found between node 'b' and this object"));
}

#[test]
fn a_node_reaches_its_pods_node_and_lease_by_name() {
    let n = authorizer();
    let a = node_user("a");
    let lease =
        |verb, ns, name| Ask { group: "coordination.k8s.io", ..ask(verb, "leases", ns, name) };
    let table: Vec<(Ask<'_>, Decision)> = vec![
        (ask("get", "pods", "d", "web"), allow()),
        (ask("get", "pods", "d", "other"), no(UNRELATED)),
        (Ask { selector: "spec.nodeName=a", ..ask("watch", "pods", "", "") }, allow()),
        (
            Ask { selector: "spec.nodeName=b", ..ask("list", "pods", "", "") },
            no("can only list/watch pods with spec.nodeName field selector"),
        ),
        (
            ask("list", "pods", "d", ""),
            no("can only list/watch pods with spec.nodeName field selector"),
        ),
        (ask("watch", "pods", "d", "web"), allow()),
        (ask("create", "pods", "d", ""), allow()),
        (ask("delete", "pods", "d", "anything"), allow()),
        (ask("update", "pods", "d", "web"), no("")),
        (Ask { sub: "status", ..ask("patch", "pods", "d", "any") }, allow()),
        (Ask { sub: "eviction", ..ask("create", "pods", "d", "any") }, allow()),
        (Ask { sub: "exec", ..ask("create", "pods", "d", "web") }, no("")),
        (ask("get", "nodes", "", "a"), allow()),
        (ask("watch", "nodes", "", "a"), allow()),
        (ask("get", "nodes", "", "b"), no("node 'a' cannot read 'b', only its own Node object")),
        (
            ask("list", "nodes", "", ""),
            no("node 'a' cannot read all nodes, only its own Node object"),
        ),
        (ask("create", "nodes", "", ""), allow()),
        (ask("patch", "nodes", "", "b"), allow()),
        (Ask { sub: "status", ..ask("update", "nodes", "", "a") }, allow()),
        (ask("delete", "nodes", "", "a"), no("")),
        (lease("update", "kube-node-lease", "a"), allow()),
        (lease("create", "kube-node-lease", ""), allow()),
        (
            lease("get", "kube-node-lease", "b"),
            no("can only access node lease with the same name as the requesting node"),
        ),
        (
            lease("get", "kube-system", "a"),
            no("can only access leases in the \"kube-node-lease\" system namespace"),
        ),
        (
            lease("list", "kube-node-lease", ""),
            no("can only get, create, update, patch, or delete a node lease"),
        ),
    ];
    for (q, want) in table {
        assert_eq!(
            decide(&n, &a, &q),
            want,
            "{} {}/{} {}/{}",
            q.verb,
            q.resource,
            q.sub,
            q.ns,
            q.name
        );
    }
}

#[test]
fn everything_else_is_upstreams_system_node_role() {
    let n = authorizer();
    let a = node_user("a");
    let allowed = |verb, group, resource| {
        decide(&n, &a, &Ask { group, ..ask(verb, resource, "d", "") }).allowed()
    };
    assert!(allowed("create", "", "events"));
    assert!(allowed("patch", "", "events"));
    assert!(allowed("list", "", "services"));
    assert!(allowed("create", "authorization.k8s.io", "subjectaccessreviews"));
    assert!(allowed("create", "authentication.k8s.io", "tokenreviews"));
    assert!(allowed("get", "node.k8s.io", "runtimeclasses"));
    assert!(!allowed("create", "events.k8s.io", "events"));
    assert!(!allowed("list", "", "endpoints"));
    assert!(!allowed("create", "apps", "deployments"));
    assert!(!allowed("delete", "", "namespaces"));
    let path = Attributes { user: &a, verb: "get", target: Target::Path("/version") };
    assert_eq!(n.decide(&path), no(""), "non-resource paths are RBAC's (system:discovery)");
    // The same rules are the bootstrap policy's `system:node` role.
    let role = policy::cluster_roles()
        .into_iter()
        .find(|r| r.metadata.name.as_deref() == Some("system:node"));
    assert_eq!(role.and_then(|r| r.rules), Some(policy::node_rules()));
    assert!(
        !policy::cluster_role_bindings().iter().any(|b| b.role_ref.name == "system:node"),
        "system:node is not bound, as upstream"
    );
}

#[test]
fn only_node_users_are_decided_and_a_nameless_one_is_refused() {
    let n = authorizer();
    let q = ask("get", "secrets", "d", "tls");
    let alice =
        User { name: "alice".into(), groups: vec!["system:nodes".into()], ..User::default() };
    assert_eq!(decide(&n, &alice, &q), no(""));
    let not_in_group = User { name: "system:node:a".into(), ..User::default() };
    assert_eq!(decide(&n, &not_in_group, &q), no(""));
    let nameless = node_user("");
    assert_eq!(decide(&n, &nameless, &q), no("unknown node for user \"system:node:\""));
}

#[test]
fn resource_slices_and_csi_nodes_follow_upstreams_rules() {
    let n = authorizer();
    let a = node_user("a");
    let slice = |verb, name, selector| Ask {
        group: "resource.k8s.io",
        selector,
        ..ask(verb, "resourceslices", "", name)
    };
    assert_eq!(decide(&n, &a, &slice("create", "", "")), allow());
    assert_eq!(decide(&n, &a, &slice("list", "", "nodeName=a")), allow());
    assert_eq!(
        decide(&n, &a, &slice("watch", "", "nodeName=b")),
        no("can only list/watch/deletecollection resourceslices with nodeName field selector")
    );
    assert_eq!(decide(&n, &a, &slice("get", "s", "")), no(UNRELATED));
    let csi = |verb, name| Ask { group: "storage.k8s.io", ..ask(verb, "csinodes", "", name) };
    assert_eq!(decide(&n, &a, &csi("update", "a")), allow());
    assert_eq!(
        decide(&n, &a, &csi("update", "b")),
        no("can only access CSINode with the same name as the requesting node")
    );
}
