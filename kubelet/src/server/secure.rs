//! The kubelet's authenticated API on `port` (default 10250), as upstream's `server.go`: TLS
//! with the configured (`tlsCertFile`/`tlsPrivateKeyFile`) or a self-signed serving certificate;
//! client certificates verified against `authentication.x509.clientCAFile` identify the caller
//! (CN the user, O the groups); without one, a bearer token the apiserver vouches for
//! ([`authn`](super::authn), `authentication.webhook`) does. Anything else is anonymous and gets
//! 401 unless `authentication.anonymous.enabled` is set; a token nobody vouches for is 401.
//!
//! Authorization ([`auth`](super::auth)), per `authorization.mode`: `Webhook` (the default)
//! asks the apiserver whether the caller may use `nodes/proxy` (or `stats`, `metrics`, ...) of
//! this node, so another node's certificate from the same CA cannot exec here; `AlwaysAllow`
//! lets every authenticated caller use every endpoint.
//!
//! Routes: `/healthz`, `/pods`, `/containerLogs/{ns}/{pod}/{container}` ([`logs`](super::logs)),
//! `/exec/{ns}/{pod}/{container}` and `/attach/{ns}/{pod}/{container}` ([`exec`](super::exec)),
//! `/portForward/{ns}/{pod}[/{uid}]` ([`portforward`](super::portforward)), `/stats/summary`
//! and `/metrics/resource` ([`stats`](super::stats)), `/metrics` and `/metrics/probes`
//! ([`metrics`](super::metrics); every request counted, refused ones too). Streams (log
//! followers, exec relays, port-forward splices) run on the server's task tracker and stop with
//! it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use super::auth::{ApiReviewer, Attributes, Authorizer, Webhook};
use super::authn::{ApiTokenReviewer, TokenAuthenticator, bearer};
use super::certs::{self, CertAndKey, CertError};
use super::read_only::{self, ServerState};
use super::request::text_error;
use super::{exec, logs, portforward};
use crate::config::kubelet_config::{AuthorizationMode, KubeletConfig};
use crate::metrics::KubeletMetrics;
use crate::metrics::http::ServerType;
use crate::runtime::RuntimeManager;

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the secure API could not start.
#[derive(Debug, thiserror::Error)]
pub enum SecureError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("TLS configuration: {what}: {reason}")]
    Tls { what: String, reason: String },
    #[error("clientCAFile {path}: {source}")]
    ClientCa { path: std::path::PathBuf, source: std::io::Error },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(
        "authorization.mode Webhook needs an apiserver to ask (--kubeconfig); set AlwaysAllow to run standalone"
    )]
    WebhookWithoutApiserver,
}

/// Who is calling: the verified client certificate's subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub groups: Vec<String>,
}

/// The identity of a connection, put in each request's extensions.
#[derive(Debug, Clone)]
pub struct Peer(pub Option<Identity>);

/// The identity a (verified) client certificate names: CN, and O as groups.
pub fn identity_from_cert(der: &[u8]) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let groups =
        subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
    Some(Identity { name, groups })
}

