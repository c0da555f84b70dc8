//! Exponential backoff keyed by string, as upstream's `flowcontrol.Backoff`: restarts of a
//! crashing container (CrashLoopBackOff, 10 s doubling to 5 min) and image pulls
//! (ImagePullBackOff). Times are passed in, so it is tested without clocks.

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
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

/// Upstream's container restart backoff: 10 s, doubling, at most 5 minutes.
pub const RESTART_INITIAL: Duration = Duration::from_secs(10);
pub const RESTART_MAX: Duration = Duration::from_secs(300);

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max, entries: HashMap::new() }
    }

    pub fn restarts() -> Self {
        Self::new(RESTART_INITIAL, RESTART_MAX)
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
        let (initial, max) = (self.initial, self.max);
        let entry = self
            .entries
            .entry(key.to_string())
            .or_insert(Entry { delay: Duration::ZERO, last: at });
        let expired = at.duration_since(entry.last).is_ok_and(|d| d > 2 * max);
        entry.delay =
            if entry.delay.is_zero() || expired { initial } else { (entry.delay * 2).min(max) };
        entry.last = at;
    }

    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Forgets keys untouched for `2 × max`.
    pub fn gc(&mut self, now: SystemTime) {
        let limit = 2 * self.max;
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
    fn gc_forgets_old_keys() {
        let mut b = Backoff::restarts();
        b.next("old", t(0));
        b.next("new", t(1000));
        b.gc(t(1000));
        assert_eq!(b.len(), 1);
        assert!(b.delay("new").is_some());
    }
}
