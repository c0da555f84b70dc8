use std::sync::Arc;

use k8s_openapi::api::authorization::v1::NonResourceAttributes;
use serde_json::json;

use super::*;
use crate::auth::node::graph::Graph;
use crate::auth::rbac::{Index, Rbac};

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

fn ask(
    verb: &str,
    group: &str,
    resource: &str,
    ns: &str,
    name: &str,
) -> SelfSubjectAccessReviewSpec {
    SelfSubjectAccessReviewSpec {
        resource_attributes: Some(ResourceAttributes_ {
            verb: Some(verb.into()),
            group: Some(group.into()),
            resource: Some(resource.into()),
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        }),
        non_resource_attributes: None,
    }
}

/// `Node,RBAC` over the bootstrap policy, with `dev` bound to `view` in namespace `a`, and the
/// pod `default/web` (using the Secret `web-tls`) bound to node-a in the node graph.
fn authz() -> Authorizer {
    let graph = Arc::new(Graph::default());
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c"}],
                 "volumes": [{"name": "tls", "secret": {"secretName": "web-tls"}}]},
    }))
    .unwrap();
    graph.set_pod("default", "web", crate::auth::node::graph::pod_edges(&pod));
    let mut index = Index::bootstrap();
    index.add_role_binding(
        serde_json::from_value(json!({
            "metadata": {"name": "dev-view", "namespace": "a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dev"}],
        }))
        .unwrap(),
    );
    Authorizer::node_rbac(Arc::new(Rbac::with_index(index))).with_graph(graph)
}

#[test]
fn answers_follow_the_chain_that_guards_requests() {
    let authz = authz();
    let admin = user("admin", &["system:masters", "system:authenticated"]);
    let dev = user("dev", &["system:authenticated"]);
    let node = user("system:node:node-a", &["system:nodes", "system:authenticated"]);
    let table = [
        (&admin, ask("delete", "", "pods", "default", ""), true),
        (&admin, ask("*", "*", "*", "", ""), true),
        (&admin, ask("create", "example.com", "widgets", "", ""), true),
        (&dev, ask("get", "", "pods", "a", ""), true),
        (&dev, ask("get", "", "pods", "default", ""), false),
        (&dev, ask("get", "", "secrets", "a", ""), false),
        (&dev, ask("watch", "apps", "deployments", "a", ""), true),
        (&dev, ask("create", "", "pods", "a", ""), false),
        (&dev, ask("create", "authorization.k8s.io", "selfsubjectrulesreviews", "", ""), true),
        (&dev, ask("delete", "authorization.k8s.io", "selfsubjectrulesreviews", "", ""), false),
        (&node, ask("update", "*", "*", "", ""), false),
        (&node, ask("update", "", "nodes", "", "node-a"), true),
        // Node writes pass the authorizer; NodeRestriction admits only the node's own.
        (&node, ask("update", "", "nodes", "", "node-b"), true),
        (&node, ask("get", "", "nodes", "", "node-b"), false),
        (&node, ask("get", "", "pods", "default", "web"), true),
        (&node, ask("get", "", "pods", "default", "other"), false),
        (&node, ask("get", "", "secrets", "default", "web-tls"), true),
        (&node, ask("get", "", "secrets", "default", "other"), false),
        // Deletes pass the authorizer; NodeRestriction admits only the node's own pods.
        (&node, ask("delete", "", "pods", "default", "other"), true),
        (&node, ask("update", "coordination.k8s.io", "leases", "kube-node-lease", "node-a"), true),
        (&node, ask("create", "", "secrets", "default", ""), false),
    ];
    for (who, spec, want) in table {
        let got = decide(&authz, who, &spec);
        assert_eq!(got.allowed, want, "{} {:?}", who.name, spec.resource_attributes);
    }
}

