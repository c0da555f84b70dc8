//! `pods/log`, `pods/exec` and `pods/attach` (and the connection for `pods/portforward`, see
//! [`portforward`](super::portforward)), proxied to the pod's kubelet as upstream's API server does: the
//! pod is looked up (404 if missing) and its container chosen (the only one when none is named;
//! 400 naming the choices, or naming an unknown container), its node's address
//! (`status.addresses`, by `--kubelet-preferred-address-types`) and kubelet port
//! (`status.daemonEndpoints.kubeletEndpoint.Port`) are read, and the request goes to
//! `https://<address>:<port>/containerLogs/{ns}/{pod}/{container}`, `/exec/…` or `/attach/…` over TLS with the
//! API server's kubelet client certificate. The kubelet's serving certificate is verified against
//! `--kubelet-certificate-authority` when given and, as upstream's default, not verified without
//! it.
//!
//! Logs stream through as they come (chunked, so `follow` works). Exec and attach are upgrades: when the
//! kubelet answers 101 the client gets the kubelet's 101 and the two connections are spliced
//! byte for byte until either side closes. A kubelet error becomes a `Status` with the kubelet's
//! code and message, as upstream's response checker does.

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ApiState;
use super::body::{self, Body};
use crate::auth::User;
use crate::errors::ApiError;
use crate::resources;

/// How long dialing a kubelet may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a kubelet's error body kept for the `Status` message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Why the kubelet client could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum KubeletClientError {
    #[error("{what}: {reason}")]
    Tls { what: &'static str, reason: String },
}

/// The node address types, in the order tried (`--kubelet-preferred-address-types`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressTypes(pub Vec<String>);

impl Default for AddressTypes {
    /// kubeadm's choice: the node's IPs before its hostname, which need not resolve.
    fn default() -> Self {
        Self(vec!["InternalIP".into(), "ExternalIP".into(), "Hostname".into()])
    }
}

/// How the API server reaches kubelets: its client certificate, the CA for their serving
/// certificates (none: not verified), the address types, and the streams it holds open.
#[derive(Debug, Clone)]
pub struct KubeletClient {
    tls: Arc<rustls::ClientConfig>,
    pub(super) address_types: AddressTypes,
    /// Exec splices and connection drivers; they end with their streams or with `stop`.
    pub streams: TaskTracker,
    pub stop: CancellationToken,
}

impl KubeletClient {
    /// A client presenting `cert_pem`/`key_pem`, verifying kubelets against `ca_pem` if given.
    pub fn new(
        cert_pem: &str,
        key_pem: &str,
        ca_pem: Option<&str>,
        address_types: AddressTypes,
    ) -> Result<Self, KubeletClientError> {
        let tls = |what, e: &dyn std::fmt::Display| KubeletClientError::Tls {
            what,
            reason: e.to_string(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| tls("kubelet client certificate", &e))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| tls("kubelet client key", &e))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls("TLS versions", &e))?;
        let builder = match ca_pem {
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    let c = c.map_err(|e| tls("kubelet certificate authority", &e))?;
                    roots.add(c).map_err(|e| tls("kubelet certificate authority", &e))?;
                }
                builder.with_root_certificates(roots)
            }
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(daemon::tls::AnyServerCert::new(provider)),
        };
        let mut config = builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| tls("kubelet client certificate", &e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            tls: Arc::new(config),
            address_types,
            streams: TaskTracker::new(),
            stop: CancellationToken::new(),
        })
    }
}

/// Where a pod's container is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub host: String,
    pub port: u16,
    pub container: String,
}

/// Upstream's `validateContainer`: the named container must exist; with none named, a pod with
/// one container means that one.
pub fn choose_container(pod: &Value, container: Option<&str>) -> Result<String, ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &pod["spec"];
    let names = |key: &str| -> Vec<String> {
        spec[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect()
    };
    let (containers, init, ephemeral) =
        (names("containers"), names("initContainers"), names("ephemeralContainers"));
    match container.filter(|c| !c.is_empty()) {
        Some(c) => {
            if containers.iter().chain(&init).chain(&ephemeral).any(|n| n == c) {
                Ok(c.to_string())
            } else {
                Err(ApiError::bad_request(format!("container {c} is not valid for pod {name}")))
            }
        }
        None => match containers.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => {
                let all: Vec<String> =
                    init.into_iter().chain(containers).chain(ephemeral).collect();
                Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    all.join(" ")
                )))
            }
        },
    }
}

