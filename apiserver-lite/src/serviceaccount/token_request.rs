//! `POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`: a TokenRequest
//! (`authentication.k8s.io/v1`) answered with a signed token, never stored, as upstream's
//! `TokenREST`: the audiences asked for (the API's by default), `expirationSeconds` (an hour
//! by default, at least ten minutes), optionally bound to a Pod (with its node in the claims),
//! a Secret or a Node that must exist with the UID given. Errors and warnings in upstream's
//! words.

use api::validation::{ErrorList, FieldError, Path};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::claims::{Bound, Claims, Issue, Ref};
use super::{
    DEFAULT_EXPIRATION_SECONDS, EXPIRATION_EXTENSION_SECONDS, Issuer, MAX_EXPIRATION_SECONDS,
    MIN_EXPIRATION_SECONDS, Objects, WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS,
};
use crate::errors::ApiError;
use crate::objects::FieldValidation;
use crate::registry;
use crate::resources::{self, ResourceType};

const GROUP: &str = "authentication.k8s.io";
const KIND: &str = "TokenRequest";

/// The body of a token request, decoded (unknown fields as `fieldValidation` says).
pub fn decode(
    mut body: Value,
    validation: FieldValidation,
) -> Result<(TokenRequest, Vec<String>), ApiError> {
    let kind = body["kind"].as_str().unwrap_or(KIND);
    let version = body["apiVersion"].as_str().unwrap_or("authentication.k8s.io/v1");
    if kind != KIND || version != "authentication.k8s.io/v1" {
        return Err(ApiError::bad_request(format!(
            "the body must be an authentication.k8s.io/v1 TokenRequest, not {version} {kind}"
        )));
    }
    if let Some(o) = body.as_object_mut() {
        o.remove("kind");
        o.remove("apiVersion");
    }
    let decoded = api::decode::decode::<TokenRequest>(body).map_err(|e| {
        ApiError::bad_request(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {e}"
        ))
    })?;
    let warnings = registry::field_warnings(&decoded.unknown_fields, validation)?;
    Ok((decoded.value, warnings))
}

/// `apps/v1` → (`apps`, `v1`); `v1` → (``, `v1`).
fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

fn not_found(r: &ResourceType, name: &str) -> ApiError {
    ApiError::not_found(r, name)
}

/// Answers a token request for ServiceAccount `name` in `namespace` at `now` (seconds):
/// the request with its status (token, expiration), and warnings.
pub fn create(
    issuer: &Issuer,
    objects: &dyn Objects,
    namespace: &str,
    name: &str,
    mut req: TokenRequest,
    now: i64,
    jti: String,
) -> Result<(TokenRequest, Vec<String>), ApiError> {
    let mut warnings = Vec::new();
    let meta = &req.metadata;
    let root = Path::root("metadata");
    for (field, given, want, what) in [
        ("name", &meta.name, name, "must match the service account name if specified"),
        (
            "namespace",
            &meta.namespace,
            namespace,
            "must match the service account namespace if specified",
        ),
    ] {
        if let Some(given) = given.as_deref().filter(|g| !g.is_empty() && *g != want) {
            let mut errs = ErrorList::default();
            errs.push(FieldError::invalid(&root.child(field), given, what));
            return Err(ApiError::invalid_object(GROUP, KIND, name, &errs));
        }
    }
    let sa = objects
        .service_account(namespace, name)
        .ok_or_else(|| not_found(&resources::SERVICE_ACCOUNTS, name))?;
    let sa_uid = sa.metadata.uid.clone().unwrap_or_default();
    match req.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() && uid != sa_uid => warnings.push(format!(
            "the UID in the token request ({uid}) does not match the UID of the service account ({sa_uid}) but TokenRequestServiceAccountUIDValidation is not enabled. In the future, this will return a conflict error"
        )),
        Some(uid) if !uid.is_empty() => {}
        _ => req.metadata.uid = Some(sa_uid.clone()),
    }
    if req.spec.audiences.is_empty() {
        req.spec.audiences = issuer.api_audiences.clone();
    }
    req.metadata.name = Some(name.to_string());
    req.metadata.namespace = Some(namespace.to_string());
    req.metadata.creation_timestamp = Some(time(now));
    req.status = None;
    let requested = *req.spec.expiration_seconds.get_or_insert(DEFAULT_EXPIRATION_SECONDS);
    validate_expiration(requested)?;

    let bound = bind(objects, namespace, name, &req)?;

    let mut expiration = requested;
    if let Some(max) = issuer.max_expiration_seconds.filter(|m| *m > 0 && requested > *m) {
        warnings.push(format!(
            "requested expiration of {requested} seconds shortened to {max} seconds"
        ));
        expiration = max;
        req.spec.expiration_seconds = Some(max);
    }
    // The safe transition of pods' projected tokens: warn after the hour, fail after a year.
    let mut warn_after = None;
    let mut exp = expiration;
    let for_the_api = req.spec.audiences.iter().all(|a| issuer.api_audiences.contains(a));
    if issuer.extend_expiration
        && matches!(bound, Some(Bound::Pod { .. }))
        && expiration == WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS
        && for_the_api
    {
        warn_after = Some(expiration);
        exp = EXPIRATION_EXTENSION_SECONDS.max(issuer.max_expiration_seconds.unwrap_or(0));
    }
    let claims = Claims::new(Issue {
        issuer: issuer.issuer.clone(),
        namespace: namespace.to_string(),
        service_account: Ref::new(name, sa_uid),
        bound,
        audiences: req.spec.audiences.clone(),
        now,
        expiration_seconds: exp,
        warn_after_seconds: warn_after,
        jti,
    });
    let token = super::jwt::sign(&issuer.key, &claims)
        .map_err(|e| ApiError::internal(format!("failed to generate token: {e}")))?;
    req.status = Some(TokenRequestStatus { token, expiration_timestamp: time(now + expiration) });
    Ok((req, warnings))
}

