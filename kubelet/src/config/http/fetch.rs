//! One GET of the manifest URL, as upstream's `http.Client{Timeout: 10 * time.Second}` sends
//! it: the configured headers, redirects followed (at most 10; `Authorization` and `Cookie`
//! only to the same host), certificates checked against the system's roots, the whole
//! exchange within the timeout. Beyond upstream (which reads any size), the body is read up to
//! a limit.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::prober::tcp::join_host_port;

/// Upstream's client timeout for the manifest URL: the connection, the answer and its body.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read (ours: the API server's request limit, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

const MAX_REDIRECTS: usize = 10;

/// A parsed `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestUrl {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// The path and query, starting with `/`.
    pub path: String,
    /// `user:password` from the URL, sent as basic authentication (as Go does).
    pub userinfo: Option<String>,
}

impl ManifestUrl {
    /// The URL's parts, or why it cannot be fetched in Go's words (without the URL).
    pub fn parse(url: &str) -> Result<Self, String> {
        let uri: hyper::Uri = url.parse().map_err(|e| format!("invalid URL: {e}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => return Err(format!("unsupported protocol scheme {other:?}")),
            None => return Err("unsupported protocol scheme \"\"".into()),
        };
        let no_host = || "http: no Host in request URL".to_string();
        let authority = uri.authority().ok_or_else(no_host)?;
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(no_host());
        }
        let userinfo = authority.as_str().rsplit_once('@').map(|(u, _)| u.to_string());
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        Ok(Self {
            https,
            host: host.to_string(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            path: if path.is_empty() { "/".into() } else { path.to_string() },
            userinfo,
        })
    }

    fn authority(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    /// Where a `Location` header leads from here.
    fn follow(&self, location: &str) -> Result<Self, String> {
        if location.starts_with("http://") || location.starts_with("https://") {
            return Self::parse(location);
        }
        let mut next = self.clone();
        next.userinfo = None;
        next.path = crate::prober::http::redirect_path(&self.path, location);
        Ok(next)
    }
}

/// Whether each header name and value can be sent (`staticPodURLHeader`), or the first that
/// cannot, and why.
pub fn check_headers(
    headers: &std::collections::BTreeMap<String, Vec<String>>,
) -> Result<(), String> {
    for (name, values) in headers {
        hyper::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header field name {name:?}"))?;
        for value in values {
            hyper::header::HeaderValue::from_str(value)
                .map_err(|_| format!("invalid header field value for {name:?}"))?;
        }
    }
    Ok(())
}

/// Why a fetch gave no usable answer; the URL is the one asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("Get {url:?}: {message}")]
    Transport { url: String, message: String },
    #[error(
        "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    )]
    Timeout { url: String },
    #[error(
        "Get {url:?}: context deadline exceeded (Client.Timeout or context cancellation while reading body)"
    )]
    BodyTimeout { url: String },
    /// Upstream's wording: the URL and the status line.
    #[error("{url}: {status}")]
    Status { url: String, status: String },
    #[error("{url}: the answer is larger than the {limit}-byte limit for a manifest URL")]
    TooLarge { url: String, limit: usize },
}

/// GETs `url` with `headers` within `timeout`, reading at most `limit` bytes of a 200 answer.
pub async fn get(
    url: &str,
    headers: &[(String, String)],
    timeout: Duration,
    limit: usize,
) -> Result<Vec<u8>, FetchError> {
    let transport = |message: String| FetchError::Transport { url: url.to_string(), message };
    let target = ManifestUrl::parse(url).map_err(transport)?;
    let mut got_headers = false;
    let exchange = follow(target, headers, limit, &mut got_headers);
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(Answer::Body(body))) => Ok(body),
        Ok(Ok(Answer::Status(status))) => Err(FetchError::Status { url: url.into(), status }),
        Ok(Ok(Answer::TooLarge)) => Err(FetchError::TooLarge { url: url.into(), limit }),
        Ok(Err(message)) => Err(transport(message)),
        Err(_) if got_headers => Err(FetchError::BodyTimeout { url: url.into() }),
        Err(_) => Err(FetchError::Timeout { url: url.into() }),
    }
}

