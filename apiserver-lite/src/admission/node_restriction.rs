//! `NodeRestriction`, as upstream's `plugin/pkg/admission/noderestriction`: what the Node
//! authorizer lets a kubelet (`system:node:<name>` in `system:nodes`) write, narrowed to what
//! is its own. A node may create only mirror pods bound to itself, owned by its Node and
//! naming no other API object; delete and evict only pods bound to it; update the status of
//! only those (labels untouched); create and update only its own Node, never with a
//! `configSource`, never changing its taints or the `node-restriction.kubernetes.io/` labels and the
//! `kubernetes.io`/`k8s.io` labels kubelets do not own; touch only its own Lease; and request
//! tokens only bound to its own pods. Anyone else passes untouched.
//!
//! The decisions are pure functions of the node, the request and the objects involved
//! ([`admit`]); [`NodeRestriction`] looks those objects up (the registry, or a fake).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Plugin;
use crate::auth::User;
use crate::auth::node::NODE_LEASE_NAMESPACE;
use crate::auth::node::references;
use crate::errors::ApiError;
use crate::registry::Registry;
use crate::resources::{self, ResourceType};
use crate::serviceaccount::Objects;

/// The annotation that makes a pod a mirror pod.
pub const MIRROR: &str = "kubernetes.io/config.mirror";
/// The label namespace only administrators may set on nodes.
pub const RESTRICTED_LABEL_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// Upstream's `kubeletapis` labels kubelets may set on their Node.
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];
/// Label namespaces (and their subdomains) kubelets may set.
const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Why a node's request is refused, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("could not determine node from user {user:?}")]
    UnknownNode { user: String },
    #[error("pod does not have {MIRROR:?} annotation, node {node:?} can only create mirror pods")]
    NotMirror { node: String },
    #[error("node {node:?} can only create pods with spec.nodeName set to itself")]
    CreateElsewhere { node: String },
    #[error("node {node:?} can only create pods with a single owner reference set to itself")]
    SeveralOwners { node: String },
    #[error("node {node:?} can only create pods with an owner reference set to itself")]
    NotOwner { node: String },
    #[error("node {node:?} can only create pods with a controller owner reference set to itself")]
    NotController { node: String },
    #[error("node {node:?} must not set blockOwnerDeletion on an owner reference")]
    BlockOwnerDeletion { node: String },
    #[error("node {node} UID mismatch: expected {owner_uid} got {node_uid}")]
    OwnerUid { node: String, owner_uid: String, node_uid: String },
    #[error("node {node:?} can not create pods that reference a service account")]
    ReferencesServiceAccount { node: String },
    #[error("node {node:?} can not create pods that reference secrets")]
    ReferencesSecrets { node: String },
    #[error("node {node:?} can not create pods that reference configmaps")]
    ReferencesConfigMaps { node: String },
    #[error("node {node:?} can not create pods that reference clustertrustbundles")]
    ReferencesClusterTrustBundles { node: String },
    #[error("node {node:?} can not create pods that reference persistentvolumeclaims")]
    ReferencesClaims { node: String },
    #[error("node {node:?} can not create pods that reference resourceclaims")]
    ReferencesResourceClaims { node: String },
    #[error("unexpected operation {op:?}, node {node:?} can only create and delete mirror pods")]
    PodOperation { op: &'static str, node: String },
    #[error("node {node:?} can only delete pods with spec.nodeName set to itself")]
    DeleteElsewhere { node: String },
    #[error("node {node:?} can only update pod status for pods with spec.nodeName set to itself")]
    StatusElsewhere { node: String },
    #[error("node {node} can only evict pods with spec.nodeName set to itself")]
    EvictElsewhere { node: String },
    #[error("could not determine pod from request data")]
    EvictWhom,
    #[error("node {node:?} cannot update labels through pod status")]
    StatusLabels { node: String },
    #[error("node {node:?} cannot update resource claim statues")]
    StatusResourceClaims { node: String },
    #[error("unexpected operation {op:?}")]
    Operation { op: &'static str },
    #[error("unexpected pod subresource {sub:?}, only 'status' and 'eviction' are allowed")]
    PodSubresource { sub: String },
    #[error("node {node:?} is not allowed to modify node {other:?}")]
    OtherNode { node: String, other: String },
    // Upstream's wording ("pods"), for a Node.
    #[error("node {node:?} is not allowed to create pods with a non-nil configSource")]
    CreateConfigSource { node: String },
    #[error("node {node:?} is not allowed to set the following labels: {labels}")]
    CreateLabels { node: String, labels: String },
    #[error("node {node:?} is not allowed to update configSource to a new non-nil configSource")]
    UpdateConfigSource { node: String },
    #[error("node {node:?} is not allowed to modify taints")]
    Taints { node: String },
    #[error("is not allowed to modify labels: {labels}")]
    UpdateLabels { labels: String },
    #[error("can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace")]
    LeaseNamespace,
    #[error("can only access node lease with the same name as the requesting node")]
    LeaseName,
    #[error("node requested token not bound to a pod")]
    TokenNotBound,
    #[error("node requested token with a pod binding without a uid")]
    TokenWithoutUid,
    #[error(
        "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
    )]
    TokenUid { uid: String },
    #[error("node requested token bound to a pod scheduled on a different node")]
    TokenElsewhere,
    /// Not a refusal of the plugin's own: the object it must read is not there (404).
    #[error("{} {name:?} not found", resource.name)]
    NotFound { resource: &'static ResourceType, name: String },
    #[error("the object does not decode as a {kind}: {error}")]
    Undecodable { kind: &'static str, error: String },
}

/// What is asked of an object.
#[derive(Debug, Clone, Copy)]
pub enum Operation<'a> {
    Create { object: &'a Value },
    Update { old: &'a Value, new: &'a Value },
    Delete,
}

impl Operation<'_> {
    /// Upstream's operation names.
    fn name(&self) -> &'static str {
        match self {
            Operation::Create { .. } => "CREATE",
            Operation::Update { .. } => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// One request as the plugin reads it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub resource: &'a ResourceType,
    pub namespace: &'a str,
    /// The name in the path (empty for a create).
    pub name: &'a str,
    pub subresource: &'a str,
    pub operation: Operation<'a>,
}

fn typed<T: DeserializeOwned>(v: &Value, kind: &'static str) -> Result<T, Refusal> {
    T::deserialize(v).map_err(|e| Refusal::Undecodable { kind, error: e.to_string() })
}

/// The plugin's decision for `node` (from the user's name; empty when it names none).
pub fn admit(
    user: &User,
    node: &str,
    req: &Request<'_>,
    objects: &dyn Objects,
) -> Result<(), Refusal> {
    if node.is_empty() {
        return Err(Refusal::UnknownNode { user: user.name.clone() });
    }
    match (req.resource.group, req.resource.name, req.subresource) {
        ("", "pods", "") => match req.operation {
            Operation::Create { object } => pod_create(node, &typed(object, "Pod")?, objects),
            Operation::Delete => {
                let pod = objects.pod(req.namespace, req.name).ok_or_else(|| {
                    Refusal::NotFound { resource: &resources::PODS, name: req.name.to_string() }
                })?;
                if node_name(&pod) != node {
                    return Err(Refusal::DeleteElsewhere { node: node.to_string() });
                }
                Ok(())
            }
            op => Err(Refusal::PodOperation { op: op.name(), node: node.to_string() }),
        },
        ("", "pods", "status") => match req.operation {
            Operation::Update { old, new } => {
                pod_status(node, &typed(old, "Pod")?, &typed(new, "Pod")?)
            }
            op => Err(Refusal::Operation { op: op.name() }),
        },
        ("", "pods", "eviction") => match req.operation {
            Operation::Create { object } => {
                // The path's name, else the Eviction's own.
                let name = Some(req.name)
                    .filter(|n| !n.is_empty())
                    .or_else(|| object["metadata"]["name"].as_str().filter(|n| !n.is_empty()))
                    .ok_or(Refusal::EvictWhom)?;
                let pod = objects.pod(req.namespace, name).ok_or_else(|| Refusal::NotFound {
                    resource: &resources::PODS,
                    name: name.to_string(),
                })?;
                if node_name(&pod) != node {
                    return Err(Refusal::EvictElsewhere { node: node.to_string() });
                }
                Ok(())
            }
            op => Err(Refusal::Operation { op: op.name() }),
        },
        ("", "pods", sub) => Err(Refusal::PodSubresource { sub: sub.to_string() }),
        ("", "nodes", _) => node_write(node, req),
        ("coordination.k8s.io", "leases", _) => {
            if req.namespace != NODE_LEASE_NAMESPACE {
                return Err(Refusal::LeaseNamespace);
            }
            let name = match req.operation {
                Operation::Create { object } => object["metadata"]["name"].as_str(),
                _ => Some(req.name),
            };
            if name != Some(node) {
                return Err(Refusal::LeaseName);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn node_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

/// A node creating a pod: only a mirror of one of its static pods.
fn pod_create(node: &str, pod: &Pod, objects: &dyn Objects) -> Result<(), Refusal> {
    let n = || node.to_string();
    let mirror = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR));
    if !mirror {
        return Err(Refusal::NotMirror { node: n() });
    }
    if node_name(pod) != node {
        return Err(Refusal::CreateElsewhere { node: n() });
    }
    let owners = pod.metadata.owner_references.as_deref().unwrap_or_default();
    let owner = match owners {
        [] => return Err(Refusal::NotOwner { node: n() }),
        [one] => one,
        _ => return Err(Refusal::SeveralOwners { node: n() }),
    };
    if owner.api_version != "v1" || owner.kind != "Node" || owner.name != node {
        return Err(Refusal::NotOwner { node: n() });
    }
    if owner.controller != Some(true) {
        return Err(Refusal::NotController { node: n() });
    }
    if owner.block_owner_deletion == Some(true) {
        return Err(Refusal::BlockOwnerDeletion { node: n() });
    }
    let registered = objects
        .node(node)
        .ok_or_else(|| Refusal::NotFound { resource: &resources::NODES, name: n() })?;
    let node_uid = registered.metadata.uid.unwrap_or_default();
    if owner.uid != node_uid {
        return Err(Refusal::OwnerUid { node: n(), owner_uid: owner.uid.clone(), node_uid });
    }
    let refs = references::of_pod(pod);
    if refs.service_account.is_some() {
        return Err(Refusal::ReferencesServiceAccount { node: n() });
    }
    if !refs.secrets.is_empty() {
        return Err(Refusal::ReferencesSecrets { node: n() });
    }
    if !refs.config_maps.is_empty() {
        return Err(Refusal::ReferencesConfigMaps { node: n() });
    }
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let bundles = volumes
        .iter()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .any(|s| s.cluster_trust_bundle.is_some());
    if bundles {
        return Err(Refusal::ReferencesClusterTrustBundles { node: n() });
    }
    if volumes.iter().any(|v| v.persistent_volume_claim.is_some()) {
        return Err(Refusal::ReferencesClaims { node: n() });
    }
    let claims = pod.spec.as_ref().and_then(|s| s.resource_claims.as_deref()).unwrap_or_default();
    if !claims.is_empty() {
        return Err(Refusal::ReferencesResourceClaims { node: n() });
    }
    Ok(())
}

fn pod_status(node: &str, old: &Pod, new: &Pod) -> Result<(), Refusal> {
    if node_name(old) != node {
        return Err(Refusal::StatusElsewhere { node: node.to_string() });
    }
    let labels = |p: &Pod| p.metadata.labels.clone().unwrap_or_default();
    if labels(old) != labels(new) {
        return Err(Refusal::StatusLabels { node: node.to_string() });
    }
    let claims = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.resource_claim_name))
            .collect::<Vec<_>>()
    };
    if claims(old) != claims(new) {
        return Err(Refusal::StatusResourceClaims { node: node.to_string() });
    }
    Ok(())
}

