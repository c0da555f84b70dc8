//! Exponential backoff keyed by string, as upstream's `flowcontrol.Backoff`: restarts of a
//! crashing container (CrashLoopBackOff, 10 s doubling to 5 min, or the node's
//! `crashLoopBackOff.maxContainerRestartPeriod`, or a pod's own [`Bounds`]) and image pulls
//! (ImagePullBackOff). A restart's delay is recorded on the container it starts, so a restarted
//! kubelet takes it up ([`Backoff::seed`]) instead of restarting a crash-looping container at
//! once. Times are passed in, so it is tested without clocks.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    /// The event (container exit, failed pull) the delay counts from.
    last: SystemTime,
}

#[derive(Debug)]
pub struct Backoff {
    bounds: Bounds,
    /// Events further apart than this start the delay over (and a key untouched this long is
    /// forgotten).
    reset_after: Duration,
    entries: HashMap<String, Entry>,
}

/// The first delay and the most it doubles to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub initial: Duration,
    pub max: Duration,
}

/// Upstream's container restart backoff: 10 s, doubling, at most 5 minutes, starting over
/// after 10 minutes.
pub const RESTART_INITIAL: Duration = Duration::from_secs(10);
pub const RESTART_MAX: Duration = Duration::from_secs(300);
pub const RESTART_RESET: Duration = Duration::from_secs(600);

