//! `pods/portforward`, proxied to the pod's kubelet (`/portForward/{ns}/{pod}`) as upstream's
//! API server does (authorized as `create`, for both methods, as `pods/exec`).
//!
//! kubectl (1.31 and later) first asks for a WebSocket whose subprotocol tunnels SPDY
//! (`SPDY/3.1+portforward.k8s.io`): the WebSocket's binary messages carry the bytes of a SPDY
//! connection. As upstream's `TunnelingHandler`, the API server translates: it asks the kubelet
//! for a SPDY upgrade with the tunnelled protocols (prefix removed) in
//! `X-Stream-Protocol-Version`, and when the kubelet agrees it answers the client's WebSocket
//! handshake with the kubelet's protocol (prefix added) and moves bytes between WebSocket
//! messages and the kubelet connection ([`tunnel`]). Nothing of SPDY is read here.
//!
//! Any other upgrade (kubectl's SPDY fallback, WebSocket channel clients) is spliced to the
//! kubelet byte for byte, as exec is. A kubelet error becomes a `Status` with its code.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{FutureExt, SinkExt, StreamExt};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_util::sync::CancellationToken;

use super::ApiState;
use super::body::{self, Body};
use super::proxy::{kubelet_error, kubelet_request, locate_pod, segment, send, upgrade_splice};
use crate::auth::User;
use crate::errors::ApiError;
use crate::resources;

/// The WebSocket subprotocol prefix that marks a SPDY tunnel.
pub const TUNNEL_PREFIX: &str = "SPDY/3.1+";
/// The largest WebSocket message taken from a client (SPDY frames are at most 16 MiB).
const MAX_MESSAGE: usize = 16 << 20;
/// How long a client has to answer our close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The SPDY protocols a WebSocket request tunnels: its `SPDY/3.1+…k8s.io` subprotocols without
/// the prefix (upstream's `spdyProtocolsFromWebsocketProtocols`). Empty for anything else.
pub fn tunnelled_protocols(headers: &hyper::HeaderMap) -> Vec<String> {
    let websocket = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if !websocket {
        return Vec::new();
    }
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| p.ends_with(".k8s.io"))
        .filter_map(|p| p.strip_prefix(TUNNEL_PREFIX))
        .map(str::to_string)
        .collect()
}

/// The kubelet's query: each `ports` value as a `port` (the kubelet checks them).
pub fn kubelet_query(raw: Option<&str>) -> String {
    let pairs = raw.unwrap_or_default().split('&').filter_map(|p| p.split_once('='));
    let ports: Vec<String> =
        pairs.filter(|(k, _)| *k == "ports").map(|(_, v)| format!("port={v}")).collect();
    ports.join("&")
}

