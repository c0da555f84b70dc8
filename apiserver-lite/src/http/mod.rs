//! The HTTP layer: who is asking (client certificate or bearer token), which route, and the
//! response. Non-resource routes (version, health, discovery, OpenAPI) live here; resources in
//! [`resource`], watch streaming in [`watch`], bodies in [`body`], `pods/log`, `pods/exec` and
//! `pods/attach` proxied to kubelets in [`proxy`], `pods/portforward` (with the WebSocket tunnel
//! kubectl uses) in [`portforward`], `serviceaccounts/token` in [`token`].

pub mod body;
pub mod portforward;
pub mod proxy;
mod resource;
mod token;
mod watch;

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use hyper::{Method, Request, Response};

use crate::auth::{Authenticator, Authorizer, User, impersonation};
use crate::discovery;
use crate::errors::ApiError;
use crate::registry::Registry;
use crate::request::{self, Query, Route};
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

/// Serves one request.
pub async fn handle(state: Arc<ApiState>, peer: Peer, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    let resp = match serve(&state, peer, req).await {
        Ok(r) => r,
        Err(e) => body::error(&e),
    };
    tracing::debug!(%method, path, status = resp.status().as_u16(), took = ?started.elapsed(), "request");
    resp
}

async fn serve(
    state: &ApiState,
    peer: Peer,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let route = request::route(req.uri().path())?;
    let query = Query::parse(req.uri().query());
    let user = match &peer {
        Peer::InsecureLocal => Some(admin()),
        Peer::Tls(cert) => {
            let authorization = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
            state.auth.authenticate(authorization, cert.as_ref())
        }
    };
    let user = match user {
        Some(u) => Some(impersonation::impersonate(&state.authz, u, req.headers())?),
        None => None,
    };
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
        Route::Health => body::bytes_response(200, "text/plain", "ok"),
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
        Route::OpenApiV3 => body::json(200, &discovery::openapi_v3_root()),
        Route::OpenApiV3GroupVersion(g, v) => {
            body::json(200, &discovery::openapi_v3(&g, &v).ok_or_else(not_found)?)
        }
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
