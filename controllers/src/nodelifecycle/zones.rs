//! Zones and how fast their nodes get `NoExecute` taints, as upstream's `ComputeZoneState` and
//! `setLimiterInZone`: a zone is `FullDisruption` when none of its nodes is ready,
//! `PartialDisruption` when more than two are not and they are at least
//! `--unhealthy-zone-threshold` of it, else `Normal`. A zone taints at `--node-eviction-rate`
//! nodes per second, in partial disruption at `--secondary-node-eviction-rate` if it has more
//! than `--large-cluster-size-threshold` nodes and not at all otherwise. When every zone is
//! fully disrupted the controller assumes its own connectivity is at fault and taints nothing
//! (upstream's "master disruption mode").

use tokio::time::Instant;

use k8s_openapi::api::core::v1::Node;

/// Upstream's zone states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    Normal,
    PartialDisruption,
    FullDisruption,
}

/// Upstream's `GetZoneKey`: region and zone labels, empty when the node has neither.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |k: &str| labels.and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let (region, zone) = (get("topology.kubernetes.io/region"), get("topology.kubernetes.io/zone"));
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\x00:{zone}")
}

pub fn state(ready: usize, not_ready: usize, unhealthy_threshold: f64) -> ZoneState {
    #[allow(clippy::cast_precision_loss)]
    let ratio = not_ready as f64 / (ready + not_ready).max(1) as f64;
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && ratio >= unhealthy_threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// The tainting rate (nodes per second) of a zone of `size` nodes in `state`.
pub fn rate(state: ZoneState, size: usize, primary: f64, secondary: f64, large: usize) -> f64 {
    match state {
        ZoneState::Normal | ZoneState::FullDisruption => primary,
        ZoneState::PartialDisruption if size > large => secondary,
        ZoneState::PartialDisruption => 0.0,
    }
}

/// A token bucket of burst one (upstream's `flowcontrol.NewTokenBucketRateLimiter(qps, 1)`)
/// whose rate may change.
#[derive(Debug)]
pub struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub fn new(now: Instant) -> Self {
        Self { tokens: 1.0, at: now }
    }

    /// Takes a token if one has accrued at `qps`.
    pub fn try_take(&mut self, qps: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        if qps > 0.0 {
            self.tokens = (self.tokens + elapsed * qps).min(1.0);
        }
        // A tiny slack, so refills summed in steps (0.1 ten times) still make a token.
        if qps > 0.0 && self.tokens >= 1.0 - 1e-9 {
            self.tokens = (self.tokens - 1.0).max(0.0);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn zone_states_are_upstreams() {
        assert_eq!(state(3, 0, 0.55), ZoneState::Normal);
        assert_eq!(state(1, 2, 0.55), ZoneState::Normal, "two not ready never disrupt");
        assert_eq!(state(2, 3, 0.55), ZoneState::PartialDisruption);
        assert_eq!(state(10, 3, 0.55), ZoneState::Normal);
        assert_eq!(state(0, 1, 0.55), ZoneState::FullDisruption);
        assert_eq!(rate(ZoneState::PartialDisruption, 10, 0.1, 0.01, 50), 0.0);
        assert_eq!(rate(ZoneState::PartialDisruption, 60, 0.1, 0.01, 50), 0.01);
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_gives_one_token_per_period() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        assert!(b.try_take(0.1, t0));
        assert!(!b.try_take(0.1, t0 + Duration::from_secs(9)));
        assert!(b.try_take(0.1, t0 + Duration::from_secs(10)));
        assert!(!b.try_take(0.0, t0 + Duration::from_secs(100)));
    }
}
