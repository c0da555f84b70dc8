//! `/portForward/{namespace}/{pod}` and `/portForward/{namespace}/{pod}/{uid}`: forwards
//! connections to ports in a pod's network namespace, as upstream's `getPortForward`.
//!
//! Two transports, as upstream's kubelet serves them:
//! - SPDY/3.1 with `portforward.k8s.io` (what kubectl speaks, directly as its fallback or through
//!   the API server's WebSocket tunnel): for each forwarded connection the client opens an
//!   `error` and a `data` stream whose headers name the `port` and a `requestID`; the runtime
//!   connects to the port inside the pod and writes any failure (e.g. nothing listening) on the
//!   error stream. A stream whose port header is missing or not a port in 1–65535 is reset, as
//!   upstream's streaming server does.
//! - WebSocket channels (`v4.channel.k8s.io` and kin) with the ports fixed up front by `port`
//!   query parameters, each port a data and an error channel.
//!
//! The request is checked first (the pod, transport, ports, the pod's sandbox), then the runtime is
//! asked for a session (CRI `PortForward`, a URL on its streaming server) and the upgrade is
//! handed to it: its answer becomes ours, and once both sides have upgraded the connections are
//! spliced ([`proxy_stream`](super::proxy_stream)) on the server's task tracker until either side
//! closes, the connection passes no data for `streamingConnectionIdleTimeout`, or the kubelet
//! stops. The runtime's streaming server reads the stream headers and does the forwarding.

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use hyper_util::rt::TokioIo;
use proto::cri;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::exec::STREAM_CREATION_TIMEOUT;
use super::proxy_stream::{self, Framing, Limits, MAX_STREAMS};
use super::request::{RequestError, find_pod};
use super::secure::SecureState;
use super::spdy::{self, PROTOCOL_HEADER, ResponseHead, SpdyError};

/// The SPDY port-forward protocol.
pub const PROTOCOL: &str = "portforward.k8s.io";
/// The most ports one WebSocket request may name: each takes two of the 256 channel numbers.
pub const MAX_PORTS: usize = 128;

/// How a client asks to forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// SPDY/3.1 with [`PROTOCOL`]: the client opens streams per forwarded connection.
    Spdy,
    /// WebSocket channels for the ports named up front.
    WebSocket { ports: Vec<u16> },
}

impl Transport {
    fn framing(&self) -> Framing {
        match self {
            Transport::Spdy => Framing::Spdy,
            Transport::WebSocket { .. } => Framing::Opaque,
        }
    }
}

/// Values of header `name`, each possibly a comma-separated list, trimmed, empty ones dropped.
fn values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect()
}