/// The label keys whose values differ between `a` and `b` (added, removed or changed).
fn modified_labels(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> BTreeSet<String> {
    let differs = |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| {
        x.iter().filter(|(k, v)| y.get(*k) != Some(*v)).map(|(k, _)| k.clone()).collect::<Vec<_>>()
    };
    differs(a, b).into_iter().chain(differs(b, a)).collect()
}

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or_default()
}

fn in_namespace(ns: &str, of: &str) -> bool {
    ns == of || ns.strip_suffix(of).is_some_and(|rest| rest.ends_with('.'))
}

/// Whether a kubelet may set `key` on its Node (upstream's `IsKubeletLabel`).
pub fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES.iter().any(|of| in_namespace(label_namespace(key), of))
}

/// The labels among `modified` a node may not add, remove or change, comma-joined in order.
pub fn forbidden_labels(modified: &BTreeSet<String>) -> String {
    let forbidden: Vec<&str> = modified
        .iter()
        .filter(|key| {
            let ns = label_namespace(key);
            let kubernetes = ["kubernetes.io", "k8s.io"].iter().any(|of| in_namespace(ns, of));
            in_namespace(ns, RESTRICTED_LABEL_NAMESPACE) || (kubernetes && !is_kubelet_label(key))
        })
        .map(String::as_str)
        .collect();
    forbidden.join(", ")
}

