//! The HTTP layer: who is asking (client certificate or bearer token), which route, and the
//! response. Non-resource routes (version, health, discovery, OpenAPI) live here; resources in
//! [`resource`] and one handler per verb in `verbs`, watch streaming in [`watch`], bodies in [`body`], `pods/log`, `pods/exec` and
//! `pods/attach` proxied to kubelets in [`proxy`], `pods/portforward` (with the WebSocket tunnel
//! kubectl uses) in [`portforward`], `serviceaccounts/token` in [`token`], `metrics.k8s.io` in
//! [`metrics`].

pub mod body;
pub mod metrics;
pub mod node_proxy;
pub mod portforward;
pub mod proxy;
mod resource;
mod token;
mod verbs;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use hyper::{Method, Request, Response};

use crate::audit;
use crate::auth::{Authenticator, Authorizer, User, impersonation};
use crate::discovery;
use crate::errors::ApiError;
use crate::openapi::Documents;
use crate::registry::Registry;
use crate::request::{self, Query, Route};
use crate::resources::Subresource;
use crate::serviceaccount::{self, openid};
use body::Body;

/// What every request handler shares.
#[derive(Debug)]
pub struct ApiState {
    pub registry: Arc<Registry>,
    pub auth: Authenticator,
    /// The `--authorization-mode` chain every request and access review asks.
    pub authz: Authorizer,
    /// `host:port` clients reach this server at (for `/api`'s address list).
    pub address: String,
    /// How `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward` reach kubelets.
    pub kubelet: proxy::KubeletClient,
    /// How `serviceaccounts/token` signs (none: the subresource is not served).
    pub tokens: Option<Arc<serviceaccount::Issuer>>,
    /// The issuer's discovery documents (none when the issuer is no https URL).
    pub openid: Option<openid::Discovery>,
    /// `--audit-policy-file` and `--audit-log-path` (none: nothing is audited).
    pub audit: Option<Arc<audit::Auditor>>,
    /// The scraped usage `metrics.k8s.io` answers from.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// How the connection authenticated, before the request's own credentials.
#[derive(Debug, Clone)]
pub enum Peer {
    /// A TLS client, with the identity of its certificate if it sent one.
    Tls(Option<User>),
    /// The explicit localhost-only insecure mode: every request is a cluster admin.
    InsecureLocal,
}

fn admin() -> User {
    User {
        name: "system:admin".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        ..User::default()
    }
}

/// Serves one request from `remote`.
pub async fn handle(
    state: Arc<ApiState>,
    peer: Peer,
    remote: SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    let route = request::route(&path);
    let identity = identify(&state, &peer, &req);
    let record = state.audit.as_ref().and_then(|auditor| {
        // A request whose impersonation was refused is logged without a user, as one that
        // carried no credentials.
        let (user, acting) =
            identity.as_ref().map_or((None, None), |(u, a)| (u.as_ref(), a.as_ref()));
        let impersonated = acting.filter(|a| Some(*a) != user);
        auditor.begin(audit_info(&req, route.as_ref().ok(), remote), user, impersonated)
    });
    let served = audit::scope(record.clone(), async {
        let route = route?;
        serve(&state, route, identity?.1, req).await
    })
    .await;
    let mut resp = served.unwrap_or_else(|e| body::error(&e));
    if let Some(record) = record {
        resp = record.finish(resp).await;
    }
    tracing::debug!(%method, path, status = resp.status().as_u16(), took = ?started.elapsed(), "request");
    resp
}

/// Who authenticated, and who they act as (after `Impersonate-*`); `None` for a request
/// without credentials.
type Identity = (Option<User>, Option<User>);

fn identify(state: &ApiState, peer: &Peer, req: &Request<Incoming>) -> Result<Identity, ApiError> {
    let user = match peer {
        Peer::InsecureLocal => Some(admin()),
        Peer::Tls(cert) => {
            let authorization = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
            state.auth.authenticate(authorization, cert.as_ref())
        }
    };
    let acting = match &user {
        Some(u) => Some(impersonation::impersonate(&state.authz, u.clone(), req.headers())?),
        None => None,
    };
    Ok((user, acting))
}

/// What the audit log says about the request itself.
fn audit_info(
    req: &Request<Incoming>,
    route: Option<&Route>,
    remote: SocketAddr,
) -> audit::RequestInfo {
    let uri =
        req.uri().path_and_query().map_or_else(|| req.uri().path().to_string(), |p| p.to_string());
    let header = |h: &str| req.headers().get(h).and_then(|v| v.to_str().ok());
    let mut source_ips: Vec<String> = header("x-forwarded-for")
        .map(|v| v.split(',').map(|ip| ip.trim().to_string()).filter(|ip| !ip.is_empty()).collect())
        .unwrap_or_default();
    for ip in [header("x-real-ip").map(str::to_string), Some(remote.ip().to_string())]
        .into_iter()
        .flatten()
    {
        if !source_ips.contains(&ip) {
            source_ips.push(ip);
        }
    }
    let (verb, object, long_running) = match route {
        Some(Route::Resource(rr)) => {
            let watch = Query::parse(req.uri().query()).flag("watch");
            let verb = request::Verb::of(req.method(), rr.name.is_some(), watch);
            let sub = rr.subresource.map(Subresource::as_str).unwrap_or_default().to_string();
            let long = verb == Some(request::Verb::Watch)
                || matches!(sub.as_str(), "exec" | "attach" | "portforward" | "log" | "proxy");
            let object = audit::ObjectRef {
                group: rr.resource.group.to_string(),
                version: rr.resource.version.to_string(),
                resource: rr.resource.name.to_string(),
                subresource: sub,
                namespace: rr.namespace.clone().unwrap_or_default(),
                name: rr.name.clone().unwrap_or_default(),
            };
            let verb = verb
                .map_or_else(|| req.method().as_str().to_lowercase(), |v| v.as_str().to_string());
            (verb, Some(object), long)
        }
        _ => (req.method().as_str().to_lowercase(), None, false),
    };
    audit::RequestInfo {
        uri,
        verb,
        user_agent: header("user-agent").map(str::to_string),
        source_ips,
        object,
        long_running,
    }
}

async fn serve(
    state: &ApiState,
    route: Route,
    user: Option<User>,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let query = Query::parse(req.uri().query());
    let accept =
        req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let aggregated = accept.contains("as=APIGroupDiscoveryList");
    match (&route, &user) {
        (Route::Version | Route::Health, _) => {}
        (_, None) => return Err(ApiError::unauthorized()),
        _ => {}
    }
    if req.method() != Method::GET && !matches!(route, Route::Resource(_)) {
        return Err(ApiError::method_not_allowed());
    }
    if let (false, Some(u)) = (matches!(route, Route::Resource(_)), &user) {
        // Non-resource paths are authorized by path (upstream's system:discovery and
        // system:public-info-viewer roles open them to authenticated users).
        state.authz.authorize_path(u, "get", req.uri().path())?;
    }
    let not_found = ApiError::path_not_found;
    Ok(match route {
        Route::Version => body::json(200, &discovery::version()),
        Route::Health => health(&state.registry.store, req.uri().path()),
        Route::Api if aggregated => body::bytes_response(
            200,
            discovery::AGGREGATED,
            discovery::aggregated(true).to_string(),
        ),
        Route::Api => body::json(200, &discovery::api_versions(&state.address)),
        Route::Apis if aggregated => body::bytes_response(
            200,
            discovery::AGGREGATED,
            discovery::aggregated(false).to_string(),
        ),
        Route::Apis => body::json(200, &discovery::api_group_list()),
        Route::Group(g) => body::json(200, &discovery::api_group(&g).ok_or_else(not_found)?),
        Route::GroupVersion(g, v) => {
            body::json(200, &discovery::resource_list(&g, &v).ok_or_else(not_found)?)
        }
        Route::OpenApiV3 => body::bytes_response(200, "application/json", Documents::get().root()),
        Route::OpenApiV3GroupVersion(g, v) => body::bytes_response(
            200,
            "application/json",
            Documents::get().group_version(&g, &v).ok_or_else(not_found)?,
        ),
        Route::OpenApiV2 => return Err(not_found()),
        Route::OpenIdConfiguration => {
            let d = state.openid.as_ref().ok_or_else(not_found)?;
            cached(body::bytes_response(200, "application/json", d.config.clone()))
        }
        Route::OpenIdKeys => {
            let d = state.openid.as_ref().ok_or_else(not_found)?;
            cached(body::bytes_response(200, openid::JWKS_CONTENT_TYPE, d.keys.clone()))
        }
        Route::Resource(rr) => {
            let user = user.ok_or_else(ApiError::unauthorized)?;
            resource::handle(state, &user, req, rr, query).await?
        }
    })
}

/// Issuer documents may be cached for an hour, as upstream serves them.
fn cached(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut()
        .insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static(openid::CACHE_CONTROL));
    resp
}

/// `/healthz`, `/livez`, `/readyz`: `ok`, or upstream's failure listing when the store cannot
/// serve (etcd's watch is down), with status 500.
fn health(store: &crate::storage::Store, path: &str) -> Response<Body> {
    let Err(reason) = store.ready() else {
        return body::bytes_response(200, "text/plain", "ok");
    };
    tracing::debug!(%reason, path, "health check failed: etcd");
    let endpoint = path.trim_start_matches('/').split('/').next().unwrap_or("healthz");
    let text = format!("[+]ping ok\n[-]etcd failed: reason withheld\n{endpoint} check failed\n");
    body::bytes_response(500, "text/plain", text)
}
