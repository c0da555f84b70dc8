//! What a cgroup is given, as upstream's `ResourceConfig` and `helpers_linux.go`: CFS shares
//! from requests, a quota from limits, a memory limit and a process limit; computed for a pod
//! ([`for_pod`]), for `kubepods` and the reserved cgroups ([`for_amounts`]), and in the cgroup v2
//! units the files take.

use api::qos::QosClass;
use k8s_openapi::api::core::v1::PodSpec;

/// Upstream's `MinShares`: what a BestEffort pod and its QoS cgroup get.
pub const MIN_SHARES: u64 = 2;
const MAX_SHARES: u64 = 262_144;
const SHARES_PER_CPU: u64 = 1024;
/// The shortest quota CFS is given (1 ms), as upstream's `MinQuotaPeriod`.
const MIN_QUOTA: i64 = 1000;

/// One cgroup's settings; `None` leaves the file as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    pub cpu_shares: Option<u64>,
    /// CFS quota in microseconds per `cpu_period`; -1 is unlimited.
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    /// Memory limit in bytes.
    pub memory: Option<i64>,
    /// Process limit; -1 is unlimited.
    pub pids: Option<i64>,
}

/// How the node's CFS settings shape pod cgroups (`cpuCFSQuota`, `cpuCFSQuotaPeriod`,
/// `podPidsLimit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCgroupPolicy {
    /// Whether CPU limits become a quota (`cpuCFSQuota`, default true).
    pub enforce_cpu_limits: bool,
    /// The CFS period in microseconds (`cpuCFSQuotaPeriod`, default 100 ms).
    pub cpu_period_us: u64,
    /// Each pod's process limit (`podPidsLimit`; -1, the default, unlimited).
    pub pod_pids_limit: i64,
}

impl Default for PodCgroupPolicy {
    fn default() -> Self {
        Self { enforce_cpu_limits: true, cpu_period_us: 100_000, pod_pids_limit: -1 }
    }
}

/// Upstream's `MilliCPUToShares`: 1024 shares a CPU, at least 2, at most 262144.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = u64::try_from(milli_cpu).unwrap_or(u64::MAX).saturating_mul(SHARES_PER_CPU) / 1000;
    shares.clamp(MIN_SHARES, MAX_SHARES)
}

/// Upstream's `MilliCPUToQuota`: the limit over a period, at least 1 ms; 0 for no limit.
pub fn milli_cpu_to_quota(milli_cpu: i64, period_us: u64) -> i64 {
    if milli_cpu <= 0 {
        return 0;
    }
    let period = i64::try_from(period_us).unwrap_or(i64::MAX);
    (milli_cpu.saturating_mul(period) / 1000).max(MIN_QUOTA)
}

/// A pod cgroup's settings, as upstream's `ResourceConfigForPod`: Guaranteed pods get shares,
/// quota and a memory limit; Burstable ones shares, and a quota or memory limit only when every
/// container (or the pod) declares that limit; BestEffort ones the minimum shares.
pub fn for_pod(spec: &PodSpec, policy: &PodCgroupPolicy) -> ResourceConfig {
    let requests = api::resources::pod_requests(spec);
    let limits = api::resources::pod_limits(spec);
    let shares = milli_cpu_to_shares(requests.milli_cpu);
    let quota = if policy.enforce_cpu_limits {
        milli_cpu_to_quota(limits.limits.milli_cpu, policy.cpu_period_us)
    } else {
        -1
    };
    let pids = (policy.pod_pids_limit > 0).then_some(policy.pod_pids_limit);
    let mut rc = ResourceConfig { pids, ..ResourceConfig::default() };
    match api::qos::pod_qos(spec) {
        QosClass::Guaranteed => {
            rc.cpu_shares = Some(shares);
            rc.cpu_quota = Some(quota);
            rc.cpu_period = Some(policy.cpu_period_us);
            rc.memory = Some(limits.limits.memory);
        }
        QosClass::Burstable => {
            rc.cpu_shares = Some(shares);
            if limits.cpu_declared {
                rc.cpu_quota = Some(quota);
                rc.cpu_period = Some(policy.cpu_period_us);
            }
            if limits.memory_declared {
                rc.memory = Some(limits.limits.memory);
            }
        }
        QosClass::BestEffort => rc.cpu_shares = Some(MIN_SHARES),
    }
    rc
}