fn node_write(node: &str, req: &Request<'_>) -> Result<(), Refusal> {
    let n = || node.to_string();
    let requested = match req.operation {
        Operation::Create { object } if req.name.is_empty() => {
            object["metadata"]["name"].as_str().unwrap_or_default()
        }
        _ => req.name,
    };
    if requested != node {
        return Err(Refusal::OtherNode { node: n(), other: requested.to_string() });
    }
    let labels = |n: &Node| n.metadata.labels.clone().unwrap_or_default();
    let config_source = |n: &Node| n.spec.as_ref().and_then(|s| s.config_source.clone());
    match req.operation {
        Operation::Create { object } => {
            let new: Node = typed(object, "Node")?;
            if config_source(&new).is_some() {
                return Err(Refusal::CreateConfigSource { node: n() });
            }
            let forbidden = forbidden_labels(&modified_labels(&labels(&new), &BTreeMap::new()));
            if !forbidden.is_empty() {
                return Err(Refusal::CreateLabels { node: n(), labels: forbidden });
            }
        }
        Operation::Update { old, new } => {
            let (old, new): (Node, Node) = (typed(old, "Node")?, typed(new, "Node")?);
            if config_source(&new).is_some() && config_source(&new) != config_source(&old) {
                return Err(Refusal::UpdateConfigSource { node: n() });
            }
            let taints =
                |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
            if taints(&old) != taints(&new) {
                return Err(Refusal::Taints { node: n() });
            }
            let forbidden = forbidden_labels(&modified_labels(&labels(&new), &labels(&old)));
            if !forbidden.is_empty() {
                return Err(Refusal::UpdateLabels { labels: forbidden });
            }
        }
        Operation::Delete => {}
    }
    Ok(())
}

