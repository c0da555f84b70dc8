//! When the PLEG last relisted and when it last saw each pod change: what tells a pod's runtime
//! status read earlier still holds, as the timestamps of upstream's pod cache do
//! (`GetNewerThan`). A periodic resync of a pod nothing happened to then plans from the status
//! it read last instead of asking the runtime again (four CRI calls per pod; at 110 pods and
//! upstream's 1-minute resync, seven calls a second at idle).
//!
//! A status read that began at `read` holds while
//! - a relist began after `read` (it compared the runtime against what it saw before `read`),
//!   and the latest relist began recently (the PLEG is not stalled);
//! - no relist or runtime event that ended after `read` saw the pod change (a change it saw
//!   happened before it ended, so a read that began later includes it).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct PodTimeline {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// When the latest successful relist began.
    relist_began: Option<Instant>,
    /// When the relist or event that last saw each pod change ended.
    changed: HashMap<String, Instant>,
    /// When the relist or event that last saw any pod change ended (pods forgotten since
    /// included).
    last_change: Option<Instant>,
}

impl PodTimeline {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A relist that began at `began` and ended at `ended` saw `changed` pods change; `live`
    /// are the pods the runtime holds now (others are forgotten once no change is recent).
    pub fn relisted<'a>(
        &self,
        began: Instant,
        ended: Instant,
        changed: impl IntoIterator<Item = &'a str>,
        live: &BTreeSet<String>,
    ) {
        let mut inner = self.lock();
        let changed: BTreeSet<&str> = changed.into_iter().collect();
        inner.changed.retain(|uid, _| live.contains(uid) || changed.contains(uid.as_str()));
        if !changed.is_empty() {
            inner.last_change = inner.last_change.max(Some(ended));
        }
        for uid in changed {
            inner.changed.insert(uid.to_string(), ended);
        }
        inner.relist_began = Some(began);
    }

    /// A relist that began at `began` saw nothing change: the pods it found are the ones the
    /// last relist found, so those kept stay (a pod a runtime event alone named, gone from the
    /// runtime, is forgotten at the next relist that sees a change).
    pub fn relisted_unchanged(&self, began: Instant) {
        self.lock().relist_began = Some(began);
    }

    /// A runtime event about `uid` arrived at `at`.
    pub fn changed(&self, uid: &str, at: Instant) {
        let mut inner = self.lock();
        inner.changed.insert(uid.to_string(), at);
        inner.last_change = inner.last_change.max(Some(at));
    }

    /// Whether the PLEG, relisting every `period` and current at `now`, has seen no pod change
    /// from `read` on: what lets a reading of every pod's figures taken at `read` stand for the
    /// pods the runtime holds ([`crate::stats::housekeeping`]). Weaker than
    /// [`Self::unchanged_since`]: a change after `read` that no relist has seen yet is missed,
    /// until one does (within a period).
    pub fn quiet_since(&self, read: Instant, now: Instant, period: Duration) -> bool {
        let inner = self.lock();
        inner.current(now, period).is_some() && inner.last_change.is_none_or(|at| at < read)
    }

    /// Whether a status of `uid` read from `read` on still holds at `now`, relists being due
    /// every `period`.
    pub fn unchanged_since(
        &self,
        uid: &str,
        read: Instant,
        now: Instant,
        period: Duration,
    ) -> bool {
        let inner = self.lock();
        let Some(began) = inner.current(now, period) else { return false };
        let changed_after = inner.changed.get(uid).is_some_and(|at| *at >= read);
        began > read && !changed_after
    }
}

