//! What every command is built from (kubectl's `cmdutil.Factory`): the client configuration,
//! the client, the namespace, and discovery, each made once and only when a command needs it.

use std::sync::Arc;

use http::{Method, Request};
use http_body_util::BodyExt;
use kube::core::Status;
use tokio::sync::OnceCell;

use crate::config::{self, ClientConfig};
use crate::discovery::{self, AGGREGATED, DiskCache, GroupDiscoveryList, Resource, Resources};
use crate::errors::{CliError, Result};
use crate::flags::ConfigFlags;

pub struct Factory {
    pub flags: ConfigFlags,
    config: OnceCell<ClientConfig>,
    client: OnceCell<kube::Client>,
    resources: OnceCell<Resources>,
}

impl std::fmt::Debug for Factory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factory").field("flags", &self.flags).finish_non_exhaustive()
    }
}

impl Factory {
    pub fn new(flags: ConfigFlags) -> Self {
        Factory {
            flags,
            config: OnceCell::new(),
            client: OnceCell::new(),
            resources: OnceCell::new(),
        }
    }

    pub async fn config(&self) -> Result<&ClientConfig> {
        self.config.get_or_try_init(|| config::client_config(&self.flags)).await
    }

    /// The namespace of namespaced requests.
    pub async fn namespace(&self) -> Result<String> {
        Ok(self.config().await?.namespace.clone())
    }

    /// Whether `-n` was given (objects in files must then agree with it).
    pub fn namespace_explicit(&self) -> bool {
        self.flags.namespace.is_some()
    }

    pub async fn client(&self) -> Result<&kube::Client> {
        self.client
            .get_or_try_init(|| async {
                let cfg = self.config().await?;
                kube::Client::try_from(cfg.kube.clone())
                    .map_err(|e| CliError::Config(e.to_string()))
            })
            .await
    }

    /// The server as kubectl names it in connection errors.
    pub async fn server(&self) -> Result<String> {
        Ok(self.config().await?.server.clone())
    }

