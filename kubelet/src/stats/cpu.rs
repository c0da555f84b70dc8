//! `usageNanoCores` for runtimes that report only cumulative CPU time, as upstream's CRI stats
//! provider keeps it: the previous sample of each container (and pod, and the node) in a small
//! bounded cache, the rate over the window between two samples.
//!
//! Every summary observes the samples of the reading it is made of; a sample less than
//! [`MIN_WINDOW_NS`] after the cached one (the same one, where a kept reading answers again,
//! [`super::housekeeping`]) answers the cached rate instead, so two scrapes in quick succession
//! do not measure a window too short to mean anything.

use std::collections::{HashMap, HashSet};

/// The shortest window a rate is computed over, in nanoseconds.
pub const MIN_WINDOW_NS: i64 = 1_000_000_000;
/// The most records kept: more containers than any node runs.
pub const CAPACITY: usize = 4096;
/// The node's key (no container or sandbox id looks like it).
pub const NODE: &str = "/";

/// One cumulative reading: when (ns since the epoch) and the core-nanoseconds used so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub at: i64,
    pub core_nanos: u64,
}

#[derive(Debug, Clone, Copy)]
struct Record {
    sample: Sample,
    nano_cores: Option<u64>,
}

#[derive(Debug, Default)]
pub struct CpuUsageCache {
    records: HashMap<String, Record>,
}

impl CpuUsageCache {
    /// The rate for `key` as of `sample`: `None` until there are two samples a window apart.
    /// A counter that went backwards (a new container under a reused key) starts over.
    pub fn observe(&mut self, key: &str, sample: Sample) -> Option<u64> {
        let Some(r) = self.records.get_mut(key) else {
            if self.records.len() < CAPACITY {
                self.records.insert(key.to_string(), Record { sample, nano_cores: None });
            }
            return None;
        };
        let window = sample.at - r.sample.at;
        if window < 0 || sample.core_nanos < r.sample.core_nanos {
            *r = Record { sample, nano_cores: None };
            return None;
        }
        if window < MIN_WINDOW_NS {
            return r.nano_cores;
        }
        let used = sample.core_nanos - r.sample.core_nanos;
        // Truncated, as upstream's conversion.
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let rate = (used as f64 / window as f64 * 1e9) as u64;
        *r = Record { sample, nano_cores: Some(rate) };
        Some(rate)
    }

    /// Forgets every key not in `live` (containers and pods gone since), and the node's never.
    pub fn retain(&mut self, live: &HashSet<&str>) {
        self.records.retain(|k, _| k == NODE || live.contains(k.as_str()));
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn at(secs: i64, core_nanos: u64) -> Sample {
        Sample { at: secs * S, core_nanos }
    }

    #[test]
    fn the_rate_is_the_cpu_used_between_two_samples_over_their_window() {
        let mut c = CpuUsageCache::default();
        assert_eq!(c.observe("a", at(100, 0)), None, "one sample is no rate");
        // Half a core for 10 s.
        assert_eq!(c.observe("a", at(110, 5 * S as u64)), Some(500_000_000));
        // A sample too soon after answers the last rate and keeps the old window's start.
        assert_eq!(
            c.observe("a", Sample { at: 110 * S + 1000, core_nanos: 6 * S as u64 }),
            Some(500_000_000)
        );
        // Two cores over the next 2 s.
        assert_eq!(c.observe("a", at(112, 9 * S as u64)), Some(2_000_000_000));
    }

    #[test]
    fn a_counter_that_goes_back_or_a_clock_that_does_starts_over() {
        let mut c = CpuUsageCache::default();
        c.observe("a", at(100, 50));
        assert_eq!(c.observe("a", at(110, 10)), None, "a new container under the key");
        assert_eq!(c.observe("a", at(105, 20)), None, "time went backwards");
        assert_eq!(c.observe("a", at(106, 20 + S as u64)), Some(1_000_000_000));
    }

    #[test]
    fn gone_keys_are_forgotten_and_the_cache_never_grows_past_its_capacity() {
        let mut c = CpuUsageCache::default();
        for i in 0..CAPACITY + 10 {
            c.observe(&format!("c{i}"), at(1, 0));
        }
        assert_eq!(c.len(), CAPACITY);
        c.observe(NODE, at(1, 0));
        c.retain(&HashSet::from(["c1", "c2"]));
        assert_eq!(c.len(), 2, "the cache was full: the node's sample waited for room");
        c.observe(NODE, at(1, 0));
        c.retain(&HashSet::from(["c1"]));
        assert_eq!(c.len(), 2, "c1 and the node");
    }
}
