//! What the secure API's handlers share: finding the pod and container a request names, and
//! the errors that refuse it, written as upstream's kubelet writes them (plain text).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::secure::SecureState;

/// A plain-text error, as upstream's kubelet writes them.
pub fn text_error(code: StatusCode, message: impl std::fmt::Display) -> Response {
    let mut r = (code, format!("{message}\n")).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// Why a logs, exec or port-forward request is refused; each names what it was about.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("pod \"{namespace}/{pod}\" not found")]
    PodNotFound { namespace: String, pod: String },
    #[error("container \"{container}\" not found in pod \"{namespace}/{pod}\"")]
    ContainerNotFound { namespace: String, pod: String, container: String },
    #[error("container \"{container}\" in pod \"{pod}\" is waiting to start: {reason}")]
    Waiting { pod: String, container: String, reason: String },
    #[error("previous terminated container \"{container}\" in pod \"{pod}\" not found")]
    NoPrevious { pod: String, container: String },
    #[error("container \"{container}\" in pod \"{namespace}/{pod}\" is not running")]
    NotRunning { namespace: String, pod: String, container: String },
    #[error("invalid {param}: {reason}")]
    BadParam { param: &'static str, reason: String },
    #[error("{0}")]
    BadRequest(String),
    #[error("log of container \"{container}\" in pod \"{namespace}/{pod}\": {source}")]
    Logs {
        namespace: String,
        pod: String,
        container: String,
        source: crate::runtime::logs::LogsError,
    },
    #[error("container \"{container}\" in pod \"{namespace}/{pod}\": runtime: {source}")]
    Runtime { namespace: String, pod: String, container: String, source: Box<proto::CallError> },
    #[error(
        "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{}]",
        offered.join(" "),
        accepted.join(" ")
    )]
    Negotiation { offered: Vec<String>, accepted: Vec<String> },
    #[error("pod \"{namespace}/{pod}\" has no running sandbox (the pod is not running)")]
    NoSandbox { namespace: String, pod: String },
    #[error("pod \"{namespace}/{pod}\": runtime: {source}")]
    PodRuntime { namespace: String, pod: String, source: Box<crate::runtime::RuntimeError> },
    #[error("pod \"{namespace}/{pod}\": runtime: {source}")]
    PodCri { namespace: String, pod: String, source: Box<proto::CallError> },
    #[error("port-forward to pod \"{namespace}/{pod}\": {source}")]
    PortForward { namespace: String, pod: String, source: Box<super::spdy::SpdyError> },
    #[error("exec in container \"{container}\" of pod \"{namespace}/{pod}\": {source}")]
    Streaming {
        namespace: String,
        pod: String,
        container: String,
        source: Box<super::spdy::SpdyError>,
    },
}

impl RequestError {
    pub fn status(&self) -> StatusCode {
        match self {
            RequestError::PodNotFound { .. } | RequestError::ContainerNotFound { .. } => {
                StatusCode::NOT_FOUND
            }
            RequestError::Logs {
                source: crate::runtime::logs::LogsError::Io { source, .. },
                ..
            } if source.kind() == std::io::ErrorKind::NotFound => StatusCode::NOT_FOUND,
            RequestError::Waiting { .. }
            | RequestError::NoPrevious { .. }
            | RequestError::NotRunning { .. }
            | RequestError::BadParam { .. }
            | RequestError::NoSandbox { .. }
            | RequestError::BadRequest(_) => StatusCode::BAD_REQUEST,
            RequestError::Negotiation { .. } => StatusCode::FORBIDDEN,
            RequestError::Logs { .. }
            | RequestError::Runtime { .. }
            | RequestError::PodRuntime { .. }
            | RequestError::PodCri { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            // The runtime's own refusal (a bad request it saw) keeps its code.
            RequestError::PortForward { source, .. } => match **source {
                super::spdy::SpdyError::Refused { status, .. } if (400..500).contains(&status) => {
                    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY)
                }
                _ => StatusCode::BAD_GATEWAY,
            },
            RequestError::Streaming { .. } => StatusCode::BAD_GATEWAY,
        }
    }
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        text_error(self.status(), &self)
    }
}

/// The pod `namespace/name` the kubelet runs, with its latest status.
pub fn find_pod(state: &SecureState, namespace: &str, name: &str) -> Result<Pod, RequestError> {
    state
        .read_only
        .statuses
        .pods()
        .into_iter()
        .find(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        })
        .ok_or_else(|| RequestError::PodNotFound { namespace: namespace.into(), pod: name.into() })
}

/// The status of `container` (an app or init container) if the pod's spec has it.
pub fn container_status<'a>(
    pod: &'a Pod,
    container: &str,
) -> Result<Option<&'a ContainerStatus>, RequestError> {
    let spec = pod.spec.as_ref();
    let in_spec = spec
        .into_iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    let m = &pod.metadata;
    if !in_spec.into_iter().any(|c| c.name == container) {
        return Err(RequestError::ContainerNotFound {
            namespace: m.namespace.clone().unwrap_or_default(),
            pod: m.name.clone().unwrap_or_default(),
            container: container.into(),
        });
    }
    let status = pod.status.as_ref();
    let statuses = status.into_iter().flat_map(|s| {
        s.container_statuses.iter().flatten().chain(s.init_container_statuses.iter().flatten())
    });
    Ok(statuses.into_iter().find(|s| s.name == container))
}

/// The runtime's id in a status's `<runtime>://<id>`.
pub fn runtime_id(container_id: &str) -> &str {
    container_id.split_once("://").map_or(container_id, |(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_found_by_spec_and_status() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "app"}], "initContainers": [{"name": "init"}]},
            "status": {"containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "i", "imageID": "", "containerID": "containerd://abc"}]},
        }))
        .unwrap();
        let app = container_status(&pod, "app").unwrap().unwrap();
        assert_eq!(runtime_id(app.container_id.as_deref().unwrap()), "abc");
        assert!(container_status(&pod, "init").unwrap().is_none());
        let err = container_status(&pod, "nope").unwrap_err();
        assert_eq!(err.status(), StatusCode::NOT_FOUND);
        assert_eq!(err.to_string(), "container \"nope\" not found in pod \"default/p\"");
        assert_eq!(runtime_id("plain"), "plain");
    }
}
