//! How the kubelet shapes cgroups, as upstream's `cm.NodeConfig`: `enforceNodeAllocatable` with
//! the reserved cgroups, `qosReserved`, `cpuCFSQuota`/`cpuCFSQuotaPeriod` and `podPidsLimit`;
//! parsed and checked with upstream's words.

use std::collections::BTreeMap;
use std::time::Duration;

use super::layout::{CgroupDriver, CgroupLayout, check_systemd_root};
use super::resources::PodCgroupPolicy;

/// How a reserved cgroup (`systemReservedCgroup`, `kubeReservedCgroup`) is held to its
/// reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforce {
    /// `system-reserved`/`kube-reserved`: every reserved resource.
    All,
    /// `…-compressible`: CPU alone.
    CompressibleOnly,
}

/// What `enforceNodeAllocatable` names (upstream's default: `pods`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    /// `pods`: the `kubepods` cgroup is limited to allocatable (capacity less reservations);
    /// without it, to the node's capacity.
    pub pods: bool,
    /// The cgroup held to `systemReserved`, and how.
    pub system_reserved: Option<(String, Enforce)>,
    /// The cgroup held to `kubeReserved`, and how.
    pub kube_reserved: Option<(String, Enforce)>,
}

impl Default for Enforcement {
    fn default() -> Self {
        Self { pods: true, system_reserved: None, kube_reserved: None }
    }
}

/// What the container manager is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    pub layout: CgroupLayout,
    pub enforcement: Enforcement,
    /// `qosReserved[memory]`: the percent of Guaranteed (for Burstable) and Burstable (for
    /// BestEffort) pods' memory requests the lower classes may not take.
    pub qos_reserved_memory: Option<u8>,
    pub pod: PodCgroupPolicy,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            layout: CgroupLayout {
                root: "/".into(),
                per_qos: true,
                driver: CgroupDriver::Cgroupfs,
            },
            enforcement: Enforcement::default(),
            qos_reserved_memory: None,
            pod: PodCgroupPolicy::default(),
        }
    }
}

/// The fields as the config file or flags wrote them.
#[derive(Debug, Clone, Default)]
pub struct NodeConfigInput<'a> {
    pub cgroup_root: &'a str,
    /// `cgroupDriver` as written (empty: `cgroupfs`).
    pub cgroup_driver: &'a str,
    pub cgroups_per_qos: bool,
    /// `None`: upstream's default (`pods`).
    pub enforce_node_allocatable: Option<&'a [String]>,
    pub system_reserved_cgroup: Option<&'a str>,
    pub kube_reserved_cgroup: Option<&'a str>,
    pub qos_reserved: Option<&'a BTreeMap<String, String>>,
    pub cpu_cfs_quota: Option<bool>,
    pub cpu_cfs_quota_period: Option<Duration>,
    pub pod_pids_limit: Option<i64>,
}

/// A setting refused: the field and upstream's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct NodeConfigError {
    pub field: &'static str,
    pub reason: String,
}

fn refuse(field: &'static str, reason: impl Into<String>) -> NodeConfigError {
    NodeConfigError { field, reason: reason.into() }
}

const PODS: &str = "pods";
const SYSTEM: &str = "system-reserved";
const KUBE: &str = "kube-reserved";
const SYSTEM_COMPRESSIBLE: &str = "system-reserved-compressible";
const KUBE_COMPRESSIBLE: &str = "kube-reserved-compressible";
const NONE: &str = "none";