impl Inner {
    /// When the latest relist began, if the PLEG is current at `now` (relisted within three
    /// periods; else it stalled and what it last saw tells nothing).
    fn current(&self, now: Instant, period: Duration) -> Option<Instant> {
        self.relist_began.filter(|began| now.saturating_duration_since(*began) <= period * 3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(1);

    fn s(n: u64) -> Duration {
        Duration::from_millis(n * 100)
    }

    #[test]
    fn a_status_holds_once_a_later_relist_saw_its_pod_unchanged() {
        let t0 = Instant::now();
        let timeline = PodTimeline::default();
        let live = BTreeSet::from(["a".to_string(), "b".to_string()]);
        let read = t0 + s(5);
        assert!(!timeline.unchanged_since("a", read, t0 + s(6), PERIOD), "never relisted");
        timeline.relisted(t0 + s(2), t0 + s(3), [], &live);
        assert!(
            !timeline.unchanged_since("a", read, t0 + s(6), PERIOD),
            "relisted before the read"
        );
        timeline.relisted(t0 + s(12), t0 + s(13), ["b"], &live);
        assert!(timeline.unchanged_since("a", read, t0 + s(14), PERIOD));
        assert!(!timeline.unchanged_since("b", read, t0 + s(14), PERIOD), "b changed since");
        assert!(!timeline.unchanged_since("a", read, t0 + s(60), PERIOD), "the PLEG stalled");
    }

    #[test]
    fn a_change_seen_by_a_relist_that_ended_after_the_read_began_voids_it() {
        let t0 = Instant::now();
        let timeline = PodTimeline::default();
        let live = BTreeSet::from(["a".to_string()]);
        // The relist began before the read and ended after it began: the change it saw may
        // have happened after the read looked.
        let read = t0 + s(5);
        timeline.relisted(t0 + s(4), t0 + s(6), ["a"], &live);
        timeline.relisted(t0 + s(14), t0 + s(15), [], &live);
        assert!(!timeline.unchanged_since("a", read, t0 + s(16), PERIOD));
        // A change ended before the read began is in it.
        assert!(timeline.unchanged_since("a", t0 + s(7), t0 + s(16), PERIOD));
        // So is an event's, by the time it arrived.
        timeline.changed("a", t0 + s(20));
        assert!(!timeline.unchanged_since("a", t0 + s(7), t0 + s(21), PERIOD));
    }

    #[test]
    fn a_reading_stands_while_no_pod_changed_since_and_the_pleg_is_current() {
        let t0 = Instant::now();
        let timeline = PodTimeline::default();
        let live = BTreeSet::from(["a".to_string()]);
        assert!(!timeline.quiet_since(t0, t0, PERIOD), "never relisted");
        timeline.relisted(t0, t0 + s(1), ["a"], &live);
        let read = t0 + s(2);
        assert!(timeline.quiet_since(read, t0 + s(3), PERIOD), "the change ended before");
        assert!(!timeline.quiet_since(t0 + s(1), t0 + s(3), PERIOD), "it ended as it began");
        assert!(!timeline.quiet_since(read, t0 + s(40), PERIOD), "the PLEG stalled");
        // A removed pod is forgotten, but its change still voids a reading taken before.
        timeline.relisted(t0 + s(10), t0 + s(11), ["a"], &BTreeSet::new());
        timeline.relisted(t0 + s(20), t0 + s(21), [], &BTreeSet::new());
        assert!(!timeline.quiet_since(read, t0 + s(22), PERIOD));
        assert!(timeline.quiet_since(t0 + s(12), t0 + s(22), PERIOD));
        timeline.changed("b", t0 + s(23));
        assert!(!timeline.quiet_since(t0 + s(12), t0 + s(24), PERIOD), "an event");
    }

    #[test]
    fn a_relist_that_saw_nothing_change_keeps_readings_standing_and_the_pleg_current() {
        let t0 = Instant::now();
        let timeline = PodTimeline::default();
        let live = BTreeSet::from(["a".to_string()]);
        timeline.relisted(t0, t0 + s(1), ["a"], &live);
        let read = t0 + s(2);
        timeline.relisted_unchanged(t0 + s(30));
        assert!(timeline.quiet_since(read, t0 + s(35), PERIOD), "current again");
        assert!(timeline.unchanged_since("a", read, t0 + s(35), PERIOD), "a later relist");
        assert!(!timeline.unchanged_since("a", t0 + s(31), t0 + s(35), PERIOD), "none since");
        assert_eq!(timeline.lock().changed.len(), 1, "the pods kept stay");
    }

    #[test]
    fn pods_the_runtime_no_longer_holds_are_forgotten() {
        let t0 = Instant::now();
        let timeline = PodTimeline::default();
        timeline.relisted(t0, t0 + s(1), ["a"], &BTreeSet::from(["a".to_string()]));
        timeline.relisted(t0 + s(10), t0 + s(11), ["a"], &BTreeSet::new());
        assert_eq!(timeline.lock().changed.len(), 1, "its removal is a change, kept once");
        timeline.relisted(t0 + s(20), t0 + s(21), [], &BTreeSet::new());
        assert!(timeline.lock().changed.is_empty());
    }
}
