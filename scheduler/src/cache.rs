//! The scheduler's view of the cluster, as upstream's `internal/cache`: every node with the pods
//! bound (or assumed) to it, and per node what those pods request and which host ports they use.
//!
//! A pod is *assumed* the moment the scheduler picks its node, before the binding reaches the
//! apiserver, so the next pod already sees that node's capacity taken. The watch later confirms
//! it (`add_pod` of the bound pod), or a failed binding forgets it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::resources::{self, Resource};

/// `namespace/name`.
pub type PodKey = String;

pub fn pod_key(pod: &Pod) -> PodKey {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

pub fn pod_uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_else(|| pod_key(pod))
}

pub use api::scheduling::{HostPort, WILDCARD_IP};

/// What the scheduler needs of a pod, computed once (upstream's `PodInfo` and PreFilter state).
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    pub key: PodKey,
    pub uid: String,
    pub requests: Resource,
    pub non_zero_requests: Resource,
    pub host_ports: Vec<HostPort>,
}

impl PodInfo {
    pub fn new(pod: Arc<Pod>) -> Self {
        let spec = pod.spec.clone().unwrap_or_default();
        let host_ports = api::scheduling::host_ports(&spec);
        Self {
            key: pod_key(&pod),
            uid: pod_uid(&pod),
            requests: resources::pod_requests(&spec),
            non_zero_requests: resources::pod_non_zero_requests(&spec),
            host_ports,
            pod,
        }
    }

    pub fn spec(&self) -> Option<&k8s_openapi::api::core::v1::PodSpec> {
        self.pod.spec.as_ref()
    }
}

/// One node and what is bound (or assumed) to it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub name: String,
    /// `None` while pods name a node the watch has not delivered (or has deleted).
    pub node: Option<Arc<Node>>,
    pub allocatable: Resource,
    pub allowed_pods: i64,
    /// Sum of the pods' requests (filtering, `BalancedAllocation`).
    pub requested: Resource,
    /// Sum of the pods' non-zero requests (`LeastAllocated`).
    pub non_zero_requested: Resource,
    pub pods: HashMap<String, PodInfo>,
    pub used_ports: HashMap<HostPort, u32>,
}