/// A node's TokenRequest in `namespace`: bound to a pod (by name and UID) bound to the node.
pub fn token(
    node: &str,
    namespace: &str,
    request: &TokenRequest,
    objects: &dyn Objects,
) -> Result<(), Refusal> {
    let r = request.spec.bound_object_ref.as_ref().ok_or(Refusal::TokenNotBound)?;
    let name = r.name.as_deref().unwrap_or_default();
    if r.api_version.as_deref() != Some("v1") || r.kind.as_deref() != Some("Pod") || name.is_empty()
    {
        return Err(Refusal::TokenNotBound);
    }
    let uid = r.uid.as_deref().unwrap_or_default();
    if uid.is_empty() {
        return Err(Refusal::TokenWithoutUid);
    }
    let pod = objects
        .pod(namespace, name)
        .ok_or_else(|| Refusal::NotFound { resource: &resources::PODS, name: name.to_string() })?;
    if pod.metadata.uid.as_deref() != Some(uid) {
        return Err(Refusal::TokenUid { uid: uid.to_string() });
    }
    if node_name(&pod) != node {
        return Err(Refusal::TokenElsewhere);
    }
    Ok(())
}

/// The plugin over one request's user, looking objects up in `objects`; a no-op for users
/// who are no node, or when the plugin is disabled.
#[derive(Debug, Clone, Copy)]
pub struct NodeRestriction<'a> {
    objects: &'a dyn Objects,
    user: &'a User,
    on: bool,
}

