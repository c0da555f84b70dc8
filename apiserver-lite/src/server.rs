//! Serving: TLS (rustls; HTTP/2 and HTTP/1.1 by ALPN) with optional client certificates, or the
//! explicit localhost-only plain-HTTP mode; each connection a task, all stopped together.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth;
use crate::http::{self, ApiState, Peer};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// The rustls server config: our certificate, HTTP/2 and HTTP/1.1, and client certificates
/// verified against `client_ca` when given (optional: bearer tokens work without one).
pub fn tls_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: Option<&str>,
) -> Result<rustls::ServerConfig, ServeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| ServeError::Tls(format!("serving certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| ServeError::Tls(format!("serving key: {e}")))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ServeError::Tls(e.to_string()))?;
    let builder = match client_ca_pem {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                let c = c.map_err(|e| ServeError::Tls(format!("client CA: {e}")))?;
                roots.add(c).map_err(|e| ServeError::Tls(format!("client CA: {e}")))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| ServeError::Tls(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config =
        builder.with_single_cert(certs, key).map_err(|e| ServeError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })
}

/// Accepts TLS connections until `stop`, then waits for open requests (watches end with it).
pub async fn serve_tls(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    state: Arc<ApiState>,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let tracker = TaskTracker::new();
    loop {
        let (tcp, remote) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept");
                    continue;
                }
            },
        };
        no_delay(&tcp);
        let (acceptor, state, stop) = (acceptor.clone(), state.clone(), stop.clone());
        tracker.spawn(async move {
            let tls = match tokio::time::timeout(
                std::time::Duration::from_secs(10),
                acceptor.accept(tcp),
            )
            .await
            {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%remote, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let cert_user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| auth::user_from_cert(c));
            serve_connection(TokioIo::new(tls), state, Peer::Tls(cert_user), remote, stop).await;
        });
    }
    tracker.close();
    tracker.wait().await;
}

/// Turns Nagle's algorithm off, as Go's servers do: a response's last small write must not
/// wait for the client's delayed ACK of the one before (a 40 ms stall on Linux, seen on list
/// responses of a few hundred kilobytes).
fn no_delay(tcp: &tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY");
    }
}

/// Plain HTTP, for `--insecure-port` on 127.0.0.1 only.
pub async fn serve_insecure(listener: TcpListener, state: Arc<ApiState>, stop: CancellationToken) {
    let tracker = TaskTracker::new();
    loop {
        let tcp = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
        };
        let (tcp, remote) = tcp;
        no_delay(&tcp);
        let (state, stop) = (state.clone(), stop.clone());
        tracker.spawn(async move {
            serve_connection(TokioIo::new(tcp), state, Peer::InsecureLocal, remote, stop).await
        });
    }
    tracker.close();
    tracker.wait().await;
}

async fn serve_connection<I>(
    io: TokioIo<I>,
    state: Arc<ApiState>,
    peer: Peer,
    remote: std::net::SocketAddr,
    stop: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let (state, peer) = (state.clone(), peer.clone());
        async move { Ok::<_, std::convert::Infallible>(http::handle(state, peer, remote, req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended");
            }
        }
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn).await;
        }
    }
}
