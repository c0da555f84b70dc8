//! API errors as upstream's `Status` objects: HTTP code, reason and message in the same words,
//! so kubectl prints `Error from server (NotFound): pods "x" not found` against us too.

use api::validation::ErrorList;
use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::storage::Revision;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// `metadata.continue` of the Status: the token an expired paged list may go on with.
    pub list_continue: Option<String>,
}

/// The request body limit (upstream's 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

fn details(r: &ResourceType, name: &str) -> Value {
    let mut d = json!({ "name": name, "kind": r.name });
    if !r.group.is_empty() {
        d["group"] = json!(r.group);
    }
    d
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None, list_continue: None }
    }

    pub fn not_found(r: &ResourceType, name: &str) -> Self {
        Self {
            details: Some(details(r, name)),
            ..Self::new(404, "NotFound", format!("{} {name:?} not found", r.qualified()))
        }
    }

    /// A write into a namespace that does not exist.
    pub fn namespace_not_found(ns: &str) -> Self {
        Self {
            details: Some(json!({ "name": ns, "kind": "namespaces" })),
            ..Self::new(404, "NotFound", format!("namespaces {ns:?} not found"))
        }
    }

    pub fn path_not_found() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    pub fn already_exists(r: &ResourceType, name: &str) -> Self {
        Self {
            details: Some(details(r, name)),
            ..Self::new(409, "AlreadyExists", format!("{} {name:?} already exists", r.qualified()))
        }
    }

    pub fn conflict(r: &ResourceType, name: &str, why: &str) -> Self {
        Self {
            details: Some(details(r, name)),
            ..Self::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on {} {name:?}: {why}", r.qualified()),
            )
        }
    }

    /// A conflict about an object named by group and resource as upstream's `GroupResource`
    /// prints it (`Pod` for a TokenRequest's bound object).
    pub fn conflict_on(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified =
            if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
        Self {
            details: Some(json!({ "name": name, "group": group, "kind": resource })),
            ..Self::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on {qualified} {name:?}: {why}"),
            )
        }
    }

    /// 403 about one object, as admission refuses it: `pods "p" is forbidden: …`.
    pub fn forbidden_object(r: &ResourceType, name: &str, why: &str) -> Self {
        let message = if name.is_empty() {
            format!("forbidden: {why}")
        } else {
            format!("{} {name:?} is forbidden: {why}", r.qualified())
        };
        Self { details: Some(details(r, name)), ..Self::new(403, "Forbidden", message) }
    }

    pub fn stale(r: &ResourceType, name: &str) -> Self {
        Self::conflict(
            r,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one cause per field error.
    pub fn invalid(r: &ResourceType, name: &str, errors: &ErrorList) -> Self {
        let causes: Vec<Value> = errors
            .0
            .iter()
            .map(|e| json!({ "reason": e.kind.cause_reason(), "message": e.message(), "field": e.field }))
            .collect();
        let mut d = details(r, name);
        d["kind"] = json!(r.kind);
        d["causes"] = json!(causes);
        Self { details: Some(d), ..Self::new(422, "Invalid", errors.status_message(r.kind, name)) }
    }

    /// 422 for an object of a kind that is no served resource (a `TokenRequest`):
    /// `TokenRequest.authentication.k8s.io "" is invalid: …`.
    pub fn invalid_object(group: &str, kind: &str, name: &str, errors: &ErrorList) -> Self {
        let causes: Vec<Value> = errors
            .0
            .iter()
            .map(|e| json!({ "reason": e.kind.cause_reason(), "message": e.message(), "field": e.field }))
            .collect();
        let d = json!({ "name": name, "group": group, "kind": kind, "causes": causes });
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let message = errors.status_message(&qualified, name);
        Self { details: Some(d), ..Self::new(422, "Invalid", message) }
    }

    /// 422 for `DeleteOptions` that contradict themselves.
    pub fn invalid_delete_options(errors: &ErrorList) -> Self {
        let causes: Vec<Value> = errors
            .0
            .iter()
            .map(|e| json!({ "reason": e.kind.cause_reason(), "message": e.message(), "field": e.field }))
            .collect();
        let d = json!({ "group": "meta.k8s.io", "kind": "DeleteOptions", "causes": causes });
        let message = errors.status_message("DeleteOptions.meta.k8s.io", "");
        Self { details: Some(d), ..Self::new(422, "Invalid", message) }
    }

    /// 422 for a `Scale` sent to a `scale` subresource.
    pub fn invalid_scale(name: &str, errors: &ErrorList) -> Self {
        let causes: Vec<Value> = errors
            .0
            .iter()
            .map(|e| json!({ "reason": e.kind.cause_reason(), "message": e.message(), "field": e.field }))
            .collect();
        let d = json!({ "name": name, "group": "autoscaling", "kind": "Scale", "causes": causes });
        let message = errors.status_message("Scale.autoscaling", name);
        Self { details: Some(d), ..Self::new(422, "Invalid", message) }
    }

    /// 422 for list or watch parameters that contradict each other, as upstream reports its
    /// `ListOptions` validation.
    pub fn invalid_list_options(errors: &ErrorList) -> Self {
        let causes: Vec<Value> = errors
            .0
            .iter()
            .map(|e| json!({ "reason": e.kind.cause_reason(), "message": e.message(), "field": e.field }))
            .collect();
        let d = json!({ "group": "meta.k8s.io", "kind": "ListOptions", "causes": causes });
        let message = errors.status_message("ListOptions.meta.k8s.io", "");
        Self { details: Some(d), ..Self::new(422, "Invalid", message) }
    }

    /// 504 for a read at a revision the store has not reached (upstream's wording; clients retry).
    pub fn too_large_resource_version(requested: Revision, current: Revision) -> Self {
        let d = json!({
            "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
            "retryAfterSeconds": 1,
        });
        let message = format!("Too large resource version: {requested}, current: {current}");
        Self { details: Some(d), ..Self::new(504, "Timeout", message) }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// A continue token whose snapshot is no longer kept, answered with `next`: a token for
    /// the rest of the list at the newest state.
    pub fn expired_continue(message: impl Into<String>, next: String) -> Self {
        Self { list_continue: Some(next), ..Self::gone(message) }
    }

    pub fn too_large() -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY}"),
        )
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    /// The `Status` body.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(token) = &self.list_continue {
            s["metadata"]["continue"] = json!(token);
        }
        s
    }
}