    /// Sends a request; a non-2xx answer is the server's `Status` as an error.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
        accept: &str,
    ) -> Result<Vec<u8>> {
        let res = self.response(method, path, body, accept).await?;
        read_body(res).await
    }

    /// GETs `path` and hands its body over as it arrives (logs with `-f`).
    pub async fn stream(
        &self,
        path: &str,
    ) -> Result<impl futures::Stream<Item = std::result::Result<bytes::Bytes, kube::Error>> + use<>>
    {
        self.stream_accepting(path, "*/*").await
    }

    /// [`stream`](Self::stream) asking for `accept` (a watch of `Table` events).
    pub async fn stream_accepting(
        &self,
        path: &str,
        accept: &str,
    ) -> Result<impl futures::Stream<Item = std::result::Result<bytes::Bytes, kube::Error>> + use<>>
    {
        let res = self.response(Method::GET, path, None, accept).await?;
        Ok(res.into_body().into_data_stream())
    }

    /// The response to a request, its `Warning` headers printed; a non-2xx answer is the
    /// server's `Status` as an error.
    async fn response(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
        accept: &str,
    ) -> Result<http::Response<kube::client::Body>> {
        let client = self.client().await?;
        let mut req = Request::builder().method(method.clone()).uri(path).header("Accept", accept);
        let body = match body {
            Some((b, content_type)) => {
                req = req.header("Content-Type", content_type);
                b
            }
            None => Vec::new(),
        };
        let req = req.body(body).map_err(|e| CliError::Usage(e.to_string()))?;
        if self.flags.verbosity >= 6 {
            eprintln!("{method} {}{path}", self.config().await?.kube.cluster_url);
        }
        let server = self.server().await?;
        let res = client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(|e| CliError::from_kube(&server, e))?;
        for w in res.headers().get_all("warning") {
            if let Some(text) = w.to_str().ok().and_then(warning_text) {
                eprintln!("Warning: {text}");
            }
        }
        let status = res.status();
        if status.is_success() {
            return Ok(res);
        }
        let bytes = read_body(res).await?;
        let parsed: Option<Status> =
            serde_json::from_slice(&bytes).ok().filter(|s: &Status| !s.message.is_empty());
        let s = parsed.unwrap_or_else(|| Status {
            code: status.as_u16(),
            message: String::from_utf8_lossy(&bytes).trim().to_string(),
            reason: String::new(),
            ..Status::default()
        });
        Err(CliError::Server(Box::new(s)))
    }

    /// GET as JSON.
    pub async fn get_json(&self, path: &str) -> Result<serde_json::Value> {
        let bytes = self.send(Method::GET, path, None, "application/json").await?;
        serde_json::from_slice(&bytes).map_err(|e| CliError::Unreachable { reason: e.to_string() })
    }

    /// The server's resources: the disk cache when fresh, else discovery (then cached).
    pub async fn resources(&self) -> Result<&Resources> {
        self.resources
            .get_or_try_init(|| async {
                let cache = DiskCache::for_server(&self.server().await?);
                if let Some(r) = cache.as_ref().and_then(DiskCache::read) {
                    return Ok(r);
                }
                let r = self.discover().await?;
                if let Some(c) = &cache {
                    c.write(&r);
                }
                Ok(r)
            })
            .await
    }

    async fn discover(&self) -> Result<Resources> {
        let mut docs = Vec::new();
        for path in ["/api", "/apis"] {
            let bytes = self.send(Method::GET, path, None, AGGREGATED).await?;
            let doc: GroupDiscoveryList = serde_json::from_slice(&bytes)
                .map_err(|e| CliError::Unreachable { reason: format!("{path}: {e}") })?;
            docs.push(doc);
        }
        Ok(Resources::from_aggregated(&docs))
    }

    /// The resource a type argument names; on a miss the cache is refreshed once, as kubectl
    /// does, before the type is declared unknown.
    pub async fn resource(&self, arg: &str) -> Result<Arc<Resource>> {
        let resources = self.resources().await?;
        if let Some(r) = resources.lookup(arg) {
            for other in resources.also_matched(arg) {
                eprintln!(
                    "Warning: short name \"{}\" could also match lower priority resource {other}",
                    arg.to_lowercase()
                );
            }
            return Ok(r);
        }
        let server = self.server().await?;
        let Some(cache) = DiskCache::for_server(&server) else {
            return Err(discovery::unknown(arg));
        };
        if cache.read().is_none() {
            // Just discovered: nothing fresher to ask.
            return Err(discovery::unknown(arg));
        }
        cache.invalidate();
        let fresh = self.discover().await?;
        cache.write(&fresh);
        fresh.lookup(arg).ok_or_else(|| discovery::unknown(arg))
    }

    /// The resource of an object's `apiVersion`/`kind`, refreshing the cache once on a miss.
    pub async fn resource_for_kind(&self, api_version: &str, kind: &str) -> Result<Arc<Resource>> {
        self.kind(api_version, kind).await?.ok_or_else(|| {
            CliError::Usage(format!(
                "resource mapping not found for name: \"\" namespace: \"\" from \"\": {}\nensure CRDs are installed first",
                discovery::no_kind_match(api_version, kind)
            ))
        })
    }

    /// The resource serving `apiVersion`/`kind` exactly, refreshing the cache once on a miss;
    /// `None` if the server serves no such kind.
    pub async fn kind(&self, api_version: &str, kind: &str) -> Result<Option<Arc<Resource>>> {
        self.kind_by(api_version, kind, Resources::for_kind).await
    }

    /// As [`kind`](Self::kind), with the kind also in lower case, as kubectl's RESTMapper
    /// maps a kind it is given (`--prune-allowlist`).
    pub async fn mapping(&self, api_version: &str, kind: &str) -> Result<Option<Arc<Resource>>> {
        self.kind_by(api_version, kind, Resources::mapping).await
    }

    async fn kind_by(
        &self,
        api_version: &str,
        kind: &str,
        find: fn(&Resources, &str, &str) -> Option<Arc<Resource>>,
    ) -> Result<Option<Arc<Resource>>> {
        if let Some(r) = find(self.resources().await?, api_version, kind) {
            return Ok(Some(r));
        }
        let fresh = self.discover().await?;
        if let Some(c) = DiskCache::for_server(&self.server().await?) {
            c.write(&fresh);
        }
        Ok(find(&fresh, api_version, kind))
    }
}

/// A whole body, copied once: each frame appended as it arrives into a buffer sized by the
/// `Content-Length` where the server sent one (a 10,000-row table is megabytes).
async fn read_body(res: http::Response<kube::client::Body>) -> Result<Vec<u8>> {
    let length = res
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    let mut out = Vec::with_capacity(length.min(MAX_PRESIZE) as usize);
    let mut body = res.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| CliError::Unreachable { reason: e.to_string() })?;
        if let Some(data) = frame.data_ref() {
            out.extend_from_slice(data);
        }
    }
    Ok(out)
}

/// The most a body's announced length reserves before any of it arrives.
const MAX_PRESIZE: u64 = 256 << 20;

/// The text of a `Warning` header (`299 - "text"`), as kubectl prints it.
fn warning_text(header: &str) -> Option<String> {
    let rest = header.splitn(3, ' ').nth(2)?;
    let quoted = rest.trim();
    let inner = quoted.strip_prefix('"')?;
    let end = inner.rfind('"')?;
    Some(inner[..end].replace("\\\"", "\"").replace("\\\\", "\\"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_header_gives_its_quoted_text() {
        assert_eq!(warning_text("299 - \"a \\\"b\\\" c\"").as_deref(), Some("a \"b\" c"));
        assert_eq!(warning_text("garbage"), None);
    }
}