impl NodeInfo {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            node: None,
            allocatable: Resource::default(),
            allowed_pods: 0,
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            pods: HashMap::new(),
            used_ports: HashMap::new(),
        }
    }

    /// A node with its allocatable read from `status.allocatable`.
    pub fn with_node(node: Arc<Node>) -> Self {
        let mut info = Self::new(node.metadata.name.as_deref().unwrap_or_default());
        info.set_node(node);
        info
    }

    pub fn set_node(&mut self, node: Arc<Node>) {
        let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        self.allocatable = Resource::from_list(alloc);
        self.allowed_pods = resources::allowed_pods(alloc);
        self.node = Some(node);
    }

    pub fn add_pod(&mut self, pod: PodInfo) {
        self.requested.add(&pod.requests);
        self.non_zero_requested.add(&pod.non_zero_requests);
        for p in &pod.host_ports {
            *self.used_ports.entry(p.clone()).or_default() += 1;
        }
        if let Some(old) = self.pods.insert(pod.uid.clone(), pod) {
            self.unaccount(&old);
        }
    }

    pub fn remove_pod(&mut self, uid: &str) -> Option<PodInfo> {
        let pod = self.pods.remove(uid)?;
        self.unaccount(&pod);
        Some(pod)
    }

    fn unaccount(&mut self, pod: &PodInfo) {
        self.requested.sub(&pod.requests);
        self.non_zero_requested.sub(&pod.non_zero_requests);
        for p in &pod.host_ports {
            if let Some(n) = self.used_ports.get_mut(p) {
                *n -= 1;
                if *n == 0 {
                    self.used_ports.remove(p);
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PodState {
    node: String,
    assumed: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheError {
    #[error("pod {pod} is already in the cache (on node {node})")]
    AlreadyCached { pod: PodKey, node: String },
}

/// Every `NodeInfo` in one vector (filtering walks it without hashing), indexed by name.
#[derive(Debug, Default)]
struct NodeTable {
    infos: Vec<NodeInfo>,
    index: HashMap<String, usize>,
}

impl NodeTable {
    fn get(&self, name: &str) -> Option<&NodeInfo> {
        self.index.get(name).map(|i| &self.infos[*i])
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut NodeInfo> {
        self.index.get(name).map(|i| &mut self.infos[*i])
    }

    /// The slot of `name`, created empty (no Node object yet) when missing.
    fn slot(&mut self, name: &str) -> usize {
        if let Some(i) = self.index.get(name) {
            return *i;
        }
        self.infos.push(NodeInfo::new(name));
        self.index.insert(name.to_string(), self.infos.len() - 1);
        self.infos.len() - 1
    }

    /// Removes `name`; returns `(from, to)` when the last slot moved into its place.
    fn remove(&mut self, name: &str) -> Option<(usize, usize)> {
        let i = self.index.remove(name)?;
        self.infos.swap_remove(i);
        let last = self.infos.len();
        if i == last {
            return None;
        }
        let moved = self.infos[i].name.clone();
        self.index.insert(moved, i);
        Some((last, i))
    }
}

/// Nodes, and pods bound or assumed to them.
#[derive(Debug, Default)]
pub struct Cache {
    nodes: NodeTable,
    /// Slots of nodes that have a Node object, in the order they arrived: the order filtering
    /// walks them in (round robin from where the last cycle stopped).
    order: Vec<usize>,
    pods: HashMap<String, PodState>,
}

/// Whether a node change can make an unschedulable pod schedulable (upstream's `NodeUpdate`
/// event with the fields its plugins register for).
fn scheduling_relevant(old: &Node, new: &Node) -> bool {
    old.metadata.labels != new.metadata.labels
        || old.spec.as_ref().map(|s| (&s.taints, s.unschedulable))
            != new.spec.as_ref().map(|s| (&s.taints, s.unschedulable))
        || old.status.as_ref().map(|s| &s.allocatable)
            != new.status.as_ref().map(|s| &s.allocatable)
}

impl Cache {
    /// Adds or updates a node; true when pods that did not fit might now (a new node, or a
    /// change to labels, taints, unschedulable or allocatable).
    pub fn add_node(&mut self, node: Arc<Node>) -> bool {
        let name = node.metadata.name.clone().unwrap_or_default();
        let slot = self.nodes.slot(&name);
        let info = &mut self.nodes.infos[slot];
        let relevant = match &info.node {
            Some(old) => scheduling_relevant(old, &node),
            None => {
                self.order.push(slot);
                true
            }
        };
        info.set_node(node);
        relevant
    }

    pub fn remove_node(&mut self, name: &str) {
        let Some(slot) = self.nodes.index.get(name).copied() else { return };
        self.order.retain(|i| *i != slot);
        let info = &mut self.nodes.infos[slot];
        info.node = None;
        if info.pods.is_empty() {
            self.drop_slot(name);
        }
    }

    fn drop_slot(&mut self, name: &str) {
        if let Some((from, to)) = self.nodes.remove(name) {
            for i in self.order.iter_mut().filter(|i| **i == from) {
                *i = to;
            }
        }
    }

    /// Drops nodes not in `keep` (after a relist).
    pub fn retain_nodes(&mut self, keep: &HashSet<String>) {
        let gone: Vec<String> = self
            .order
            .iter()
            .map(|i| &self.nodes.infos[*i].name)
            .filter(|n| !keep.contains(*n))
            .cloned()
            .collect();
        for n in gone {
            self.remove_node(&n);
        }
    }

    /// Nodes with a Node object, in filtering order.
    pub fn node_count(&self) -> usize {
        self.order.len()
    }

    /// The `i`th node in filtering order.
    pub fn node_at(&self, i: usize) -> Option<&NodeInfo> {
        self.order.get(i).map(|slot| &self.nodes.infos[*slot])
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name)
    }

    pub fn is_assumed(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|s| s.assumed)
    }

    pub fn contains_pod(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Adds a pod the scheduler chose a node for, before the binding is done.
    pub fn assume(&mut self, pod: PodInfo, node: &str) -> Result<(), CacheError> {
        if let Some(s) = self.pods.get(&pod.uid) {
            return Err(CacheError::AlreadyCached { pod: pod.key, node: s.node.clone() });
        }
        self.pods.insert(pod.uid.clone(), PodState { node: node.to_string(), assumed: true });
        let slot = self.nodes.slot(node);
        self.nodes.infos[slot].add_pod(pod);
        Ok(())
    }

    /// Undoes `assume` after a failed binding (no-op once the watch confirmed the pod).
    pub fn forget(&mut self, uid: &str) {
        if self.pods.get(uid).is_some_and(|s| s.assumed) {
            self.remove_pod(uid);
        }
    }

    /// Adds or updates a pod the watch reports bound to a node; confirms an assumed one.
    pub fn add_pod(&mut self, pod: PodInfo, node: &str) {
        if let Some(s) = self.pods.get(&pod.uid)
            && s.node != node
        {
            self.remove_pod(&pod.uid);
        }
        self.pods.insert(pod.uid.clone(), PodState { node: node.to_string(), assumed: false });
        let slot = self.nodes.slot(node);
        self.nodes.infos[slot].add_pod(pod);
    }

    /// Removes a pod (deleted, or finished: terminal pods hold no resources).
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(state) = self.pods.remove(uid) else { return false };
        if let Some(info) = self.nodes.get_mut(&state.node) {
            info.remove_pod(uid);
            if info.node.is_none() && info.pods.is_empty() {
                self.drop_slot(&state.node);
            }
        }
        true
    }

    /// Drops confirmed pods not in `keep` (after a relist); assumed pods stay.
    pub fn retain_pods(&mut self, keep: &HashSet<String>) {
        let gone: Vec<String> = self
            .pods
            .iter()
            .filter(|(uid, s)| !s.assumed && !keep.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            self.remove_pod(&uid);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, NodeSpec, NodeStatus, PodSpec, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    pub(crate) fn node(name: &str, cpu: &str, memory: &str, pods: &str) -> Node {
        let alloc = [("cpu", cpu), ("memory", memory), ("pods", pods)]
            .iter()
            .map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string())))
            .collect();
        Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
        }
    }

    pub(crate) fn pod(name: &str, cpu: &str, memory: &str) -> Pod {
        let mut requests = std::collections::BTreeMap::new();
        if !cpu.is_empty() {
            requests.insert("cpu".to_string(), Quantity(cpu.into()));
        }
        if !memory.is_empty() {
            requests.insert("memory".to_string(), Quantity(memory.into()));
        }
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(requests),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    pub(crate) fn with_host_port(mut p: Pod, port: i32, ip: Option<&str>) -> Pod {
        if let Some(spec) = p.spec.as_mut() {
            spec.containers[0].ports = Some(vec![ContainerPort {
                container_port: port,
                host_port: Some(port),
                host_ip: ip.map(String::from),
                ..Default::default()
            }]);
        }
        p
    }

    fn info(p: Pod) -> PodInfo {
        PodInfo::new(Arc::new(p))
    }

    #[test]
    fn assumed_pods_count_until_forgotten_and_confirmed_ones_stay() {
        let mut c = Cache::default();
        assert!(c.add_node(Arc::new(node("n1", "4", "8Gi", "110"))));
        c.assume(info(with_host_port(pod("a", "1", "1Gi"), 80, None)), "n1").expect("assume");
        let n = c.node("n1").expect("n1");
        assert_eq!((n.requested.milli_cpu, n.requested.memory), (1000, 1 << 30));
        assert_eq!(n.used_ports.len(), 1);
        assert!(c.is_assumed("uid-a"));
        assert!(matches!(
            c.assume(info(pod("a", "1", "1Gi")), "n1"),
            Err(CacheError::AlreadyCached { .. })
        ));

        c.forget("uid-a");
        let n = c.node("n1").expect("n1");
        assert!(n.requested.is_zero() && n.used_ports.is_empty() && n.pods.is_empty());

        c.assume(info(pod("b", "500m", "")), "n1").expect("assume");
        c.add_pod(info(pod("b", "500m", "")), "n1");
        assert!(!c.is_assumed("uid-b"), "the watch confirmed it");
        c.forget("uid-b");
        assert_eq!(c.node("n1").map(|n| n.requested.milli_cpu), Some(500), "confirmed pods stay");
        assert_eq!(
            c.node("n1").map(|n| n.non_zero_requested.memory),
            Some(crate::resources::DEFAULT_MEMORY_REQUEST)
        );
        assert!(c.remove_pod("uid-b"));
        assert!(c.node("n1").is_some_and(|n| n.requested.is_zero()));
    }

    #[test]
    fn pods_on_unknown_nodes_are_kept_and_nodes_go_when_deleted_and_empty() {
        let mut c = Cache::default();
        c.add_pod(info(pod("a", "1", "")), "later");
        assert_eq!(c.node_count(), 0, "no Node object yet");
        assert!(c.add_node(Arc::new(node("later", "2", "1Gi", "10"))));
        assert_eq!(c.node_at(0).map(|n| n.requested.milli_cpu), Some(1000));
        c.remove_node("later");
        assert_eq!(c.node_count(), 0);
        assert!(c.node("later").is_some(), "still holds a pod");
        c.remove_pod("uid-a");
        assert!(c.node("later").is_none());
    }

    #[test]
    fn only_scheduling_relevant_node_changes_report_true() {
        let mut c = Cache::default();
        let n = node("n1", "4", "8Gi", "110");
        assert!(c.add_node(Arc::new(n.clone())));
        let mut heartbeat = n.clone();
        heartbeat.metadata.resource_version = Some("2".into());
        assert!(!c.add_node(Arc::new(heartbeat)));
        let mut labelled = n;
        labelled.metadata.labels = Some([("disk".to_string(), "ssd".to_string())].into());
        assert!(c.add_node(Arc::new(labelled)));
        let mut bigger = node("n1", "8", "8Gi", "110");
        bigger.metadata.labels = Some([("disk".to_string(), "ssd".to_string())].into());
        assert!(c.add_node(Arc::new(bigger)));
        assert_eq!(c.node_count(), 1);
    }

    #[test]
    fn removing_a_node_keeps_the_others_in_order_and_findable() {
        let mut c = Cache::default();
        for n in ["a", "b", "c", "d"] {
            c.add_node(Arc::new(node(n, "4", "8Gi", "110")));
        }
        c.add_pod(info(pod("on-ghost", "1", "")), "ghost");
        c.remove_node("b");
        let names: Vec<&str> =
            (0..c.node_count()).filter_map(|i| c.node_at(i)).map(|n| n.name.as_str()).collect();
        assert_eq!(names, vec!["a", "c", "d"]);
        c.add_pod(info(pod("p", "1", "")), "d");
        assert_eq!(c.node("d").map(|n| n.requested.milli_cpu), Some(1000));
        assert_eq!(c.node_at(2).map(|n| n.requested.milli_cpu), Some(1000));
        c.remove_pod("uid-on-ghost");
        assert!(c.node("ghost").is_none());
        assert_eq!(c.node_at(2).map(|n| n.name.as_str()), Some("d"));
        assert!(c.add_node(Arc::new(node("b", "4", "8Gi", "110"))));
        assert_eq!(c.node_at(3).map(|n| n.name.as_str()), Some("b"));
    }

    #[test]
    fn relists_drop_what_is_gone_but_keep_assumed_pods() {
        let mut c = Cache::default();
        c.add_node(Arc::new(node("n1", "4", "8Gi", "110")));
        c.add_node(Arc::new(node("n2", "4", "8Gi", "110")));
        c.add_pod(info(pod("gone", "1", "")), "n1");
        c.assume(info(pod("assumed", "1", "")), "n1").expect("assume");
        c.retain_pods(&HashSet::new());
        c.retain_nodes(&["n1".to_string()].into());
        assert_eq!(c.node_count(), 1);
        assert!(!c.contains_pod("uid-gone"));
        assert!(c.is_assumed("uid-assumed"));
    }

    #[test]
    fn host_ports_conflict_on_same_protocol_port_and_overlapping_address() {
        let hp =
            |ip: &str, proto: &str, port| HostPort { ip: ip.into(), protocol: proto.into(), port };
        assert!(hp("0.0.0.0", "TCP", 80).conflicts(&hp("10.0.0.1", "TCP", 80)));
        assert!(hp("10.0.0.1", "TCP", 80).conflicts(&hp("10.0.0.1", "TCP", 80)));
        assert!(!hp("10.0.0.1", "TCP", 80).conflicts(&hp("10.0.0.2", "TCP", 80)));
        assert!(!hp("0.0.0.0", "TCP", 80).conflicts(&hp("0.0.0.0", "UDP", 80)));
        assert!(!hp("0.0.0.0", "TCP", 80).conflicts(&hp("0.0.0.0", "TCP", 81)));
    }
}
