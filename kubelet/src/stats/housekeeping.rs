//! The last reading of every pod's figures, kept for the next asker, as cAdvisor's housekeeping
//! keeps upstream's (`--housekeeping-interval`, 10 s): the summary API, the resource metrics
//! and the eviction manager each ask for a summary, and Prometheus and `kubectl top` scrape on
//! clocks of their own. A reading (the runtime's listing and each pod's and container's CPU,
//! memory and processes) is reused while it is less than [`INTERVAL`] old and the PLEG, current,
//! has seen no pod change since it began ([`PodTimeline::quiet_since`]): so a started or
//! stopped container is in the next answer once a relist sees it (within its period). Each
//! figure keeps the time it was read, so a rate made from two answers is right. The eviction
//! manager, which acts on what pods use now, always reads afresh (and keeps what it read).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use proto::cri as api;

use super::cri::Listing;
use crate::pleg::timeline::PodTimeline;

/// How old a reading may be and still answer (upstream's default housekeeping interval).
pub const INTERVAL: Duration = Duration::from_secs(10);

/// The pods' figures as one source gave them.
#[derive(Debug)]
pub enum PodFigures {
    /// Per pod: read from the pods' cgroups, or the runtime's `ListPodSandboxStats`.
    Sandboxes(Vec<api::PodSandboxStats>),
    /// Per container, from a runtime without `ListPodSandboxStats`.
    Containers(Vec<api::ContainerStats>),
}

/// One reading: what the runtime listed and the pods' figures, from `began` on.
#[derive(Debug)]
pub struct Reading {
    pub began: Instant,
    pub listing: Arc<Listing>,
    pub figures: PodFigures,
}

/// The reading kept, and what tells whether it still stands.
#[derive(Debug)]
pub struct Housekeeping {
    timeline: Arc<PodTimeline>,
    relist_period: Duration,
    kept: Mutex<Option<Arc<Reading>>>,
}

impl Housekeeping {
    /// Readings checked against `timeline`, which the PLEG updates every `relist_period`.
    pub fn new(timeline: Arc<PodTimeline>, relist_period: Duration) -> Self {
        Self { timeline, relist_period, kept: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Reading>>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept reading, if it still stands at `now`.
    pub fn recent(&self, now: Instant) -> Option<Arc<Reading>> {
        let kept = self.lock().clone()?;
        let young = now.saturating_duration_since(kept.began) < INTERVAL;
        (young && self.timeline.quiet_since(kept.began, now, self.relist_period)).then_some(kept)
    }

    /// Keeps `reading` unless a later one is kept already (readings made at once finish in
    /// any order).
    pub fn keep(&self, reading: Arc<Reading>) {
        let mut kept = self.lock();
        if kept.as_ref().is_none_or(|k| k.began <= reading.began) {
            *kept = Some(reading);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const PERIOD: Duration = Duration::from_secs(1);

    fn reading(began: Instant) -> Arc<Reading> {
        Arc::new(Reading {
            began,
            listing: Arc::default(),
            figures: PodFigures::Sandboxes(Vec::new()),
        })
    }

    fn relisted(timeline: &PodTimeline, at: Instant, changed: &[&str]) {
        let live = BTreeSet::from(["a".to_string()]);
        timeline.relisted(at, at, changed.iter().copied(), &live);
    }

    #[test]
    fn a_reading_answers_until_it_is_an_interval_old() {
        let t0 = Instant::now();
        let timeline = Arc::new(PodTimeline::default());
        let h = Housekeeping::new(timeline.clone(), PERIOD);
        assert!(h.recent(t0).is_none(), "nothing read yet");
        h.keep(reading(t0));
        relisted(&timeline, t0 + INTERVAL / 2, &[]);
        assert!(h.recent(t0 + INTERVAL / 2).is_some());
        relisted(&timeline, t0 + INTERVAL, &[]);
        assert!(h.recent(t0 + INTERVAL).is_none(), "an interval old");
    }

    #[test]
    fn a_pod_change_the_pleg_saw_after_the_reading_began_voids_it() {
        let t0 = Instant::now();
        let timeline = Arc::new(PodTimeline::default());
        let h = Housekeeping::new(timeline.clone(), PERIOD);
        relisted(&timeline, t0, &["a"]);
        h.keep(reading(t0 + PERIOD));
        assert!(h.recent(t0 + PERIOD * 2).is_some(), "the change was in the reading");
        relisted(&timeline, t0 + PERIOD * 2, &["a"]);
        assert!(h.recent(t0 + PERIOD * 2).is_none());
        h.keep(reading(t0 + PERIOD * 3));
        assert!(h.recent(t0 + PERIOD * 4).is_some(), "a new reading stands");
        assert!(h.recent(t0 + PERIOD * 6).is_none(), "the PLEG has not relisted since: stalled");
    }

    #[test]
    fn an_earlier_reading_that_finishes_later_does_not_replace_a_later_one() {
        let t0 = Instant::now();
        let timeline = Arc::new(PodTimeline::default());
        relisted(&timeline, t0, &[]);
        let h = Housekeeping::new(timeline, PERIOD);
        h.keep(reading(t0 + PERIOD));
        h.keep(reading(t0));
        assert_eq!(h.recent(t0 + PERIOD).map(|r| r.began), Some(t0 + PERIOD));
    }
}
