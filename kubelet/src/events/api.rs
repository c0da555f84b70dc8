//! The kubelet's events in the apiserver, when it is joined to one: each pod event becomes a
//! core/v1 Event from `source.component: kubelet`, `source.host: <node>`, about the pod
//! (`involvedObject` `v1`/`Pod`, namespace, name, UID, the container's `fieldPath`), handed to
//! the shared [`record`] writer, which correlates, counts and writes it without the caller
//! ever waiting.
//!
//! A static pod exists in the apiserver only as its mirror pod (same namespace and name,
//! another UID, assigned by the apiserver), so its events go to the mirror: the UID is the one
//! of the mirror that reflects the static pod's current manifest (`kubernetes.io/config.mirror`
//! = its config hash), so `kubectl describe pod <name>-<node>` lists them. Until that mirror
//! exists (the kubelet creates it once the Node is registered, often after the first
//! containers started), the events are held, at most [`MIRROR_WAIT`] and [`HELD_CAPACITY`] of
//! them; then they are written anyway, by namespace and name without a UID, which
//! `kubectl get events` shows and `describe` (which selects by UID) does not. Holding briefly
//! keeps a static pod's first `Pulled`/`Created`/`Started` with its mirror; writing rather than
//! dropping keeps what happened visible when no mirror can be made.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use record::{EventRecorder, EventType};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::reference::PodRef;
use crate::mirror::MirrorView;

/// The component name on the kubelet's events, as upstream's.
pub const COMPONENT: &str = "kubelet";
/// How long a static pod's event waits for its mirror pod.
pub const MIRROR_WAIT: Duration = Duration::from_secs(10);
/// How many events wait for mirrors at most; beyond, the oldest is written at once.
pub const HELD_CAPACITY: usize = 256;

#[derive(Debug)]
struct Held {
    event: Event,
    hash: String,
    since: Instant,
}

/// Pod events on their way to the apiserver.
#[derive(Debug)]
pub struct ApiEvents {
    recorder: EventRecorder,
    mirrors: watch::Receiver<MirrorView>,
    held: Mutex<VecDeque<Held>>,
    held_changed: Notify,
}

/// The UID of the mirror pod that stands for the static pod with this object reference and
/// config hash.
fn mirror_uid(view: &MirrorView, object: &ObjectReference, hash: &str) -> Option<String> {
    let namespace = object.namespace.as_deref().unwrap_or("default");
    let name = object.name.as_deref().unwrap_or_default();
    let mirror = view.as_ref()?.get(&format!("{namespace}/{name}"))?;
    let annotations = mirror.metadata.annotations.as_ref()?;
    let reflects = annotations.get(api::keys::CONFIG_MIRROR).is_some_and(|h| h == hash);
    (reflects && mirror.metadata.deletion_timestamp.is_none())
        .then(|| mirror.metadata.uid.clone())
        .flatten()
}

impl ApiEvents {
    pub fn new(recorder: EventRecorder, mirrors: watch::Receiver<MirrorView>) -> Self {
        Self { recorder, mirrors, held: Mutex::default(), held_changed: Notify::new() }
    }

    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// Hands the event to the writer, or holds a static pod's until its mirror is known.
    /// Never waits.
    pub fn record(&self, pod: &PodRef, type_: EventType, reason: &str, message: &str) {
        let object = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(pod.namespace.clone()),
            name: Some(pod.name.clone()),
            uid: pod.static_hash.is_none().then(|| pod.uid.clone()),
            field_path: pod.field_path.clone(),
            ..ObjectReference::default()
        };
        let now = jiff::Timestamp::now();
        let mut event =
            record::make_event(self.recorder.source(), &object, type_, reason, message, now);
        let Some(hash) = &pod.static_hash else {
            self.recorder.record(event);
            return;
        };
        if let Some(uid) = mirror_uid(&self.mirrors.borrow(), &event.involved_object, hash) {
            event.involved_object.uid = Some(uid);
            self.recorder.record(event);
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.len() >= HELD_CAPACITY
            && let Some(oldest) = held.pop_front()
        {
            self.recorder.record(oldest.event);
        }
        held.push_back(Held { event, hash: hash.clone(), since: Instant::now() });
        drop(held);
        self.held_changed.notify_one();
    }

    /// Writes held events whose mirror is known now (with its UID), and those held for
    /// [`MIRROR_WAIT`] (without); returns when the oldest still held is due.
    fn release(&self, now: Instant) -> Option<Instant> {
        let view = self.mirrors.borrow().clone();
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let mut keep = VecDeque::with_capacity(held.len());
        for mut h in held.drain(..) {
            if let Some(uid) = mirror_uid(&view, &h.event.involved_object, &h.hash) {
                h.event.involved_object.uid = Some(uid);
                self.recorder.record(h.event);
            } else if now.saturating_duration_since(h.since) >= MIRROR_WAIT {
                let o = &h.event.involved_object;
                tracing::debug!(namespace = ?o.namespace, pod = ?o.name, reason = ?h.event.reason, "no mirror pod yet; event written without a UID");
                self.recorder.record(h.event);
            } else {
                keep.push_back(h);
            }
        }
        *held = keep;
        held.front().map(|h| h.since + MIRROR_WAIT)
    }

    /// Releases held events as mirrors appear and waits expire, until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut mirrors = self.mirrors.clone();
        let mut watching = true;
        let mut due: Option<Instant> = None;
        loop {
            let deadline = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                () = stop.cancelled() => return,
                r = mirrors.changed(), if watching => watching = r.is_ok(),
                () = self.held_changed.notified() => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
            due = self.release(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests;