fn time(seconds: i64) -> Time {
    Time(jiff::Timestamp::from_second(seconds).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

/// Upstream's `ValidateTokenRequest`.
fn validate_expiration(seconds: i64) -> Result<(), ApiError> {
    let path = Path::root("spec").child("expirationSeconds");
    let mut errs = ErrorList::default();
    if seconds < MIN_EXPIRATION_SECONDS {
        errs.push(FieldError::invalid(
            &path,
            seconds,
            "may not specify a duration less than 10 minutes",
        ));
    }
    if seconds > MAX_EXPIRATION_SECONDS {
        errs.push(FieldError::invalid(
            &path,
            seconds,
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    errs.into_result().map_err(|e| ApiError::invalid_object(GROUP, KIND, "", &e))
}

/// The object the token is bound to, looked up and checked against the reference.
fn bind(
    objects: &dyn Objects,
    namespace: &str,
    sa: &str,
    req: &TokenRequest,
) -> Result<Option<Bound>, ApiError> {
    let Some(r) = &req.spec.bound_object_ref else { return Ok(None) };
    let api_version = r.api_version.as_deref().unwrap_or_default();
    let kind = r.kind.as_deref().unwrap_or_default();
    let name = r.name.as_deref().unwrap_or_default();
    let (group, version) = group_version(api_version);
    let (bound, uid) = match (group, kind) {
        ("", "Pod") => {
            let pod =
                objects.pod(namespace, name).ok_or_else(|| not_found(&resources::PODS, name))?;
            let spec = pod.spec.unwrap_or_default();
            if spec.service_account_name.as_deref().unwrap_or_default() != sa {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {sa:?} to pod running with different serviceaccount name."
                )));
            }
            let uid = pod.metadata.uid.unwrap_or_default();
            // The node is named even when its Node object is gone (without a UID), as upstream.
            let node = spec.node_name.filter(|n| !n.is_empty()).map(|n| {
                let uid = objects.node(&n).and_then(|node| node.metadata.uid).unwrap_or_default();
                Ref::new(n, uid)
            });
            (Bound::Pod { pod: Ref::new(name, uid.clone()), node }, uid)
        }
        ("", "Node") => {
            let node = objects.node(name).ok_or_else(|| not_found(&resources::NODES, name))?;
            let uid = node.metadata.uid.unwrap_or_default();
            (Bound::Node(Ref::new(name, uid.clone())), uid)
        }
        ("", "Secret") => {
            let secret = objects
                .secret(namespace, name)
                .ok_or_else(|| not_found(&resources::SECRETS, name))?;
            let uid = secret.metadata.uid.unwrap_or_default();
            (Bound::Secret(Ref::new(name, uid.clone())), uid)
        }
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {group}/{version}, Kind={kind}"
            )));
        }
    };
    if let Some(want) = r.uid.as_deref().filter(|u| !u.is_empty() && *u != uid) {
        let why = format!(
            "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
        );
        return Err(ApiError::conflict_on("", kind, name, &why));
    }
    Ok(Some(bound))
}

#[cfg(test)]
pub(crate) mod tests;
