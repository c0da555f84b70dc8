//! `httpGet` probes and hooks, as upstream's `probe/http`: a GET with `User-Agent:
//! kube-probe/<major.minor>` and `Accept: */*` unless the probe sets them, no keep-alive, TLS
//! without verification for `HTTPS`; redirects followed to the same host (at most 10), a
//! redirect to another host ends the probe as a success with a warning; a status from 200 to
//! 399 is healthy; at most 10 KiB of the body is read.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::Outcome;
use super::outcome::{MAX_OUTPUT, bounded_text};
use super::tcp::join_host_port;

/// The `User-Agent` probes send unless they set their own.
pub const USER_AGENT: &str = "kube-probe/1.35";
const MAX_REDIRECTS: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Where an HTTP probe or hook goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// The path and query, starting with `/`.
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Target {
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.scheme.as_str(), join_host_port(&self.host, self.port), self.path)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The response of one request: its status and the first 10 KiB of its body.
#[derive(Debug)]
struct Response {
    status: u16,
    location: Option<String>,
    body: Vec<u8>,
}

/// Probes `target` within `timeout` (the whole exchange, redirects included).
pub async fn probe(target: &Target, timeout: Duration) -> Outcome {
    let url = target.url();
    match tokio::time::timeout(timeout, follow(target.clone())).await {
        Err(_) => Outcome::Failure(format!(
            "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
        Ok(Err(e)) => Outcome::Failure(format!("Get {url:?}: {e}")),
        Ok(Ok((response, terminated))) => {
            let body = bounded_text(&response.body);
            match response.status {
                200..=299 => Outcome::Success(body),
                300..=399 if terminated => {
                    Outcome::Warning(format!("Probe terminated redirects, Response body: {body}"))
                }
                300..=399 => Outcome::Success(body),
                code => Outcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
            }
        }
    }
}

/// Sends the GET as a probe does (redirects included) and returns the final status: for hooks,
/// where only a failed exchange is a failure.
pub async fn status(target: &Target, timeout: Duration) -> Result<u16, String> {
    let url = target.url();
    match tokio::time::timeout(timeout, follow(target.clone())).await {
        Err(_) => Err(format!("Get {url:?}: context deadline exceeded")),
        Ok(Err(e)) => Err(format!("Get {url:?}: {e}")),
        Ok(Ok((response, _))) => Ok(response.status),
    }
}

/// Sends the request and follows same-host redirects; true when a redirect to another host
/// was not followed.
async fn follow(mut target: Target) -> Result<(Response, bool), String> {
    let original_host = target.host.clone();
    for _ in 0..=MAX_REDIRECTS {
        let response = get(&target).await?;
        let Some(location) = response.location.as_deref().filter(|_| is_redirect(response.status))
        else {
            return Ok((response, false));
        };
        let next = redirect_target(&target, location)?;
        if !next.host.eq_ignore_ascii_case(&original_host) {
            return Ok((response, true));
        }
        target = next;
    }
    Err(format!("stopped after {MAX_REDIRECTS} redirects"))
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Where a `Location` header leads from `from`: absolute URLs, absolute paths and relative
/// paths.
fn redirect_target(from: &Target, location: &str) -> Result<Target, String> {
    let mut next = from.clone();
    let absolute = location
        .strip_prefix("http://")
        .map(|r| (Scheme::Http, r))
        .or_else(|| location.strip_prefix("https://").map(|r| (Scheme::Https, r)));
    if let Some((scheme, rest)) = absolute {
        let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
        let default_port = if scheme == Scheme::Https { 443 } else { 80 };
        let (host, port) = split_authority(authority, default_port)
            .ok_or_else(|| format!("redirect to an unusable location {location:?}"))?;
        next.scheme = scheme;
        next.host = host;
        next.port = port;
        next.path = path.to_string();
    } else {
        next.path = redirect_path(&from.path, location);
    }
    Ok(next)
}

/// The path a `Location` that names no host leads to from `base` (a path and query): an
/// absolute path as it is, a relative one beside `base`'s last segment. Shared with the
/// manifest URL's fetch.
pub(crate) fn redirect_path(base: &str, location: &str) -> String {
    if location.starts_with('/') {
        return location.to_string();
    }
    let base = base.split('?').next().unwrap_or("/");
    let dir = base.rsplit_once('/').map_or("", |(d, _)| d);
    format!("{dir}/{location}")
}

fn split_authority(authority: &str, default_port: u16) -> Option<(String, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default_port,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((authority.to_string(), default_port)),
    }
}

/// One GET over a new connection.
async fn get(target: &Target) -> Result<Response, String> {
    let addr = join_host_port(&target.host, target.port);
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("dial tcp {addr}: connect: {e}"))?;
    match target.scheme {
        Scheme::Http => exchange(tcp, target).await,
        Scheme::Https => {
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|e| format!("tls: server name {:?}: {e}", target.host))?;
            let tls = tokio_rustls::TlsConnector::from(insecure_tls())
                .connect(name, tcp)
                .await
                .map_err(|e| format!("tls: {e}"))?;
            exchange(tls, target).await
        }
    }
}

async fn exchange<IO>(io: IO, target: &Target) -> Result<Response, String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| e.to_string())?;
    let mut req = Request::get(target.path.as_str());
    let host = target
        .header("Host")
        .map_or_else(|| join_host_port(&target.host, target.port), str::to_string);
    req = req.header(hyper::header::HOST, host);
    if target.header("User-Agent").is_none() {
        req = req.header(hyper::header::USER_AGENT, USER_AGENT);
    }
    if target.header("Accept").is_none() {
        req = req.header(hyper::header::ACCEPT, "*/*");
    }
    for (name, value) in target.headers.iter().filter(|(n, _)| !n.eq_ignore_ascii_case("Host")) {
        req = req.header(name.as_str(), value.as_str());
    }
    req = req.header(hyper::header::CONNECTION, "close");
    let req = req.body(Empty::<Bytes>::new()).map_err(|e| format!("building the request: {e}"))?;
    let work = async move {
        let response = sender.send_request(req).await.map_err(|e| e.to_string())?;
        read_response(response).await
    };
    let mut work = std::pin::pin!(work);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        out = &mut work => out,
        ended = &mut conn => match ended {
            // The server closed after its answer: what was read is still there.
            Ok(()) => work.await,
            Err(e) => Err(e.to_string()),
        },
    }
}

async fn read_response(response: hyper::Response<Incoming>) -> Result<Response, String> {
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(hyper::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    let mut incoming = response.into_body();
    while body.len() < MAX_OUTPUT {
        match incoming.frame().await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    body.extend_from_slice(&data);
                }
            }
            // A body cut short still leaves the status, which is what is judged.
            Some(Err(_)) => break,
        }
    }
    body.truncate(MAX_OUTPUT);
    Ok(Response { status, location, body })
}

/// Upstream probes `HTTPS` endpoints without verifying their certificates (pods rarely have
/// one for their IP); the connection is only a health signal.
fn insecure_tls() -> Arc<rustls::ClientConfig> {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map(|b| {
                    b.dangerous()
                        .with_custom_certificate_verifier(daemon::tls::AnyServerCert::new(provider))
                        .with_no_client_auth()
                });
            match config {
                Ok(c) => Arc::new(c),
                // The ring provider supports the default versions; this cannot fail.
                Err(_) => Arc::new(
                    rustls::ClientConfig::builder()
                        .with_root_certificates(rustls::RootCertStore::empty())
                        .with_no_client_auth(),
                ),
            }
        })
        .clone()
}

#[cfg(test)]
mod tests;
