use serde_json::json;

use super::*;
use crate::auth::rbac::Index;
use crate::resources::find;

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

fn chain(modes: &[Mode]) -> Authorizer {
    Authorizer::new(modes.to_vec(), Arc::new(Rbac::with_index(Index::bootstrap())))
}

#[test]
fn modes_parse_as_upstreams_flag_and_refuse_what_is_unknown() {
    let list = |s: &str| Mode::parse_list(&s.split(',').map(str::to_string).collect::<Vec<_>>());
    assert_eq!(list("Node,RBAC").unwrap(), [Mode::Node, Mode::Rbac]);
    assert_eq!(list("AlwaysAllow").unwrap(), [Mode::AlwaysAllow]);
    assert_eq!(
        list("ABAC").unwrap_err().to_string(),
        "--authorization-mode: unknown mode \"ABAC\" (supported: Node, RBAC, AlwaysAllow)"
    );
    assert_eq!(list("RBAC,RBAC").unwrap_err(), ModeError::Repeated("RBAC".into()));
    assert_eq!(list("").unwrap_err(), ModeError::Empty);
}

#[test]
fn masters_pass_before_any_mode_and_no_opinion_everywhere_is_a_refusal() {
    let pods = find("", "v1", "pods").unwrap();
    let nothing = Authorizer::new(vec![Mode::Node], Arc::new(Rbac::default()));
    let admin = user("admin", &["system:masters"]);
    assert!(nothing.authorize(&admin, "delete", pods, Some("a"), Some("p"), None, None).is_ok());
    let alice = user("alice", &["system:authenticated"]);
    let err = nothing.authorize(&alice, "list", pods, Some("a"), None, None, None).unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"a\""
        )
    );
    let nodes = find("", "v1", "nodes").unwrap();
    let err = nothing
        .authorize(&alice, "get", nodes, None, Some("n1"), Some("status"), None)
        .unwrap_err();
    assert_eq!(
        err.message,
        "nodes \"n1\" is forbidden: User \"alice\" cannot get resource \"nodes/status\" in API group \"\" at the cluster scope"
    );
    let deploy = find("apps", "v1", "deployments").unwrap();
    let err = nothing.authorize(&alice, "create", deploy, Some("a"), None, None, None).unwrap_err();
    assert!(err.message.starts_with("deployments.apps is forbidden: "), "{}", err.message);
    let err = nothing.authorize_path(&alice, "get", "/version").unwrap_err();
    assert_eq!(err.message, "forbidden: User \"alice\" cannot get path \"/version\"");
    assert!(chain(&[Mode::Node, Mode::Rbac]).authorize_path(&alice, "get", "/version").is_ok());
}

#[test]
fn the_first_mode_with_an_opinion_decides_in_flag_order() {
    let secrets = find("", "v1", "secrets").unwrap();
    let alice = user("alice", &["system:authenticated"]);
    let node = user("system:node:n1", &["system:nodes", "system:authenticated"]);
    let rbac_only = chain(&[Mode::Rbac]);
    assert!(
        rbac_only.authorize(&node, "get", secrets, Some("a"), Some("s"), None, None).is_err(),
        "RBAC alone gives nodes nothing"
    );
    let node_rbac = chain(&[Mode::Node, Mode::Rbac]);
    assert!(node_rbac.authorize(&node, "get", secrets, Some("a"), Some("s"), None, None).is_ok());
    assert!(node_rbac.authorize(&alice, "get", secrets, Some("a"), Some("s"), None, None).is_err());
    let open = chain(&[Mode::Rbac, Mode::AlwaysAllow]);
    assert!(open.authorize(&alice, "delete", secrets, Some("a"), Some("s"), None, None).is_ok());
    let d = open.decide(&Attributes {
        user: &alice,
        verb: "create",
        target: Target::Resource(ResourceAttributes {
            group: "authorization.k8s.io",
            resource: "selfsubjectaccessreviews",
            ..Default::default()
        }),
        object: None,
    });
    assert!(d.reason().starts_with("RBAC: allowed by"), "RBAC answered first: {d:?}");
}

#[test]
fn a_node_writes_only_its_own_objects_and_reads_everything_until_the_graph_arrives() {
    let authz = chain(&[Mode::Node, Mode::Rbac]);
    let (pods, nodes, sa) = (
        find("", "v1", "pods").unwrap(),
        find("", "v1", "nodes").unwrap(),
        find("", "v1", "serviceaccounts").unwrap(),
    );
    let node = user("system:node:n1", &["system:nodes", "system:authenticated"]);
    assert!(
        authz.authorize(&node, "update", nodes, None, Some("n1"), Some("status"), None).is_ok()
    );
    assert!(
        authz.authorize(&node, "update", nodes, None, Some("n2"), Some("status"), None).is_err()
    );
    let new_node = json!({"metadata": {"name": "n1"}});
    assert!(authz.authorize(&node, "create", nodes, None, None, None, Some(&new_node)).is_ok());
    let mine = json!({"spec": {"nodeName": "n1", "serviceAccountName": "web"}});
    let theirs = json!({"spec": {"nodeName": "n2", "serviceAccountName": "web"}});
    assert!(
        authz.authorize(&node, "delete", pods, Some("d"), Some("p"), None, Some(&mine)).is_ok()
    );
    assert!(
        authz.authorize(&node, "delete", pods, Some("d"), Some("p"), None, Some(&theirs)).is_err()
    );
    let token = |name: &str, pod: Option<&Value>| {
        authz.authorize(&node, "create", sa, Some("d"), Some(name), Some("token"), pod)
    };
    assert!(token("web", Some(&mine)).is_ok());
    assert!(token("other", Some(&mine)).is_err(), "the pod runs as another account");
    assert!(token("web", Some(&theirs)).is_err());
    assert!(token("web", None).is_err(), "no pod: no token for a node");
    let sar = find("authorization.k8s.io", "v1", "subjectaccessreviews").unwrap();
    assert!(authz.authorize(&node, "create", sar, None, None, None, None).is_ok());
    let alice = user("alice", &["system:authenticated"]);
    assert!(authz.authorize(&alice, "create", sar, None, None, None, None).is_err());
}
