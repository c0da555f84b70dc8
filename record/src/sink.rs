//! Where events are written: [`EventSink`] (create, patch) is the boundary to the apiserver,
//! [`KubeSink`] the real one. Errors say whether a retry can help: the apiserver's refusal is
//! final (upstream does not retry a `StatusError`; a 404 on a patch means the event was
//! deleted, and the writer creates it again), an unreachable apiserver is retried.

use std::future::Future;

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::Value;

/// Why an event write failed, naming the event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// The apiserver answered with an error status: not retried.
    #[error("event {namespace}/{name}: refused by the apiserver ({code} {reason}): {message}")]
    Rejected { namespace: String, name: String, code: u16, reason: String, message: String },
    /// No answer (connection refused, timeout, unreadable response): retried.
    #[error("event {namespace}/{name}: the apiserver could not be reached: {message}")]
    Unreachable { namespace: String, name: String, message: String },
}

impl SinkError {
    /// The HTTP status of a refusal.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Rejected { code, .. } => Some(*code),
            Self::Unreachable { .. } => None,
        }
    }

    fn from_kube(namespace: &str, name: &str, e: kube::Error) -> Self {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        match e {
            kube::Error::Api(s) => Self::Rejected {
                namespace,
                name,
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
            },
            other => Self::Unreachable { namespace, name, message: other.to_string() },
        }
    }
}

/// Writes events to an apiserver.
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event` (in `event.metadata.namespace`); the apiserver's copy on success.
    fn create(&self, event: &Event) -> impl Future<Output = Result<Event, SinkError>> + Send;
    /// Applies a strategic merge patch to an existing event.
    fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<Event, SinkError>> + Send;
}

/// The apiserver, through kube-rs.
#[derive(Clone)]
pub struct KubeSink {
    client: kube::Client,
}

impl KubeSink {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for KubeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSink").finish_non_exhaustive()
    }
}

fn namespace_and_name(event: &Event) -> (String, String) {
    let m = &event.metadata;
    (m.namespace.clone().unwrap_or_else(|| "default".into()), m.name.clone().unwrap_or_default())
}

impl EventSink for KubeSink {
    async fn create(&self, event: &Event) -> Result<Event, SinkError> {
        let (namespace, name) = namespace_and_name(event);
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        events
            .create(&PostParams::default(), event)
            .await
            .map_err(|e| SinkError::from_kube(&namespace, &name, e))
    }

    async fn patch(&self, namespace: &str, name: &str, patch: &Value) -> Result<Event, SinkError> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        events
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map_err(|e| SinkError::from_kube(namespace, name, e))
    }
}
