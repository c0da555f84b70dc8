//! Binding: the one way this scheduler sets `spec.nodeName`, a `Binding` posted to the pod's
//! `binding` subresource, as upstream's `DefaultBinder`. Behind a trait so scheduling cycles are
//! tested without an apiserver.

use std::future::Future;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

use crate::cache::pod_key;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The pod was deleted: nothing to retry.
    #[error("binding pod {pod} to node {node}: the pod no longer exists")]
    Gone { pod: String, node: String },
    /// Another binding won (another scheduler, or a direct `nodeName`): nothing to retry.
    #[error("binding pod {pod} to node {node}: {message}")]
    AlreadyBound { pod: String, node: String, message: String },
    /// Refused for another reason (validation, authorization): retried with backoff.
    #[error("binding pod {pod} to node {node}: {message}")]
    Rejected { pod: String, node: String, message: String },
    /// The request failed (connection, timeout): retried with backoff.
    #[error("binding pod {pod} to node {node}: {source}")]
    Request { pod: String, node: String, source: kube::Error },
}

impl BindError {
    /// Whether the pod should go back to the queue.
    pub fn is_retriable(&self) -> bool {
        matches!(self, BindError::Rejected { .. } | BindError::Request { .. })
    }
}

/// Binds a pod to a node.
pub trait Binder: Send + Sync + 'static {
    fn bind(&self, pod: &Pod, node: &str) -> impl Future<Output = Result<(), BindError>> + Send;
}

/// Upstream's `DefaultBinder`: `POST pods/<name>/binding` with the pod's UID as precondition.
#[derive(Clone)]
pub struct ApiBinder {
    pub client: kube::Client,
}

impl std::fmt::Debug for ApiBinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiBinder").finish_non_exhaustive()
    }
}

/// The `Binding` upstream's binder posts.
pub fn binding(pod: &Pod, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.into()),
            ..Default::default()
        },
    }
}

impl Binder for ApiBinder {
    async fn bind(&self, pod: &Pod, node: &str) -> Result<(), BindError> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let result: Result<serde_json::Value, kube::Error> = api
            .create_subresource("binding", name, &PostParams::default(), &binding(pod, node))
            .await;
        let (pod, node) = (pod_key(pod), node.to_string());
        match result {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Err(BindError::Gone { pod, node }),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                Err(BindError::AlreadyBound { pod, node, message: s.message })
            }
            Err(kube::Error::Api(s)) if (400..500).contains(&s.code) && s.code != 429 => {
                Err(BindError::Rejected { pod, node, message: s.message })
            }
            Err(source) => Err(BindError::Request { pod, node, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_names_the_pod_its_uid_and_the_node() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let b = serde_json::to_value(binding(&pod, "n1")).unwrap_or_default();
        assert_eq!(b["metadata"]["uid"], "u1");
        assert_eq!(b["metadata"]["namespace"], "ns");
        assert_eq!(b["target"]["kind"], "Node");
        assert_eq!(b["target"]["name"], "n1");
    }
}
