use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::auth::rbac::{Index, Rbac};

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

/// The bootstrap policy; `alice` has `admin` in namespace `a`, `binder` may `bind` the
/// ClusterRole `edit`, `escalator` may `escalate` roles in `a`.
fn authz() -> Authorizer {
    let mut index = Index::bootstrap();
    let bind = |name: &str, role_kind: &str, role: &str, user: &str| {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "a"},
            "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role},
            "subjects": [{"kind": "User", "apiGroup": GROUP, "name": user}],
        }))
        .unwrap()
    };
    index.add_role_binding(bind("alice-admin", "ClusterRole", "admin", "alice"));
    index.add_role(
        "a",
        "bind-edit",
        vec![rule::named_rule(&["bind"], &[GROUP], &["clusterroles"], &["edit"])],
    );
    index.add_role_binding(bind("binder", "Role", "bind-edit", "binder"));
    index.add_role("a", "escalate", vec![rule::resource_rule(&["escalate"], &[GROUP], &["roles"])]);
    index.add_role_binding(bind("escalator", "Role", "escalate", "escalator"));
    Authorizer::node_rbac(Arc::new(Rbac::with_index(index)))
}

fn role(name: &str, rules: serde_json::Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "a"}, "rules": rules})
}

fn binding(name: &str, kind: &str, role: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "a"},
           "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
           "subjects": [{"kind": "User", "name": "carol"}]})
}

#[test]
fn a_role_may_grant_only_what_its_writer_holds() {
    let authz = authz();
    let roles = &crate::resources::ROLES;
    let alice = user("alice", &["system:authenticated"]);
    let within = role(
        "ok",
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "secrets"]}]),
    );
    assert!(check(&authz, &alice, roles, Some("a"), &within, None).is_ok());
    let beyond = role(
        "big",
        json!([
            {"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]},
            {"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods", "nodes"]},
        ]),
    );
    let err = check(&authz, &alice, roles, Some("a"), &beyond, None).unwrap_err();
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "roles.rbac.authorization.k8s.io \"big\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"get\" \"delete\"]}"
    );
    assert!(check(&authz, &alice, roles, Some("b"), &within, None).is_err(), "admin in a only");
    // The same rules again (a label change): not checked.
    assert!(check(&authz, &alice, roles, Some("a"), &beyond, Some(&beyond)).is_ok());
    let escalator = user("escalator", &[]);
    assert!(check(&authz, &escalator, roles, Some("a"), &beyond, None).is_ok(), "escalate");
    let admin = user("root", &["system:masters"]);
    assert!(check(&authz, &admin, roles, Some("a"), &beyond, None).is_ok());
}

#[test]
fn an_aggregation_rule_needs_every_permission() {
    let authz = authz();
    let cluster_roles = &crate::resources::CLUSTER_ROLES;
    let alice = user("alice", &["system:authenticated"]);
    let agg = json!({"metadata": {"name": "agg"}, "rules": [],
                     "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
    let err = check(&authz, &alice, cluster_roles, None, &agg, None).unwrap_err();
    assert_eq!(
        err.message,
        "clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );
}

#[test]
fn a_binding_needs_the_roles_permissions_or_bind() {
    let authz = authz();
    let bindings = &crate::resources::ROLE_BINDINGS;
    let alice = user("alice", &["system:authenticated"]);
    assert!(
        check(&authz, &alice, bindings, Some("a"), &binding("v", "ClusterRole", "view"), None)
            .is_ok()
    );
    let err = check(
        &authz,
        &alice,
        bindings,
        Some("a"),
        &binding("ca", "ClusterRole", "cluster-admin"),
        None,
    )
    .unwrap_err();
    assert!(
        err.message.starts_with("rolebindings.rbac.authorization.k8s.io \"ca\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"),
        "{}",
        err.message
    );
    let err = check(&authz, &alice, bindings, Some("a"), &binding("g", "Role", "ghost"), None)
        .unwrap_err();
    assert_eq!(
        err.message,
        "rolebindings.rbac.authorization.k8s.io \"g\" is forbidden: roles.rbac.authorization.k8s.io \"ghost\" not found"
    );
    let binder = user("binder", &[]);
    assert!(
        check(&authz, &binder, bindings, Some("a"), &binding("e", "ClusterRole", "edit"), None)
            .is_ok(),
        "bind"
    );
    assert!(
        check(&authz, &binder, bindings, Some("a"), &binding("v", "ClusterRole", "view"), None)
            .is_err()
    );
}
