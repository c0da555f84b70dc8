//! Which pods stop when, as upstream's `migrateConfig` and `groupByPriority`: two groups from
//! `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods` — regular pods (priority below
//! 2000000000) get the whole less the critical share, critical ones the critical share — each
//! pod the smaller of its group's period and its own `terminationGracePeriodSeconds`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::ShutdownConfig;

/// Upstream's `SystemCriticalPriority`.
pub use crate::lifecycle::eviction::SYSTEM_CRITICAL_PRIORITY;

/// Pods stopped together, and how long the group is waited for.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The lowest priority in the group.
    pub priority: i32,
    pub period: Duration,
    /// Each pod's UID and the grace it is given.
    pub pods: Vec<(String, Duration)>,
}

/// The groups, lowest priority first (stopped in that order), with `pods` placed.
pub fn group_by_priority(config: &ShutdownConfig, pods: &[Pod]) -> Vec<Group> {
    let critical = config.critical_grace_period;
    let regular = config.grace_period.saturating_sub(critical);
    let mut groups = vec![
        Group { priority: 0, period: regular, pods: Vec::new() },
        Group { priority: SYSTEM_CRITICAL_PRIORITY, period: critical, pods: Vec::new() },
    ];
    for pod in pods {
        let spec = pod.spec.as_ref();
        let priority = spec.and_then(|s| s.priority).unwrap_or(0);
        // The highest group whose priority the pod reaches; below every group, the lowest.
        let index = groups.iter().rposition(|g| g.priority <= priority).unwrap_or(0);
        let group = &mut groups[index];
        let own = spec
            .and_then(|s| s.termination_grace_period_seconds)
            .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)));
        let grace = own.filter(|own| *own <= group.period).unwrap_or(group.period);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        group.pods.push((uid, grace));
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(uid: &str, priority: Option<i32>, grace: Option<i64>) -> Pod {
        Pod {
            metadata: ObjectMeta { uid: Some(uid.into()), ..Default::default() },
            spec: Some(PodSpec {
                priority,
                termination_grace_period_seconds: grace,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn regular_pods_go_first_within_the_whole_less_the_critical_share() {
        let config = ShutdownConfig {
            grace_period: Duration::from_secs(30),
            critical_grace_period: Duration::from_secs(10),
        };
        let pods = [
            pod("web", None, Some(60)),
            pod("quick", Some(1000), Some(3)),
            pod("dns", Some(2_000_000_000), None),
            pod("node-critical", Some(2_000_001_000), Some(5)),
            pod("negative", Some(-5), None),
        ];
        let groups = group_by_priority(&config, &pods);
        let s = Duration::from_secs;
        assert_eq!(groups[0].period, s(20));
        assert_eq!(
            groups[0].pods,
            vec![("web".into(), s(20)), ("quick".into(), s(3)), ("negative".into(), s(20))],
            "a pod's own shorter grace is kept; a longer one is cut to the group's"
        );
        assert_eq!(groups[1].period, s(10));
        assert_eq!(groups[1].pods, vec![("dns".into(), s(10)), ("node-critical".into(), s(5))]);
    }

    #[test]
    fn without_a_critical_share_critical_pods_get_no_time() {
        let config = ShutdownConfig {
            grace_period: Duration::from_secs(5),
            critical_grace_period: Duration::ZERO,
        };
        let groups = group_by_priority(&config, &[pod("c", Some(2_000_000_000), Some(30))]);
        assert_eq!(groups[1].pods, vec![("c".into(), Duration::ZERO)]);
    }
}
