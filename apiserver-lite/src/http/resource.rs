//! The resource verbs over HTTP: the prelude every request shares (verb, options, field
//! manager, authorization), then one handler per verb in [`verbs`](super::verbs) (`status`,
//! `scale`, `binding` and `eviction` there too); `log`, `exec` and `attach` go to
//! [`proxy`](super::proxy), `portforward` to [`portforward`](super::portforward), `nodes/proxy`
//! to [`node_proxy`](super::node_proxy),
//! `serviceaccounts/token` to [`token`](super::token), the reviews to [`reviews`],
//! `metrics.k8s.io` to [`metrics`](super::metrics).

use api::validation::{ErrorList, FieldError, Path};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, Response};

use super::ApiState;
use super::body::{self, Body};
use super::proxy::RemoteCommand;
use super::verbs::{Call, binding, delete, eviction, read, scale, with_warnings, write};
use crate::admission::node_restriction::NodeRestriction;
use crate::auth::User;
use crate::errors::ApiError;
use crate::managedfields::manager::prefix_from_user_agent;
use crate::objects::FieldValidation;
use crate::patch::PatchType;
use crate::registry::WriteOptions;
use crate::request::{Query, ResourceRequest, Verb};
use crate::resources::{Backing, ResourceType, Subresource};
use crate::reviews;

/// Serves one resource request for an authenticated user.
pub async fn handle(
    state: &ApiState,
    user: &User,
    req: Request<Incoming>,
    rr: ResourceRequest,
    q: Query,
) -> Result<Response<Body>, ApiError> {
    // Routing serves these subresources for pods only, and `proxy` for nodes.
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
            (_, Some(n), Some(Subresource::Proxy)) => {
                return super::node_proxy::proxy(state, user, n, req).await;
            }
            _ => {}
        }
    }
    if rr.resource.backing == Backing::Metrics {
        let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
        return super::metrics::handle(state, user, req.method(), accept, &rr, &q);
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
    let c = Call {
        state,
        user,
        r,
        ns,
        q: &q,
        accept: &accept,
        content_type: content_type.as_deref(),
        write,
        manager: &manager,
        restriction: NodeRestriction::new(&state.registry, user),
    };
    // A get or list with no resourceVersion is a consistent read: the store first catches up
    // with everything durable (over etcd, other apiservers' writes); one at a resourceVersion
    // waits for the store to reach it.
    match (verb, q.get("resourceVersion").filter(|v| !v.is_empty()).map(str::parse::<i64>)) {
        (Verb::Get | Verb::List, None) => state.registry.store.sync().await?,
        // Read at another apiserver, it may be ahead of this one's store: wait for it.
        (Verb::Get | Verb::List | Verb::Watch, Some(Ok(rv))) => {
            state.registry.store.catch_up(rv).await;
        }
        _ => {}
    }
    use Subresource::{Binding, Eviction, Finalize, Scale, Status};
    match (verb, name, sub) {
        (Verb::Watch, None, None) => read::watch(&c),
        (Verb::List, None, None) => read::list(&c),
        (Verb::Get, Some(n), None | Some(Status)) => read::get(&c, n),
        (Verb::Get, Some(n), Some(Scale)) => scale::get(&c, n),
        (Verb::Create, None, None) => write::create(&c, incoming).await,
        (Verb::Create, Some(n), Some(Binding)) => binding::create(&c, n, incoming).await,
        (Verb::Create, Some(n), Some(Eviction)) => eviction::create(&c, n, incoming).await,
        // A namespace's `finalize` is an update of the namespace.
        (Verb::Update, Some(n), None | Some(Status | Finalize)) => {
            write::update(&c, n, sub.filter(|s| *s == Status), incoming).await
        }
        (Verb::Patch, Some(n), None | Some(Status | Scale)) if pt == Some(PatchType::Apply) => {
            write::apply(&c, n, sub, incoming).await
        }
        (Verb::Update | Verb::Patch, Some(n), Some(Scale)) => {
            scale::write(&c, n, pt, incoming).await
        }
        (Verb::Patch, Some(n), None | Some(Status)) => {
            let pt = pt.ok_or_else(|| ApiError::internal("a patch without its type"))?;
            write::patch(&c, n, sub, pt, incoming).await
        }
        (Verb::Delete, Some(n), None) => delete::delete(&c, n, incoming).await,
        (Verb::DeleteCollection, None, None) => delete::delete_collection(&c, incoming).await,
        _ => Err(ApiError::method_not_allowed()),
    }
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