impl Bounds {
    /// The node's restart bounds under `crashLoopBackOff.maxContainerRestartPeriod` (upstream
    /// lowers the initial delay to a maximum below it), with a pod's own
    /// ([`api::restart_backoff`]) taking precedence.
    pub fn restarts(node_max: Duration, pod: api::restart_backoff::PodBackoff) -> Self {
        let max = pod.max.unwrap_or(node_max);
        let initial = pod.initial.unwrap_or(RESTART_INITIAL).min(max);
        Self { initial, max }
    }
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self { bounds: Bounds { initial, max }, reset_after: 2 * max, entries: HashMap::new() }
    }

    /// Container restarts: upstream's bounds, reset after 10 minutes whatever a pod's bounds.
    pub fn restarts() -> Self {
        Self {
            bounds: Bounds { initial: RESTART_INITIAL, max: RESTART_MAX },
            reset_after: RESTART_RESET,
            entries: HashMap::new(),
        }
    }

    /// The time left before `key` may act again, counting from `since` (e.g. the container's
    /// exit); `None` when it may act now.
    pub fn remaining(&self, key: &str, since: SystemTime, now: SystemTime) -> Option<Duration> {
        let e = self.entries.get(key)?;
        let until = since + e.delay;
        until.duration_since(now).ok().filter(|d| !d.is_zero())
    }

    /// The time left before `key` may act again, counting from its last recorded event.
    pub fn remaining_since_last(&self, key: &str, now: SystemTime) -> Option<Duration> {
        let e = self.entries.get(key)?;
        (e.last + e.delay).duration_since(now).ok().filter(|d| !d.is_zero())
    }

    /// The current delay of `key`, if it has one.
    pub fn delay(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|e| e.delay)
    }

    /// Records an attempt after the event at `at`: the first delay is `initial`, then it doubles
    /// up to `max`, and starts over when the events are more than `2 × max` apart (a container
    /// that ran that long is no longer crash-looping).
    pub fn next(&mut self, key: &str, at: SystemTime) {
        self.next_within(key, at, self.bounds);
    }

    /// [`Self::next`] with bounds of its own (a pod's).
    pub fn next_within(&mut self, key: &str, at: SystemTime, Bounds { initial, max }: Bounds) {
        let reset_after = self.reset_after;
        let entry = self
            .entries
            .entry(key.to_string())
            .or_insert(Entry { delay: Duration::ZERO, last: at });
        let expired = at.duration_since(entry.last).is_ok_and(|d| d > reset_after);
        entry.delay =
            if entry.delay.is_zero() || expired { initial } else { (entry.delay * 2).min(max) };
        entry.last = at;
    }

    /// Takes up a delay recorded before a restart of the kubelet, counting from `last`, for a
    /// key it has no delay for.
    pub fn seed(&mut self, key: &str, delay: Duration, last: SystemTime) {
        self.entries.entry(key.to_string()).or_insert(Entry { delay, last });
    }

    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Forgets keys untouched for the reset period.
    pub fn gc(&mut self, now: SystemTime) {
        let limit = self.reset_after;
        self.entries.retain(|_, e| now.duration_since(e.last).map_or(true, |d| d <= limit));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn the_first_restart_is_immediate_then_delays_double_to_the_cap() {
        let mut b = Backoff::restarts();
        assert_eq!(b.remaining("c", t(100), t(100)), None, "never failed: no wait");
        b.next("c", t(100));
        assert_eq!(b.remaining("c", t(100), t(101)), Some(Duration::from_secs(9)));
        assert_eq!(b.remaining("c", t(100), t(110)), None);
        let mut delays = vec![];
        for at in 110..118 {
            b.next("c", t(at));
            delays.push(b.delay("c").unwrap().as_secs());
        }
        assert_eq!(delays, [20, 40, 80, 160, 300, 300, 300, 300]);
    }

    #[test]
    fn a_container_that_ran_ten_minutes_starts_over() {
        let mut b = Backoff::restarts();
        b.next("c", t(0));
        b.next("c", t(10));
        assert_eq!(b.delay("c"), Some(Duration::from_secs(20)));
        b.next("c", t(10 + 601));
        assert_eq!(b.delay("c"), Some(Duration::from_secs(10)));
    }

    #[test]
    fn a_pods_bounds_and_a_seeded_delay_are_followed() {
        let mut b = Backoff::restarts();
        let fast = Bounds { initial: Duration::from_secs(1), max: Duration::from_secs(5) };
        let mut delays = vec![];
        for at in 0..5 {
            b.next_within("c", t(at), fast);
            delays.push(b.delay("c").unwrap().as_secs());
        }
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        // Ten minutes apart starts over even with a 5 s maximum.
        b.next_within("c", t(100), fast);
        assert_eq!(b.delay("c"), Some(Duration::from_secs(5)));
        b.next_within("c", t(100 + 601), fast);
        assert_eq!(b.delay("c"), Some(Duration::from_secs(1)));
        // A delay from before a restart is taken up, not started over.
        let mut fresh = Backoff::restarts();
        fresh.seed("c", Duration::from_secs(40), t(50));
        assert_eq!(fresh.remaining("c", t(60), t(61)), Some(Duration::from_secs(39)));
        fresh.next("c", t(100));
        assert_eq!(fresh.delay("c"), Some(Duration::from_secs(80)));
        fresh.seed("c", Duration::from_secs(1), t(100));
        assert_eq!(fresh.delay("c"), Some(Duration::from_secs(80)), "a known delay is kept");
    }

    #[test]
    fn node_and_pod_bounds_combine_as_upstream_and_the_pod_wins() {
        use api::restart_backoff::PodBackoff;
        let s = Duration::from_secs;
        let node = |max| Bounds::restarts(s(max), PodBackoff::default());
        assert_eq!(node(300), Bounds { initial: s(10), max: s(300) });
        assert_eq!(node(60), Bounds { initial: s(10), max: s(60) });
        assert_eq!(node(2), Bounds { initial: s(2), max: s(2) }, "initial lowered to the max");
        let pod = PodBackoff { initial: Some(s(1)), max: Some(s(5)) };
        assert_eq!(Bounds::restarts(s(60), pod), Bounds { initial: s(1), max: s(5) });
        let max_only = PodBackoff { initial: None, max: Some(s(4)) };
        assert_eq!(Bounds::restarts(s(300), max_only), Bounds { initial: s(4), max: s(4) });
    }

    #[test]
    fn gc_forgets_old_keys() {
        let mut b = Backoff::restarts();
        b.next("old", t(0));
        b.next("new", t(1000));
        b.gc(t(1000));
        assert_eq!(b.len(), 1);
        assert!(b.delay("new").is_some());
    }
}
