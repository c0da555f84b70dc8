//! `/exec/{namespace}/{pod}/{container}?command=…&input=1&output=1&error=1&tty=1`: runs a
//! command in a running container, as upstream's `getExec`; and
//! `/attach/{namespace}/{pod}/{container}?input=1&output=1&error=1&tty=1`: joins the stdio of
//! the container's own process, as upstream's `getAttach`. Both over a WebSocket with
//! `v5.channel.k8s.io` or `v4.channel.k8s.io` (see [`remotecommand`](super::remotecommand)).
//!
//! The request is checked first (pod, container running, parameters, the upgrade), so a bad one
//! gets a plain HTTP error before anything starts. Then the kubelet asks the runtime for a
//! session (CRI `Exec` or `Attach`, which return a URL on the runtime's streaming server), opens
//! its streams over SPDY ([`spdy`](super::spdy)), answers 101 and relays between the two until
//! the runtime ends the session (an exec's status is its last message; an attach ends with the
//! container), the client goes, or the kubelet stops. SPDY from clients (kubectl's fallback) is
//! refused: clients reach exec and attach over WebSocket.

use std::time::Duration;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use proto::cri;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_util::sync::CancellationToken;

use super::remotecommand::{self, Protocol, Relay, StreamOptions};
use super::request::{RequestError, container_status, find_pod, runtime_id};
use super::secure::SecureState;
use super::spdy::{Event, RuntimeStreams};

/// How long the runtime's streams may take to open (upstream's stream creation timeout).
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest WebSocket message accepted from a client (kubectl writes stdin in 32 KiB pieces).
pub const MAX_MESSAGE: usize = 1 << 20;
/// How long a client has to answer our close before the connection is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a session runs: a new command, or the container's own process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    Exec { command: Vec<String> },
    Attach,
}

/// The parsed query (upstream's `remotecommand.Options`, and the command of an exec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecQuery {
    pub session: Session,
    pub streams: StreamOptions,
}

fn flag(v: &str) -> bool {
    matches!(v, "1" | "true" | "True")
}

impl ExecQuery {
    /// An exec's query: the command and the streams.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, RequestError> {
        let command: Vec<String> =
            pairs.iter().filter(|(k, _)| k == "command").map(|(_, v)| v.clone()).collect();
        if command.is_empty() {
            return Err(RequestError::BadRequest(
                "no command given (the command parameter)".into(),
            ));
        }
        Ok(Self { session: Session::Exec { command }, streams: streams(pairs)? })
    }

    /// An attach's query: the streams (a command is ignored, as upstream ignores it).
    pub fn parse_attach(pairs: &[(String, String)]) -> Result<Self, RequestError> {
        Ok(Self { session: Session::Attach, streams: streams(pairs)? })
    }
}

/// The streams a query asks for; at least one of them.
fn streams(pairs: &[(String, String)]) -> Result<StreamOptions, RequestError> {
    let mut s = StreamOptions::default();
    for (k, v) in pairs {
        match k.as_str() {
            "input" | "stdin" => s.stdin = flag(v),
            "output" | "stdout" => s.stdout = flag(v),
            "error" | "stderr" => s.stderr = flag(v),
            "tty" => s.tty = flag(v),
            _ => {}
        }
    }
    if !(s.stdin || s.stdout || s.stderr) {
        return Err(RequestError::BadRequest(
            "you must specify at least 1 of stdin, stdout, stderr".into(),
        ));
    }
    // A terminal merges stderr into stdout (upstream drops stderr the same way).
    if s.tty {
        s.stderr = false;
    }
    Ok(s)
}

/// The WebSocket handshake a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    pub protocol: Protocol,
    /// `Sec-WebSocket-Accept` for the client's key.
    pub accept: String,
}

/// Checks the upgrade request: WebSocket version 13 with a key and one of our protocols.
pub fn websocket_upgrade(headers: &HeaderMap) -> Result<Upgrade, RequestError> {
    let get = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
    let upgrade = get(header::UPGRADE).unwrap_or_default();
    if upgrade.to_ascii_lowercase().starts_with("spdy") {
        return Err(RequestError::BadRequest(
            "exec and attach over SPDY are not served by this kubelet: use WebSocket (v5.channel.k8s.io or v4.channel.k8s.io)".into(),
        ));
    }
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(RequestError::BadRequest("Upgrade request required".into()));
    }
    if get(header::SEC_WEBSOCKET_VERSION) != Some("13") {
        return Err(RequestError::BadRequest("Sec-WebSocket-Version must be 13".into()));
    }
    let key = get(header::SEC_WEBSOCKET_KEY)
        .ok_or_else(|| RequestError::BadRequest("Sec-WebSocket-Key is missing".into()))?;
    let offered =
        headers.get_all(header::SEC_WEBSOCKET_PROTOCOL).iter().filter_map(|v| v.to_str().ok());
    let protocol = Protocol::negotiate(offered).ok_or_else(|| {
        RequestError::BadRequest(
            "none of the offered WebSocket protocols is served (v5.channel.k8s.io, v4.channel.k8s.io)"
                .into(),
        )
    })?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    Ok(Upgrade { protocol, accept })
}