/// The node's address by the preferred types, and its kubelet port.
pub fn node_endpoint(node: &Value, types: &AddressTypes) -> Result<(String, u16), ApiError> {
    let name = node["metadata"]["name"].as_str().unwrap_or_default();
    let addresses = node["status"]["addresses"].as_array().cloned().unwrap_or_default();
    let host = types
        .0
        .iter()
        .find_map(|t| {
            addresses
                .iter()
                .find(|a| a["type"].as_str() == Some(t.as_str()))
                .and_then(|a| a["address"].as_str())
                .filter(|a| !a.is_empty())
        })
        .ok_or_else(|| {
            let known: Vec<String> = addresses
                .iter()
                .map(|a| {
                    format!(
                        "{}={}",
                        a["type"].as_str().unwrap_or("?"),
                        a["address"].as_str().unwrap_or("")
                    )
                })
                .collect();
            ApiError::internal(format!(
                "node {name:?} has no address of the preferred types {:?}; known addresses: [{}]",
                types.0,
                known.join(" ")
            ))
        })?;
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            ApiError::new(
                503,
                "ServiceUnavailable",
                format!(
                    "node {name:?} reports no kubelet endpoint (status.daemonEndpoints.kubeletEndpoint.Port): its kubelet does not serve its API"
                ),
            )
        })?;
    Ok((host.to_string(), port))
}

/// Finds where `ns/name`'s container (from the `container` query parameter) is served.
pub fn locate(
    state: &ApiState,
    ns: Option<&str>,
    name: &str,
    container: Option<&str>,
) -> Result<Location, ApiError> {
    let (pods, nodes) = (&resources::PODS, &resources::NODES);
    let pod = state.registry.get(pods, ns, name)?;
    let container = choose_container(&pod, container)?;
    let node_name =
        pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!("pod {name} does not have a host assigned"))
        })?;
    let node = state.registry.get(nodes, None, node_name)?;
    let (host, port) = node_endpoint(&node, &state.kubelet.address_types)?;
    Ok(Location { host, port, container })
}

/// Finds the kubelet that runs pod `ns/name` (no container: port-forward is the pod's).
pub fn locate_pod(state: &ApiState, ns: Option<&str>, name: &str) -> Result<Location, ApiError> {
    let (pods, nodes) = (&resources::PODS, &resources::NODES);
    let pod = state.registry.get(pods, ns, name)?;
    let node_name =
        pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!("pod {name} does not have a host assigned"))
        })?;
    let node = state.registry.get(nodes, None, node_name)?;
    let (host, port) = node_endpoint(&node, &state.kubelet.address_types)?;
    Ok(Location { host, port, container: String::new() })
}

/// The query the kubelet gets: the client's, without `container` (it is in the path), and for
/// exec with upstream's `input`/`output`/`error` in place of `stdin`/`stdout`/`stderr`. Values
/// pass as sent (still percent-encoded).
pub fn kubelet_query(raw: Option<&str>, exec: bool) -> String {
    let truthy = |v: &str| matches!(v, "" | "1" | "true" | "True");
    let mut out: Vec<String> = Vec::new();
    for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match (k, exec) {
            ("container", _) => {}
            ("stdin" | "stdout" | "stderr" | "tty", true) => {
                let renamed = match k {
                    "stdin" => "input",
                    "stdout" => "output",
                    "stderr" => "error",
                    other => other,
                };
                if truthy(v) {
                    out.push(format!("{renamed}=1"));
                }
            }
            _ => out.push(pair.to_string()),
        }
    }
    out.join("&")
}

/// A kubelet's non-2xx answer as a `Status` with its code and text.
pub(super) async fn kubelet_error(resp: Response<Incoming>) -> ApiError {
    let code = resp.status().as_u16();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_ERROR_BODY).collect().await;
    let text = body.map(|b| b.to_bytes()).unwrap_or_default();
    let message = String::from_utf8_lossy(&text).trim().to_string();
    let reason = match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    let message = if message.is_empty() { format!("the kubelet answered {code}") } else { message };
    ApiError::new(code, reason, message)
}

/// Dials the kubelet and sends `req` over HTTP/1.1, driving the connection on the tracker.
pub(super) async fn send<B>(
    client: &KubeletClient,
    loc: &Location,
    req: Request<B>,
) -> Result<Response<Incoming>, ApiError>
where
    B: HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let target = format!("{}:{}", loc.host, loc.port);
    let dial_error = |e: &dyn std::fmt::Display| {
        ApiError::internal(format!("error dialing backend: {target}: {e}"))
    };
    let tcp = tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(&target))
        .await
        .map_err(|_| dial_error(&"timed out"))?
        .map_err(|e| dial_error(&e))?;
    let server_name = match loc.host.parse::<IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => ServerName::try_from(loc.host.clone()).map_err(|e| dial_error(&e))?,
    };
    let tls = tokio::time::timeout(
        DIAL_TIMEOUT,
        tokio_rustls::TlsConnector::from(client.tls.clone()).connect(server_name, tcp),
    )
    .await
    .map_err(|_| dial_error(&"TLS handshake timed out"))?
    .map_err(|e| dial_error(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| dial_error(&e))?;
    let stop = client.stop.clone();
    client.streams.spawn(async move {
        tokio::select! {
            r = conn.with_upgrades() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "kubelet connection ended");
                }
            }
            () = stop.cancelled() => {}
        }
    });
    sender.send_request(req).await.map_err(|e| dial_error(&e))
}

