//! The kubelet's HTTP APIs, as upstream's `pkg/kubelet/server`:
//!
//! - [`read_only`]: the read-only port (`readOnlyPort`): `/pods`, `/healthz`, [`stats`],
//!   [`metrics`], and
//!   our `/manifests` and `/events`; the healthz port.
//! - [`secure`]: the authenticated API on `port` (TLS; client certificates verified against
//!   `clientCAFile`; anonymous requests refused with 401 unless allowed): `/healthz`, `/pods`,
//!   [`logs`] (`/containerLogs/{ns}/{pod}/{container}`) and [`exec`] (`/exec/{ns}/{pod}/{container}`
//!   over WebSocket) and [`portforward`] (`/portForward/{ns}/{pod}` over SPDY or WebSocket),
//!   [`stats`] and [`metrics`].
//! - [`stats`]: `/stats/summary` (the summary API) and `/metrics/resource` (the resource
//!   metrics, Prometheus text).
//! - [`metrics`]: `/metrics` and `/metrics/probes` (the kubelet's own metrics), and the
//!   request counting both servers do.
//! - [`authn`]: bearer tokens on the secure API, checked with the apiserver (TokenReview).
//! - [`auth`]: who may do what on the secure API (`authorization.mode`: Webhook asks the
//!   apiserver with a SubjectAccessReview, answers cached; or AlwaysAllow).
//! - [`answers`]: the bounded, expiring cache of the apiserver's answers both of them keep.
//! - [`request`]: finding the pod and container a request names; the errors that refuse it.
//! - [`certs`]: the self-signed serving certificate made when none is configured.
//! - [`remotecommand`]: the channel protocol kubectl speaks (`v5.channel.k8s.io`,
//!   `v4.channel.k8s.io`) and its relay to the runtime's streams.
//! - [`spdy`]: the client side of the runtime's streaming server (CRI `Exec` URLs), SPDY/3.1
//!   with `v4.channel.k8s.io`; frame boundaries and kinds for the port-forward splice.
//! - [`proxy_stream`]: a client's upgraded connection spliced to the runtime's (port-forward),
//!   with the idle timeout, the kubelet's stop and a bound on open SPDY streams.

pub mod answers;
pub mod auth;
pub mod authn;
pub mod certs;
pub mod exec;
pub mod logs;
pub mod metrics;
pub mod portforward;
pub mod proxy_stream;
pub mod read_only;
pub mod remotecommand;
pub mod request;
pub mod secure;
pub mod spdy;
pub mod stats;

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;

pub use read_only::{ServerState, healthz_router, read_only_router};

/// Serves `router` on an already bound listener until `stop`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    stop: CancellationToken,
) {
    use axum::serve::ListenerExt;
    let addr = listener.local_addr().ok();
    // Nagle off, as Go's servers: a response's last write must not wait for the client's
    // delayed ACK (40 ms).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    if let Err(e) =
        axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await
    {
        tracing::error!(?addr, error = %e, "HTTP server failed");
    }
}

/// Binds `addr`, naming it in the error.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, crate::KubeletError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| crate::KubeletError::Bind { addr, source })
}
