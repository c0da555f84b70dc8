//! The container manager's cgroup work, as upstream's `containerManagerImpl` with its pod and
//! QoS container managers, through [`Cgroups`] (the cgroupfs, or systemd's slices with the
//! systemd driver) and with the names of [`super::CgroupLayout`]:
//! - at start ([`ContainerManager::start`]), `cgroupRoot` must exist; `kubepods` is made under
//!   it, limited to allocatable when `enforceNodeAllocatable` has `pods` (capacity less
//!   `systemReserved` and `kubeReserved`, as upstream's `getNodeAllocatableInternalAbsolute`) or
//!   to capacity otherwise, with `burstable` and `besteffort` inside; the reserved cgroups
//!   `enforceNodeAllocatable` names are held to their reservations;
//! - before a pod's sandbox, its cgroup is made with limits from its containers
//!   ([`super::resources::for_pod`]); the QoS cgroups follow the pods: `burstable` gets the
//!   Burstable pods' CPU requests as shares, `besteffort` the minimum, and with `qosReserved`
//!   memory limits that keep that share of the higher classes' requests for them;
//! - a pod's cgroup is removed with the pod, and a pod cgroup no pod owns is removed at
//!   housekeeping ([`ContainerManager::remove_orphans`]).
//!
//! Without `cgroupsPerQOS` nothing here touches a cgroup.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use api::qos::QosClass;
use k8s_openapi::api::core::v1::PodSpec;

use super::allocatable::{Capacity, NodeAllocatable, Reservable};
use super::cgroupfs::{CgroupError, Cgroups};
use super::node_config::{Enforce, NodeConfig};
use super::resources::{self, Amounts, MIN_SHARES, ResourceConfig};
use crate::events::{ObjectRef, Recorder};

