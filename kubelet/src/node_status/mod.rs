//! The node's API object, as upstream's `kubelet_node_status.go`: what the node is
//! ([`MachineInfo`], read once), how it is doing ([`Readings`], read at every update), and the
//! pure functions that turn them into a `Node` and its status. [`reporter`] registers the node
//! and posts its status on change and at least every `nodeStatusReportFrequency`.

pub mod machine;
pub mod reporter;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::cm::allocatable::{NodeAllocatable, Reservable};
use crate::eviction::{Pressure, Signal};

pub use machine::{MachineInfo, Readings};

/// The kubelet version reported in `nodeInfo.kubeletVersion` (the API level we implement).
pub const KUBELET_VERSION: &str = "v1.35.0";

/// What the kubelet knows about its node besides the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    pub hostname: String,
    pub internal_ip: Option<String>,
    pub max_pods: u32,
    /// `<runtime>://<version>`, e.g. `containerd://1.6.20`.
    pub runtime_version: String,
    /// The kubelet API's port (`daemonEndpoints.kubeletEndpoint`), 0 when not served.
    pub kubelet_port: u16,
    /// How allocatable is made from capacity.
    pub allocatable: NodeAllocatable,
}

/// The object the kubelet registers: labels and an initial status.
pub fn node(facts: &NodeFacts, machine: &MachineInfo, status: NodeStatus) -> Node {
    let labels = BTreeMap::from([
        (api::keys::LABEL_HOSTNAME.to_string(), facts.name.clone()),
        (api::keys::LABEL_OS.to_string(), "linux".to_string()),
        (api::keys::LABEL_ARCH.to_string(), machine.architecture.clone()),
        ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
        ("beta.kubernetes.io/arch".to_string(), machine.architecture.clone()),
    ]);
    Node {
        metadata: ObjectMeta {
            name: Some(facts.name.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: None,
        status: Some(status),
    }
}

/// Bytes as a quantity: in `Ki` when that is exact (capacity is), else in bytes, as upstream's
/// canonical form of an allocatable figure.
fn bytes(n: u64) -> Quantity {
    Quantity(if n.is_multiple_of(1024) { format!("{}Ki", n / 1024) } else { n.to_string() })
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> NodeCondition {
    NodeCondition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: None,
        last_transition_time: None,
    }
}

/// A pressure condition: `True` with `on` (reason, message) or `False` with `off`.
fn pressure(type_: &str, under: bool, on: [&str; 2], off: [&str; 2]) -> NodeCondition {
    let [reason, message] = if under { on } else { off };
    condition(type_, under, reason, message)
}

/// The node's status now. Condition times: heartbeat is `now`; a transition time is kept from
/// `previous` while the condition's status is unchanged.
pub fn status(
    facts: &NodeFacts,
    machine: &MachineInfo,
    readings: &Readings,
    previous: Option<&NodeStatus>,
    now: Time,
) -> NodeStatus {
    let ephemeral = readings.observed.get(Signal::NodeFsAvailable).map_or(0, |o| o.capacity);
    let mut capacity = BTreeMap::from([
        ("cpu".to_string(), Quantity(machine.cpus.to_string())),
        ("memory".to_string(), Quantity(format!("{}Ki", machine.memory_bytes / 1024))),
        ("pods".to_string(), Quantity(facts.max_pods.to_string())),
    ]);
    if ephemeral > 0 {
        capacity.insert("ephemeral-storage".into(), Quantity(format!("{}Ki", ephemeral / 1024)));
    }
    // Allocatable: capacity less the system, kube and hard eviction reservations, as upstream's
    // `GetNodeAllocatableAbsolute`.
    let a = &facts.allocatable;
    let mut allocatable = capacity.clone();
    let cpu = a.allocatable(Reservable::Cpu, machine.milli_cpus());
    allocatable.insert("cpu".into(), Quantity(Reservable::Cpu.format(cpu)));
    let memory = a.allocatable(Reservable::Memory, machine.memory_bytes);
    allocatable.insert("memory".into(), bytes(memory));
    if ephemeral > 0 {
        let storage = a.allocatable(Reservable::EphemeralStorage, ephemeral);
        allocatable.insert("ephemeral-storage".into(), bytes(storage));
    }
    let mut addresses = Vec::new();
    if let Some(ip) = &facts.internal_ip {
        addresses.push(NodeAddress { type_: "InternalIP".into(), address: ip.clone() });
    }
    addresses.push(NodeAddress { type_: "Hostname".into(), address: facts.hostname.clone() });

    let under = |p: Pressure| readings.pressures.contains(&p);
    let ready = match &readings.runtime_health {
        Ok(()) => condition("Ready", true, "KubeletReady", "kubelet is posting ready status"),
        Err(reason) => condition("Ready", false, "KubeletNotReady", reason),
    };
    let mut conditions = vec![
        pressure(
            "MemoryPressure",
            under(Pressure::Memory),
            ["KubeletHasInsufficientMemory", "kubelet has insufficient memory available"],
            ["KubeletHasSufficientMemory", "kubelet has sufficient memory available"],
        ),
        pressure(
            "DiskPressure",
            under(Pressure::Disk),
            ["KubeletHasDiskPressure", "kubelet has disk pressure"],
            ["KubeletHasNoDiskPressure", "kubelet has no disk pressure"],
        ),
        pressure(
            "PIDPressure",
            under(Pressure::Pid),
            ["KubeletHasInsufficientPID", "kubelet has insufficient PID available"],
            ["KubeletHasSufficientPID", "kubelet has sufficient PID available"],
        ),
        ready,
    ];
    for c in &mut conditions {
        let before = previous
            .and_then(|p| p.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|o| o.type_ == c.type_));
        c.last_transition_time = match before {
            Some(b) if b.status == c.status && b.last_transition_time.is_some() => {
                b.last_transition_time.clone()
            }
            _ => Some(now.clone()),
        };
        c.last_heartbeat_time = Some(now.clone());
    }
    NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        addresses: Some(addresses),
        conditions: Some(conditions),
        daemon_endpoints: (facts.kubelet_port != 0).then(|| NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: i32::from(facts.kubelet_port) }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: machine.architecture.clone(),
            boot_id: machine.boot_id.clone(),
            container_runtime_version: facts.runtime_version.clone(),
            kernel_version: machine.kernel_version.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: KUBELET_VERSION.to_string(),
            machine_id: machine.machine_id.clone(),
            operating_system: "linux".to_string(),
            os_image: machine.os_image.clone(),
            system_uuid: machine.system_uuid.clone(),
            swap: None,
        }),
        ..Default::default()
    }
}

/// Whether two statuses differ in anything but heartbeat times (what makes an update worth
/// posting before the report period is up).
pub fn changed(a: &NodeStatus, b: &NodeStatus) -> bool {
    let strip = |s: &NodeStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s
    };
    strip(a) != strip(b)
}

#[cfg(test)]
mod tests;