/// Amounts of the resources a cgroup may be given: cpu in millicores, memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    pub milli_cpu: Option<i64>,
    pub memory: Option<i64>,
    pub pids: Option<i64>,
}

/// A cgroup sized to amounts (upstream's `getCgroupConfig`): shares for cpu, the memory and
/// process limits; with `compressible_only`, cpu alone.
pub fn for_amounts(a: Amounts, compressible_only: bool) -> ResourceConfig {
    let cpu_shares = a.milli_cpu.map(milli_cpu_to_shares);
    if compressible_only {
        return ResourceConfig { cpu_shares, ..ResourceConfig::default() };
    }
    ResourceConfig { cpu_shares, memory: a.memory, pids: a.pids, ..ResourceConfig::default() }
}

/// cgroup v2's `cpu.weight` for v1 shares (runc's `ConvertCPUSharesToCgroupV2Value`): 2 → 1,
/// 1024 → 39, 262144 → 10000.
pub fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.clamp(MIN_SHARES, MAX_SHARES) - MIN_SHARES) * 9999 / (MAX_SHARES - MIN_SHARES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    use crate::test_cri::resources_spec;

    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        resources_spec(requests, limits).containers.remove(0)
    }

    fn spec(containers: Vec<Container>) -> PodSpec {
        PodSpec { containers, ..Default::default() }
    }

    #[test]
    fn shares_and_quota_convert_as_upstream() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2, "at least the minimum");
        assert_eq!(milli_cpu_to_shares(250), 256);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(1_000_000), 262_144, "at most the maximum");
        assert_eq!(milli_cpu_to_quota(0, 100_000), 0);
        assert_eq!(milli_cpu_to_quota(500, 100_000), 50_000);
        assert_eq!(milli_cpu_to_quota(1, 100_000), 1000, "at least 1 ms");
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
    }

    #[test]
    fn a_guaranteed_pod_gets_shares_quota_and_the_summed_memory_limit() {
        let both = [("cpu", "500m"), ("memory", "64Mi")];
        let pod = spec(vec![container(&both, &both), container(&both, &both)]);
        let rc = for_pod(&pod, &PodCgroupPolicy::default());
        assert_eq!(
            rc,
            ResourceConfig {
                cpu_shares: Some(1024),
                cpu_quota: Some(100_000),
                cpu_period: Some(100_000),
                memory: Some(128 << 20),
                pids: None,
            }
        );
        let no_quota = PodCgroupPolicy { enforce_cpu_limits: false, ..PodCgroupPolicy::default() };
        assert_eq!(for_pod(&pod, &no_quota).cpu_quota, Some(-1), "cpuCFSQuota: false");
        let pids = PodCgroupPolicy { pod_pids_limit: 100, ..PodCgroupPolicy::default() };
        assert_eq!(for_pod(&pod, &pids).pids, Some(100), "podPidsLimit");
    }

    #[test]
    fn a_burstable_pod_is_bounded_only_where_every_container_declares_the_limit() {
        let pod = spec(vec![
            container(&[("cpu", "100m")], &[("cpu", "200m"), ("memory", "32Mi")]),
            container(&[("cpu", "100m")], &[("cpu", "300m")]),
        ]);
        let rc = for_pod(&pod, &PodCgroupPolicy::default());
        assert_eq!(rc.cpu_shares, Some(204));
        assert_eq!((rc.cpu_quota, rc.cpu_period), (Some(50_000), Some(100_000)));
        assert_eq!(rc.memory, None, "the second container may use any memory");
    }

    #[test]
    fn a_best_effort_pod_gets_the_minimum_shares_and_nothing_else() {
        let rc = for_pod(&spec(vec![container(&[], &[])]), &PodCgroupPolicy::default());
        assert_eq!(rc, ResourceConfig { cpu_shares: Some(2), ..ResourceConfig::default() });
    }

    #[test]
    fn amounts_become_shares_and_limits_or_shares_alone_when_compressible() {
        let a = Amounts { milli_cpu: Some(2000), memory: Some(1 << 30), pids: Some(4096) };
        let rc = for_amounts(a, false);
        assert_eq!((rc.cpu_shares, rc.memory, rc.pids), (Some(2048), Some(1 << 30), Some(4096)));
        assert_eq!(
            for_amounts(a, true),
            ResourceConfig { cpu_shares: Some(2048), ..ResourceConfig::default() }
        );
    }
}
