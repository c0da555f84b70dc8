//! The node authorizer's graph, as upstream's `graph.go`: which objects each node reaches
//! through the pods bound to it. Edges run object → pod → node (a bound pod's Secrets,
//! ConfigMaps, service account, claims and resource claims), PV → claim (a bound volume) and
//! Secret → PV (the volume's kubelet-visible secrets). A mirror pod reaches its node and
//! nothing else: a node must never gain access by creating a pod.
//!
//! Kept as the answers decisions need rather than as a general graph: for each object, how
//! many pods on each node reference it, so that "does node N reach object O" is a map lookup
//! under a read lock. [`Graph::set_pod`] and [`Graph::set_pv`] are the only writers (the
//! populator's, from the store's watch); [`pod_edges`] is the pure part.

use std::collections::{BTreeSet, HashMap};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};

use super::references::{self, PvReferences};

/// The kinds of object a node may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Pod,
    Secret,
    ConfigMap,
    ServiceAccount,
    PersistentVolumeClaim,
    PersistentVolume,
    ResourceClaim,
}

/// An object: its kind, namespace (`""` for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Vertex {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl Vertex {
    pub fn new(kind: Kind, namespace: &str, name: &str) -> Self {
        Self { kind, namespace: namespace.to_string(), name: name.to_string() }
    }
}

/// A bound pod's edges: its node, and the objects it makes that node reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodEdges {
    pub node: String,
    pub reaches: BTreeSet<Vertex>,
}

/// Upstream's `AnnotationKey` for mirror pods.
const MIRROR: &str = "kubernetes.io/config.mirror";

/// What `pod` adds to the graph: nothing until it is bound to a node (`spec.nodeName`); then
/// its node and, unless it is a mirror pod, everything it references.
pub fn pod_edges(pod: &Pod) -> Option<PodEdges> {
    let node = pod.spec.as_ref()?.node_name.clone().filter(|n| !n.is_empty())?;
    let mirror = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR));
    if mirror {
        return Some(PodEdges { node, reaches: BTreeSet::new() });
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let refs = references::of_pod(pod);
    let mut reaches = BTreeSet::new();
    let mut each = |kind, names: &BTreeSet<String>| {
        reaches.extend(names.iter().map(|n| Vertex::new(kind, ns, n)));
    };
    each(Kind::Secret, &refs.secrets);
    each(Kind::ConfigMap, &refs.config_maps);
    each(Kind::PersistentVolumeClaim, &refs.claims);
    each(Kind::ResourceClaim, &refs.resource_claims);
    if let Some(sa) = &refs.service_account {
        reaches.insert(Vertex::new(Kind::ServiceAccount, ns, sa));
    }
    Some(PodEdges { node, reaches })
}

/// What `pv` adds: its claim and secrets while it is bound.
pub fn pv_edges(pv: &PersistentVolume) -> Option<PvReferences> {
    references::of_pv(pv)
}

#[derive(Debug, Default)]
struct Inner {
    /// Bound pods by (namespace, name).
    pods: HashMap<(String, String), PodEdges>,
    /// For each object bound pods reference: node → how many of its pods do.
    reached: HashMap<Vertex, HashMap<String, usize>>,
    /// Bound persistent volumes by name.
    pvs: HashMap<String, PvReferences>,
    /// For each Secret (namespace, name): the volumes that name it.
    pv_secrets: HashMap<(String, String), BTreeSet<String>>,
}

impl Inner {
    fn remove_pod(&mut self, key: &(String, String)) {
        let Some(old) = self.pods.remove(key) else { return };
        for v in &old.reaches {
            if let Some(nodes) = self.reached.get_mut(v) {
                if let Some(n) = nodes.get_mut(&old.node) {
                    *n -= 1;
                    if *n == 0 {
                        nodes.remove(&old.node);
                    }
                }
                if nodes.is_empty() {
                    self.reached.remove(v);
                }
            }
        }
    }