/// The transport a request asks for (upstream's upgrade and protocol checks, and `NewV4Options`
/// for WebSocket ports).
pub fn transport(
    headers: &HeaderMap,
    pairs: &[(String, String)],
) -> Result<Transport, RequestError> {
    let connection = values(headers, header::CONNECTION.as_str());
    let upgrade = headers.get(header::UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !connection.iter().any(|c| c.eq_ignore_ascii_case("upgrade")) || upgrade.is_empty() {
        return Err(RequestError::BadRequest(
            "unable to upgrade: missing upgrade headers in request (Connection: Upgrade, and Upgrade: SPDY/3.1 or websocket)".into(),
        ));
    }
    if upgrade.eq_ignore_ascii_case("websocket") {
        return Ok(Transport::WebSocket { ports: ports(pairs)? });
    }
    if !upgrade.eq_ignore_ascii_case("SPDY/3.1") {
        return Err(RequestError::BadRequest(format!(
            "unable to upgrade: {upgrade:?} is not served (SPDY/3.1 or websocket)"
        )));
    }
    let offered = values(headers, PROTOCOL_HEADER);
    if offered.is_empty() {
        return Err(RequestError::BadRequest(format!(
            "unable to upgrade: {PROTOCOL_HEADER} is required"
        )));
    }
    if !offered.contains(&PROTOCOL) {
        return Err(RequestError::Negotiation {
            offered: offered.into_iter().map(str::to_string).collect(),
            accepted: vec![PROTOCOL.to_string()],
        });
    }
    Ok(Transport::Spdy)
}

/// The `port` query parameters of a WebSocket request (each a port or a comma-separated list),
/// as upstream's `NewV4Options` reads them.
pub fn ports(pairs: &[(String, String)]) -> Result<Vec<u16>, RequestError> {
    let values: Vec<&str> =
        pairs.iter().filter(|(k, _)| k == "port").map(|(_, v)| v.as_str()).collect();
    if values.is_empty() {
        return Err(RequestError::BadRequest("query parameter \"port\" is required".into()));
    }
    let mut ports = Vec::new();
    for value in values {
        if value.is_empty() {
            return Err(RequestError::BadRequest(
                "query parameter \"port\" cannot be empty".into(),
            ));
        }
        for p in value.split(',') {
            let port: u16 = p.parse().map_err(|e| {
                RequestError::BadRequest(format!("unable to parse {value:?} as a port: {e}"))
            })?;
            if port == 0 {
                return Err(RequestError::BadRequest(format!("port {value:?} must be > 0")));
            }
            ports.push(port);
        }
    }
    if ports.len() > MAX_PORTS {
        return Err(RequestError::BadRequest(format!(
            "too many ports: {} (at most {MAX_PORTS} in one request)",
            ports.len()
        )));
    }
    Ok(ports)
}

/// The request that hands the client's upgrade to the runtime's streaming server: SPDY with
/// our protocol, or the client's WebSocket handshake with its ports in the query.
pub fn runtime_request(
    authority: &str,
    path: &str,
    transport: &Transport,
    client: &HeaderMap,
) -> String {
    let mut head = String::new();
    match transport {
        Transport::Spdy => {
            head.push_str(&format!(
                "POST {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: kubelet\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n{PROTOCOL_HEADER}: {PROTOCOL}\r\n"
            ));
        }
        Transport::WebSocket { ports } => {
            let query: Vec<String> = ports.iter().map(|p| format!("port={p}")).collect();
            let sep = if path.contains('?') { '&' } else { '?' };
            head.push_str(&format!(
                "GET {path}{sep}{} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: kubelet\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n",
                query.join("&")
            ));
            for name in [
                header::SEC_WEBSOCKET_KEY,
                header::SEC_WEBSOCKET_VERSION,
                header::SEC_WEBSOCKET_PROTOCOL,
            ] {
                // Header values never hold CR or LF, so they are copied as they are.
                for v in client.get_all(&name).iter().filter_map(|v| v.to_str().ok()) {
                    head.push_str(&format!("{name}: {v}\r\n"));
                }
            }
        }
    }
    head.push_str("\r\n");
    head
}

/// The runtime's answer headers passed back with a 101.
const UPGRADE_HEADERS: [&str; 5] = [
    "connection",
    "upgrade",
    "x-stream-protocol-version",
    "sec-websocket-accept",
    "sec-websocket-protocol",
];

/// Connects to the runtime's `url` and sends the upgrade; its answer and the connection with
/// what arrived after the answer.
async fn dial(
    url: &str,
    transport: &Transport,
    client: &HeaderMap,
) -> Result<(TcpStream, BytesMut, ResponseHead), SpdyError> {
    let io = |source| SpdyError::Io { url: url.to_string(), source };
    let (authority, path) = spdy::split_url(url)?;
    let connect = async {
        let mut tcp = TcpStream::connect(authority).await.map_err(io)?;
        tcp.set_nodelay(true).map_err(io)?;
        tcp.write_all(runtime_request(authority, path, transport, client).as_bytes())
            .await
            .map_err(io)?;
        let mut buf = BytesMut::with_capacity(16 * 1024);
        let head = spdy::read_response_head(&mut tcp, &mut buf)
            .await
            .map_err(io)?
            .ok_or_else(|| SpdyError::Closed { url: url.to_string() })?;
        if head.status != 101 {
            let body = spdy::refusal_body(&mut tcp, &mut buf).await;
            return Err(SpdyError::Refused { url: url.to_string(), status: head.status, body });
        }
        Ok((tcp, buf, head))
    };
    tokio::time::timeout(STREAM_CREATION_TIMEOUT, connect)
        .await
        .map_err(|_| io(std::io::ErrorKind::TimedOut.into()))?
}

/// The port-forward handler.
pub async fn port_forward(
    State(state): State<SecureState>,
    Path((namespace, pod)): Path<(String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
    req: Request,
) -> Response {
    respond(state, namespace, pod, None, pairs, req).await
}

/// The port-forward handler for a path naming the pod's UID as well.
pub async fn port_forward_uid(
    State(state): State<SecureState>,
    Path((namespace, pod, uid)): Path<(String, String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
    req: Request,
) -> Response {
    respond(state, namespace, pod, Some(uid), pairs, req).await
}

async fn respond(
    state: SecureState,
    namespace: String,
    pod: String,
    uid: Option<String>,
    pairs: Vec<(String, String)>,
    req: Request,
) -> Response {
    start(state, namespace, pod, uid, &pairs, req).await.unwrap_or_else(|e| {
        tracing::debug!(error = %e, "port-forward refused");
        e.into_response()
    })
}

/// The newest ready sandbox of pod `uid`: the network namespace to forward into.
async fn sandbox(
    state: &SecureState,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<String, RequestError> {
    let status =
        state.runtime.pod_status(uid).await.map_err(|source| RequestError::PodRuntime {
            namespace: namespace.into(),
            pod: name.into(),
            source: Box::new(source),
        })?;
    status
        .sandboxes
        .iter()
        .find(|s| s.ready)
        .map(|s| s.id.clone())
        .ok_or_else(|| RequestError::NoSandbox { namespace: namespace.into(), pod: name.into() })
}

async fn start(
    state: SecureState,
    namespace: String,
    name: String,
    uid: Option<String>,
    pairs: &[(String, String)],
    mut req: Request,
) -> Result<Response, RequestError> {
    // The pod first, as upstream (a missing pod is 404 whatever the request), then the upgrade.
    let pod = find_pod(&state, &namespace, &name)?;
    let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
    if uid.as_deref().is_some_and(|u| u != pod_uid) {
        return Err(RequestError::PodNotFound { namespace, pod: name });
    }
    let transport = transport(req.headers(), pairs)?;
    let sandbox = sandbox(&state, &namespace, &name, &pod_uid).await?;
    let port = match &transport {
        Transport::WebSocket { ports } => ports.iter().map(|p| i32::from(*p)).collect(),
        Transport::Spdy => Vec::new(),
    };
    let request = cri::PortForwardRequest { pod_sandbox_id: sandbox, port };
    let url =
        state.runtime.cri.port_forward(request).await.map_err(|source| RequestError::PodCri {
            namespace: namespace.clone(),
            pod: name.clone(),
            source: Box::new(source),
        })?;
    let (runtime, early, head) =
        dial(&url.url, &transport, req.headers()).await.map_err(|source| {
            RequestError::PortForward {
                namespace: namespace.clone(),
                pod: name.clone(),
                source: Box::new(source),
            }
        })?;
    let on_upgrade = hyper::upgrade::on(&mut req);
    let what = format!("{namespace}/{name}");
    tracing::info!(pod = %what, ?transport, "port-forward");
    let limits = Limits {
        idle: state.idle_timeout,
        max_streams: MAX_STREAMS,
        stop: state.stop.child_token(),
    };
    let framing = transport.framing();
    state.streams.spawn(async move {
        match on_upgrade.await {
            Ok(client) => {
                let ended =
                    proxy_stream::splice(TokioIo::new(client), runtime, early, framing, limits)
                        .await;
                tracing::debug!(pod = %what, ?ended, "port-forward ended");
            }
            Err(e) => {
                tracing::debug!(pod = %what, error = %e, "port-forward: the client did not upgrade");
            }
        }
    });
    let mut resp = StatusCode::SWITCHING_PROTOCOLS.into_response();
    for (name, value) in &head.headers {
        let name = name.to_ascii_lowercase();
        if let (Some(known), Ok(v)) =
            (UPGRADE_HEADERS.iter().find(|h| **h == name), HeaderValue::from_str(value))
        {
            resp.headers_mut().append(*known, v);
        }
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
    }

    const SPDY: [(&str, &str); 3] = [
        ("connection", "Upgrade"),
        ("upgrade", "SPDY/3.1"),
        ("x-stream-protocol-version", "portforward.k8s.io"),
    ];

    #[test]
    fn spdy_upgrades_need_the_portforward_protocol() {
        assert_eq!(transport(&headers(&SPDY), &[]).unwrap(), Transport::Spdy);
        let listed = [
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "spdy/3.1"),
            ("x-stream-protocol-version", "v9.example, portforward.k8s.io"),
        ];
        assert_eq!(transport(&headers(&listed), &[]).unwrap(), Transport::Spdy);
        let none = transport(&headers(&SPDY[..2]), &[]).unwrap_err();
        assert_eq!(none.status(), StatusCode::BAD_REQUEST);
        assert_eq!(none.to_string(), "unable to upgrade: X-Stream-Protocol-Version is required");
        let mut other = SPDY;
        other[2] = ("x-stream-protocol-version", "v4.channel.k8s.io");
        let err = transport(&headers(&other), &[]).unwrap_err();
        assert_eq!(err.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            err.to_string(),
            "unable to upgrade: unable to negotiate protocol: client supports [v4.channel.k8s.io], server accepts [portforward.k8s.io]"
        );
        let plain = transport(&headers(&[]), &[]).unwrap_err();
        assert!(plain.to_string().contains("missing upgrade headers"), "{plain}");
        let h2c = transport(&headers(&[("connection", "upgrade"), ("upgrade", "h2c")]), &[]);
        assert!(h2c.unwrap_err().to_string().contains("\"h2c\" is not served"));
    }

    #[test]
    fn websocket_ports_are_read_as_upstream_reads_them() {
        let ws = headers(&[("connection", "Upgrade"), ("upgrade", "websocket")]);
        let got = transport(&ws, &query(&[("port", "80"), ("port", "81,8080")])).unwrap();
        assert_eq!(got, Transport::WebSocket { ports: vec![80, 81, 8080] });
        let err = |q: &[(&str, &str)]| transport(&ws, &query(q)).unwrap_err().to_string();
        assert_eq!(err(&[]), "query parameter \"port\" is required");
        assert_eq!(err(&[("port", "")]), "query parameter \"port\" cannot be empty");
        assert_eq!(
            err(&[("port", "http")]),
            "unable to parse \"http\" as a port: invalid digit found in string"
        );
        assert_eq!(
            err(&[("port", "70000")]),
            "unable to parse \"70000\" as a port: number too large to fit in target type"
        );
        assert_eq!(err(&[("port", "80,0")]), "port \"80,0\" must be > 0");
        let many: Vec<String> = (1..=129).map(|p| p.to_string()).collect();
        let err = transport(&ws, &query(&[("port", &many.join(","))])).unwrap_err();
        assert_eq!(err.to_string(), "too many ports: 129 (at most 128 in one request)");
    }

    #[test]
    fn the_runtime_gets_our_protocol_or_the_clients_handshake() {
        let spdy =
            runtime_request("127.0.0.1:1", "/portforward/T", &Transport::Spdy, &headers(&SPDY));
        assert!(
            spdy.starts_with("POST /portforward/T HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"),
            "{spdy}"
        );
        assert!(spdy.contains(
            "\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n"
        ));
        let client = headers(&[
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
            ("sec-websocket-protocol", "v4.channel.k8s.io"),
        ]);
        let ws = Transport::WebSocket { ports: vec![80, 81] };
        let got = runtime_request("127.0.0.1:1", "/portforward/T", &ws, &client);
        assert!(got.starts_with("GET /portforward/T?port=80&port=81 HTTP/1.1\r\n"), "{got}");
        assert!(got.contains("\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), "{got}");
        assert!(got.ends_with("sec-websocket-protocol: v4.channel.k8s.io\r\n\r\n"), "{got}");
    }
}
