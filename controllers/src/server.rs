//! The secure port (`--secure-port`, default 10257 as upstream; `--bind-address`): `/healthz`
//! (`ok`) and `/metrics` (the Prometheus text format) over TLS. The serving certificate is
//! `--tls-cert-file`/`--tls-private-key-file`, or a self-signed one for `localhost`, 127.0.0.1
//! and the bind address: kept in `--cert-dir` as `kube-controller-manager.crt`/`.key` when that
//! is set (made once, then reused), in memory otherwise.
//!
//! Unlike upstream, requests are not authenticated or authorized against the apiserver yet
//! (upstream delegates both; it serves `/healthz` to anyone too).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use hyper_util::rt::TokioIo;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::metrics::Metrics;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("making a self-signed serving certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub cert_dir: Option<PathBuf>,
}

fn read(path: &Path) -> Result<String, ServeError> {
    std::fs::read_to_string(path).map_err(|source| ServeError::Io { path: path.into(), source })
}

fn self_signed(names: &[String]) -> Result<(String, String), ServeError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, "localhost@kube-controller-manager");
    for name in names {
        let san = match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(name.clone().try_into()?),
        };
        if !params.subject_alt_names.contains(&san) {
            params.subject_alt_names.push(san);
        }
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The certificate and key PEMs to serve with.
pub fn certificate(serving: &Serving, bind: IpAddr) -> Result<(String, String), ServeError> {
    if let (Some(c), Some(k)) = (&serving.cert_file, &serving.key_file) {
        return Ok((read(c)?, read(k)?));
    }
    let names = ["localhost".to_string(), "127.0.0.1".into(), bind.to_string()];
    let Some(dir) = &serving.cert_dir else { return self_signed(&names) };
    let (cert_path, key_path) =
        (dir.join("kube-controller-manager.crt"), dir.join("kube-controller-manager.key"));
    if cert_path.is_file() && key_path.is_file() {
        return Ok((read(&cert_path)?, read(&key_path)?));
    }
    std::fs::create_dir_all(dir).map_err(|source| ServeError::Io { path: dir.clone(), source })?;
    let (cert, key) = self_signed(&names)?;
    let write = |p: &Path, s: &str, mode| {
        daemon::write_atomically(p, s.as_bytes(), mode)
            .map_err(|source| ServeError::Io { path: p.into(), source })
    };
    write(&cert_path, &cert, 0o644)?;
    write(&key_path, &key, 0o600)?;
    Ok((cert, key))
}

fn tls_config(cert: &str, key: &str) -> Result<rustls::ServerConfig, ServeError> {
    let tls = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| tls(&e))?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| tls(&e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls(&e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

pub fn router(metrics: Metrics) -> axum::Router {
    axum::Router::new().route("/healthz", get(|| async { "ok" })).route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    m.encode(),
                )
            }
        }),
    )
}

/// A bound secure port.
#[derive(Debug)]
pub struct SecureServer {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
}

impl SecureServer {
    pub async fn bind(addr: SocketAddr, serving: &Serving) -> Result<Self, ServeError> {
        let (cert, key) = certificate(serving, addr.ip())?;
        let tls = Arc::new(tls_config(&cert, &key)?);
        let listener =
            TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Self { listener, tls })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `stop`.
    pub async fn serve(self, metrics: Metrics, stop: CancellationToken) {
        tracing::info!(addr = ?self.local_addr(), "serving /healthz and /metrics over TLS");
        let acceptor = tokio_rustls::TlsAcceptor::from(self.tls);
        let router = router(metrics);
        let connections = TaskTracker::new();
        loop {
            let tcp = tokio::select! {
                () = stop.cancelled() => break,
                a = self.listener.accept() => match a {
                    Ok((tcp, _)) => {
                        // Nagle off, as Go's servers (no 40 ms wait for a delayed ACK).
                        let _ = tcp.set_nodelay(true);
                        tcp
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "secure port: accept");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let (acceptor, router, stop) = (acceptor.clone(), router.clone(), stop.clone());
            connections.spawn(async move {
                let Ok(Ok(tls)) =
                    tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| router.clone().oneshot(req));
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    () = stop.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
                    }
                }
            });
        }
        connections.close();
        connections.wait().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_cert_dir_keeps_the_self_signed_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let serving = Serving { cert_dir: Some(dir.path().join("pki")), ..Default::default() };
        let a = certificate(&serving, "127.0.0.1".parse().unwrap()).unwrap();
        let b = certificate(&serving, "127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(a, b);
        assert!(tls_config(&a.0, &a.1).is_ok());
        let missing = Serving {
            cert_file: Some(dir.path().join("nope.crt")),
            key_file: Some(dir.path().join("nope.key")),
            cert_dir: None,
        };
        let err = certificate(&missing, "127.0.0.1".parse().unwrap()).unwrap_err();
        assert!(err.to_string().contains("nope.crt"), "{err}");
    }

    #[tokio::test]
    async fn healthz_answers_ok_and_metrics_lists_the_workqueue_families() {
        let metrics = Metrics::default();
        let q = crate::workqueue::WorkQueue::<String>::new("replicaset", metrics.queues.clone());
        metrics.add_refresher(q.clone());
        q.add("a".into());
        let r = router(metrics);
        let body = |resp: axum::response::Response| async {
            let b = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
            String::from_utf8_lossy(&b).into_owned()
        };
        let req = |p: &str| axum::http::Request::get(p).body(axum::body::Body::empty()).unwrap();
        assert_eq!(body(r.clone().oneshot(req("/healthz")).await.unwrap()).await, "ok");
        let text = body(r.oneshot(req("/metrics")).await.unwrap()).await;
        for line in [
            "workqueue_depth{name=\"replicaset\"} 1",
            "workqueue_adds_total{name=\"replicaset\"} 1",
            "# TYPE workqueue_queue_duration_seconds histogram",
            "# TYPE workqueue_work_duration_seconds histogram",
            "workqueue_unfinished_work_seconds{name=\"replicaset\"} 0",
            "workqueue_longest_running_processor_seconds{name=\"replicaset\"} 0",
            "# TYPE workqueue_retries counter",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