enum Answer {
    Body(Vec<u8>),
    /// Not 200: the status line (`404 Not Found`).
    Status(String),
    TooLarge,
}

async fn follow(
    mut target: ManifestUrl,
    headers: &[(String, String)],
    limit: usize,
    got_headers: &mut bool,
) -> Result<Answer, String> {
    let first_host = target.host.clone();
    for _ in 0..=MAX_REDIRECTS {
        // Credentials go to the first host only, as Go's client forwards them.
        let same_host = target.host.eq_ignore_ascii_case(&first_host);
        let (response, _connection) = send(&target, headers, same_host).await?;
        let status = response.status();
        let location = response
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let Some(location) = location.filter(|_| is_redirect(status.as_u16())) {
            target = target.follow(&location)?;
            continue;
        }
        *got_headers = true;
        if status != hyper::StatusCode::OK {
            let reason = status.canonical_reason().unwrap_or_default();
            return Ok(Answer::Status(format!("{} {reason}", status.as_u16()).trim().to_string()));
        }
        let mut body = Vec::new();
        let mut incoming = response.into_body();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| e.to_string())?;
            if let Ok(data) = frame.into_data() {
                if body.len() + data.len() > limit {
                    return Ok(Answer::TooLarge);
                }
                body.extend_from_slice(&data);
            }
        }
        return Ok(Answer::Body(body));
    }
    Err(format!("stopped after {MAX_REDIRECTS} redirects"))
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Sends one GET over a new connection and returns the answer's head (its body unread).
async fn send(
    target: &ManifestUrl,
    headers: &[(String, String)],
    credentials: bool,
) -> Result<(hyper::Response<hyper::body::Incoming>, Connection), String> {
    let addr = target.authority();
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("dial tcp {addr}: connect: {e}"))?;
    let mut req = Request::get(target.path.as_str()).header(hyper::header::HOST, addr);
    let sensitive = ["authorization", "www-authenticate", "cookie", "cookie2"];
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("host")
            || (!credentials && sensitive.contains(&name.to_ascii_lowercase().as_str()))
        {
            continue;
        }
        req = req.header(name.as_str(), value.as_str());
    }
    let has_authorization = headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
    if let Some(userinfo) = target.userinfo.as_deref().filter(|_| !has_authorization) {
        let encoded = base64::engine::general_purpose::STANDARD.encode(userinfo);
        req = req.header(hyper::header::AUTHORIZATION, format!("Basic {encoded}"));
    }
    let req = req.body(Empty::<Bytes>::new()).map_err(|e| format!("net/http: {e}"))?;
    if !target.https {
        return exchange(tcp, req).await;
    }
    let name = rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|e| format!("tls: server name {:?}: {e}", target.host))?;
    let tls = tokio_rustls::TlsConnector::from(verified_tls()?)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    exchange(tls, req).await
}

/// The task driving a connection (and the body read through it): ended when dropped, so a
/// timed-out fetch leaves nothing behind.
#[derive(Debug)]
struct Connection(tokio::task::JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn exchange<IO>(
    io: IO,
    req: Request<Empty<Bytes>>,
) -> Result<(hyper::Response<hyper::body::Incoming>, Connection), String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| e.to_string())?;
    let connection = Connection(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let response = sender.send_request(req).await.map_err(|e| e.to_string())?;
    Ok((response, connection))
}

/// TLS checked against the system's trusted roots, as Go's default client.
fn verified_tls() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>> =
        std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A certificate the store cannot use is skipped, as Go skips it.
                let _ = roots.add(cert);
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
                .map_err(|e| format!("tls: {e}"))
        })
        .clone()
}