/// `GET`/`POST pods/{name}/portforward`.
pub async fn port_forward(
    state: &ApiState,
    user: &User,
    ns: Option<&str>,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let pods = &resources::PODS;
    state.authz.authorize(user, "create", pods, ns, Some(name), Some("portforward"))?;
    let loc = locate_pod(state, ns, name)?;
    let mut path = format!("/portForward/{}/{}", segment(ns.unwrap_or_default()), segment(name));
    let q = kubelet_query(req.uri().query());
    if !q.is_empty() {
        path = format!("{path}?{q}");
    }
    let what = format!("{}/{name}", ns.unwrap_or_default());
    let tunnelled = tunnelled_protocols(req.headers());
    if tunnelled.is_empty() {
        return upgrade_splice(state, &loc, &path, req, what, "portforward").await;
    }
    let key = req
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::bad_request("Sec-WebSocket-Key is missing"))?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut forward = kubelet_request(Method::POST, &loc, &path)?
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "SPDY/3.1");
    for p in &tunnelled {
        forward = forward.header("x-stream-protocol-version", p.as_str());
    }
    let forward =
        forward.body(Empty::<Bytes>::new()).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut req = req;
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut resp = send(&state.kubelet, &loc, forward).await?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(kubelet_error(resp).await);
    }
    let upgraded_to_spdy = resp
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("spdy/3.1"));
    if !upgraded_to_spdy {
        return Err(ApiError::internal("unable to upgrade: missing upgrade headers in response"));
    }
    let agreed = resp
        .headers()
        .get("x-stream-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(|p| format!("{TUNNEL_PREFIX}{}", p.trim()));
    let mut out = Response::new(body::full(Bytes::new()));
    *out.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = out.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Some(v) = agreed.and_then(|p| HeaderValue::from_str(&p).ok()) {
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
    }
    let kubelet_upgrade = hyper::upgrade::on(&mut resp);
    let stop = state.kubelet.stop.clone();
    state.kubelet.streams.spawn(async move {
        let (client, kubelet) = match tokio::join!(client_upgrade, kubelet_upgrade) {
            (Ok(c), Ok(k)) => (c, k),
            (c, k) => {
                tracing::debug!(pod = %what, client = ?c.err(), kubelet = ?k.err(), "portforward upgrade failed");
                return;
            }
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let ws =
            WebSocketStream::from_raw_socket(TokioIo::new(client), Role::Server, Some(config))
                .await;
        let ended = tunnel(ws, TokioIo::new(kubelet), stop).await;
        tracing::debug!(pod = %what, ?ended, "portforward tunnel ended");
    });
    Ok(out)
}

/// Why a tunnel ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TunnelEnd {
    ClientClosed,
    KubeletClosed,
    Stopped,
    /// A side broke, or the client sent a text message (the tunnel carries binary only).
    Failed(String),
}