/// A kubelet's response body, ending (rather than failing) if the kubelet's stream breaks: the
/// status line has already gone to the client, so an early end is all it can be told.
pub(super) struct Passthrough(pub(super) Incoming);

impl HttpBody for Passthrough {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.0).poll_frame(cx) {
            Poll::Ready(Some(Ok(f))) => Poll::Ready(Some(Ok(f))),
            Poll::Ready(Some(Err(e))) => {
                tracing::debug!(error = %e, "kubelet stream broke");
                Poll::Ready(None)
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

pub(super) fn kubelet_request(
    method: Method,
    loc: &Location,
    path_and_query: &str,
) -> Result<hyper::http::request::Builder, ApiError> {
    let host = HeaderValue::from_str(&format!("{}:{}", loc.host, loc.port))
        .map_err(|e| ApiError::internal(format!("kubelet address: {e}")))?;
    Ok(Request::builder().method(method).uri(path_and_query).header(header::HOST, host))
}

pub(super) fn segment(s: &str) -> String {
    // Names are DNS labels/subdomains; anything else is escaped rather than trusted.
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// `GET pods/{name}/log`.
pub async fn logs(
    state: &ApiState,
    user: &User,
    ns: Option<&str>,
    name: &str,
    raw_query: Option<&str>,
    container: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let pods = &resources::PODS;
    state.authz.authorize(user, "get", pods, ns, Some(name), Some("log"))?;
    let loc = locate(state, ns, name, container)?;
    let mut path = format!(
        "/containerLogs/{}/{}/{}",
        segment(ns.unwrap_or_default()),
        segment(name),
        segment(&loc.container)
    );
    let q = kubelet_query(raw_query, false);
    if !q.is_empty() {
        path = format!("{path}?{q}");
    }
    let req = kubelet_request(Method::GET, &loc, &path)?
        .body(Empty::<Bytes>::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = send(&state.kubelet, &loc, req).await?;
    if resp.status() != StatusCode::OK {
        return Err(kubelet_error(resp).await);
    }
    let mut out = Response::new(Passthrough(resp.into_body()).boxed());
    out.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(out)
}

/// The request headers an upgrade needs forwarded.
const UPGRADE_HEADERS: [HeaderName; 5] = [
    header::CONNECTION,
    header::UPGRADE,
    header::SEC_WEBSOCKET_KEY,
    header::SEC_WEBSOCKET_VERSION,
    header::SEC_WEBSOCKET_PROTOCOL,
];

/// The response headers of a 101 passed back.
const UPGRADE_RESPONSE_HEADERS: [HeaderName; 4] = [
    header::CONNECTION,
    header::UPGRADE,
    header::SEC_WEBSOCKET_ACCEPT,
    header::SEC_WEBSOCKET_PROTOCOL,
];

/// The two remote-command subresources, streamed the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCommand {
    /// `pods/exec`: a new command in the container.
    Exec,
    /// `pods/attach`: the container's own process.
    Attach,
}

impl RemoteCommand {
    /// The subresource, which is also the kubelet's path.
    pub fn subresource(self) -> &'static str {
        match self {
            RemoteCommand::Exec => "exec",
            RemoteCommand::Attach => "attach",
        }
    }
}

/// `GET`/`POST pods/{name}/exec` or `pods/{name}/attach` (authorized as `create`, as upstream
/// does for both methods).
pub async fn remote_command(
    kind: RemoteCommand,
    state: &ApiState,
    user: &User,
    ns: Option<&str>,
    name: &str,
    req: Request<Incoming>,
    container: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let pods = &resources::PODS;
    let sub = kind.subresource();
    state.authz.authorize(user, "create", pods, ns, Some(name), Some(sub))?;
    let loc = locate(state, ns, name, container)?;
    let q = kubelet_query(req.uri().query(), true);
    let path = format!(
        "/{sub}/{}/{}/{}?{q}",
        segment(ns.unwrap_or_default()),
        segment(name),
        segment(&loc.container)
    );
    let what = format!("{}/{name}/{}", ns.unwrap_or_default(), loc.container);
    upgrade_splice(state, &loc, &path, req, what, sub).await
}

/// Sends `req`'s upgrade to the kubelet at `loc` (`path`), and when the kubelet answers 101
/// passes its 101 back and splices the two connections byte for byte until either closes (on
/// the kubelet client's tracker, ending with its stop). Any other answer is a `Status`.
pub(super) async fn upgrade_splice(
    state: &ApiState,
    loc: &Location,
    path: &str,
    mut req: Request<Incoming>,
    what: String,
    sub: &'static str,
) -> Result<Response<Body>, ApiError> {
    let mut forward = kubelet_request(req.method().clone(), loc, path)?;
    for h in UPGRADE_HEADERS.iter().chain([&HeaderName::from_static("x-stream-protocol-version")]) {
        for v in req.headers().get_all(h) {
            forward = forward.header(h, v);
        }
    }
    let forward =
        forward.body(Empty::<Bytes>::new()).map_err(|e| ApiError::internal(e.to_string()))?;
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut resp = send(&state.kubelet, loc, forward).await?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(kubelet_error(resp).await);
    }
    let mut out = Response::new(body::full(Bytes::new()));
    *out.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for h in UPGRADE_RESPONSE_HEADERS
        .iter()
        .chain([&HeaderName::from_static("x-stream-protocol-version")])
    {
        if let Some(v) = resp.headers().get(h) {
            out.headers_mut().insert(h, v.clone());
        }
    }
    let kubelet_upgrade = hyper::upgrade::on(&mut resp);
    let stop = state.kubelet.stop.clone();
    state.kubelet.streams.spawn(async move {
        let (client, kubelet) = match tokio::join!(client_upgrade, kubelet_upgrade) {
            (Ok(c), Ok(k)) => (c, k),
            (c, k) => {
                tracing::debug!(session = %what, client = ?c.err(), kubelet = ?k.err(), "{sub} upgrade failed");
                return;
            }
        };
        let (mut client, mut kubelet) = (TokioIo::new(client), TokioIo::new(kubelet));
        tokio::select! {
            r = tokio::io::copy_bidirectional(&mut client, &mut kubelet) => {
                if let Err(e) = r {
                    tracing::debug!(session = %what, error = %e, "{sub} stream ended");
                }
            }
            () = stop.cancelled() => {}
        }
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn containers_are_chosen_as_upstream_does() {
        let one = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app"}]}});
        assert_eq!(choose_container(&one, None).unwrap(), "app");
        assert_eq!(choose_container(&one, Some("")).unwrap(), "app");
        assert_eq!(choose_container(&one, Some("app")).unwrap(), "app");
        let err = choose_container(&one, Some("nope")).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "container nope is not valid for pod p")
        );
        let two = json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            choose_container(&two, None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [init a b]"
        );
        assert_eq!(choose_container(&two, Some("init")).unwrap(), "init");
    }

    #[test]
    fn the_node_endpoint_comes_from_its_status() {
        let node = json!({"metadata": {"name": "n"}, "status": {
            "addresses": [{"type": "Hostname", "address": "n"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}});
        assert_eq!(
            node_endpoint(&node, &AddressTypes::default()).unwrap(),
            ("10.0.0.5".into(), 10250)
        );
        let by_name = AddressTypes(vec!["Hostname".into()]);
        assert_eq!(node_endpoint(&node, &by_name).unwrap().0, "n");
        let mut no_port = node.clone();
        no_port["status"]["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": 0}});
        let err = node_endpoint(&no_port, &AddressTypes::default()).unwrap_err();
        assert_eq!(err.code, 503);
        assert!(err.message.contains("reports no kubelet endpoint"), "{}", err.message);
        let no_address = json!({"metadata": {"name": "n"}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 1}}}});
        let err = node_endpoint(&no_address, &AddressTypes::default()).unwrap_err();
        assert!(err.message.contains("has no address"), "{}", err.message);
    }

    #[test]
    fn the_kubelet_gets_upstreams_query() {
        assert_eq!(
            kubelet_query(
                Some(
                    "command=sh&command=-c&command=exit%203&container=c&stdin=true&stdout=true&stderr=true&tty=false"
                ),
                true
            ),
            "command=sh&command=-c&command=exit%203&input=1&output=1&error=1"
        );
        assert_eq!(
            kubelet_query(Some("&container=c&follow=true&tailLines=2"), false),
            "follow=true&tailLines=2"
        );
        assert_eq!(kubelet_query(None, false), "");
        assert_eq!(segment("nginx-pod"), "nginx-pod");
        assert_eq!(segment("a/b"), "a%2Fb");
    }
}