impl NodeConfig {
    pub fn parse(input: &NodeConfigInput<'_>) -> Result<Self, NodeConfigError> {
        let driver = parse_driver(input.cgroup_driver, input.cgroup_root)?;
        let default_keys = [PODS.to_string()];
        let keys = input.enforce_node_allocatable.unwrap_or(&default_keys);
        let field = "enforceNodeAllocatable";
        if !input.cgroups_per_qos && !keys.is_empty() {
            return Err(refuse(
                field,
                "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) is not supported unless cgroupsPerQOS (--cgroups-per-qos) is set to true",
            ));
        }
        let mut enforcement =
            Enforcement { pods: false, system_reserved: None, kube_reserved: None };
        let cgroup = |name: Option<&str>, setting: &str, flag: &str, key: &str| {
            name.filter(|n| !n.is_empty()).map(str::to_string).ok_or_else(|| {
                refuse(
                    field,
                    format!(
                        "invalid configuration: {setting} (--{flag}) must be specified when {key:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)"
                    ),
                )
            })
        };
        for key in keys {
            let system = |how| {
                let name = cgroup(
                    input.system_reserved_cgroup,
                    "systemReservedCgroup",
                    "system-reserved-cgroup",
                    key,
                )?;
                Ok::<_, NodeConfigError>(Some((name, how)))
            };
            let kube = |how| {
                let name = cgroup(
                    input.kube_reserved_cgroup,
                    "kubeReservedCgroup",
                    "kube-reserved-cgroup",
                    key,
                )?;
                Ok::<_, NodeConfigError>(Some((name, how)))
            };
            match key.as_str() {
                PODS => enforcement.pods = true,
                SYSTEM => enforcement.system_reserved = system(Enforce::All)?,
                SYSTEM_COMPRESSIBLE => {
                    enforcement.system_reserved = system(Enforce::CompressibleOnly)?
                }
                KUBE => enforcement.kube_reserved = kube(Enforce::All)?,
                KUBE_COMPRESSIBLE => enforcement.kube_reserved = kube(Enforce::CompressibleOnly)?,
                NONE if keys.len() > 1 => {
                    return Err(refuse(
                        field,
                        format!(
                            "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when {NONE:?} is specified"
                        ),
                    ));
                }
                NONE => {}
                other => {
                    return Err(refuse(
                        field,
                        format!(
                            "invalid configuration: option {other:?} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are {PODS:?}, {SYSTEM:?}, {KUBE:?}, {SYSTEM_COMPRESSIBLE:?}, {KUBE_COMPRESSIBLE:?} or {NONE:?}"
                        ),
                    ));
                }
            }
        }
        for (a, b) in [(SYSTEM, SYSTEM_COMPRESSIBLE), (KUBE, KUBE_COMPRESSIBLE)] {
            if keys.iter().any(|k| k == a) && keys.iter().any(|k| k == b) {
                return Err(refuse(
                    field,
                    format!(
                        "invalid configuration: both {a:?} and {b:?} cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"
                    ),
                ));
            }
        }
        let qos_reserved_memory = match input.qos_reserved {
            Some(map) => parse_qos_reserved(map)?,
            None => None,
        };
        let mut pod = PodCgroupPolicy::default();
        if let Some(quota) = input.cpu_cfs_quota {
            pod.enforce_cpu_limits = quota;
        }
        if let Some(period) = input.cpu_cfs_quota_period {
            if !(Duration::from_millis(1)..=Duration::from_secs(1)).contains(&period) {
                return Err(refuse(
                    "cpuCFSQuotaPeriod",
                    format!(
                        "invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {period:?} must be between 1ms and 1sec, inclusive"
                    ),
                ));
            }
            pod.cpu_period_us = u64::try_from(period.as_micros()).unwrap_or(u64::MAX);
        }
        if let Some(limit) = input.pod_pids_limit {
            pod.pod_pids_limit = limit;
        }
        Ok(Self {
            layout: CgroupLayout {
                root: input.cgroup_root.to_string(),
                per_qos: input.cgroups_per_qos,
                driver,
            },
            enforcement,
            qos_reserved_memory,
            pod,
        })
    }
}

