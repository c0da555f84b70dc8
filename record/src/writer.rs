//! [`EventWriter`]: the task that drains the queue, one event at a time as upstream's
//! `recordToSink`: correlate it, then create it (or patch the existing object), retrying an
//! unreachable apiserver up to 12 tries, the first sleep a random fraction of 10 s (so that
//! clients do not retry in step after an outage) and 10 s after that. While it retries, new
//! events wait in the bounded queue; past its bound they are dropped, never waited for.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::correlator::{Correlation, CorrelatorOptions, EventCorrelator};
use crate::recorder::{Counters, EventQueue};
use crate::sink::{EventSink, SinkError};

/// Upstream's `maxTriesPerEvent` and `defaultSleepDuration`, and the correlator's options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriterOptions {
    pub max_tries: u32,
    pub retry_sleep: Duration,
    pub correlator: CorrelatorOptions,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            max_tries: 12,
            retry_sleep: Duration::from_secs(10),
            correlator: CorrelatorOptions::default(),
        }
    }
}

#[derive(Debug)]
pub struct EventWriter<S> {
    sink: S,
    queue: EventQueue,
    correlator: EventCorrelator,
    options: WriterOptions,
}

fn name(event: &Event) -> (&str, &str) {
    let m = &event.metadata;
    (m.namespace.as_deref().unwrap_or("default"), m.name.as_deref().unwrap_or_default())
}

impl<S: EventSink> EventWriter<S> {
    pub fn new(sink: S, queue: EventQueue) -> Self {
        Self::with_options(sink, queue, WriterOptions::default())
    }

    pub fn with_options(sink: S, queue: EventQueue, options: WriterOptions) -> Self {
        let correlator = EventCorrelator::new(options.correlator);
        Self { sink, queue, correlator, options }
    }

    /// Writes events until `stop` (a write in progress is abandoned) or until every recorder
    /// is dropped and the queue is empty.
    pub async fn run(mut self, stop: CancellationToken) {
        loop {
            let event = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                e = self.queue.rx.recv() => e,
            };
            let Some(event) = event else { return };
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                () = self.write(event) => {}
            }
        }
    }

    async fn write(&mut self, event: Event) {
        let counters = self.queue.counters.clone();
        let correlated = self.correlator.correlate(event, Instant::now(), jiff::Timestamp::now());
        let (mut event, patch, key) = match correlated {
            Correlation::Skip => {
                Counters::add(&counters.skipped);
                return;
            }
            Correlation::Create { event, key } => (event, None, key),
            Correlation::Patch { event, patch, key } => (event, Some(patch), key),
        };
        let mut tries = 0;
        loop {
            let error = match self.try_write(&mut event, patch.as_ref()).await {
                Ok(written) => {
                    self.correlator.update_state(&key, &written);
                    Counters::add(&counters.written);
                    return;
                }
                Err(e) => e,
            };
            if let SinkError::Rejected { code, .. } = &error {
                if *code == 409 {
                    tracing::debug!(error = %error, "event not written (will not retry)");
                } else {
                    tracing::warn!(error = %error, "event not written (will not retry)");
                }
                Counters::add(&counters.abandoned);
                return;
            }
            tries += 1;
            if tries >= self.options.max_tries {
                tracing::warn!(error = %error, tries, "event not written: retry limit reached");
                Counters::add(&counters.abandoned);
                return;
            }
            let delay = if tries == 1 {
                tracing::warn!(error = %error, "event not written yet; retrying");
                self.options.retry_sleep.mul_f64(rand::random::<f64>())
            } else {
                tracing::debug!(error = %error, tries, "event not written yet; retrying");
                self.options.retry_sleep
            };
            tokio::time::sleep(delay).await;
        }
    }

    /// Upstream's `recordEvent`: a patch when the event exists already, falling back to a
    /// create when it was deleted in the meantime (404).
    async fn try_write(
        &self,
        event: &mut Event,
        patch: Option<&Value>,
    ) -> Result<Event, SinkError> {
        if let Some(patch) = patch {
            let (namespace, name) = name(event);
            match self.sink.patch(namespace, name, patch).await {
                Err(e) if e.code() == Some(404) => {}
                other => return other,
            }
        }
        event.metadata.resource_version = None;
        self.sink.create(event).await
    }
}

#[cfg(test)]
mod tests;
