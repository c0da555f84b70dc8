//! The interim authorizer (until RBAC and the node authorizer arrive): `system:masters` may do
//! anything; any other identity (users, nodes, service accounts) may read and ask the reviews
//! about itself; a node may also write its own Node, Lease, the pods bound to it and events,
//! ask about others (SubjectAccessReview, TokenReview), and request tokens for the service
//! accounts of pods bound to it. [`crate::reviews`] lists the same rules for
//! `kubectl auth can-i --list`.

use serde_json::Value;

use super::User;
use crate::errors::ApiError;
use crate::resources::ResourceType;

/// The reviews that ask about someone else: for masters and nodes only.
pub const ABOUT_OTHERS: [&str; 2] = ["subjectaccessreviews", "tokenreviews"];

/// Whether `user` may `verb` the object. `obj` is what the decision reads beyond the request:
/// the object written (a pod bound to a node), or for `serviceaccounts/token` the pod the token
/// is to be bound to.
pub fn authorize(
    user: &User,
    verb: &str,
    r: &ResourceType,
    ns: Option<&str>,
    name: Option<&str>,
    sub: Option<&str>,
    obj: Option<&Value>,
) -> Result<(), ApiError> {
    if user.is_master() || matches!(verb, "get" | "list" | "watch") {
        return Ok(());
    }
    if !r.is_stored() && verb == "create" {
        // Asking about oneself is open to every authenticated user, as upstream's
        // system:basic-user role makes it; asking about others (SubjectAccessReview,
        // TokenReview) is for kubelets checking callers of their API, as upstream's system:node
        // role.
        if !ABOUT_OTHERS.contains(&r.name) || user.node().is_some() {
            return Ok(());
        }
    }
    let own = user.node().is_some_and(|node| match (r.group, r.name) {
        ("", "nodes") => {
            name == Some(node)
                || (verb == "create" && obj.is_some_and(|o| o["metadata"]["name"] == node))
        }
        ("coordination.k8s.io", "leases") => {
            ns == Some("kube-node-lease")
                && (name == Some(node) || obj.is_some_and(|o| o["metadata"]["name"] == node))
        }
        ("", "pods") => obj.is_some_and(|o| o["spec"]["nodeName"] == node) || sub == Some("status"),
        // A kubelet asks for the tokens of its pods' projected volumes, bound to the pod (as
        // upstream's node authorizer and NodeRestriction allow).
        ("", "serviceaccounts") => {
            verb == "create"
                && sub == Some("token")
                && obj.is_some_and(|pod| {
                    pod["spec"]["nodeName"] == node
                        && name.is_some_and(|n| pod["spec"]["serviceAccountName"] == n)
                })
        }
        ("", "events") | ("events.k8s.io", "events") => verb == "create" || verb == "patch",
        _ => false,
    });
    if own {
        return Ok(());
    }
    let subject = match name {
        Some(n) => format!("{} {n:?}", r.qualified()),
        None => r.qualified(),
    };
    let resource = match sub {
        Some(s) => format!("{}/{s}", r.name),
        None => r.name.to_string(),
    };
    let scope = match ns {
        Some(ns) => format!(" in the namespace {ns:?}"),
        None => String::new(),
    };
    Err(ApiError::forbidden(format!(
        "{subject} is forbidden: User {:?} cannot {verb} resource {resource:?} in API group {:?}{scope}",
        user.name, r.group
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::find;

    #[test]
    fn only_masters_write_anything_and_nodes_write_their_own() {
        let pods = find("", "v1", "pods").unwrap();
        let nodes = find("", "v1", "nodes").unwrap();
        let node = User {
            name: "system:node:n1".into(),
            groups: vec!["system:nodes".into()],
            ..User::default()
        };
        let alice = User { name: "alice".into(), groups: vec![], ..User::default() };
        let master =
            User { name: "admin".into(), groups: vec!["system:masters".into()], ..User::default() };
        assert!(authorize(&master, "delete", nodes, None, Some("n2"), None, None).is_ok());
        assert!(authorize(&alice, "list", pods, Some("default"), None, None, None).is_ok());
        let err = authorize(&alice, "create", pods, Some("default"), None, None, None).unwrap_err();
        assert_eq!(
            err.message,
            "pods is forbidden: User \"alice\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert!(authorize(&node, "update", nodes, None, Some("n1"), Some("status"), None).is_ok());
        assert!(authorize(&node, "update", nodes, None, Some("n2"), Some("status"), None).is_err());
        let mine = serde_json::json!({"spec": {"nodeName": "n1"}});
        assert!(
            authorize(&node, "delete", pods, Some("default"), Some("p"), None, Some(&mine)).is_ok()
        );
        let theirs = serde_json::json!({"spec": {"nodeName": "n2"}});
        assert!(
            authorize(&node, "delete", pods, Some("default"), Some("p"), None, Some(&theirs))
                .is_err()
        );
    }

    #[test]
    fn anyone_asks_about_themselves_and_only_nodes_and_masters_about_others() {
        let sar = find("authorization.k8s.io", "v1", "subjectaccessreviews").unwrap();
        let ssar = find("authorization.k8s.io", "v1", "selfsubjectaccessreviews").unwrap();
        let user = |name: &str, group: &str| User {
            name: name.into(),
            groups: vec![group.into()],
            ..User::default()
        };
        let (alice, node) = (user("alice", "devs"), user("system:node:n1", "system:nodes"));
        assert!(authorize(&alice, "create", ssar, None, None, None, None).is_ok());
        assert!(authorize(&alice, "create", sar, None, None, None, None).is_err());
        assert!(authorize(&node, "create", sar, None, None, None, None).is_ok());
        let tokens = find("authentication.k8s.io", "v1", "tokenreviews").unwrap();
        assert!(authorize(&alice, "create", tokens, None, None, None, None).is_err());
        assert!(authorize(&node, "create", tokens, None, None, None, None).is_ok());
        let admin = user("admin", "system:masters");
        assert!(authorize(&admin, "create", sar, None, None, None, None).is_ok());
    }

    #[test]
    fn a_node_asks_only_for_tokens_of_the_pods_bound_to_it() {
        let sa = find("", "v1", "serviceaccounts").unwrap();
        let node = User {
            name: "system:node:n1".into(),
            groups: vec!["system:nodes".into()],
            ..User::default()
        };
        let mine = serde_json::json!({"spec": {"nodeName": "n1", "serviceAccountName": "web"}});
        let ask = |name: &str, pod: Option<&Value>| {
            authorize(&node, "create", sa, Some("default"), Some(name), Some("token"), pod)
        };
        assert!(ask("web", Some(&mine)).is_ok());
        assert!(ask("other", Some(&mine)).is_err(), "the pod runs as another account");
        let theirs = serde_json::json!({"spec": {"nodeName": "n2", "serviceAccountName": "web"}});
        assert!(ask("web", Some(&theirs)).is_err());
        assert!(ask("web", None).is_err(), "no pod: no token for a node");
        let sa_user = User {
            name: "system:serviceaccount:default:web".into(),
            groups: vec!["system:serviceaccounts".into()],
            ..User::default()
        };
        assert!(authorize(&sa_user, "get", sa, Some("default"), Some("web"), None, None).is_ok());
        assert!(
            authorize(
                &sa_user,
                "create",
                sa,
                Some("default"),
                Some("web"),
                Some("token"),
                Some(&mine)
            )
            .is_err()
        );
    }
}