#[test]
fn a_subject_access_review_asks_about_its_subject_as_a_kubelet_does() {
    let authz = authz();
    let kubelet_asks = |user: &str, groups: &[&str], verb: &str, node: &str| {
        let spec = SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            resource_attributes: Some(ResourceAttributes_ {
                verb: Some(verb.into()),
                version: Some("v1".into()),
                resource: Some("nodes".into()),
                subresource: Some("proxy".into()),
                name: Some(node.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (subject, asked) = subject_of(&spec);
        decide(&authz, &subject, &asked).allowed
    };
    let masters = ["system:masters", "system:authenticated"];
    assert!(kubelet_asks("kube-apiserver-kubelet-client", &masters, "create", "node-a"));
    let nodes = ["system:nodes", "system:authenticated"];
    // A node's rights end at its Node object: its kubelet API is not for it (as upstream).
    assert!(!kubelet_asks("system:node:node-a", &nodes, "create", "node-a"));
    assert!(!kubelet_asks("system:node:node-b", &nodes, "create", "node-a"));
    assert!(!kubelet_asks("dev", &[], "create", "node-a"));
}

#[test]
fn an_allowed_answer_names_the_binding_and_a_missing_role_is_the_reason_for_no() {
    let mut index = Index::bootstrap();
    index.add_cluster_role_binding(
        serde_json::from_value(json!({
            "metadata": {"name": "ghost"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nope"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dev"}],
        }))
        .unwrap(),
    );
    let authz = Authorizer::node_rbac(Arc::new(Rbac::with_index(index)));
    let dev = user("dev", &["system:authenticated"]);
    let no = decide(&authz, &dev, &ask("get", "", "pods", "a", ""));
    assert!(!no.allowed);
    assert_eq!(
        no.reason.as_deref(),
        Some("RBAC: clusterrole.rbac.authorization.k8s.io \"nope\" not found")
    );
    let yes = decide(
        &authz,
        &dev,
        &ask("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", ""),
    );
    assert_eq!(
        yes.reason.as_deref(),
        Some(
            "RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole \"system:basic-user\" to Group \"system:authenticated\""
        )
    );
}

#[test]
fn a_token_review_names_the_tokens_user_or_says_it_is_invalid() {
    let mut authn = Authenticator::default();
    authn.add_token("t0k3n", user("system:node:node-b", &["system:nodes"]));
    let ask = |token: &str| {
        let spec = TokenReviewSpec {
            token: Some(token.into()),
            audiences: Some(vec!["https://kubernetes.default.svc".into()]),
        };
        token_review(&authn, &spec)
    };
    let yes = ask("t0k3n");
    assert_eq!(yes.authenticated, Some(true));
    let who = yes.user.unwrap();
    assert_eq!(who.username.as_deref(), Some("system:node:node-b"));
    assert_eq!(who.groups.unwrap(), ["system:nodes", "system:authenticated"]);
    assert_eq!(yes.audiences.unwrap(), ["https://kubernetes.default.svc"]);
    for bad in ["nope", ""] {
        let no = ask(bad);
        assert_eq!(no.authenticated, Some(false), "{bad:?}");
        assert_eq!((no.user, no.error.as_deref()), (None, Some("invalid bearer token")));
    }
}

#[test]
fn types_this_server_does_not_serve_and_paths_are_asked_of_the_rules() {
    let authz = authz();
    let dev = user("dev", &["system:authenticated"]);
    assert!(!decide(&authz, &dev, &ask("get", "example.com", "widgets", "a", "")).allowed);
    let admin = user("admin", &["system:masters"]);
    assert!(decide(&authz, &admin, &ask("get", "example.com", "widgets", "a", "")).allowed);
    let path = |verb: &str, p: &str| SelfSubjectAccessReviewSpec {
        resource_attributes: None,
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some(p.into()),
            verb: Some(verb.into()),
        }),
    };
    assert!(decide(&authz, &dev, &path("get", "/version")).allowed);
    assert!(decide(&authz, &dev, &path("get", "/apis/apps/v1")).allowed);
    assert!(!decide(&authz, &dev, &path("post", "/version")).allowed);
    assert!(!decide(&authz, &dev, &path("get", "/metrics")).allowed);
}

#[test]
fn rules_reviews_list_what_rbac_grants_and_mark_nodes_incomplete() {
    let authz = authz();
    let dev = authz.rules_for(&user("dev", &["system:authenticated"]), "a");
    assert!(!dev.incomplete);
    assert!(
        dev.resource_rules
            .iter()
            .any(|r| r.resources.as_deref().is_some_and(|x| x.contains(&"pods".to_string())))
    );
    assert!(dev.non_resource_rules.iter().any(|r| {
        r.non_resource_urls.as_deref().is_some_and(|u| u.contains(&"/version".to_string()))
    }));
    let elsewhere = authz.rules_for(&user("dev", &["system:authenticated"]), "b");
    assert!(
        !elsewhere
            .resource_rules
            .iter()
            .any(|r| r.resources.as_deref().is_some_and(|x| x.contains(&"pods".to_string())))
    );
    let node = authz.rules_for(&user("system:node:n1", &["system:nodes"]), "default");
    assert!(node.incomplete);
    assert_eq!(
        node.evaluation_error.as_deref(),
        Some("node authorizer does not support user rule resolution")
    );
}

#[test]
fn a_reviews_field_selector_reaches_the_node_authorizer() {
    let authz = authz();
    let node = user("system:node:node-a", &["system:nodes", "system:authenticated"]);
    let list = |selector: Option<Value>| {
        let mut spec = ask("list", "", "pods", "", "");
        if let (Some(a), Some(s)) = (spec.resource_attributes.as_mut(), selector) {
            a.field_selector = Some(serde_json::from_value(s).unwrap());
        }
        decide(&authz, &node, &spec)
    };
    assert!(list(Some(json!({"rawSelector": "spec.nodeName=node-a"}))).allowed);
    let requirement =
        json!({"requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["node-a"]}]});
    assert!(list(Some(requirement)).allowed);
    let other =
        json!({"requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["node-b"]}]});
    assert!(!list(Some(other)).allowed);
    let many = json!({"requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["node-a", "node-b"]}]});
    assert!(!list(Some(many)).allowed, "a set of nodes is no single node");
    let denied = list(None);
    assert!(!denied.allowed);
    assert_eq!(
        denied.reason.as_deref(),
        Some("can only list/watch pods with spec.nodeName field selector")
    );
}
