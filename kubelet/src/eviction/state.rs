//! What the eviction manager carries from one round to the next, pure (upstream's
//! `thresholdsFirstObservedAt`, `thresholdsMet`, `nodeConditionsLastObservedAt` and the
//! helpers that update them in `synchronize`). Each round, given the thresholds and what the
//! node reads now:
//! 1. the thresholds met now, and those met last round whose minimum reclaim is not freed yet
//!    (upstream's `mergeThresholds` of `thresholdsNotYetResolved`);
//! 2. the pressure conditions they set, which stay until the transition period has passed
//!    since they were last seen (`nodeConditionsObservedSince`) — soft thresholds set them
//!    at once, before their grace period;
//! 3. of those thresholds, the ones met continuously for their grace period (zero for hard
//!    ones): what pods are evicted for (`thresholdsMetGracePeriod`).
//!
//! It also keeps the pods evicted and not finished yet, which are no candidates again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use super::config::Threshold;
use super::{Observations, Pressure};

/// The manager's memory; thresholds are named by their index in the configured list.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// When each threshold met was first seen met (continuously since).
    first_observed: BTreeMap<usize, Instant>,
    /// When each pressure condition was last seen.
    last_observed: BTreeMap<Pressure, Instant>,
    /// The thresholds met with their grace period at the last round: they stay met until
    /// their minimum reclaim is freed.
    met: Vec<usize>,
    /// The pods (UIDs) evicted and not finished yet: their termination is requested, so they
    /// are no candidates again (upstream's `IsPodTerminationRequested`).
    pub evicted: BTreeSet<String>,
}

/// What one round found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The node's pressure conditions, in [`Pressure`]'s order.
    pub pressures: Vec<Pressure>,
    /// The thresholds (indices) pods may be evicted for: met, grace periods served.
    pub act_on: Vec<usize>,
}

impl State {
    /// Updates the state with one round's readings.
    pub fn observe(
        &mut self,
        thresholds: &[Threshold],
        observed: &Observations,
        transition: Duration,
        now: Instant,
    ) -> Verdict {
        let mut current: Vec<usize> =
            (0..thresholds.len()).filter(|&i| thresholds[i].met(observed, false)).collect();
        for &i in &self.met {
            if !current.contains(&i) && thresholds.get(i).is_some_and(|t| t.met(observed, true)) {
                current.push(i);
            }
        }
        let first: BTreeMap<usize, Instant> = current
            .iter()
            .map(|&i| (i, self.first_observed.get(&i).copied().unwrap_or(now)))
            .collect();
        for &i in &current {
            self.last_observed.insert(thresholds[i].signal.pressure(), now);
        }
        let pressures = self
            .last_observed
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) < transition)
            .map(|(p, _)| *p)
            .collect();
        let act_on: Vec<usize> = first
            .iter()
            .filter(|(i, at)| now.saturating_duration_since(**at) >= thresholds[**i].grace)
            .map(|(i, _)| *i)
            .collect();
        self.first_observed = first;
        self.met = act_on.clone();
        Verdict { pressures, act_on }
    }
}

#[cfg(test)]
mod tests;