/// The TLS server config: our certificate (HTTP/1.1, which WebSocket needs) and client
/// certificates verified against `client_ca_pem` when given (optional at the TLS level: a
/// request without one is anonymous).
pub fn tls_config(
    serving: &CertAndKey,
    client_ca_pem: Option<&str>,
) -> Result<rustls::ServerConfig, SecureError> {
    let tls = |what: &str, reason: String| SecureError::Tls { what: what.into(), reason };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| tls("serving certificate", e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())
        .map_err(|e| tls("serving key", e.to_string()))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("protocol versions", e.to_string()))?;
    let builder = match client_ca_pem {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let c = c.map_err(|e| tls("client CA", e.to_string()))?;
                roots.add(c).map_err(|e| tls("client CA", e.to_string()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| tls("client CA", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| tls("serving certificate", e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// What the secure API's handlers share.
#[derive(Debug, Clone)]
pub struct SecureState {
    pub read_only: ServerState,
    pub runtime: Arc<RuntimeManager>,
    /// Log followers, exec relays and port-forward splices; closed and waited for with the server.
    pub streams: TaskTracker,
    pub stop: CancellationToken,
    /// How long an exec, attach or port-forward stream may pass no data before it is closed.
    pub idle_timeout: Option<Duration>,
}

/// The secure API's routes.
pub fn router(state: SecureState) -> axum::Router {
    let read_only = axum::Router::new()
        .route("/pods", get(read_only::pods))
        .route("/pods/", get(read_only::pods))
        .route("/healthz", get(read_only::healthz))
        .route("/manifests", get(read_only::manifests))
        .route("/events", get(read_only::events))
        .with_state(state.read_only.clone())
        .merge(super::stats::router(state.read_only.stats.clone()))
        .merge(super::metrics::router(state.read_only.metrics.clone()));
    axum::Router::new()
        .route("/containerLogs/{namespace}/{pod}/{container}", get(logs::container_logs))
        .route("/exec/{namespace}/{pod}/{container}", get(exec::exec).post(exec::exec))
        .route("/attach/{namespace}/{pod}/{container}", get(exec::attach).post(exec::attach))
        .route(
            "/portForward/{namespace}/{pod}",
            get(portforward::port_forward).post(portforward::port_forward),
        )
        .route(
            "/portForward/{namespace}/{pod}/{uid}",
            get(portforward::port_forward_uid).post(portforward::port_forward_uid),
        )
        .with_state(state)
        .merge(read_only)
}

/// Loads the serving certificate, the client CA and binds: the secure API as configured.
pub struct SecureServer {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    anonymous: bool,
    authorizer: Authorizer,
    tokens: Option<Tokens>,
    node: String,
}

/// Bearer-token authentication with the apiserver.
type Tokens = Arc<TokenAuthenticator<ApiTokenReviewer>>;

impl std::fmt::Debug for SecureServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureServer")
            .field("addr", &self.listener.local_addr().ok())
            .field("anonymous", &self.anonymous)
            .field("authorizer", &self.authorizer)
            .finish()
    }
}

impl SecureServer {
    /// Prepares the server from the config; `names` are the node's names and addresses for a
    /// self-signed certificate; `client` reaches the apiserver (Webhook authorization).
    pub async fn bind(
        config: &KubeletConfig,
        names: &[String],
        client: Option<&kube::Client>,
    ) -> Result<Self, SecureError> {
        let authorizer = match (config.authorization_mode, client) {
            (AuthorizationMode::AlwaysAllow, _) => Authorizer::AlwaysAllow,
            (AuthorizationMode::Webhook, Some(client)) => {
                Authorizer::Webhook(Arc::new(Webhook::new(
                    ApiReviewer(kube::Api::all(client.clone())),
                    config.authorization_cache_authorized_ttl,
                    config.authorization_cache_unauthorized_ttl,
                )))
            }
            // Nobody can authenticate (no client CA, no anonymous): every request is 401 first.
            (AuthorizationMode::Webhook, None) if !config.api_callers_possible() => {
                Authorizer::AlwaysAllow
            }
            (AuthorizationMode::Webhook, None) => return Err(SecureError::WebhookWithoutApiserver),
        };
        // Standalone there is nobody to ask about tokens: token callers get 401.
        let tokens = client.filter(|_| config.authentication_token_webhook).map(|c| {
            let reviewer = ApiTokenReviewer(kube::Api::all(c.clone()));
            Arc::new(TokenAuthenticator::new(
                reviewer,
                config.authentication_token_webhook_cache_ttl,
            ))
        });
        let serving = match (&config.tls_cert_file, &config.tls_private_key_file) {
            (Some(cert), Some(key)) => certs::load(cert, key)?,
            _ => {
                let dir = config.cert_dir.clone().unwrap_or_else(|| config.root_dir.join("pki"));
                certs::self_signed(&dir, names)?
            }
        };
        let client_ca = match &config.client_ca_file {
            Some(path) => Some(read_ca(path)?),
            None => None,
        };
        if client_ca.is_none() && !config.anonymous_auth {
            tracing::warn!(
                "no clientCAFile: every request to the kubelet API is anonymous and refused"
            );
        }
        if config.anonymous_auth {
            tracing::warn!(
                "anonymous requests to the kubelet API are allowed (authentication.anonymous.enabled); anyone who reaches the port can read logs and exec into containers"
            );
        }
        let tls = Arc::new(tls_config(&serving, client_ca.as_deref())?);
        let addr = SocketAddr::new(config.address, config.port);
        let listener =
            TcpListener::bind(addr).await.map_err(|source| SecureError::Bind { addr, source })?;
        Ok(Self {
            listener,
            tls,
            anonymous: config.anonymous_auth,
            authorizer,
            tokens,
            node: config.node_name.clone(),
        })
    }

    /// The port it listens on (the one reported as the node's kubelet endpoint).
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map_or(0, |a| a.port())
    }

    /// Accepts connections until `state.stop`, then waits for open requests and streams.
    pub async fn serve(self, state: SecureState) {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.tls);
        let router = router(state.clone());
        let connections = TaskTracker::new();
        let stop = state.stop.clone();
        tracing::info!(addr = ?self.listener.local_addr().ok(), "serving the kubelet API (/containerLogs, /exec, /attach, /portForward, /pods, /stats/summary, /metrics, /metrics/probes, /metrics/resource, /healthz) over TLS");
        loop {
            let (tcp, remote) = tokio::select! {
                () = stop.cancelled() => break,
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "kubelet API: accept");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            // Nagle off, as Go's servers: a response's last write must not wait for the
            // client's delayed ACK (40 ms).
            let _ = tcp.set_nodelay(true);
            let (acceptor, router, stop) = (acceptor.clone(), router.clone(), stop.clone());
            let metrics = state.read_only.metrics.clone();
            let access = Access {
                anonymous: self.anonymous,
                authorizer: self.authorizer.clone(),
                tokens: self.tokens.clone(),
                node: self.node.clone(),
            };
            connections.spawn(async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%remote, error = %e, "kubelet API: TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
                let identity = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| identity_from_cert(c));
                serve_connection(tls, Peer(identity), access, router, metrics, stop).await;
            });
        }
        connections.close();
        connections.wait().await;
        state.streams.close();
        state.streams.wait().await;
    }
}

