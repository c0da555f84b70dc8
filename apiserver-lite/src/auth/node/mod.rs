//! The Node authorizer (`--authorization-mode=Node`), as upstream's
//! `plugin/pkg/auth/authorizer/node`, for kubelets (`system:node:<name>` in `system:nodes`);
//! it has no opinion on anyone else:
//!
//! - this file: [`NodeAuthorizer::decide`]: Secrets, ConfigMaps, claims, volumes, resource
//!   claims and service accounts only when the node reaches them in the [`graph`]; its own
//!   Node and Lease by name; pods bound to it (or listed by `spec.nodeName=<node>`); every
//!   other request by upstream's `system:node` rules ([`policy::node_rules`]) with the RBAC rule
//!   matcher. Writes it allows to pods, nodes and leases are narrowed further by the
//!   NodeRestriction admission plugin (`crate::admission::node_restriction`);
//! - [`references`]: what a pod or a persistent volume names (pure);
//! - [`graph`]: which objects each node reaches, read under a lock, never from storage;
//! - [`populator`]: the task that keeps the graph current from the store's watch.

pub mod graph;
pub mod populator;
pub mod references;

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::authorizer::{Attributes, Decision, ResourceAttributes, Target, field_equals};
use super::rbac::{policy, rule};
use graph::{Graph, Kind, Vertex};

/// Why a node's rules are not listed (upstream's words).
pub const NO_RULE_RESOLUTION: &str = "node authorizer does not support user rule resolution";

/// The namespace of node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

fn no(reason: impl Into<String>) -> Decision {
    Decision::NoOpinion(reason.into())
}

fn allow() -> Decision {
    Decision::Allow(String::new())
}

/// The Node mode: the graph it reads and the static rules.
#[derive(Debug, Clone)]
pub struct NodeAuthorizer {
    graph: Arc<Graph>,
    rules: Vec<PolicyRule>,
}

impl Default for NodeAuthorizer {
    fn default() -> Self {
        Self::new(Arc::new(Graph::default()))
    }
}

impl NodeAuthorizer {
    pub fn new(graph: Arc<Graph>) -> Self {
        Self { graph, rules: policy::node_rules() }
    }

    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// Upstream's decision for a request from a node; no opinion for anyone else.
    pub fn decide(&self, a: &Attributes<'_>) -> Decision {
        let Some(node) = a.user.node() else { return no("") };
        if node.is_empty() {
            return no(format!("unknown node for user {:?}", a.user.name));
        }
        if let Target::Resource(r) = &a.target {
            let read = |kind| self.read_namespaced(node, kind, a.verb, r);
            match (r.group, r.resource) {
                ("", "secrets") => return read(Kind::Secret),
                ("", "configmaps") => return read(Kind::ConfigMap),
                ("", "persistentvolumeclaims") if r.subresource == "status" => {
                    return self.status_update(node, Kind::PersistentVolumeClaim, a.verb, r);
                }
                ("", "persistentvolumeclaims") => {
                    return self.get(node, Kind::PersistentVolumeClaim, a.verb, r);
                }
                ("", "persistentvolumes") => {
                    return self.get(node, Kind::PersistentVolume, a.verb, r);
                }
                ("resource.k8s.io", "resourceclaims") => {
                    return self.get(node, Kind::ResourceClaim, a.verb, r);
                }
                // No VolumeAttachment or ResourceSlice is served, so none names a node.
                ("storage.k8s.io", "volumeattachments") => return get_unrelated(node, a.verb, r),
                ("resource.k8s.io", "resourceslices") => return resource_slice(node, a.verb, r),
                ("", "serviceaccounts") => return self.service_account(node, a.verb, r),
                ("coordination.k8s.io", "leases") => return lease(node, a.verb, r),
                ("storage.k8s.io", "csinodes") => return csi_node(node, a.verb, r),
                ("", "nodes") => return node_object(node, a.verb, r),
                ("", "pods") => return self.pod(node, a.verb, r),
                _ => {}
            }
        }
        if self.rules.iter().any(|rule| rule::allows(rule, a)) { allow() } else { no("") }
    }

    /// Whether the object `kind` named by `r` is related to `node`.
    fn related(&self, node: &str, kind: Kind, r: &ResourceAttributes<'_>) -> Decision {
        if r.name.is_empty() {
            return no("No Object name found");
        }
        if self.graph.reaches(node, &Vertex::new(kind, r.namespace, r.name)) {
            allow()
        } else {
            no(unrelated(node))
        }
    }

    /// `get`, `list` and `watch` of one namespaced object (its name from the path, or from a
    /// `metadata.name` field selector).
    fn read_namespaced(
        &self,
        node: &str,
        kind: Kind,
        verb: &str,
        r: &ResourceAttributes<'_>,
    ) -> Decision {
        if !matches!(verb, "get" | "list" | "watch") {
            return no("can only read resources of this type");
        }
        if !r.subresource.is_empty() {
            return no("cannot read subresource");
        }
        if r.namespace.is_empty() {
            return no("can only read namespaced object of this type");
        }
        self.related(node, kind, r)
    }