impl<'a> NodeRestriction<'a> {
    /// Over the registry, as its admission settings say.
    pub fn new(registry: &'a Registry, user: &'a User) -> Self {
        Self::over(registry, user, registry.admission.enabled(Plugin::NodeRestriction))
    }

    pub fn over(objects: &'a dyn Objects, user: &'a User, on: bool) -> Self {
        Self { objects, user, on }
    }

    fn node(&self) -> Option<&'a str> {
        self.user.node().filter(|_| self.on)
    }

    fn refuse(r: &ResourceType, name: &str, why: Refusal) -> ApiError {
        match why {
            Refusal::NotFound { resource, name } => ApiError::not_found(resource, &name),
            Refusal::Undecodable { .. } => ApiError::bad_request(why.to_string()),
            why => ApiError::forbidden_object(r, name, &why.to_string()),
        }
    }

    /// Upstream's name for the object in a refusal: the path's, else the object's name or
    /// generateName, else `Unknown`.
    fn name_of(path_name: &str, object: Option<&Value>) -> String {
        if !path_name.is_empty() {
            return path_name.to_string();
        }
        let meta = object.map(|o| &o["metadata"]);
        let field = |f: &str| {
            meta.and_then(|m| m[f].as_str()).filter(|s| !s.is_empty()).map(str::to_string)
        };
        field("name").or_else(|| field("generateName")).unwrap_or_else(|| "Unknown".into())
    }

    fn check(&self, req: &Request<'_>, object: Option<&Value>) -> Result<(), ApiError> {
        let Some(node) = self.node() else { return Ok(()) };
        admit(self.user, node, req, self.objects)
            .map_err(|why| Self::refuse(req.resource, &Self::name_of(req.name, object), why))
    }

    /// A create of `object` as `r` in `ns`.
    pub fn admit_create(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        object: &Value,
    ) -> Result<(), ApiError> {
        let req = Request {
            resource: r,
            namespace: ns.unwrap_or_default(),
            name: "",
            subresource: "",
            operation: Operation::Create { object },
        };
        self.check(&req, Some(object))
    }

    /// An update (or patch) of `name` (its `sub`resource) from `old` to `new`.
    pub fn admit_update(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        old: &Value,
        new: &Value,
    ) -> Result<(), ApiError> {
        let req = Request {
            resource: r,
            namespace: ns.unwrap_or_default(),
            name,
            subresource: sub.unwrap_or_default(),
            operation: Operation::Update { old, new },
        };
        self.check(&req, Some(new))
    }

    /// A delete of `name`.
    pub fn admit_delete(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(), ApiError> {
        let req = Request {
            resource: r,
            namespace: ns.unwrap_or_default(),
            name,
            subresource: "",
            operation: Operation::Delete,
        };
        self.check(&req, None)
    }

    /// An eviction (`pods/eviction`) of pod `name` in `ns`, `eviction` the body.
    pub fn admit_eviction(&self, ns: &str, name: &str, eviction: &Value) -> Result<(), ApiError> {
        let req = Request {
            resource: &resources::PODS,
            namespace: ns,
            name,
            subresource: "eviction",
            operation: Operation::Create { object: eviction },
        };
        self.check(&req, Some(eviction))
    }

    /// A TokenRequest for the service account `name` in `ns`.
    pub fn admit_token(
        &self,
        r: &ResourceType,
        ns: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<(), ApiError> {
        let Some(node) = self.node() else { return Ok(()) };
        if node.is_empty() {
            let why = Refusal::UnknownNode { user: self.user.name.clone() };
            return Err(Self::refuse(r, name, why));
        }
        token(node, ns, request, self.objects).map_err(|why| Self::refuse(r, name, why))
    }
}

#[cfg(test)]
mod tests;
