//! Events to the apiserver, as client-go's `tools/record` (the legacy core/v1 event recorder
//! every upstream component uses): components record events without ever waiting; a writer task
//! correlates them and writes them to the apiserver.
//!
//! - [`event`]: the Event upstream's recorder makes: name `<object>.<hex unix nanos>`, source,
//!   reporting component and instance, `count` and timestamps; limits on names and messages.
//! - [`correlator`]: upstream's `EventCorrelator`: similar events aggregated, identical ones
//!   counted on the existing object, a token bucket per source and object against spam.
//! - [`recorder`]: [`EventRecorder`], the handle components hold: a bounded queue that drops
//!   (and counts) instead of blocking.
//! - [`writer`]: [`EventWriter`], the task that drains the queue into an [`EventSink`] with
//!   upstream's retries.
//! - [`sink`]: [`EventSink`], the API writes (create, patch) behind a trait, and [`KubeSink`],
//!   the real one on kube-rs.
//! - [`fake`]: [`FakeSink`], an in-memory sink for tests.
//!
//! ```no_run
//! # async fn example(client: kube::Client, stop: tokio_util::sync::CancellationToken) {
//! use k8s_openapi::api::core::v1::ObjectReference;
//! let source = record::Source { component: "kubelet".into(), host: Some("node-a".into()) };
//! let (recorder, queue) = record::channel(source, record::QUEUE_CAPACITY);
//! let writer = record::EventWriter::new(record::KubeSink::new(client), queue);
//! tokio::spawn(writer.run(stop));
//! let pod = ObjectReference { kind: Some("Pod".into()), ..Default::default() };
//! recorder.event(&pod, record::EventType::Normal, "Started", "Container started");
//! # }
//! ```

pub mod correlator;
pub mod event;
pub mod fake;
pub mod recorder;
pub mod sink;
pub mod writer;

pub use correlator::{Correlation, CorrelatorOptions, EventCorrelator};
pub use event::{EventType, Source, make_event};
pub use fake::FakeSink;
pub use recorder::{Counts, EventQueue, EventRecorder, QUEUE_CAPACITY, Stats, channel};
pub use sink::{EventSink, KubeSink, SinkError};
pub use writer::{EventWriter, WriterOptions};