/// The exec handler.
pub async fn exec(
    State(state): State<SecureState>,
    Path(names): Path<(String, String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
    req: Request,
) -> Response {
    respond(state, names, ExecQuery::parse(&pairs), req).await
}

/// The attach handler.
pub async fn attach(
    State(state): State<SecureState>,
    Path(names): Path<(String, String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
    req: Request,
) -> Response {
    respond(state, names, ExecQuery::parse_attach(&pairs), req).await
}

/// Starts the session a parsed query asks for, or answers why not.
async fn respond(
    state: SecureState,
    (namespace, pod, container): (String, String, String),
    query: Result<ExecQuery, RequestError>,
    req: Request,
) -> Response {
    let started = match query {
        Ok(q) => start(state, namespace, pod, container, q, req).await,
        Err(e) => Err(e),
    };
    started.unwrap_or_else(|e| {
        tracing::debug!(error = %e, "exec or attach refused");
        e.into_response()
    })
}

async fn start(
    state: SecureState,
    namespace: String,
    name: String,
    container: String,
    q: ExecQuery,
    mut req: Request,
) -> Result<Response, RequestError> {
    let pod = find_pod(&state, &namespace, &name)?;
    let status = container_status(&pod, &container)?;
    let id = status
        .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
        .and_then(|s| s.container_id.as_deref())
        .map(|id| runtime_id(id).to_string())
        .ok_or_else(|| RequestError::NotRunning {
            namespace: namespace.clone(),
            pod: name.clone(),
            container: container.clone(),
        })?;
    let upgrade = websocket_upgrade(req.headers())?;
    let o = q.streams;
    let cri = &state.runtime.cri;
    let url = match &q.session {
        Session::Exec { command } => {
            let r = cri::ExecRequest {
                container_id: id,
                cmd: command.clone(),
                tty: o.tty,
                stdin: o.stdin,
                stdout: o.stdout,
                stderr: o.stderr,
            };
            cri.exec(r).await.map(|r| r.url)
        }
        Session::Attach => {
            let r = cri::AttachRequest {
                container_id: id,
                tty: o.tty,
                stdin: o.stdin,
                stdout: o.stdout,
                stderr: o.stderr,
            };
            cri.attach(r).await.map(|r| r.url)
        }
    };
    let url = match url {
        Ok(url) => url,
        Err(source) => {
            return Err(RequestError::Runtime {
                namespace,
                pod: name,
                container,
                source: Box::new(source),
            });
        }
    };
    let runtime =
        RuntimeStreams::open(&url, q.streams, STREAM_CREATION_TIMEOUT).await.map_err(|source| {
            RequestError::Streaming {
                namespace: namespace.clone(),
                pod: name.clone(),
                container: container.clone(),
                source: Box::new(source),
            }
        })?;
    let on_upgrade = hyper::upgrade::on(&mut req);
    let what = format!("{namespace}/{name}/{container}");
    tracing::info!(container = %what, session = ?q.session, protocol = upgrade.protocol.name(), "remote command");
    let stop = state.stop.child_token();
    let idle = state.idle_timeout;
    let (protocol, streams) = (upgrade.protocol, q.streams);
    state.streams.spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let config = WebSocketConfig::default()
                    .max_message_size(Some(MAX_MESSAGE))
                    .max_frame_size(Some(MAX_MESSAGE));
                let ws = WebSocketStream::from_raw_socket(
                    TokioIo::new(upgraded),
                    Role::Server,
                    Some(config),
                )
                .await;
                let ends = Ends { stop, idle };
                relay(ws, runtime, Relay::new(protocol, streams), ends, &what).await;
            }
            Err(e) => {
                tracing::debug!(container = %what, error = %e, "exec: the client did not upgrade");
                runtime.close().await;
            }
        }
    });
    let mut resp = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(upgrade.protocol.name()));
    if let Ok(v) = HeaderValue::from_str(&upgrade.accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    Ok(resp)
}

/// What ends a relay besides its two sides: the kubelet stopping, and no data for `idle`.
struct Ends {
    stop: CancellationToken,
    idle: Option<Duration>,
}

impl Ends {
    /// When the stream counts as idle if nothing passes before then.
    fn idle_deadline(&self) -> Option<tokio::time::Instant> {
        self.idle.map(|t| tokio::time::Instant::now() + t)
    }
}

