//! `nodes/{name}/proxy/{path}`, as upstream's node proxy: the request goes to the node's
//! kubelet (its preferred address and `daemonEndpoints` port, the API server's kubelet client
//! certificate) at `/{path}` with the client's query, and the kubelet's answer comes back as it
//! is — status, `Content-Type` and body, streamed — so `kubectl get --raw
//! /api/v1/nodes/<n>/proxy/stats/summary` prints what the kubelet serves. Authorized as the
//! method's verb (`get`, `create`, `update`, `patch`, `delete`) on `nodes/proxy`. Connection
//! upgrades are not proxied here (exec and port-forward go through `pods/*`).

use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response};

use super::ApiState;
use super::body::{self, Body};
use super::proxy::{Location, Passthrough, kubelet_request, node_endpoint, send};
use crate::auth::User;
use crate::errors::ApiError;
use crate::resources;

/// The verb a proxied method is authorized as, upstream's for connect requests.
fn verb(method: &Method) -> Option<&'static str> {
    Some(match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => return None,
    })
}

/// The kubelet's path and query for a request to `/api/v1/nodes/{name}/proxy{rest}`: `rest`
/// (as sent, still escaped; `/` when empty) and the query as sent.
pub fn kubelet_path(request_path: &str, name: &str, query: Option<&str>) -> Option<String> {
    let marker = format!("/nodes/{name}/proxy");
    let at = request_path.find(&marker)? + marker.len();
    let rest = &request_path[at..];
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let path = if rest.is_empty() { "/" } else { rest };
    Some(match query.filter(|q| !q.is_empty()) {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    })
}

/// Proxies `req` to node `name`'s kubelet.
pub async fn proxy(
    state: &ApiState,
    user: &User,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let nodes = &resources::NODES;
    let verb = verb(req.method()).ok_or_else(ApiError::method_not_allowed)?;
    state.authz.authorize(user, verb, nodes, None, Some(name), Some("proxy"))?;
    let node = state.registry.get(nodes, None, name)?;
    let (host, port) = node_endpoint(&node, &state.kubelet.address_types)?;
    let loc = Location { host, port, container: String::new() };
    let path = kubelet_path(req.uri().path(), name, req.uri().query())
        .ok_or_else(ApiError::path_not_found)?;
    let (parts, incoming) = req.into_parts();
    let mut forward = kubelet_request(parts.method.clone(), &loc, &path)?;
    for h in [header::ACCEPT, header::CONTENT_TYPE] {
        if let Some(v) = parts.headers.get(&h) {
            forward = forward.header(h, v);
        }
    }
    let bytes = body::read(incoming).await?;
    let forward = forward.body(Full::new(bytes)).map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = send(&state.kubelet, &loc, forward).await?;
    let status = resp.status();
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let mut out = Response::new(Passthrough(resp.into_body()).boxed());
    *out.status_mut() = status;
    if let Some(v) = content_type {
        out.headers_mut().insert(header::CONTENT_TYPE, v);
    } else {
        out.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_gets_the_path_after_proxy_and_the_query_as_sent() {
        let p = |path, q| kubelet_path(path, "node-a", q);
        assert_eq!(
            p("/api/v1/nodes/node-a/proxy/stats/summary", None).as_deref(),
            Some("/stats/summary")
        );
        assert_eq!(
            p("/api/v1/nodes/node-a/proxy/stats/summary", Some("only_cpu_and_memory=true"))
                .as_deref(),
            Some("/stats/summary?only_cpu_and_memory=true")
        );
        assert_eq!(p("/api/v1/nodes/node-a/proxy", None).as_deref(), Some("/"));
        assert_eq!(p("/api/v1/nodes/node-a/proxy/", Some("")).as_deref(), Some("/"));
        assert_eq!(p("/api/v1/nodes/node-a/proxy/a%20b", None).as_deref(), Some("/a%20b"));
        assert_eq!(p("/api/v1/nodes/node-a/proxyx", None), None);
    }

    #[test]
    fn methods_are_authorized_as_upstreams_connect_verbs() {
        assert_eq!(verb(&Method::GET), Some("get"));
        assert_eq!(verb(&Method::POST), Some("create"));
        assert_eq!(verb(&Method::DELETE), Some("delete"));
        assert_eq!(verb(&Method::TRACE), None);
    }
}
