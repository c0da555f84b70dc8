//! `activeDeadlineSeconds`, as upstream's `activeDeadlineHandler`: a pod active on the node
//! (since its `startTime`) longer than its deadline is killed and fails with reason
//! `DeadlineExceeded`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::status::PodFailure;

pub const REASON: &str = "DeadlineExceeded";
pub const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// Where a pod stands against its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deadline {
    /// No deadline, or not started yet.
    None,
    /// Passes in this long.
    In(Duration),
    Exceeded(PodFailure),
}

/// Checks `pod` (started at `start`) at `now`.
pub fn check(pod: &Pod, start: Option<&Time>, now: jiff::Timestamp) -> Deadline {
    let Some(seconds) = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds) else {
        return Deadline::None;
    };
    let Some(start) = start else { return Deadline::None };
    let allowed = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    let active = Duration::try_from(now.duration_since(start.0)).unwrap_or(Duration::ZERO);
    match allowed.checked_sub(active) {
        Some(left) if !left.is_zero() => Deadline::In(left),
        _ => Deadline::Exceeded(PodFailure {
            reason: REASON.into(),
            message: MESSAGE.into(),
            disruption: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_fails_once_active_longer_than_its_deadline() {
        let mut pod = Pod::default();
        let start = Time(jiff::Timestamp::from_second(1000).unwrap());
        let at = |s| jiff::Timestamp::from_second(s).unwrap();
        assert_eq!(check(&pod, Some(&start), at(5000)), Deadline::None, "no deadline");
        pod.spec = Some(Default::default());
        pod.spec.as_mut().unwrap().active_deadline_seconds = Some(30);
        assert_eq!(check(&pod, None, at(5000)), Deadline::None, "not started");
        assert_eq!(check(&pod, Some(&start), at(1010)), Deadline::In(Duration::from_secs(20)));
        assert!(
            matches!(check(&pod, Some(&start), at(1030)), Deadline::Exceeded(f) if f.reason == REASON)
        );
    }
}