    fn get(&self, node: &str, kind: Kind, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
        if verb != "get" {
            return no("can only get individual resources of this type");
        }
        if !r.subresource.is_empty() {
            return no("cannot get subresource");
        }
        self.related(node, kind, r)
    }

    fn status_update(
        &self,
        node: &str,
        kind: Kind,
        verb: &str,
        r: &ResourceAttributes<'_>,
    ) -> Decision {
        if !matches!(verb, "update" | "patch") {
            return no("can only get/update/patch this type");
        }
        self.related(node, kind, r)
    }

    /// A service account may be read, and a token requested for it, when a pod bound to the
    /// node runs as it (NodeRestriction checks the token is bound to such a pod).
    fn service_account(&self, node: &str, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
        match (verb, r.subresource) {
            ("get", "") => self.read_namespaced(node, Kind::ServiceAccount, verb, r),
            ("create", "token") if !r.name.is_empty() => {
                self.related(node, Kind::ServiceAccount, r)
            }
            ("create", "token") => no("can only create tokens for individual service accounts"),
            _ => no("can only get individual service accounts or create service account tokens"),
        }
    }

    fn pod(&self, node: &str, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
        match (r.subresource, verb) {
            ("", "get") => self.get(node, Kind::Pod, verb, r),
            ("", "list" | "watch") => {
                if field_equals(r.field_selector, "spec.nodeName") == Some(node) {
                    allow()
                } else if !r.name.is_empty() {
                    self.related(node, Kind::Pod, r)
                } else {
                    no("can only list/watch pods with spec.nodeName field selector")
                }
            }
            // Mirror pods, and deleting pods bound to the node: NodeRestriction narrows both.
            ("", "create" | "delete") => allow(),
            ("status", "update" | "patch") => allow(),
            ("eviction", "create") => allow(),
            _ => no(""),
        }
    }
}

fn unrelated(node: &str) -> String {
    format!("no relationship found between node '{node}' and this object")
}

/// An object kind this server keeps none of: nothing is related to any node.
fn get_unrelated(node: &str, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
    if verb != "get" {
        return no("can only get individual resources of this type");
    }
    if !r.subresource.is_empty() {
        return no("cannot get subresource");
    }
    if r.name.is_empty() {
        return no("No Object name found");
    }
    no(unrelated(node))
}

fn resource_slice(node: &str, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
    if !r.subresource.is_empty() {
        return no("cannot authorize ResourceSlice subresources");
    }
    match verb {
        // NodeRestriction checks the slice's nodeName on create.
        "create" => allow(),
        "get" | "update" | "patch" | "delete" if r.name.is_empty() => no("No Object name found"),
        "get" | "update" | "patch" | "delete" => no(unrelated(node)),
        "watch" | "list" | "deletecollection" => {
            if field_equals(r.field_selector, "nodeName") == Some(node) {
                allow()
            } else {
                no(
                    "can only list/watch/deletecollection resourceslices with nodeName field selector",
                )
            }
        }
        _ => no(
            "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection",
        ),
    }
}

fn lease(node: &str, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
    if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
        return no("can only get, create, update, patch, or delete a node lease");
    }
    if r.namespace != NODE_LEASE_NAMESPACE {
        return no(format!(
            "can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"
        ));
    }
    // A create has no name yet: NodeRestriction checks the object's.
    if verb != "create" && r.name != node {
        return no("can only access node lease with the same name as the requesting node");
    }
    allow()
}

fn csi_node(node: &str, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
    if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
        return no("can only get, create, update, patch, or delete a CSINode");
    }
    if !r.subresource.is_empty() {
        return no("cannot authorize CSINode subresources");
    }
    if verb != "create" && r.name != node {
        return no("can only access CSINode with the same name as the requesting node");
    }
    allow()
}

fn node_object(node: &str, verb: &str, r: &ResourceAttributes<'_>) -> Decision {
    match (r.subresource, verb) {
        // NodeRestriction limits a node to its own Node.
        ("", "create" | "update" | "patch") => allow(),
        // By name rather than the graph, so a kubelet may read its Node before creating it.
        ("", "get" | "list" | "watch") if r.name == node => allow(),
        ("", "get" | "list" | "watch") if r.name.is_empty() => {
            no(format!("node '{node}' cannot read all nodes, only its own Node object"))
        }
        ("", "get" | "list" | "watch") => {
            no(format!("node '{node}' cannot read '{}', only its own Node object", r.name))
        }
        ("status", "update" | "patch") => allow(),
        _ => no(""),
    }
}

#[cfg(test)]
mod tests;