/// Starts the secure API as configured (nothing when `port` is 0) on `tasks`; returns the port
/// it serves on, for the node's `daemonEndpoints.kubeletEndpoint`.
pub async fn start(
    config: &KubeletConfig,
    read_only: ServerState,
    runtime: Arc<RuntimeManager>,
    host_ip: Option<&str>,
    client: Option<&kube::Client>,
    tasks: &TaskTracker,
    stop: CancellationToken,
) -> Result<u16, SecureError> {
    if config.port == 0 {
        return Ok(0);
    }
    let mut names = vec![config.node_name.clone(), "localhost".to_string(), "127.0.0.1".into()];
    names.extend(host_ip.map(str::to_string));
    if !config.address.is_unspecified() {
        names.push(config.address.to_string());
    }
    let server = SecureServer::bind(config, &names, client).await?;
    let port = server.port();
    let idle_timeout = Some(config.streaming_connection_idle_timeout).filter(|t| !t.is_zero());
    let state = SecureState { read_only, runtime, streams: TaskTracker::new(), stop, idle_timeout };
    tasks.spawn(server.serve(state));
    Ok(port)
}

fn read_ca(path: &Path) -> Result<String, SecureError> {
    std::fs::read_to_string(path)
        .map_err(|source| SecureError::ClientCa { path: path.into(), source })
}

/// Who may do what on one connection's requests.
#[derive(Clone)]
struct Access {
    anonymous: bool,
    authorizer: Authorizer,
    tokens: Option<Tokens>,
    node: String,
}

