//! The resource verbs over HTTP: list, watch, get, create, update, patch, delete and
//! deletecollection, and the `status`, `scale` and `binding` subresources; `log` and `exec` go to
//! [`proxy`](super::proxy), `serviceaccounts/token` to [`token`](super::token).

use api::validation::{ErrorList, FieldError, NEGATIVE_MSG, Path};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue, USER_AGENT};
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::ApiState;
use super::body::{self, Body};
use super::proxy::RemoteCommand;
use super::watch::{self, WatchFormat};
use crate::admission::node_restriction::NodeRestriction;
use crate::auth::User;
use crate::auth::rbac::escalation;
use crate::binding::Binding;
use crate::errors::ApiError;
use crate::managedfields::manager::prefix_from_user_agent;
use crate::objects::{self, FieldValidation};
use crate::patch::{self, PatchType};
use crate::registry::{
    ApplyOptions, DeleteOptions, DeleteQuery, ListAt, ListOptions, WatchOptions, WatchStart,
    WriteOptions,
};
use crate::request::{Query, ResourceRequest, Verb};
use crate::resources::{self, ResourceType, Subresource};
use crate::reviews;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::table::{self, IncludeObject};

/// A list's options: selectors, paging, and the revision it reads.
fn list_options(r: &ResourceType, q: &Query) -> Result<ListOptions, ApiError> {
    if q.flag("sendInitialEvents") {
        return Err(forbidden_option(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    let limit =
        q.number("limit")?.filter(|l| *l > 0).map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let continue_from = q.get("continue").filter(|c| !c.is_empty()).map(str::to_string);
    let at = ListAt::parse(
        q.get("resourceVersion"),
        q.get("resourceVersionMatch"),
        limit.is_some(),
        continue_from.is_some(),
    )?;
    Ok(ListOptions { limit, continue_from, at, ..selection(r, q)? })
}

/// A watch's options: only the selectors; where it starts is its [`WatchStart`]. A match on
/// the resource version belongs to WatchList requests (`sendInitialEvents`), as upstream checks.
fn watch_selection(r: &ResourceType, q: &Query) -> Result<ListOptions, ApiError> {
    let rv_match = q.get("resourceVersionMatch").filter(|m| !m.is_empty());
    match (q.flag("sendInitialEvents"), rv_match) {
        (false, Some(_)) => {
            return Err(forbidden_option(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        (true, m) if m != Some("NotOlderThan") => {
            return Err(forbidden_option(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        _ => {}
    }
    selection(r, q)
}

fn selection(r: &ResourceType, q: &Query) -> Result<ListOptions, ApiError> {
    Ok(ListOptions {
        labels: LabelSelector::parse(q.get("labelSelector").unwrap_or_default())?,
        fields: FieldSelector::parse(q.get("fieldSelector").unwrap_or_default(), r)?,
        ..ListOptions::default()
    })
}

fn forbidden_option(field: &str, detail: &str) -> ApiError {
    let mut errors = ErrorList::default();
    errors.push(FieldError::forbidden(&Path::root(field), detail));
    ApiError::invalid_list_options(&errors)
}

pub(super) fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {:?}", w)) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

fn success(r: &ResourceType, name: &str, uid: &Value) -> Value {
    let mut details = json!({"name": name, "kind": r.name, "uid": uid});
    if !r.group.is_empty() {
        details["group"] = json!(r.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// The `scale` subresource of `r` (routing serves it only for kinds that have one).
fn scale(r: &ResourceType) -> Result<crate::kinds::scale::Scale, ApiError> {
    r.strategy.scale.ok_or_else(ApiError::method_not_allowed)
}

/// Serves one resource request for an authenticated user.
pub async fn handle(
    state: &ApiState,
    user: &User,
    req: Request<Incoming>,
    rr: ResourceRequest,
    q: Query,
) -> Result<Response<Body>, ApiError> {
    // Routing serves these subresources for pods only.
    {
        let ns = rr.namespace.as_deref();
        match (req.method(), rr.name.as_deref(), rr.subresource) {
            (&Method::GET, Some(n), Some(Subresource::Log)) => {
                let raw = req.uri().query().map(str::to_string);
                return super::proxy::logs(state, user, ns, n, raw.as_deref(), q.get("container"))
                    .await;
            }
            (
                &Method::GET | &Method::POST,
                Some(n),
                Some(sub @ (Subresource::Exec | Subresource::Attach)),
            ) => {
                let kind = match sub {
                    Subresource::Exec => RemoteCommand::Exec,
                    _ => RemoteCommand::Attach,
                };
                let container = q.get("container").map(str::to_string);
                let c = container.as_deref();
                return super::proxy::remote_command(kind, state, user, ns, n, req, c).await;
            }
            (&Method::GET | &Method::POST, Some(n), Some(Subresource::PortForward)) => {
                return super::portforward::port_forward(state, user, ns, n, req).await;
            }
            _ => {}
        }
    }
    if rr.subresource == Some(Subresource::Token) {
        return super::token::create(state, user, req, &rr, &q).await;
    }
    let (parts, incoming) = req.into_parts();
    let r: &'static ResourceType = rr.resource;
    let ns = rr.namespace.as_deref();
    let name = rr.name.as_deref();
    let sub = rr.subresource;
    let accept =
        parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let content_type =
        parts.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let registry = &state.registry;
    let write = WriteOptions {
        dry_run: q.dry_run(),
        validation: FieldValidation::parse(q.get("fieldValidation"))?,
    };
    // The field manager: `fieldManager`, else the User-Agent up to its first slash.
    let manager = match q.get("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => prefix_from_user_agent(
            parts.headers.get(USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default(),
        ),
    };
    let verb = Verb::of(&parts.method, name.is_some(), q.flag("watch"))
        .ok_or_else(ApiError::method_not_allowed)?;
    if !r.verbs.contains(&verb) || (!r.is_stored() && name.is_some()) {
        return Err(ApiError::method_not_allowed());
    }
    let pt = match verb {
        Verb::Patch => Some(patch_type(content_type.as_deref())?),
        _ => None,
    };
    if let Some(pt) = pt {
        validate_patch_options(pt, &q)?;
    }
    let authz = &state.authz;
    if !r.is_stored() {
        // A review: the answer is computed, not stored.
        authz.authorize(user, verb.as_str(), r, ns, None, None)?;
        let body = body::parse(&body::read(incoming).await?, content_type.as_deref())?;
        let (answer, warnings) =
            reviews::answer(&state.auth, authz, user, r, body, write.validation)?;
        return Ok(with_warnings(body::json(201, &answer), &warnings));
    }
    // Lists and watches by their field selector (it may name the object), creations once
    // the body is read (below), others by name.
    match (verb, name) {
        (Verb::List | Verb::Watch, None) => {
            let selector = q.get("fieldSelector").unwrap_or_default();
            authz.authorize_list(user, verb.as_str(), r, ns, selector)?;
        }
        (Verb::Create, None) => {}
        _ => authz.authorize(user, verb.as_str(), r, ns, name, sub.map(Subresource::as_str))?,
    }
    let restriction = NodeRestriction::new(&state.registry, user);

    match (verb, name, sub) {
        (Verb::Watch, None, None) => {
            let start = if q.flag("sendInitialEvents") {
                WatchStart::InitialEvents
            } else {
                match q.get("resourceVersion").filter(|v| !v.is_empty() && *v != "0") {
                    None => WatchStart::Now,
                    Some(v) => WatchStart::After(v.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid resourceVersion {v:?}"))
                    })?),
                }
            };
            let opts = WatchOptions {
                start,
                list: watch_selection(r, &q)?,
                bookmarks: q.flag("allowWatchBookmarks"),
            };
            let stream = registry.watch(r, ns, opts)?;
            let timeout = match q.number("timeoutSeconds")? {
                Some(s) if s > 0 => std::time::Duration::from_secs(s.unsigned_abs()),
                _ => watch::default_timeout(),
            };
            let fmt = WatchFormat {
                table: table::wants_table(&accept)
                    .then(|| IncludeObject::parse(q.get("includeObject"))),
                bookmarks: q.flag("allowWatchBookmarks"),
                timeout,
            };
            let store = registry.store.clone();
            Ok(watch::respond(r, stream, fmt, move || store.revision()))
        }
        (Verb::List, None, None) => {
            let page = registry.list(r, ns, &list_options(r, &q)?)?;
            let mut meta = json!({"resourceVersion": page.revision.to_string()});
            if let Some(c) = &page.continue_token {
                meta["continue"] = json!(c);
                meta["remainingItemCount"] = json!(page.remaining.unwrap_or(0));
            }
            if table::wants_table(&accept) {
                let objects: Vec<Value> =
                    page.items.iter().filter_map(|b| serde_json::from_slice(b).ok()).collect();
                let t = table::table(
                    r,
                    &objects,
                    IncludeObject::parse(q.get("includeObject")),
                    meta,
                    true,
                );
                return Ok(body::json(200, &t));
            }
            // Items are written as stored: no re-encoding of the whole collection.
            let mut out = format!(
                "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
                r.list_kind(),
                r.group_version(),
                meta
            )
            .into_bytes();
            for (i, item) in page.items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(item);
            }
            out.extend_from_slice(b"]}");
            Ok(body::bytes_response(200, "application/json", out))
        }
        (Verb::Get, Some(n), None | Some(Subresource::Status)) => {
            let obj = registry.get(r, ns, n)?;
            if table::wants_table(&accept) {
                let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
                return Ok(body::json(
                    200,
                    &table::table(
                        r,
                        &[obj],
                        IncludeObject::parse(q.get("includeObject")),
                        meta,
                        true,
                    ),
                ));
            }
            Ok(body::json(200, &obj))
        }
        (Verb::Get, Some(n), Some(Subresource::Scale)) => {
            Ok(body::json(200, &(scale(r)?.of)(&registry.get(r, ns, n)?)))
        }
        (Verb::Create, None, None) => {
            let body = body::parse(&body::read(incoming).await?, content_type.as_deref())?;
            authz.authorize(user, verb.as_str(), r, ns, None, None)?;
            escalation::check(authz, user, r, ns, &body, None)?;
            restriction.admit_create(r, ns, &body)?;
            let (obj, warnings) = registry.create_as(r, ns, body, write, &manager).await?;
            Ok(with_warnings(body::json(201, &obj), &warnings))
        }
        (Verb::Create, Some(n), Some(Subresource::Binding)) => {
            let body = body::parse(&body::read(incoming).await?, content_type.as_deref())?;
            let binding = Binding::parse(&body)?;
            let pods = &resources::PODS;
            let now = objects::now_rfc3339();
            let (bound, _) = registry
                .update_with(pods, ns, n, Some(Subresource::Binding.as_str()), write, |old| {
                    binding.assign(pods, old, &now)
                })
                .await?;
            Ok(body::json(201, &success(pods, n, &bound["metadata"]["uid"])))
        }
        (Verb::Update, Some(n), None | Some(Subresource::Status | Subresource::Finalize)) => {
            let body = body::parse(&body::read(incoming).await?, content_type.as_deref())?;
            let sub = sub.filter(|s| *s == Subresource::Status).map(Subresource::as_str);
            let guard = |old: &Value, new: &Value| {
                escalation::check(authz, user, r, ns, new, Some(old))?;
                restriction.admit_update(r, ns, n, sub, old, new)
            };
            let (obj, warnings) =
                registry.update_guarded(r, ns, n, sub, body, write, &manager, guard).await?;
            Ok(with_warnings(body::json(200, &obj), &warnings))
        }
        (Verb::Patch, Some(n), None | Some(Subresource::Status | Subresource::Scale))
            if pt == Some(PatchType::Apply) =>
        {
            let config = apply_body(&body::read(incoming).await?)?;
            let is_scale = sub == Some(Subresource::Scale);
            let config = if is_scale { scale_config(r, n, &config)? } else { config };
            let sub = sub.map(Subresource::as_str);
            if sub.is_none() && registry.get(r, ns, n).is_err() {
                // An apply that creates needs the right to create, as upstream's.
                authz.authorize(user, Verb::Create.as_str(), r, ns, None, None)?;
            }
            let force = matches!(q.get("force"), Some("true" | "True" | "1"));
            let opts = ApplyOptions { manager: &manager, force, write };
            let guard = |old: Option<&Value>, new: &Value| {
                escalation::check(authz, user, r, ns, new, old)?;
                match old {
                    Some(old) => restriction.admit_update(r, ns, n, sub, old, new),
                    None => restriction.admit_create(r, ns, new),
                }
            };
            let applied = registry.apply(r, ns, n, sub, config, opts, guard).await?;
            let code = if applied.created { 201 } else { 200 };
            let out = if is_scale { (scale(r)?.of)(&applied.object) } else { applied.object };
            Ok(with_warnings(body::json(code, &out), &applied.warnings))
        }
        (Verb::Update | Verb::Patch, Some(n), Some(Subresource::Scale)) => {
            let scale = scale(r)?;
            let raw = body::read(incoming).await?;
            let (body, pt) = if verb == Verb::Patch {
                (
                    serde_json::from_slice(&raw).map_err(|e| {
                        ApiError::bad_request(format!("the patch is not valid JSON: {e}"))
                    })?,
                    pt,
                )
            } else {
                (body::parse(&raw, content_type.as_deref())?, None)
            };
            let (obj, _) = registry
                .update_with_as(
                    r,
                    ns,
                    n,
                    Some(Subresource::Scale.as_str()),
                    write,
                    &manager,
                    |old| {
                        let scale = match pt {
                            Some(pt) => patch::apply(pt, &(scale.of)(old), &body)?,
                            None => body.clone(),
                        };
                        let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| {
                            ApiError::bad_request("scale spec.replicas is required")
                        })?;
                        if replicas < 0 {
                            let mut errs = ErrorList::default();
                            let path = Path::root("spec").child("replicas");
                            errs.push(FieldError::invalid(&path, replicas, NEGATIVE_MSG));
                            return Err(ApiError::invalid_scale(n, &errs));
                        }
                        let mut new = old.clone();
                        new["spec"]["replicas"] = json!(replicas);
                        Ok(new)
                    },
                )
                .await?;
            Ok(body::json(200, &(scale.of)(&obj)))
        }
        (Verb::Patch, Some(n), None | Some(Subresource::Status)) => {
            let pt = pt.ok_or_else(|| ApiError::internal("a patch without its type"))?;
            let sub = sub.map(Subresource::as_str);
            let raw = body::read(incoming).await?;
            let patch: Value = serde_json::from_slice(&raw)
                .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
            let (obj, warnings) = registry
                .update_with_as(r, ns, n, sub, write, &manager, |old| {
                    let new = patch::apply(pt, old, &patch)?;
                    escalation::check(authz, user, r, ns, &new, Some(old))?;
                    restriction.admit_update(r, ns, n, sub, old, &new)?;
                    Ok(new)
                })
                .await?;
            Ok(with_warnings(body::json(200, &obj), &warnings))
        }
        (Verb::Delete, Some(n), None) => {
            restriction.admit_delete(r, ns, n)?;
            let opts = delete_options(incoming, content_type.as_deref(), &q).await?;
            let deleted = registry.delete(r, ns, n, &opts, write.dry_run).await?;
            // Upstream answers 202 only to an explicit `orphanDependents: false` still pending.
            let code =
                if !deleted.removed && opts.orphan_dependents == Some(false) { 202 } else { 200 };
            let resp = if r.strategy.returns_deleted_object || !deleted.removed {
                body::json(code, &deleted.object)
            } else {
                body::json(code, &success(r, n, &deleted.object["metadata"]["uid"]))
            };
            Ok(with_warnings(resp, &deleted.warnings))
        }
        (Verb::DeleteCollection, None, None) => {
            let opts = delete_options(incoming, content_type.as_deref(), &q).await?;
            let page = registry.list(r, ns, &list_options(r, &q)?)?;
            let mut warnings = Vec::new();
            let mut items = Vec::new();
            for raw in page.items {
                let obj: Value = serde_json::from_slice(&raw).unwrap_or_default();
                let n = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let ons = obj["metadata"]["namespace"].as_str().map(str::to_string);
                match registry.delete(r, ons.as_deref().or(ns), &n, &opts, write.dry_run).await {
                    Ok(d) => {
                        for w in d.warnings {
                            if !warnings.contains(&w) {
                                warnings.push(w);
                            }
                        }
                        items.push(d.object);
                    }
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let list = json!({"kind": r.list_kind(), "apiVersion": r.group_version(), "metadata": {}, "items": items});
            Ok(with_warnings(body::json(200, &list), &warnings))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// A delete's options: the `DeleteOptions` body (JSON or YAML; none is allowed) and the query's
/// `gracePeriodSeconds`, `propagationPolicy` and `orphanDependents`.
async fn delete_options(
    incoming: Incoming,
    content_type: Option<&str>,
    q: &Query,
) -> Result<DeleteOptions, ApiError> {
    let raw = body::read(incoming).await?;
    let body = if raw.is_empty() { None } else { Some(body::parse(&raw, content_type)?) };
    let orphan = q.get("orphanDependents").map(|v| matches!(v, "true" | "True" | "1"));
    let query = DeleteQuery {
        grace_period_seconds: q.number("gracePeriodSeconds")?,
        propagation_policy: q.get("propagationPolicy").filter(|p| !p.is_empty()),
        orphan_dependents: orphan,
    };
    DeleteOptions::parse(body, query)
}

fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    let ct = content_type.unwrap_or_default();
    if ct.split(';').next().unwrap_or_default().trim() == "application/apply-patch+cbor" {
        // Upstream serves CBOR apply only behind a feature gate; its answer without it.
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json",
        ));
    }
    PatchType::from_content_type(ct).ok_or_else(|| ApiError::unsupported_media_type(ct))
}

/// Upstream's `ValidatePatchOptions`: an apply names its field manager, only an apply is forced.
fn validate_patch_options(pt: PatchType, q: &Query) -> Result<(), ApiError> {
    let mut errs = ErrorList::default();
    let manager = q.get("fieldManager").unwrap_or_default();
    if pt == PatchType::Apply && manager.is_empty() {
        errs.push(FieldError::required(&Path::root("fieldManager"), "is required for apply patch"));
    }
    if pt != PatchType::Apply && q.get("force").is_some() {
        errs.push(FieldError::forbidden(
            &Path::root("force"),
            "may not be specified for non-apply patch",
        ));
    }
    if manager.len() > 128 {
        errs.push(FieldError::too_long(&Path::root("fieldManager"), 128));
    }
    if manager.chars().any(char::is_control) {
        let detail = "is invalid: must be printable characters";
        errs.push(FieldError::invalid(&Path::root("fieldManager"), manager, detail));
    }
    errs.into_result().map_err(|e| ApiError::invalid_object("meta.k8s.io", "PatchOptions", "", &e))
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

/// An applied `autoscaling/v1` Scale as a configuration of its parent: its name and replicas.
fn scale_config(r: &ResourceType, name: &str, scale: &Value) -> Result<Value, ApiError> {
    let (api_version, kind) = (scale["apiVersion"].as_str(), scale["kind"].as_str());
    if (api_version, kind) != (Some("autoscaling/v1"), Some("Scale")) {
        let v = api_version.unwrap_or_default();
        let (group, version) = v.split_once('/').unwrap_or(("", v));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={}",
            kind.unwrap_or_default()
        )));
    }
    Ok((self::scale(r)?.config)(r, name, scale["spec"].get("replicas")))
}