/// Moves the client's binary messages to the kubelet as bytes and the kubelet's bytes to the
/// client as binary messages, until either side closes or `stop`. Messages that are ready
/// together are written to the kubelet together (Go's SPDY framer writes a frame in pieces, each
/// its own message). The client gets a normal close (1000) when the kubelet or the server ends
/// it, which kubectl reads as the end of the connection.
pub async fn tunnel<S, K>(
    mut ws: WebSocketStream<S>,
    kubelet: K,
    stop: CancellationToken,
) -> TunnelEnd
where
    S: AsyncRead + AsyncWrite + Unpin,
    K: AsyncRead + AsyncWrite + Unpin,
{
    let (mut from_kubelet, to_kubelet) = tokio::io::split(kubelet);
    let mut to_kubelet = tokio::io::BufWriter::new(to_kubelet);
    let mut buf = BytesMut::with_capacity(32 * 1024);
    let ended = loop {
        tokio::select! {
            () = stop.cancelled() => break TunnelEnd::Stopped,
            msg = ws.next() => {
                let mut msg = msg;
                // Take whatever else is ready before writing.
                let failed = loop {
                    match msg {
                        Some(Ok(Message::Binary(data))) => {
                            if let Err(e) = to_kubelet.write_all(&data).await {
                                break Some(TunnelEnd::Failed(format!("kubelet: {e}")));
                            }
                        }
                        Some(Ok(Message::Text(_))) => {
                            break Some(TunnelEnd::Failed("client: text message in a SPDY tunnel".into()));
                        }
                        Some(Ok(Message::Close(_))) | None => break Some(TunnelEnd::ClientClosed),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => break Some(TunnelEnd::Failed(format!("client: {e}"))),
                    }
                    match ws.next().now_or_never() {
                        Some(next) => msg = next,
                        None => break None,
                    }
                };
                if let Some(end) = failed {
                    break end;
                }
                if let Err(e) = to_kubelet.flush().await {
                    break TunnelEnd::Failed(format!("kubelet: {e}"));
                }
            }
            read = from_kubelet.read_buf(&mut buf) => match read {
                Ok(0) => break TunnelEnd::KubeletClosed,
                Ok(_) => {
                    if let Err(e) = ws.send(Message::Binary(buf.split().freeze())).await {
                        break TunnelEnd::Failed(format!("client: {e}"));
                    }
                    buf.reserve(32 * 1024);
                }
                Err(e) => break TunnelEnd::Failed(format!("kubelet: {e}")),
            },
        }
    };
    let _ = to_kubelet.shutdown().await;
    if ended != TunnelEnd::ClientClosed {
        let normal = CloseFrame { code: CloseCode::Normal, reason: "".into() };
        let _ = ws.close(Some(normal)).await;
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn only_websocket_requests_with_k8s_spdy_subprotocols_are_tunnels() {
        let kubectl = headers(&[
            ("upgrade", "websocket"),
            ("sec-websocket-protocol", "SPDY/3.1+portforward.k8s.io"),
        ]);
        assert_eq!(tunnelled_protocols(&kubectl), ["portforward.k8s.io"]);
        let listed = headers(&[
            ("upgrade", "WebSocket"),
            ("sec-websocket-protocol", "v4.channel.k8s.io, SPDY/3.1+portforward.k8s.io"),
            ("sec-websocket-protocol", "SPDY/3.1+other.example"),
        ]);
        assert_eq!(tunnelled_protocols(&listed), ["portforward.k8s.io"]);
        let channels =
            headers(&[("upgrade", "websocket"), ("sec-websocket-protocol", "v4.channel.k8s.io")]);
        assert!(tunnelled_protocols(&channels).is_empty());
        let spdy = headers(&[
            ("upgrade", "SPDY/3.1"),
            ("sec-websocket-protocol", "SPDY/3.1+portforward.k8s.io"),
        ]);
        assert!(tunnelled_protocols(&spdy).is_empty());
    }

    #[test]
    fn the_kubelet_gets_each_port_as_upstream_passes_them() {
        assert_eq!(kubelet_query(Some("ports=80&ports=8080&container=x")), "port=80&port=8080");
        assert_eq!(kubelet_query(None), "");
    }

    async fn client_and_tunnel(
        stop: CancellationToken,
    ) -> (
        WebSocketStream<tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        tokio::task::JoinHandle<TunnelEnd>,
    ) {
        let (client_side, server_side) = tokio::io::duplex(1 << 16);
        let (kubelet_side, kubelet) = tokio::io::duplex(1 << 16);
        let task = tokio::spawn(async move {
            let ws = WebSocketStream::from_raw_socket(server_side, Role::Server, None).await;
            tunnel(ws, kubelet_side, stop).await
        });
        let client = WebSocketStream::from_raw_socket(client_side, Role::Client, None).await;
        (client, kubelet, task)
    }

    #[tokio::test]
    async fn messages_become_bytes_and_bytes_become_messages() {
        let (mut client, mut kubelet, task) = client_and_tunnel(CancellationToken::new()).await;
        // A frame written in pieces arrives as one byte stream.
        for piece in [&b"\x80\x03"[..], b"\x00\x06", b"\x00\x00\x00\x04", b"\x00\x00\x00\x01"] {
            client.send(Message::Binary(Bytes::copy_from_slice(piece))).await.unwrap();
        }
        let mut got = [0; 12];
        kubelet.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01");
        kubelet.write_all(b"pong").await.unwrap();
        let Some(Ok(Message::Binary(b))) = client.next().await else { panic!("no message") };
        assert_eq!(&b[..], b"pong");
        // The kubelet closing is a normal close for the client.
        drop(kubelet);
        match client.next().await {
            Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Normal),
            other => panic!("not a normal close: {other:?}"),
        }
        drop(client);
        assert_eq!(task.await.unwrap(), TunnelEnd::KubeletClosed);
    }

    #[tokio::test]
    async fn text_and_the_server_stopping_end_the_tunnel() {
        let (mut client, _kubelet, task) = client_and_tunnel(CancellationToken::new()).await;
        client.send(Message::Text("hello".into())).await.unwrap();
        drop(client);
        assert!(matches!(task.await.unwrap(), TunnelEnd::Failed(m) if m.contains("text message")));

        let stop = CancellationToken::new();
        let (mut client, mut kubelet, task) = client_and_tunnel(stop.clone()).await;
        stop.cancel();
        match client.next().await {
            Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Normal),
            other => panic!("not a normal close: {other:?}"),
        }
        drop(client);
        assert_eq!(task.await.unwrap(), TunnelEnd::Stopped);
        let mut rest = Vec::new();
        kubelet.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "the kubelet connection is shut down");
    }
}
