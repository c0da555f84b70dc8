//! The Node authorizer (`--authorization-mode=Node`), for kubelets (`system:node:<name>` in
//! `system:nodes`); it has no opinion on anyone else. Until the graph of what pods bound to a
//! node reference arrives (issue 16, item 3), a node keeps the interim rights it had before
//! RBAC: it reads everything; it writes its own Node and Lease, the pods bound to it and their
//! status, and events; it asks about others (SubjectAccessReview, TokenReview); and it requests
//! tokens for the service accounts of the pods bound to it, bound to those pods.

use super::authorizer::{Attributes, Decision, Target};

/// Why a node's rules are not listed (upstream's words).
pub const NO_RULE_RESOLUTION: &str = "node authorizer does not support user rule resolution";

/// The Node mode's decision.
pub fn decide(a: &Attributes<'_>) -> Decision {
    let Some(node) = a.user.node() else {
        return Decision::NoOpinion(String::new());
    };
    let Target::Resource(r) = &a.target else {
        return Decision::NoOpinion(String::new());
    };
    let verb = a.verb;
    let obj = a.object;
    let name = (!r.name.is_empty()).then_some(r.name);
    let sub = (!r.subresource.is_empty()).then_some(r.subresource);
    let named = |field: &serde_json::Value| obj.is_some_and(|o| o["metadata"]["name"] == *field);
    let own = matches!(verb, "get" | "list" | "watch")
        || match (r.group, r.resource) {
            ("authentication.k8s.io", "tokenreviews")
            | ("authorization.k8s.io", "subjectaccessreviews") => verb == "create",
            ("", "nodes") => {
                name == Some(node) || (verb == "create" && named(&serde_json::json!(node)))
            }
            ("coordination.k8s.io", "leases") => {
                r.namespace == "kube-node-lease"
                    && (name == Some(node) || named(&serde_json::json!(node)))
            }
            ("", "pods") => {
                obj.is_some_and(|o| o["spec"]["nodeName"] == node) || sub == Some("status")
            }
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
        };
    if own { Decision::Allow(String::new()) } else { Decision::NoOpinion(String::new()) }
}
