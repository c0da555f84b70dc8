//! [`EventRecorder`]: what components hold to record events. Recording never waits: the event
//! goes into a bounded queue, or, when the queue is full (the apiserver is slow or away), it is
//! dropped and counted, as upstream's broadcaster drops when its 1000-event queue is full.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use tokio::sync::mpsc;

use crate::event::{EventType, Source, make_event};

/// Upstream's `maxQueuedEvents`.
pub const QUEUE_CAPACITY: usize = 1000;

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) dropped: AtomicU64,
    pub(crate) skipped: AtomicU64,
    pub(crate) written: AtomicU64,
    pub(crate) abandoned: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64) -> u64 {
        counter.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// What became of the events recorded so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Not queued: the queue was full or the writer gone.
    pub dropped: u64,
    /// Dropped by the spam filter.
    pub skipped: u64,
    /// Created or patched in the apiserver.
    pub written: u64,
    /// Refused by the apiserver, or still unwritten after every retry.
    pub abandoned: u64,
}

/// The recording side; cheap to clone.
#[derive(Debug, Clone)]
pub struct EventRecorder {
    source: Arc<Source>,
    tx: mpsc::Sender<Event>,
    counters: Arc<Counters>,
}

/// The writing side, for [`EventWriter`](crate::EventWriter).
#[derive(Debug)]
pub struct EventQueue {
    pub(crate) rx: mpsc::Receiver<Event>,
    pub(crate) counters: Arc<Counters>,
}

/// A recorder for `source` and the queue its events wait in (at most `capacity`).
pub fn channel(source: Source, capacity: usize) -> (EventRecorder, EventQueue) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let counters = Arc::new(Counters::default());
    (
        EventRecorder { source: Arc::new(source), tx, counters: counters.clone() },
        EventQueue { rx, counters },
    )
}

impl EventRecorder {
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Records that `reason` happened to `object` now (upstream's `Event`).
    pub fn event(&self, object: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        let now = jiff::Timestamp::now();
        self.record(make_event(&self.source, object, type_, reason, message, now));
    }

    /// Queues an event made elsewhere (with [`make_event`], then adjusted); never waits.
    /// False if it was dropped.
    pub fn record(&self, event: Event) -> bool {
        match self.tx.try_send(event) {
            Ok(()) => true,
            Err(e) => {
                let n = Counters::add(&self.counters.dropped);
                let event = match &e {
                    mpsc::error::TrySendError::Full(ev) | mpsc::error::TrySendError::Closed(ev) => {
                        ev
                    }
                };
                let why = match e {
                    mpsc::error::TrySendError::Full(_) => "too many queued events",
                    mpsc::error::TrySendError::Closed(_) => "the event writer has stopped",
                };
                // Every drop at debug; the first of a run of drops and then every power of two
                // at warn, so an outage is visible without one log line per event.
                if n.is_power_of_two() {
                    tracing::warn!(dropped = n, reason = ?event.reason, object = ?event.involved_object.name, "event dropped: {why}");
                } else {
                    tracing::debug!(dropped = n, reason = ?event.reason, "event dropped: {why}");
                }
                false
            }
        }
    }

    pub fn counts(&self) -> Counts {
        self.stats().counts()
    }

    /// A handle on the counts that does not keep the queue open.
    pub fn stats(&self) -> Stats {
        Stats(self.counters.clone())
    }
}

/// The counts of a recorder's events, readable after the recorder is gone.
#[derive(Debug, Clone)]
pub struct Stats(Arc<Counters>);

impl Stats {
    pub fn counts(&self) -> Counts {
        let c = &self.0;
        Counts {
            dropped: c.dropped.load(Ordering::Relaxed),
            skipped: c.skipped.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
            abandoned: c.abandoned.load(Ordering::Relaxed),
        }
    }
}