impl Access {
    /// `None` when the request may go on; otherwise the refusal (401, 403 or 500).
    async fn check(
        &self,
        peer: &Peer,
        method: &axum::http::Method,
        path: &str,
        authorization: Option<&str>,
    ) -> Option<Response> {
        let unauthorized = || Some(text_error(StatusCode::UNAUTHORIZED, "Unauthorized"));
        // A client certificate first, then a bearer token (a token nobody vouches for is 401,
        // never anonymous), then anonymous if allowed.
        let from_token = match (&peer.0, bearer(authorization), &self.tokens) {
            (None, Some(token), Some(tokens)) => match tokens.authenticate(token).await {
                Ok(Some(who)) => Some(who),
                Ok(None) => {
                    tracing::debug!(path, "kubelet API: invalid bearer token");
                    return unauthorized();
                }
                Err(e) => {
                    tracing::warn!(error = %e, path, "kubelet API: token authentication failed");
                    return unauthorized();
                }
            },
            _ => None,
        };
        let caller = match peer.0.clone().or(from_token) {
            Some(who) => who,
            None if self.anonymous => Identity {
                name: "system:anonymous".into(),
                groups: vec!["system:unauthenticated".into()],
            },
            None => {
                tracing::debug!(path, "kubelet API: anonymous request refused");
                return unauthorized();
            }
        };
        let attrs = Attributes::of(method, path, &caller, &self.node);
        match self.authorizer.authorize(&attrs).await {
            Ok(true) => None,
            Ok(false) => {
                tracing::info!(
                    user = attrs.user,
                    verb = attrs.verb,
                    subresource = attrs.subresource,
                    path,
                    "kubelet API: forbidden"
                );
                Some(attrs.forbidden())
            }
            Err(e) => {
                tracing::warn!(error = %e, path, "kubelet API: authorization failed");
                Some(attrs.error())
            }
        }
    }
}

async fn serve_connection<I>(
    io: I,
    peer: Peer,
    access: Access,
    router: axum::Router,
    metrics: Arc<KubeletMetrics>,
    stop: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        let (router, peer, access) = (router.clone(), peer.clone(), access.clone());
        let in_flight =
            metrics.http.track(req.method().as_str(), req.uri().path(), ServerType::ReadWrite);
        async move {
            let _in_flight = in_flight;
            let authorization =
                req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
            let refusal = access.check(&peer, req.method(), req.uri().path(), authorization).await;
            if let Some(refusal) = refusal {
                return Ok::<_, Infallible>(refusal);
            }
            tracing::debug!(user = ?peer.0.as_ref().map(|i| &i.name), method = %req.method(), path = req.uri().path(), "kubelet API request");
            req.extensions_mut().insert(peer);
            router.oneshot(req).await
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "kubelet API connection ended");
            }
        }
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn certificates_pass_and_others_need_anonymous_allowed() {
        let admin = Peer(Some(Identity {
            name: "kube-apiserver-kubelet-client".into(),
            groups: vec!["system:masters".into()],
        }));
        let access = |anonymous| Access {
            anonymous,
            authorizer: Authorizer::AlwaysAllow,
            tokens: None,
            node: "n".into(),
        };
        let get = axum::http::Method::GET;
        let code = |r: Option<Response>| r.map(|r| r.status().as_u16());
        assert_eq!(code(access(false).check(&admin, &get, "/pods", None).await), None);
        assert_eq!(code(access(true).check(&Peer(None), &get, "/pods", None).await), None);
        assert_eq!(code(access(false).check(&Peer(None), &get, "/pods", None).await), Some(401));
        // A token with nobody to check it (standalone) is no credential.
        let token = Some("Bearer abc");
        assert_eq!(code(access(false).check(&Peer(None), &get, "/pods", token).await), Some(401));
    }

    #[test]
    fn client_certificates_name_user_and_groups() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "kube-apiserver-kubelet-client");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:masters");
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            identity_from_cert(cert.der()),
            Some(Identity {
                name: "kube-apiserver-kubelet-client".into(),
                groups: vec!["system:masters".into()]
            })
        );
        assert_eq!(identity_from_cert(b"not a certificate"), None);
    }
}
