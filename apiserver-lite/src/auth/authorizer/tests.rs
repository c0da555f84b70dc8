use serde_json::json;

use super::*;
use crate::auth::rbac::Index;

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
    let pods = &crate::resources::PODS;
    let nothing = Authorizer::new(vec![Mode::Node], Arc::new(Rbac::default()));
    let admin = user("admin", &["system:masters"]);
    assert!(nothing.authorize(&admin, "delete", pods, Some("a"), Some("p"), None).is_ok());
    let alice = user("alice", &["system:authenticated"]);
    let err = nothing.authorize(&alice, "list", pods, Some("a"), None, None).unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"a\""
        )
    );
    let nodes = &crate::resources::NODES;
    let err =
        nothing.authorize(&alice, "get", nodes, None, Some("n1"), Some("status")).unwrap_err();
    assert_eq!(
        err.message,
        "nodes \"n1\" is forbidden: User \"alice\" cannot get resource \"nodes/status\" in API group \"\" at the cluster scope"
    );
    let deploy = &crate::resources::DEPLOYMENTS;
    let err = nothing.authorize(&alice, "create", deploy, Some("a"), None, None).unwrap_err();
    assert!(err.message.starts_with("deployments.apps is forbidden: "), "{}", err.message);
    let err = nothing.authorize_path(&alice, "get", "/version").unwrap_err();
    assert_eq!(err.message, "forbidden: User \"alice\" cannot get path \"/version\"");
    assert!(chain(&[Mode::Node, Mode::Rbac]).authorize_path(&alice, "get", "/version").is_ok());
}

#[test]
fn the_first_mode_with_an_opinion_decides_in_flag_order() {
    let secrets = &crate::resources::SECRETS;
    let alice = user("alice", &["system:authenticated"]);
    let node = user("system:node:n1", &["system:nodes", "system:authenticated"]);
    let rbac_only = chain(&[Mode::Rbac]);
    assert!(
        rbac_only.authorize(&node, "get", secrets, Some("a"), Some("s"), None).is_err(),
        "RBAC alone gives nodes nothing"
    );
    let node_rbac = chain(&[Mode::Node, Mode::Rbac]);
    let services = &crate::resources::SERVICES;
    assert!(node_rbac.authorize(&node, "get", services, Some("a"), Some("s"), None).is_ok());
    assert!(node_rbac.authorize(&alice, "get", services, Some("a"), Some("s"), None).is_err());
    assert!(node_rbac.authorize(&alice, "get", secrets, Some("a"), Some("s"), None).is_err());
    let open = chain(&[Mode::Rbac, Mode::AlwaysAllow]);
    assert!(open.authorize(&alice, "delete", secrets, Some("a"), Some("s"), None).is_ok());
    let d = open.decide(&Attributes {
        user: &alice,
        verb: "create",
        target: Target::Resource(ResourceAttributes {
            group: "authorization.k8s.io",
            resource: "selfsubjectaccessreviews",
            ..Default::default()
        }),
    });
    assert!(d.reason().starts_with("RBAC: allowed by"), "RBAC answered first: {d:?}");
}

#[test]
fn a_list_or_watch_is_about_the_object_its_field_selector_names() {
    assert_eq!(field_equals("metadata.name=web", "metadata.name"), Some("web"));
    assert_eq!(field_equals("a=b,metadata.name==web", "metadata.name"), Some("web"));
    assert_eq!(field_equals("metadata.name!=web", "metadata.name"), None);
    assert_eq!(field_equals("spec.nodeName=n1", "metadata.name"), None);
    assert_eq!(field_equals("", "metadata.name"), None);
    assert_eq!(selected_name("metadata.name=web"), Some("web"));
    for bad in ["metadata.name=", "metadata.name=..", "metadata.name=a/b", "metadata.name=a%2F"] {
        assert_eq!(selected_name(bad), None, "{bad}");
    }
    // RBAC reads the name too: a rule naming one ConfigMap lets its holder watch just that one.
    let mut index = Index::bootstrap();
    index.add_role(
        "a",
        "one",
        vec![crate::auth::rbac::rule::named_rule(
            &["list", "watch"],
            &[""],
            &["configmaps"],
            &["web"],
        )],
    );
    index.add_role_binding(
        serde_json::from_value(json!({
            "metadata": {"name": "one", "namespace": "a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one"},
            "subjects": [{"kind": "User", "name": "alice"}],
        }))
        .unwrap(),
    );
    let authz = Authorizer::new(vec![Mode::Node, Mode::Rbac], Arc::new(Rbac::with_index(index)));
    let alice = user("alice", &["system:authenticated"]);
    let cms = &crate::resources::CONFIG_MAPS;
    assert!(authz.authorize_list(&alice, "watch", cms, Some("a"), "metadata.name=web").is_ok());
    assert!(authz.authorize_list(&alice, "watch", cms, Some("a"), "metadata.name=other").is_err());
    assert!(authz.authorize_list(&alice, "list", cms, Some("a"), "").is_err());
}
