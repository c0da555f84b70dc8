//! `pods/eviction`: a pod deleted on request, as upstream's `EvictionREST`
//! (`pkg/registry/core/pod/storage/eviction.go`). The body is a `policy/v1` (or
//! `policy/v1beta1`) Eviction naming the pod of the URL, optionally with the `DeleteOptions`
//! of the delete (grace period, UID and resourceVersion preconditions, dry run); the answer is
//! `201` with a `Status` of `Success`. A pod that is not there is `404`; a body that is no
//! Eviction, or names another pod, `400` in upstream's words.
//!
//! PodDisruptionBudgets: this server serves none, so no budget ever blocks an eviction (no
//! `429 Cannot evict pod as it would violate the pod's disruption budget`): every eviction is
//! the delete its options describe. What upstream does differently by pod is kept: a pod it
//! would let through without looking at budgets because it is `Pending` (not finished, not
//! being deleted) is deleted under a resourceVersion precondition of the pod just read, so
//! that it cannot have become ready meanwhile; a conflict is retried ([`RETRY`]) unless the
//! caller gave a resourceVersion of its own.
//!
//! The decisions are pure ([`decode`], [`check_target`], [`propagate_dry_run`], [`plan`]);
//! [`crate::http`] reads the pod and deletes it through the registry.

use std::time::Duration;

use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions as DeleteOptionsBody;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::objects::FieldValidation;
use crate::registry::{self, DeleteOptions, DeleteQuery};

/// The kind and the group versions the subresource accepts (upstream's `AcceptsGroupVersion`).
pub const KIND: &str = "Eviction";
pub const VERSIONS: [&str; 2] = ["policy/v1", "policy/v1beta1"];

/// Upstream's `EvictionsRetry`: how often, and how far apart, a conflicting delete of a pod
/// evicted without looking at budgets is tried.
pub const RETRY: Retry = Retry { tries: 20, every: Duration::from_millis(500) };

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub tries: u32,
    pub every: Duration,
}

/// Reads a body as an Eviction: `apiVersion` and `kind` defaulted when absent, anything else
/// than an Eviction of the accepted versions refused, fields of the wrong type refused with
/// their path, unknown ones warned about (or refused) as `fieldValidation` says.
pub fn decode(
    mut body: Value,
    validation: FieldValidation,
) -> Result<(Eviction, Vec<String>), ApiError> {
    let Some(fields) = body.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the object provided is unrecognized (must be of type Eviction): the body is not a JSON object",
        ));
    };
    let api_version = fields
        .remove("apiVersion")
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| VERSIONS[0].to_string());
    let kind = fields
        .remove("kind")
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| KIND.to_string());
    // Upstream's decoder names the version without its group.
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let cannot = |why: String| {
        ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {KIND}: {why}"
        ))
    };
    if kind != KIND {
        return Err(cannot(format!(
            "the kind in the data ({kind}) does not match the expected kind of pods/eviction ({KIND})"
        )));
    }
    if !VERSIONS.contains(&api_version.as_str()) {
        return Err(cannot(format!("no kind {KIND:?} is registered for version {api_version:?}")));
    }
    let decoded = api::decode::decode::<Eviction>(body).map_err(|e| cannot(e.to_string()))?;
    let warnings = registry::field_warnings(&decoded.unknown_fields, validation)?;
    Ok((decoded.value, warnings))
}

/// The Eviction's namespace (filled in from the URL when absent) and name against the URL's.
pub fn check_target(eviction: &mut Eviction, namespace: &str, name: &str) -> Result<(), ApiError> {
    let meta = &mut eviction.metadata;
    match meta.namespace.as_deref() {
        None | Some("") => meta.namespace = Some(namespace.to_string()),
        Some(given) if given == namespace => {}
        Some(_) => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    if meta.name.as_deref().unwrap_or_default() != name {
        return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
    }
    Ok(())
}

/// Upstream's `propagateDryRun`: the request's `dryRun` goes into the Eviction's options
/// unless they carry their own, which must then be the same.
pub fn propagate_dry_run(
    eviction: &Eviction,
    query_dry_run: bool,
) -> Result<DeleteOptionsBody, ApiError> {
    let query: Vec<String> = if query_dry_run { vec!["All".into()] } else { Vec::new() };
    let mut options = eviction.delete_options.clone().unwrap_or_default();
    let given = options.dry_run.clone().unwrap_or_default();
    if given.is_empty() {
        options.dry_run = (!query.is_empty()).then_some(query);
    } else if !query.is_empty() && query != given {
        // Upstream returns a plain error here: a 500 without a reason.
        return Err(ApiError::new(
            500,
            "",
            format!(
                "Non-matching dry-run options in request and content: [{}] and [{}]",
                query.join(" "),
                given.join(" ")
            ),
        ));
    }
    Ok(options)
}

/// What an eviction of `pod` does: the delete, and whether a conflict is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub delete: DeleteOptions,
    pub retry_conflicts: bool,
}

/// Upstream's `canIgnorePDB`: finished, pending or already being deleted.
fn budgets_ignored(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed" | "Pending"))
        || pod["metadata"]["deletionTimestamp"].is_string()
}

/// Upstream's `shouldEnforceResourceVersion`: not finished and not being deleted.
fn enforce_resource_version(pod: &Value) -> bool {
    !matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
        && !pod["metadata"]["deletionTimestamp"].is_string()
}

/// The delete that evicts `pod` (as just read) with the Eviction's `options`: those options,
/// validated as a delete's, with the pod's resourceVersion as a precondition when upstream
/// would add it.
pub fn plan(pod: &Value, options: &DeleteOptionsBody) -> Result<Plan, ApiError> {
    let body = serde_json::to_value(options).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut delete = DeleteOptions::parse(Some(body), DeleteQuery::default())?;
    let caller_version = delete.precondition_resource_version.is_some();
    let ignored = budgets_ignored(pod);
    if ignored && enforce_resource_version(pod) && !caller_version {
        delete.precondition_resource_version =
            pod["metadata"]["resourceVersion"].as_str().map(str::to_string);
    }
    // Without budgets, only the delete of a pod let through before them is retried.
    Ok(Plan { delete, retry_conflicts: ignored && !caller_version })
}

/// The answer to a done eviction.
pub fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

#[cfg(test)]
mod tests;