/// `cgroupDriver`, and `cgroupRoot` in the driver's form: an absolute path for cgroupfs, `/` or
/// a slice for systemd.
fn parse_driver(driver: &str, root: &str) -> Result<CgroupDriver, NodeConfigError> {
    let driver = match driver {
        "" => CgroupDriver::Cgroupfs,
        other => CgroupDriver::parse(other).ok_or_else(|| {
            refuse(
                "cgroupDriver",
                format!(
                    "invalid configuration: cgroupDriver {other:?}: must be cgroupfs or systemd"
                ),
            )
        })?,
    };
    match driver {
        CgroupDriver::Cgroupfs if !root.starts_with('/') => {
            Err(refuse("cgroupRoot", "must be an absolute cgroup path"))
        }
        CgroupDriver::Systemd => check_systemd_root(root).map(|()| driver).map_err(|e| {
            refuse(
                "cgroupRoot",
                format!(
                    "invalid configuration: cgroupRoot {root:?} must be / or a systemd slice with cgroupDriver: systemd: {e}"
                ),
            )
        }),
        CgroupDriver::Cgroupfs => Ok(driver),
    }
}

/// `qosReserved` as upstream's `ParseQOSReserved`: memory only, a percentage 0–100.
fn parse_qos_reserved(map: &BTreeMap<String, String>) -> Result<Option<u8>, NodeConfigError> {
    let field = "qosReserved";
    let mut memory = None;
    for (k, v) in map {
        if k != "memory" {
            return Err(refuse(field, format!("cannot reserve {k:?} resource")));
        }
        let fail = |why: String| {
            refuse(field, format!("failed to parse percentage {v:?} for {k:?} resource: {why}"))
        };
        let Some(number) = v.strip_suffix('%') else {
            return Err(fail(format!("percentage expected, got '{v}'")));
        };
        let percent: i64 =
            number.parse().map_err(|_| fail(format!("invalid number in percentage '{v}'")))?;
        let percent = u8::try_from(percent)
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| fail("percentage must be between 0 and 100".into()))?;
        memory = Some(percent);
    }
    Ok(memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(keys: Option<&'a [String]>) -> NodeConfigInput<'a> {
        NodeConfigInput {
            cgroup_root: "/",
            cgroups_per_qos: true,
            enforce_node_allocatable: keys,
            ..Default::default()
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn enforcement_defaults_to_pods_and_names_the_reserved_cgroups() {
        let c = NodeConfig::parse(&input(None)).unwrap();
        assert_eq!(c.enforcement, Enforcement::default());
        let keys = strings(&["pods", "system-reserved", "kube-reserved-compressible"]);
        let mut i = input(Some(&keys));
        i.system_reserved_cgroup = Some("/system.slice");
        i.kube_reserved_cgroup = Some("/kube.slice");
        let c = NodeConfig::parse(&i).unwrap();
        assert_eq!(c.enforcement.system_reserved, Some(("/system.slice".into(), Enforce::All)));
        assert_eq!(
            c.enforcement.kube_reserved,
            Some(("/kube.slice".into(), Enforce::CompressibleOnly))
        );
        let none = strings(&["none"]);
        assert!(!NodeConfig::parse(&input(Some(&none))).unwrap().enforcement.pods);
        let empty: Vec<String> = Vec::new();
        assert!(!NodeConfig::parse(&input(Some(&empty))).unwrap().enforcement.pods);
    }

    #[test]
    fn bad_enforcement_is_refused_in_upstreams_words() {
        let cases: Vec<(Vec<String>, bool, &str)> = vec![
            (
                strings(&["pods"]),
                false,
                "is not supported unless cgroupsPerQOS (--cgroups-per-qos) is set to true",
            ),
            (
                strings(&["system-reserved"]),
                true,
                "systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" contained in enforceNodeAllocatable",
            ),
            (
                strings(&["kube-reserved"]),
                true,
                "kubeReservedCgroup (--kube-reserved-cgroup) must be specified",
            ),
            (
                strings(&["none", "pods"]),
                true,
                "may not contain additional enforcements when \"none\" is specified",
            ),
            (
                strings(&["Pods"]),
                true,
                "option \"Pods\" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are",
            ),
        ];
        for (keys, per_qos, want) in &cases {
            let mut i = input(Some(keys));
            i.cgroups_per_qos = *per_qos;
            let err = NodeConfig::parse(&i).unwrap_err();
            assert_eq!(err.field, "enforceNodeAllocatable");
            assert!(err.reason.contains(want), "{keys:?}: {err}");
        }
        let keys = strings(&["system-reserved", "system-reserved-compressible"]);
        let mut i = input(Some(&keys));
        i.system_reserved_cgroup = Some("/s");
        assert!(NodeConfig::parse(&i).unwrap_err().reason.contains("cannot be specified together"));
    }

    #[test]
    fn qos_reserved_takes_a_memory_percentage_only() {
        let map = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        let parse = |m: &BTreeMap<String, String>| {
            let mut i = input(None);
            i.qos_reserved = Some(m);
            NodeConfig::parse(&i)
        };
        assert_eq!(parse(&map("memory", "50%")).unwrap().qos_reserved_memory, Some(50));
        for (m, want) in [
            (map("cpu", "50%"), "cannot reserve \"cpu\" resource"),
            (map("memory", "50"), "percentage expected, got '50'"),
            (map("memory", "ten%"), "invalid number in percentage 'ten%'"),
            (map("memory", "101%"), "percentage must be between 0 and 100"),
        ] {
            let err = parse(&m).unwrap_err();
            assert_eq!(err.field, "qosReserved");
            assert!(err.reason.contains(want), "{m:?}: {err}");
        }
    }

    #[test]
    fn cfs_settings_and_the_pod_pids_limit_shape_pod_cgroups() {
        let mut i = input(None);
        i.cpu_cfs_quota = Some(false);
        i.cpu_cfs_quota_period = Some(Duration::from_millis(50));
        i.pod_pids_limit = Some(1024);
        let c = NodeConfig::parse(&i).unwrap();
        assert_eq!(
            c.pod,
            PodCgroupPolicy {
                enforce_cpu_limits: false,
                cpu_period_us: 50_000,
                pod_pids_limit: 1024
            }
        );
        i.cpu_cfs_quota_period = Some(Duration::from_secs(2));
        let err = NodeConfig::parse(&i).unwrap_err();
        assert!(err.reason.contains("must be between 1ms and 1sec"), "{err}");
    }

    #[test]
    fn the_driver_decides_the_form_cgroup_root_takes() {
        let parse = |driver, root| {
            let mut i = input(None);
            (i.cgroup_driver, i.cgroup_root) = (driver, root);
            NodeConfig::parse(&i)
        };
        assert_eq!(parse("", "/").unwrap().layout.driver, CgroupDriver::Cgroupfs);
        assert_eq!(parse("cgroupfs", "/x").unwrap().layout.driver, CgroupDriver::Cgroupfs);
        let systemd = parse("systemd", "/").unwrap().layout;
        assert_eq!(
            (systemd.driver, systemd.kubepods().as_str()),
            (CgroupDriver::Systemd, "/kubepods.slice")
        );
        assert_eq!(parse("systemd", "kubelet.slice").unwrap().layout.root, "kubelet.slice");
        let err = parse("cgroupfs", "kubelet.slice").unwrap_err();
        assert_eq!(
            (err.field, err.reason.as_str()),
            ("cgroupRoot", "must be an absolute cgroup path")
        );
        let err = parse("systemd", "/kubelet").unwrap_err();
        assert_eq!(err.field, "cgroupRoot");
        assert!(
            err.reason.ends_with("with cgroupDriver: systemd: invalid slice name: kubelet"),
            "{err}"
        );
        let err = parse("Systemd", "/").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cgroupDriver: invalid configuration: cgroupDriver \"Systemd\": must be cgroupfs or systemd"
        );
    }
}