impl From<crate::storage::StorageError> for ApiError {
    fn from(e: crate::storage::StorageError) -> Self {
        use crate::storage::StorageError;
        tracing::error!(error = %e, "storage failure");
        match e {
            // The watch cache behind etcd: the client retries, as upstream's.
            StorageError::Lagging { wanted, at } => Self::too_large_resource_version(wanted, at),
            StorageError::Etcd { timed_out: true, .. } => Self::new(
                504,
                "Timeout",
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
            ),
            StorageError::Etcd { .. } | StorageError::Unreachable { .. } => {
                Self::new(503, "ServiceUnavailable", e.to_string())
            }
            _ => ApiError::internal(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_like_upstreams() {
        let pods = &crate::resources::PODS;
        let s = ApiError::not_found(pods, "nope").status();
        assert_eq!(s["message"], "pods \"nope\" not found");
        assert_eq!((s["code"].as_u64(), s["reason"].as_str()), (Some(404), Some("NotFound")));
        assert_eq!(s["details"], json!({"name": "nope", "kind": "pods"}));
        let deploy = &crate::resources::DEPLOYMENTS;
        assert_eq!(
            ApiError::already_exists(deploy, "web").message,
            "deployments.apps \"web\" already exists"
        );
        assert_eq!(ApiError::namespace_not_found("nons").message, "namespaces \"nons\" not found");
    }
}
