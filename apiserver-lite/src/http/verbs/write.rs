//! create, update, patch and apply, of an object or its `status`.

use hyper::Response;
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::super::body::{self, Body};
use super::{Call, patch_body, scale, with_warnings};
use crate::auth::rbac::escalation;
use crate::errors::ApiError;
use crate::patch::{self, PatchType};
use crate::registry::ApplyOptions;
use crate::request::Verb;
use crate::resources::{self, Subresource};

pub(in crate::http) async fn create(
    c: &Call<'_>,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let (r, ns, authz, user) = (c.r, c.ns, &c.state.authz, c.user);
    let body = body::parse(&body::read(incoming).await?, c.content_type)?;
    authz.authorize(user, Verb::Create.as_str(), r, ns, None, None)?;
    escalation::check(authz, user, r, ns, &body, None)?;
    c.restriction.admit_create(r, ns, &body)?;
    let created = c.state.registry.create_as(r, ns, body, c.write, c.manager).await?;
    let mut warnings = created.warnings;
    warnings.extend(missing_role(c, &created.object));
    let response = match created.encoded {
        // The bytes stored are the object answered: not encoded a second time.
        Some(stored) => body::bytes_response(201, "application/json", stored),
        None => body::json(201, &created.object),
    };
    Ok(with_warnings(response, &warnings))
}

/// A replacement of the object, or of its status (`sub`).
pub(in crate::http) async fn update(
    c: &Call<'_>,
    n: &str,
    sub: Option<Subresource>,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let (r, ns, authz, user) = (c.r, c.ns, &c.state.authz, c.user);
    let body = body::parse(&body::read(incoming).await?, c.content_type)?;
    let sub = sub.map(Subresource::as_str);
    let guard = |old: &Value, new: &Value| {
        escalation::check(authz, user, r, ns, new, Some(old))?;
        c.restriction.admit_update(r, ns, n, sub, old, new)
    };
    let (obj, mut warnings) =
        c.state.registry.update_guarded(r, ns, n, sub, body, c.write, c.manager, guard).await?;
    warnings.extend(missing_role(c, &obj));
    Ok(with_warnings(body::json(200, &obj), &warnings))
}

/// A JSON, merge or strategic merge patch of the object or its status.
pub(in crate::http) async fn patch(
    c: &Call<'_>,
    n: &str,
    sub: Option<Subresource>,
    pt: PatchType,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let (r, ns, authz, user) = (c.r, c.ns, &c.state.authz, c.user);
    let sub = sub.map(Subresource::as_str);
    let patch = patch_body(&body::read(incoming).await?)?;
    let (obj, mut warnings) = c
        .state
        .registry
        .update_with_as(r, ns, n, sub, c.write, c.manager, |old| {
            let new = patch::apply(pt, old, &patch)?;
            escalation::check(authz, user, r, ns, &new, Some(old))?;
            c.restriction.admit_update(r, ns, n, sub, old, &new)?;
            Ok(new)
        })
        .await?;
    warnings.extend(missing_role(c, &obj));
    Ok(with_warnings(body::json(200, &obj), &warnings))
}

/// A server-side apply of the object, its status or its scale (an applied Scale is an
/// apply of the object's replicas).
pub(in crate::http) async fn apply(
    c: &Call<'_>,
    n: &str,
    sub: Option<Subresource>,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let (r, ns, authz, user, registry) = (c.r, c.ns, &c.state.authz, c.user, &c.state.registry);
    let config = apply_body(&body::read(incoming).await?)?;
    let is_scale = sub == Some(Subresource::Scale);
    let config = if is_scale { scale::config(r, n, &config)? } else { config };
    let sub = sub.map(Subresource::as_str);
    if sub.is_none() && !registry.exists(r, ns, n) {
        // An apply that creates needs the right to create, as upstream's.
        authz.authorize(user, Verb::Create.as_str(), r, ns, None, None)?;
    }
    let force = matches!(c.q.get("force"), Some("true" | "True" | "1"));
    let opts = ApplyOptions { manager: c.manager, force, write: c.write };
    let guard = |old: Option<&Value>, new: &Value| {
        escalation::check(authz, user, r, ns, new, old)?;
        match old {
            Some(old) => c.restriction.admit_update(r, ns, n, sub, old, new),
            None => c.restriction.admit_create(r, ns, new),
        }
    };
    let mut applied = registry.apply(r, ns, n, sub, config, opts, guard).await?;
    applied.warnings.extend(missing_role(c, &applied.object));
    let code = if applied.created { 201 } else { 200 };
    let out = if is_scale { (scale::of(r)?.of)(&applied.object) } else { applied.object };
    Ok(with_warnings(body::json(code, &out), &applied.warnings))
}

/// A binding whose role does not exist grants nothing until the role is made (as upstream's
/// RBAC, which stores it all the same); the write says so in a warning, which kubectl prints.
fn missing_role(c: &Call<'_>, binding: &Value) -> Option<String> {
    if *c.r != resources::ROLE_BINDINGS && *c.r != resources::CLUSTER_ROLE_BINDINGS {
        return None;
    }
    let kind = binding["roleRef"]["kind"].as_str()?;
    let name = binding["roleRef"]["name"].as_str()?;
    let (roles, ns) = match kind {
        "Role" => (&resources::ROLES, c.ns),
        "ClusterRole" => (&resources::CLUSTER_ROLES, None),
        _ => return None,
    };
    match c.state.registry.get(roles, ns, name) {
        Err(e) if e.code == 404 => {
            let at = ns.map(|ns| format!(" in namespace {ns:?}")).unwrap_or_default();
            Some(format!(
                "roleRef names {kind} {name:?}, which does not exist{at}: this binding grants nothing until it does"
            ))
        }
        _ => None,
    }
}

/// An apply body: YAML (JSON is YAML) holding one object, refused in upstream's words.
fn apply_body(raw: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(raw)
        .map_err(|_| ApiError::bad_request("error decoding patch: the body is not UTF-8"))?;
    let v: Value = serde_yaml_ng::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let kind = match &v {
        Value::Object(_) => return Ok(v),
        Value::Null => return Ok(json!({})),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Err(ApiError::bad_request(format!(
        "error decoding patch: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    )))
}
