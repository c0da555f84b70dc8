//! Events controllers post about the objects they act on (`SuccessfulCreate`,
//! `ScalingReplicaSet`, ...), behind the [`Recorder`] trait so a shared event-recorder crate can
//! take its place. [`ApiRecorder`] posts core/v1 Events as upstream's recorder names and
//! attributes them (`<object>.<hex nanoseconds>`, `source.component` the controller's name),
//! from a bounded queue: recording never waits, and a full queue drops the event. No
//! aggregation or spam filtering here.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records an event about an object; never waits.
pub trait Recorder: Send + Sync + 'static {
    fn record(&self, about: ObjectReference, kind: EventType, reason: &str, message: String);
}

/// The reference an event names.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.uid(),
        resource_version: obj.resource_version(),
        ..Default::default()
    }
}

/// Upstream's event for `about`, from `component`.
pub fn event(
    about: ObjectReference,
    kind: EventType,
    reason: &str,
    message: String,
    component: &str,
    now: jiff::Timestamp,
) -> Event {
    let name = about.name.clone().unwrap_or_default();
    let nanos = u128::try_from(now.as_nanosecond()).unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{nanos:x}")),
            namespace: about.namespace.clone().or(Some("default".into())),
            ..Default::default()
        },
        involved_object: about,
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(kind.as_str().into()),
        source: Some(EventSource { component: Some(component.into()), host: None }),
        reporting_component: Some(component.into()),
        reporting_instance: Some(component.into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Default::default()
    }
}

/// Queues events for [`ApiRecorder::run`] to post.
#[derive(Debug, Clone)]
pub struct ApiRecorder {
    component: &'static str,
    tx: mpsc::Sender<Event>,
}

impl ApiRecorder {
    /// A recorder for `component` (`replicaset-controller`, ...) writing through `sink`.
    pub fn new(component: &'static str, sink: &EventSink) -> Self {
        Self { component, tx: sink.tx.clone() }
    }
}

impl Recorder for ApiRecorder {
    fn record(&self, about: ObjectReference, kind: EventType, reason: &str, message: String) {
        tracing::debug!(object = ?about.name, reason, %message, "event");
        let e = event(about, kind, reason, message, self.component, jiff::Timestamp::now());
        if self.tx.try_send(e).is_err() {
            tracing::debug!(reason, "event queue full or closed; event dropped");
        }
    }
}

/// The one queue all recorders share, and its writer.
#[derive(Debug)]
pub struct EventSink {
    tx: mpsc::Sender<Event>,
    rx: Mutex<Option<mpsc::Receiver<Event>>>,
}

impl EventSink {
    pub fn new(capacity: usize) -> Self {
        let (tx, rx) = mpsc::channel(capacity);
        Self { tx, rx: Mutex::new(Some(rx)) }
    }

    /// Whether every queued event has been taken by the writer.
    pub fn is_empty(&self) -> bool {
        self.tx.capacity() == self.tx.max_capacity()
    }

    /// Posts queued events until `stop`.
    pub async fn run(self: Arc<Self>, client: kube::Client, stop: CancellationToken) {
        let rx = self.rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let Some(mut rx) = rx else { return };
        loop {
            let e = tokio::select! {
                () = stop.cancelled() => return,
                e = rx.recv() => e,
            };
            let Some(e) = e else { return };
            let ns = e.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let api: Api<Event> = Api::namespaced(client.clone(), &ns);
            if let Err(err) = api.create(&PostParams::default(), &e).await {
                tracing::debug!(event = ?e.metadata.name, error = %err, "writing event");
            }
        }
    }
}

/// Collects events in memory (hermetic tests).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    pub events: Mutex<Vec<(String, String, String)>>,
}

impl MemoryRecorder {
    /// `(object name, reason, message)` of each event so far.
    pub fn take(&self) -> Vec<(String, String, String)> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl Recorder for MemoryRecorder {
    fn record(&self, about: ObjectReference, _: EventType, reason: &str, message: String) {
        self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((
            about.name.unwrap_or_default(),
            reason.to_string(),
            message,
        ));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;

    use super::*;

    #[test]
    fn events_are_named_and_attributed_as_upstreams() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let now = jiff::Timestamp::from_nanosecond(0xabc).unwrap_or_default();
        let e = event(
            reference(&rs),
            EventType::Normal,
            "SuccessfulCreate",
            "Created pod: web-x".into(),
            "replicaset-controller",
            now,
        );
        assert_eq!(e.metadata.name.as_deref(), Some("web.abc"));
        assert_eq!(e.involved_object.kind.as_deref(), Some("ReplicaSet"));
        assert_eq!(e.involved_object.api_version.as_deref(), Some("apps/v1"));
        assert_eq!(e.source.and_then(|s| s.component).as_deref(), Some("replicaset-controller"));
    }
}
