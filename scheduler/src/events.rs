//! What the scheduler tells users about pods, as upstream's scheduler does: a `Scheduled`
//! (Normal) or `FailedScheduling` (Warning) core/v1 Event on the pod from `default-scheduler`,
//! and for an unschedulable pod the `PodScheduled=False` condition with reason `Unschedulable`
//! and the same message (what `kubectl get pods` and `describe` show).
//!
//! Scheduling never waits for these writes: [`Reporter::report`] queues them (dropping when the
//! bounded queue is full, as upstream's event broadcaster does) and [`run`] writes them: the
//! condition itself, the events through the shared `record` writer, whose correlator makes a
//! repeated `FailedScheduling` with the same message bump the existing event's `count`.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use record::{EventRecorder, EventType, Source};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The component name on events, as upstream's.
pub const COMPONENT: &str = "default-scheduler";
pub const REASON_SCHEDULED: &str = "Scheduled";
pub const REASON_FAILED_SCHEDULING: &str = "FailedScheduling";
/// At most this many condition writes in flight.
const CONCURRENT_WRITES: usize = 8;

#[derive(Debug, Clone)]
pub enum Report {
    Scheduled {
        pod: Arc<Pod>,
        node: String,
    },
    /// `unschedulable`: no node fitted (also sets the `PodScheduled` condition); otherwise an
    /// error such as a rejected binding.
    FailedScheduling {
        pod: Arc<Pod>,
        message: String,
        unschedulable: bool,
    },
}

/// The scheduling side of the report queue.
#[derive(Debug, Clone)]
pub struct Reporter {
    tx: mpsc::Sender<Report>,
}

impl Reporter {
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<Report>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { tx }, rx)
    }

    /// Queues a report; never waits.
    pub fn report(&self, report: Report) {
        if let Err(mpsc::error::TrySendError::Full(r)) = self.tx.try_send(report) {
            tracing::debug!(report = ?std::mem::discriminant(&r), "event queue full; event dropped");
        }
    }
}

/// The Event upstream's recorder would create: `<pod>.<hex nanoseconds>`, from
/// `default-scheduler`, reported by this `instance`.
pub fn event(
    pod: &Pod,
    type_: EventType,
    reason: &str,
    message: &str,
    instance: &str,
    now: jiff::Timestamp,
) -> Event {
    let object = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    };
    let source = Source { component: COMPONENT.into(), host: None };
    let mut e = record::make_event(&source, &object, type_, reason, message, now);
    e.reporting_instance = Some(instance.into());
    e.action = Some(if reason == REASON_SCHEDULED { "Binding" } else { "Scheduling" }.into());
    e
}

/// Whether the pod already carries `PodScheduled=False/Unschedulable` with this message.
pub fn has_unschedulable_condition(pod: &Pod, message: &str) -> bool {
    pod.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
            && c.message.as_deref() == Some(message)
    })
}

/// Writes reports until the channel closes (then the events still queued are written) or
/// `stop` (pending ones are dropped then).
pub async fn run(
    client: kube::Client,
    reports: mpsc::Receiver<Report>,
    instance: String,
    stop: CancellationToken,
) {
    let source = Source { component: COMPONENT.into(), host: None };
    let (recorder, queue) = record::channel(source, record::QUEUE_CAPACITY);
    let writer = record::EventWriter::new(record::KubeSink::new(client.clone()), queue);
    let reporting = async {
        let recorder = recorder;
        let writes = tokio_stream_from(reports)
            .map(|r| write(client.clone(), r, &instance, recorder.clone()))
            .buffer_unordered(CONCURRENT_WRITES)
            .for_each(|()| async {});
        tokio::select! {
            () = writes => {}
            () = stop.cancelled() => {}
        }
        // Dropping the last recorder lets the writer finish what is queued, then return.
    };
    tokio::join!(writer.run(stop.clone()), reporting);
}

fn tokio_stream_from(mut rx: mpsc::Receiver<Report>) -> impl futures::Stream<Item = Report> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn write(client: kube::Client, report: Report, instance: &str, events: EventRecorder) {
    let now = jiff::Timestamp::now();
    let (pod, type_, reason, message, unschedulable) = match report {
        Report::Scheduled { pod, node } => {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let msg = format!(
                "Successfully assigned {ns}/{} to {node}",
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            (pod, EventType::Normal, REASON_SCHEDULED, msg, false)
        }
        Report::FailedScheduling { pod, message, unschedulable } => {
            (pod, EventType::Warning, REASON_FAILED_SCHEDULING, message, unschedulable)
        }
    };
    events.record(event(&pod, type_, reason, &message, instance, now));
    if unschedulable && !has_unschedulable_condition(&pod, &message) {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": Time(now), "lastProbeTime": null,
        }]}});
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if let Err(e) =
            pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch)).await
        {
            tracing::debug!(pod = name, error = %e, "setting PodScheduled=False");
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    use super::*;
    use crate::cache::tests::pod;

    #[test]
    fn events_are_named_and_attributed_as_upstreams() {
        let p = pod("web", "", "");
        let now = jiff::Timestamp::from_nanosecond(0x1234_5678).unwrap_or_default();
        let e = event(
            &p,
            EventType::Warning,
            REASON_FAILED_SCHEDULING,
            "0/3 nodes are available: 3 Insufficient cpu.",
            "me",
            now,
        );
        assert_eq!(e.metadata.name.as_deref(), Some("web.12345678"));
        assert_eq!(e.involved_object.kind.as_deref(), Some("Pod"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("uid-web"));
        assert_eq!(e.source.and_then(|s| s.component).as_deref(), Some("default-scheduler"));
        assert_eq!(e.reporting_component.as_deref(), Some("default-scheduler"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
    }

    #[test]
    fn the_unschedulable_condition_is_written_once_per_message() {
        let mut p = pod("web", "", "");
        assert!(!has_unschedulable_condition(&p, "m"));
        p.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some("m".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert!(has_unschedulable_condition(&p, "m"));
        assert!(!has_unschedulable_condition(&p, "other"));
    }

    #[tokio::test]
    async fn a_full_queue_drops_instead_of_blocking() {
        let (r, mut rx) = Reporter::channel(1);
        for _ in 0..3 {
            r.report(Report::Scheduled { pod: Arc::new(pod("p", "", "")), node: "n".into() });
        }
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err());
    }
}