    fn add_pod(&mut self, key: (String, String), edges: PodEdges) {
        for v in &edges.reaches {
            *self.reached.entry(v.clone()).or_default().entry(edges.node.clone()).or_default() += 1;
        }
        self.pods.insert(key, edges);
    }

    fn remove_pv(&mut self, name: &str) {
        let Some(old) = self.pvs.remove(name) else { return };
        for s in &old.secrets {
            if let Some(pvs) = self.pv_secrets.get_mut(s) {
                pvs.remove(name);
                if pvs.is_empty() {
                    self.pv_secrets.remove(s);
                }
            }
        }
    }

    fn add_pv(&mut self, name: &str, refs: PvReferences) {
        for s in &refs.secrets {
            self.pv_secrets.entry(s.clone()).or_default().insert(name.to_string());
        }
        self.pvs.insert(name.to_string(), refs);
    }

    fn claim_reaches(&self, node: &str, (ns, name): &(String, String)) -> bool {
        let claim = Vertex::new(Kind::PersistentVolumeClaim, ns, name);
        self.reached.get(&claim).is_some_and(|nodes| nodes.contains_key(node))
    }

    fn reaches(&self, node: &str, v: &Vertex) -> bool {
        match v.kind {
            Kind::Pod => self
                .pods
                .get(&(v.namespace.clone(), v.name.clone()))
                .is_some_and(|p| p.node == node),
            Kind::PersistentVolume => {
                self.pvs.get(&v.name).is_some_and(|pv| self.claim_reaches(node, &pv.claim))
            }
            _ => {
                let direct = self.reached.get(v).is_some_and(|nodes| nodes.contains_key(node));
                direct
                    || (v.kind == Kind::Secret
                        && self
                            .pv_secrets
                            .get(&(v.namespace.clone(), v.name.clone()))
                            .into_iter()
                            .flatten()
                            .filter_map(|pv| self.pvs.get(pv))
                            .any(|pv| self.claim_reaches(node, &pv.claim)))
            }
        }
    }
}

/// The graph, shared by the populator (writes) and decisions (reads).
#[derive(Debug, Default)]
pub struct Graph {
    inner: RwLock<Inner>,
}

impl Graph {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `node` reaches `v` through the pods bound to it.
    pub fn reaches(&self, node: &str, v: &Vertex) -> bool {
        self.read().reaches(node, v)
    }

    /// The pod `namespace/name` now has `edges` (`None`: it is gone or not bound).
    pub fn set_pod(&self, namespace: &str, name: &str, edges: Option<PodEdges>) {
        let key = (namespace.to_string(), name.to_string());
        let mut inner = self.write();
        if inner.pods.get(&key) == edges.as_ref() {
            return;
        }
        inner.remove_pod(&key);
        if let Some(e) = edges {
            inner.add_pod(key, e);
        }
    }

    /// The persistent volume `name` now has `refs` (`None`: it is gone or not bound).
    pub fn set_pv(&self, name: &str, refs: Option<PvReferences>) {
        let mut inner = self.write();
        if inner.pvs.get(name) == refs.as_ref() {
            return;
        }
        inner.remove_pv(name);
        if let Some(r) = refs {
            inner.add_pv(name, r);
        }
    }

    /// Everything replaced at once (a relist): `pods` by (namespace, name), `pvs` by name.
    pub fn replace(
        &self,
        pods: Vec<((String, String), PodEdges)>,
        pvs: Vec<(String, PvReferences)>,
    ) {
        let mut fresh = Inner::default();
        for (key, edges) in pods {
            fresh.add_pod(key, edges);
        }
        for (name, refs) in pvs {
            fresh.add_pv(&name, refs);
        }
        *self.write() = fresh;
    }

    /// How many bound pods and objects they reach the graph holds (for tests and logs).
    pub fn size(&self) -> (usize, usize) {
        let inner = self.read();
        (inner.pods.len(), inner.reached.len())
    }
}

#[cfg(test)]
mod tests;