/// Why the kubelet cannot start with its cgroup settings.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: cgroup-root {0:?} doesn't exist")]
    RootMissing(String),
    #[error(
        "failed to enforce {what} Cgroup Limits on {cgroup:?}: {cgroup:?} cgroup does not exist"
    )]
    ReservedMissing { what: &'static str, cgroup: String },
    #[error("setting up the kubelet's cgroups: {0}")]
    Cgroup(#[from] CgroupError),
    #[error("cgroupDriver: {0}")]
    Driver(#[from] super::systemd::DriverError),
}

/// What the QoS cgroups are sized from, per pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PodShare {
    qos: QosClass,
    milli_cpu: i64,
    memory: i64,
}

/// The node's figures the cgroups are sized from.
#[derive(Debug, Clone)]
pub struct NodeResources {
    pub capacity: Capacity,
    pub allocatable: NodeAllocatable,
}

impl NodeResources {
    fn capacity(&self, r: Reservable) -> Option<i64> {
        self.capacity.0.get(&r).map(|v| i64::try_from(*v).unwrap_or(i64::MAX))
    }

    /// `kubepods`' amounts: capacity, less the reservations when pods are enforced.
    fn for_pods(&self, enforce: bool) -> Amounts {
        let amount = |r| {
            let cap = self.capacity.0.get(&r).copied()?;
            let v = if enforce { self.allocatable.internal(r, cap) } else { cap };
            Some(i64::try_from(v).unwrap_or(i64::MAX))
        };
        Amounts {
            milli_cpu: amount(Reservable::Cpu),
            memory: amount(Reservable::Memory),
            pids: amount(Reservable::Pid),
        }
    }

    /// A reservation's amounts, for the cgroup held to it.
    fn reserved(&self, which: &super::allocatable::Reserved) -> Amounts {
        let amount = |r| {
            let v = which.get(r);
            (v > 0).then(|| i64::try_from(v).unwrap_or(i64::MAX))
        };
        Amounts {
            milli_cpu: amount(Reservable::Cpu),
            memory: amount(Reservable::Memory),
            pids: amount(Reservable::Pid),
        }
    }

    /// Allocatable memory as the node reports it (hard eviction reserved too).
    fn allocatable_memory(&self) -> Option<i64> {
        let cap = self.capacity(Reservable::Memory)?;
        let cap = u64::try_from(cap).unwrap_or(0);
        Some(
            i64::try_from(self.allocatable.allocatable(Reservable::Memory, cap))
                .unwrap_or(i64::MAX),
        )
    }
}

/// Makes, sizes and removes the kubelet's cgroups.
#[derive(Debug)]
pub struct ContainerManager {
    cgroups: Arc<dyn Cgroups>,
    config: NodeConfig,
    node: NodeResources,
    recorder: Recorder,
    node_name: String,
    /// The pods whose cgroups exist, for the QoS cgroups' sizes.
    pods: Mutex<BTreeMap<String, PodShare>>,
    /// Whether `kubepods` holds its limits (an update refused while pods use more is retried).
    enforced: Mutex<bool>,
}

impl ContainerManager {
    pub fn new(
        cgroups: Arc<dyn Cgroups>,
        config: NodeConfig,
        node: NodeResources,
        recorder: Recorder,
        node_name: String,
    ) -> Self {
        Self {
            cgroups,
            config,
            node,
            recorder,
            node_name,
            pods: Mutex::new(BTreeMap::new()),
            enforced: Mutex::new(false),
        }
    }

    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    fn kubepods(&self) -> String {
        self.config.layout.kubepods()
    }

    /// Checks the root and makes `kubepods`, the QoS cgroups and the reserved cgroups' limits.
    pub fn start(&self) -> Result<(), StartError> {
        if !self.config.layout.per_qos {
            return Ok(());
        }
        if !self.cgroups.exists(&self.config.layout.root_cgroup()) {
            return Err(StartError::RootMissing(self.config.layout.root.clone()));
        }
        let kubepods = self.kubepods();
        let limits = self.kubepods_config();
        if self.cgroups.exists(&kubepods) {
            self.enforce_kubepods();
        } else {
            self.cgroups.create(&kubepods, &limits)?;
            self.enforced_now();
        }
        for qos in [QosClass::Burstable, QosClass::BestEffort] {
            let path = self.config.layout.qos_cgroup(qos);
            let config = ResourceConfig {
                cpu_shares: (qos == QosClass::BestEffort).then_some(MIN_SHARES),
                ..ResourceConfig::default()
            };
            if self.cgroups.exists(&path) {
                self.cgroups.update(&path, &config)?;
            } else {
                self.cgroups.create(&path, &config)?;
            }
        }
        let e = &self.config.enforcement;
        for (what, held, reserved) in [
            ("System Reserved", &e.system_reserved, &self.node.allocatable.system),
            ("Kube Reserved", &e.kube_reserved, &self.node.allocatable.kube),
        ] {
            let Some((cgroup, how)) = held else { continue };
            if !self.cgroups.exists(cgroup) {
                return Err(StartError::ReservedMissing { what, cgroup: cgroup.clone() });
            }
            let config = resources::for_amounts(
                self.node.reserved(reserved),
                *how == Enforce::CompressibleOnly,
            );
            self.cgroups.update(cgroup, &config)?;
            tracing::info!(cgroup, ?config, "{what} cgroup held to its reservation");
        }
        self.update_qos();
        Ok(())
    }

    fn kubepods_config(&self) -> ResourceConfig {
        resources::for_amounts(self.node.for_pods(self.config.enforcement.pods), false)
    }

    fn enforced_now(&self) {
        *self.enforced.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        let node = ObjectRef::Node(self.node_name.clone());
        self.recorder.normal(
            &node,
            "SuccessfulNodeAllocatableEnforcement",
            "Updated Node Allocatable limit across pods",
        );
    }

    /// Sets `kubepods`' limits; refused (pods use more memory than the new limit), a Warning
    /// and a retry at the next QoS update, as upstream's retry loop.
    fn enforce_kubepods(&self) {
        let kubepods = self.kubepods();
        match self.cgroups.update(&kubepods, &self.kubepods_config()) {
            Ok(()) => self.enforced_now(),
            Err(e) => {
                let node = ObjectRef::Node(self.node_name.clone());
                let message = format!("Failed to update Node Allocatable Limits {kubepods:?}: {e}");
                tracing::warn!("{message}");
                self.recorder.warning(&node, "FailedNodeAllocatableEnforcement", message);
            }
        }
    }

    /// The cgroup parent of a pod's sandbox: its own cgroup, made and sized first where it is
    /// missing; `cgroupRoot` itself without `cgroupsPerQOS`.
    pub fn ensure_pod(&self, uid: &str, spec: &PodSpec) -> Result<String, CgroupError> {
        let qos = api::qos::pod_qos(spec);
        let path = self.config.layout.pod_cgroup(qos, uid);
        if !self.config.layout.per_qos {
            return Ok(path);
        }
        let requests = api::resources::pod_requests(spec);
        let share = PodShare { qos, milli_cpu: requests.milli_cpu, memory: requests.memory };
        let changed = self.lock_pods().insert(uid.to_string(), share) != Some(share);
        if changed {
            // The QoS level grows before the pod joins it, as upstream's `UpdateQOSCgroups`.
            self.update_qos();
        }
        if !self.cgroups.exists(&path) {
            let config = resources::for_pod(spec, &self.config.pod);
            self.cgroups.create(&path, &config)?;
            tracing::debug!(uid, path, ?config, "pod cgroup made");
        }
        Ok(path)
    }

    fn lock_pods(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, PodShare>> {
        self.pods.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A pod's cgroup: where it was made for the pod's QoS class, or, for a pod this kubelet
    /// has not synced (its QoS class unknown), wherever it is; `None` without pod cgroups.
    pub fn pod_cgroup_of(&self, uid: &str) -> Option<String> {
        if let Some(share) = self.lock_pods().get(uid) {
            return Some(self.config.layout.pod_cgroup(share.qos, uid));
        }
        self.config.layout.all_pod_cgroups(uid).into_iter().find(|p| self.cgroups.exists(p))
    }

    /// Where each of a pod's containers is, by container ID (see
    /// [`super::CgroupLayout::container_cgroup`]); the pod's children read once, for systemd's
    /// scopes.
    pub fn container_cgroups(&self, pod: &str) -> impl Fn(&str) -> String + '_ {
        let children = match self.config.layout.driver {
            super::CgroupDriver::Systemd => self.cgroups.children(pod),
            super::CgroupDriver::Cgroupfs => Vec::new(),
        };
        let pod = pod.to_string();
        move |id| self.config.layout.container_cgroup(&pod, id, &children)
    }

    /// What a cgroup's processes use (see [`super::cgroupfs::CgroupUsage`]).
    pub fn usage(
        &self,
        path: &str,
        processes: super::cgroupfs::Processes,
    ) -> Option<super::cgroupfs::CgroupUsage> {
        self.cgroups.usage(path, processes)
    }

    /// Ends a reading of every pod's usage (see [`super::cgroupfs::Cgroups::end_reading`]).
    pub fn end_reading(&self) {
        self.cgroups.end_reading();
    }

    /// Removes a pod's cgroup wherever it is (its QoS class may be unknown).
    pub fn remove_pod(&self, uid: &str) {
        for cgroup in self.config.layout.all_pod_cgroups(uid) {
            if let Err(e) = self.cgroups.remove(&cgroup) {
                tracing::warn!(uid, error = %e, "removing the pod cgroup");
            }
        }
        if self.lock_pods().remove(uid).is_some() {
            self.update_qos();
        }
    }

    /// Removes the pod cgroups whose pods `known` does not know (upstream's
    /// `cleanupOrphanedPodCgroups`); one that still holds processes stays until they are gone.
    pub fn remove_orphans(&self, known: impl Fn(&str) -> bool) -> Vec<String> {
        if !self.config.layout.per_qos {
            return Vec::new();
        }
        let mut removed = Vec::new();
        let levels = [
            self.kubepods(),
            self.config.layout.qos_cgroup(QosClass::Burstable),
            self.config.layout.qos_cgroup(QosClass::BestEffort),
        ];
        for level in levels {
            for child in self.cgroups.children(&level) {
                let Some(uid) = self.config.layout.pod_uid(&child) else { continue };
                if known(&uid) {
                    continue;
                }
                let path = format!("{}/{child}", level.trim_end_matches('/'));
                match self.cgroups.remove(&path) {
                    Ok(()) => {
                        tracing::info!(path, "removed the cgroup of a pod no longer known");
                        removed.push(uid);
                    }
                    Err(e) => tracing::debug!(path, error = %e, "orphaned pod cgroup stays"),
                }
            }
        }
        let mut pods = self.lock_pods();
        let forgotten = removed.iter().filter(|uid| pods.remove(*uid).is_some()).count();
        drop(pods);
        if forgotten > 0 {
            self.update_qos();
        }
        removed
    }

    /// Sizes the QoS cgroups from the pods (upstream's `qosContainerManager.UpdateCgroups`);
    /// retries `kubepods`' limits if they were refused before.
    pub fn update_qos(&self) {
        if !self.config.layout.per_qos {
            return;
        }
        let (burstable, besteffort) = self.qos_configs();
        for (qos, config) in [(QosClass::Burstable, burstable), (QosClass::BestEffort, besteffort)]
        {
            let path = self.config.layout.qos_cgroup(qos);
            if let Err(e) = self.cgroups.update(&path, &config) {
                tracing::warn!(path, error = %e, "updating the QoS cgroup");
            }
        }
        if !*self.enforced.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            self.enforce_kubepods();
        }
    }

    fn qos_configs(&self) -> (ResourceConfig, ResourceConfig) {
        let pods = self.lock_pods();
        let sum = |qos: QosClass, f: fn(&PodShare) -> i64| {
            pods.values().filter(|p| p.qos == qos).map(f).fold(0i64, i64::saturating_add)
        };
        let burstable_cpu = sum(QosClass::Burstable, |p| p.milli_cpu);
        let mut burstable = ResourceConfig {
            cpu_shares: Some(resources::milli_cpu_to_shares(burstable_cpu)),
            ..ResourceConfig::default()
        };
        let mut besteffort =
            ResourceConfig { cpu_shares: Some(MIN_SHARES), ..ResourceConfig::default() };
        if let (Some(percent), Some(allocatable)) =
            (self.config.qos_reserved_memory, self.node.allocatable_memory())
            && allocatable > 0
        {
            let percent = i64::from(percent);
            let guaranteed = sum(QosClass::Guaranteed, |p| p.memory);
            let burst = sum(QosClass::Burstable, |p| p.memory);
            let burstable_limit =
                allocatable.saturating_sub(guaranteed.saturating_mul(percent) / 100);
            let besteffort_limit =
                burstable_limit.saturating_sub(burst.saturating_mul(percent) / 100);
            burstable.memory = Some(burstable_limit);
            besteffort.memory = Some(besteffort_limit);
        }
        (burstable, besteffort)
    }
}

#[cfg(test)]
mod tests;