/// Waits until `deadline`, or forever without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Moves messages between the client and the runtime until the runtime ends the session, the
/// client goes, nothing passes for the idle timeout, or the kubelet stops.
async fn relay<S>(
    mut ws: WebSocketStream<S>,
    mut runtime: RuntimeStreams,
    mut relay: Relay,
    ends: Ends,
    what: &str,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut failure: Option<String> = None;
    let mut client_gone = false;
    let mut deadline = ends.idle_deadline();
    'relay: loop {
        tokio::select! {
            () = ends.stop.cancelled() => {
                failure = Some("the kubelet is stopping".into());
                break;
            }
            () = until(deadline) => {
                let idle = humantime::format_duration(ends.idle.unwrap_or_default());
                failure = Some(format!(
                    "closed after {idle} with no data either way (streamingConnectionIdleTimeout)"
                ));
                break;
            }
            msg = ws.next() => match msg {
                Some(Ok(Message::Binary(data))) => {
                    deadline = ends.idle_deadline();
                    if let Some(to) = relay.from_client(&data)
                        && let Err(e) = runtime.send(to).await
                    {
                        failure = Some(e.to_string());
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None => {
                    client_gone = true;
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(container = %what, error = %e, "exec: client connection failed");
                    client_gone = true;
                    break;
                }
            },
            event = runtime.next().inspect(|e| tracing::trace!(container = %what, event = ?e, "exec: runtime event")) => match event {
                Ok(Some(Event::Data { stream, data, fin })) => {
                    deadline = ends.idle_deadline();
                    for m in relay.from_runtime(stream, &data, fin) {
                        if ws.send(Message::Binary(Bytes::from(m))).await.is_err() {
                            client_gone = true;
                            break 'relay;
                        }
                    }
                }
                Ok(Some(Event::Ping { id })) => {
                    if let Err(e) = runtime.pong(id).await {
                        failure = Some(e.to_string());
                        break;
                    }
                }
                Ok(Some(Event::Reset { .. } | Event::GoAway)) => {}
                Ok(None) => break,
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            },
        }
    }
    tracing::debug!(container = %what, client_gone, ?failure, "exec: relay ended");
    runtime.close().await;
    if client_gone {
        tracing::debug!(container = %what, "exec: the client went away");
        return;
    }
    let last = match (relay.finish(), failure) {
        (Some(status), _) => Some(status),
        (None, Some(f)) => {
            tracing::warn!(container = %what, error = %f, "exec failed");
            Some(remotecommand::internal_error_status(&f))
        }
        (None, None) => None,
    };
    if let Some(m) = last {
        let _ = ws.send(Message::Binary(Bytes::from(m))).await;
    }
    // A normal closure (1000): clients treat any other close as a broken stream, even after the
    // status arrived.
    let normal = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    let _ = ws.close(Some(normal)).await;
    let _ =
        tokio::time::timeout(CLOSE_TIMEOUT, async { while let Some(Ok(_)) = ws.next().await {} })
            .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Result<ExecQuery, RequestError> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect();
        ExecQuery::parse(&pairs)
    }

    #[test]
    fn parses_the_command_and_streams() {
        let got = q(&[
            ("command", "sh"),
            ("command", "-c"),
            ("command", "exit 3"),
            ("output", "1"),
            ("error", "1"),
        ])
        .unwrap();
        let command = ["sh", "-c", "exit 3"].map(String::from).to_vec();
        assert_eq!(got.session, Session::Exec { command });
        assert_eq!(
            got.streams,
            StreamOptions { stdin: false, stdout: true, stderr: true, tty: false }
        );
        let tty =
            q(&[("command", "sh"), ("input", "1"), ("output", "1"), ("error", "1"), ("tty", "1")])
                .unwrap();
        assert_eq!(
            tty.streams,
            StreamOptions { stdin: true, stdout: true, stderr: false, tty: true }
        );
        assert_eq!(
            q(&[("output", "1")]).unwrap_err().to_string(),
            "no command given (the command parameter)"
        );
        assert_eq!(
            q(&[("command", "ls")]).unwrap_err().to_string(),
            "you must specify at least 1 of stdin, stdout, stderr"
        );
    }

    #[test]
    fn an_attach_needs_streams_and_no_command() {
        let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
        };
        let got = ExecQuery::parse_attach(&owned(&[("input", "1"), ("output", "1")])).unwrap();
        assert_eq!(got.session, Session::Attach);
        assert_eq!(got.streams, StreamOptions { stdin: true, stdout: true, ..Default::default() });
        let err = ExecQuery::parse_attach(&owned(&[("tty", "1")])).unwrap_err();
        assert_eq!(err.to_string(), "you must specify at least 1 of stdin, stdout, stderr");
    }

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

    #[test]
    fn accepts_websocket_upgrades_with_our_protocols_only() {
        let ok = [
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-protocol", "v4.channel.k8s.io, v5.channel.k8s.io"),
        ];
        let up = websocket_upgrade(&headers(&ok)).unwrap();
        // RFC 6455's example key and answer.
        assert_eq!(up.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(up.protocol, Protocol::V5);
        let spdy = websocket_upgrade(&headers(&[("upgrade", "SPDY/3.1")])).unwrap_err();
        assert!(spdy.to_string().contains("over SPDY are not served"), "{spdy}");
        let plain = websocket_upgrade(&headers(&[])).unwrap_err();
        assert_eq!(plain.to_string(), "Upgrade request required");
        let mut other = ok;
        other[3] = ("sec-websocket-protocol", "base64.channel.k8s.io");
        assert!(websocket_upgrade(&headers(&other)).is_err());
        let mut old = ok;
        old[1] = ("sec-websocket-version", "8");
        assert!(websocket_upgrade(&headers(&old)).is_err());
    }
}
