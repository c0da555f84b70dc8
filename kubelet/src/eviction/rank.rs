//! Which pod is evicted first, as upstream's rankers (`rankMemoryPressure`,
//! `rankDiskPressureFunc`, `rankPIDPressure`), pure: pods using more than they request first,
//! then lower priority first, then the largest use beyond the request first. Under PID
//! pressure requests do not count (there are none for PIDs).

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// A pod that may be evicted, with its use of the resource under pressure and its request.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub pod: Arc<Pod>,
    pub usage: u64,
    pub request: u64,
}

impl Candidate {
    fn exceeds(&self) -> bool {
        self.usage > self.request
    }

    fn priority(&self) -> i32 {
        self.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
    }

    /// Use beyond the request (negative below it), as upstream's comparison of
    /// `usage - request`.
    fn beyond(&self) -> i128 {
        i128::from(self.usage) - i128::from(self.request)
    }
}

/// Orders `pods` first to last to go; `with_requests: false` ranks by priority and use alone.
pub fn rank(pods: &mut [Candidate], with_requests: bool) {
    pods.sort_by(|a, b| {
        let exceeds = if with_requests { b.exceeds().cmp(&a.exceeds()) } else { Ordering::Equal };
        exceeds.then(a.priority().cmp(&b.priority())).then(b.beyond().cmp(&a.beyond()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(name: &str, priority: i32, usage: u64, request: u64) -> Candidate {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "spec": {"priority": priority, "containers": []},
        }))
        .unwrap();
        Candidate { pod: Arc::new(pod), usage, request }
    }

    fn names(pods: &[Candidate]) -> Vec<&str> {
        pods.iter().map(|c| c.pod.metadata.name.as_deref().unwrap_or_default()).collect()
    }

    #[test]
    fn pods_beyond_their_requests_go_first_then_low_priority_then_the_largest_excess() {
        let mut pods = vec![
            candidate("guaranteed-within", 0, 50, 100),
            candidate("besteffort-small", 0, 10, 0),
            candidate("besteffort-big", 0, 500, 0),
            candidate("important-beyond", 1000, 900, 100),
            candidate("burstable-beyond", 0, 300, 100),
        ];
        rank(&mut pods, true);
        assert_eq!(
            names(&pods),
            [
                "besteffort-big",
                "burstable-beyond",
                "besteffort-small",
                "important-beyond",
                "guaranteed-within"
            ]
        );
        rank(&mut pods, false);
        assert_eq!(names(&pods)[..2], ["besteffort-big", "burstable-beyond"]);
        assert_eq!(names(&pods)[4], "important-beyond", "highest priority last");
    }
}
