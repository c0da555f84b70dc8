//! The etcd v3 backend: etcd holds the objects and decides revisions; this server's [`Store`]
//! is a cache of it, loaded at start and kept current by one etcd watch (upstream's `etcd3`
//! storage behind its `cacher`).
//!
//! - this file: connecting ([`EtcdConfig`]), and [`Remote`], the reads and conditional writes;
//! - [`layout`]: upstream's key layout, mapped to the store's keys;
//! - [`follow`]: the watch that applies etcd's events to the cache, in revision order;
//! - [`history`]: the events before the load that etcd still keeps, so watches resume across
//!   an apiserver's restart;
//! - [`write`]: `Store::mutate` over etcd: decide on the cached value, commit with a
//!   transaction conditioned on its revision, decide again on conflict;
//! - [`compact`]: periodic compaction, one apiserver at a time.
//!
//! Several apiservers may share one etcd: each writes through transactions and sees every
//! write, its own and the others', through its watch, so all serve the same objects at the same
//! revisions.
//!
//! [`Store`]: super::Store

pub mod compact;
pub mod follow;
pub mod history;
pub mod layout;
pub mod write;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{Certificate, Client, ConnectOptions, GetOptions, Identity, TlsOptions};

pub use layout::KeyLayout;

use super::{Record, Revision, StorageError, Stored, Versioner};

/// How long connecting, and each request, may take before etcd counts as unreachable.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The marker's key under the prefix (see [`Remote::mark`]).
pub const MARKER: &str = "apiserver-lite/marker";
/// Attempts of a request while members answer `Unavailable` (one down of three: the chance
/// that every attempt reaches it is 1 in 3^7).
const UNAVAILABLE_ATTEMPTS: usize = 7;
/// Keys read per request while loading (bounded messages, as upstream's paged lists).
const LOAD_PAGE: i64 = 1000;
/// The largest response accepted from etcd (an object is at most 1.5 MiB in etcd; a page of
/// them more).
pub(crate) const MAX_MESSAGE: usize = 256 << 20;

/// The etcd flags: `--etcd-servers`, `--etcd-prefix`, `--etcd-cafile/certfile/keyfile`.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    pub servers: Vec<String>,
    pub prefix: String,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// etcd as this server reads and writes it.
#[derive(Clone)]
pub struct Remote {
    client: Client,
    pub(crate) layout: Arc<KeyLayout>,
    versioner: Versioner,
    /// The endpoints, for messages.
    servers: String,
    /// The marker's etcd key (see [`Remote::mark`]).
    marker: String,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("servers", &self.servers).finish_non_exhaustive()
    }
}

/// The outcome of a conditional write.
#[derive(Debug)]
pub enum Committed {
    /// Written at this revision.
    At(Revision),
    /// The key had changed: its value now (`None`: absent), to decide on again.
    Conflict(Option<Stored>),
}

impl Remote {
    /// Connects and checks that etcd answers (a read of the prefix); an unreachable endpoint
    /// fails here, naming the endpoints and the reason.
    pub async fn connect(
        config: &EtcdConfig,
        layout: KeyLayout,
        versioner: Versioner,
    ) -> Result<Self, StorageError> {
        let servers = config.servers.join(",");
        let unreachable =
            |reason: String| StorageError::Unreachable { servers: servers.clone(), reason };
        let mut options = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(10), REQUEST_TIMEOUT)
            // A member cut off from the others answers nothing rather than stale data.
            .with_require_leader(true);
        if let Some(tls) = tls_options(config)? {
            options = options.with_tls(tls);
        }
        let endpoints: Vec<String> = config.servers.iter().map(|s| endpoint(s)).collect();
        let client = Client::connect(&endpoints, Some(options))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let marker = format!("{}{MARKER}", layout.etcd_prefix());
        let layout = Arc::new(layout);
        let me = Self { client, layout, versioner, servers: servers.clone(), marker };
        me.current_revision().await.map_err(|e| unreachable(e.to_string()))?;
        Ok(me)
    }

    pub(crate) fn error(&self, e: etcd_client::Error) -> StorageError {
        let (reason, timed_out) = match &e {
            // tonic's own text carries the whole source chain; the code and message suffice.
            etcd_client::Error::GRpcStatus(s) => (
                format!("{} ({:?})", s.message(), s.code()),
                s.code() == tonic::Code::DeadlineExceeded,
            ),
            other => (other.to_string(), false),
        };
        StorageError::Etcd { servers: self.servers.clone(), reason, timed_out }
    }

    /// Runs an etcd request again (a few times, briefly apart) while it fails as `Unavailable`:
    /// the client balances over every endpoint, and a request that went to a member that is
    /// down never reached etcd, so another member is tried (as etcd's Go client does).
    async fn retrying<T, F, Fut>(&self, mut request: F) -> Result<T, StorageError>
    where
        F: FnMut(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let mut pause = Duration::from_millis(20);
        for _ in 1..UNAVAILABLE_ATTEMPTS {
            match request(self.client.clone()).await {
                Err(e) if unavailable(&e) => {
                    tracing::debug!(error = %e, "etcd: a member is unavailable; trying again");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                done => return done.map_err(|e| self.error(e)),
            }
        }
        request(self.client.clone()).await.map_err(|e| self.error(e))
    }

    /// Writes the marker (a key under the prefix no resource serves, so no store holds it) and
    /// returns its revision: its event, on any watch of the prefix, comes after every event
    /// before it. How a reader knows it has seen everything up to a revision.
    pub async fn mark(&self) -> Result<Revision, StorageError> {
        let key = self.marker.clone();
        let r = self
            .retrying(|mut c| {
                let key = key.clone();
                async move { c.put(key, "", None).await }
            })
            .await?;
        Ok(r.header().map_or(0, etcd_client::ResponseHeader::revision))
    }

    /// The store key's etcd key.
    fn etcd_key(&self, key: &str) -> Result<String, StorageError> {
        self.layout.to_etcd(key).ok_or_else(|| StorageError::Unmapped(key.to_string()))
    }

    /// etcd's current revision (a linearizable read: the leader's).
    pub async fn current_revision(&self) -> Result<Revision, StorageError> {
        // Any linearizable read answers with the revision; one key (the marker's) costs etcd
        // the least (a count of the whole prefix would walk every key).
        let key = self.marker.clone();
        let r = self
            .retrying(|mut c| {
                let key = key.clone();
                async move { c.get(key, Some(GetOptions::new().with_keys_only())).await }
            })
            .await?;
        Ok(r.header().map_or(0, etcd_client::ResponseHeader::revision))
    }

    /// Every object under the prefix, read in pages at one revision, with that revision.
    /// Keys that are not this server's, and values that do not decode, are reported and
    /// skipped.
    pub async fn load(&self) -> Result<(Vec<Record>, Revision), StorageError> {
        let prefix = self.layout.etcd_prefix();
        let end = prefix_end(prefix.as_bytes());
        let mut records = Vec::new();
        let mut from = prefix.clone().into_bytes();
        let mut at = 0;
        loop {
            let mut options = GetOptions::new().with_range(end.clone()).with_limit(LOAD_PAGE);
            if at != 0 {
                options = options.with_revision(at);
            }
            let r = self
                .retrying(|c| {
                    let (from, options) = (from.clone(), options.clone());
                    async move {
                        let mut kv = c.kv_client().max_decoding_message_size(MAX_MESSAGE);
                        kv.get(from, Some(options)).await
                    }
                })
                .await?;
            if at == 0 {
                at = r.header().map_or(0, etcd_client::ResponseHeader::revision);
            }
            for item in r.kvs() {
                if let Some(stored) = self.decode(item.key(), item.value(), item.mod_revision()) {
                    records.push(Record {
                        key: stored.0,
                        value: stored.1.value,
                        revision: stored.1.revision,
                    });
                }
            }
            match r.kvs().last() {
                Some(last) if r.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => break,
            }
        }
        Ok((records, at))
    }

    /// A value from etcd as the store keeps it: under its store key, carrying its revision.
    /// `None` (reported) for a key that is not ours or a value that does not decode.
    pub(crate) fn decode(
        &self,
        key: &[u8],
        value: &[u8],
        revision: Revision,
    ) -> Option<(String, Stored)> {
        let Some(store_key) = self.layout.from_etcd(key) else {
            tracing::debug!(key = %String::from_utf8_lossy(key), "etcd: a key this server does not serve; skipped");
            return None;
        };
        match self.stored(value, revision) {
            Ok(stored) => Some((store_key, stored)),
            Err(reason) => {
                tracing::warn!(key = %String::from_utf8_lossy(key), %reason, "etcd: a value that does not decode; skipped");
                None
            }
        }
    }

    /// The key's value now, read from etcd (not the cache).
    pub async fn get(&self, key: &str) -> Result<Option<Stored>, StorageError> {
        let etcd_key = self.etcd_key(key)?;
        let r = self
            .retrying(|mut c| {
                let k = etcd_key.clone();
                async move { c.get(k, None).await }
            })
            .await?;
        self.first(key, r.kvs())
    }

    fn first(
        &self,
        key: &str,
        kvs: &[etcd_client::KeyValue],
    ) -> Result<Option<Stored>, StorageError> {
        let Some(kv) = kvs.first() else { return Ok(None) };
        self.stored(kv.value(), kv.mod_revision())
            .map(Some)
            .map_err(|reason| StorageError::Corrupt { key: key.to_string(), reason })
    }

    /// A value read from etcd, carrying the revision it is at; `Err` (why) if it does not
    /// decode.
    fn stored(&self, value: &[u8], revision: Revision) -> Result<Stored, String> {
        let versioned = (self.versioner)(value, revision)?;
        let value = versioned.unwrap_or_else(|| Bytes::copy_from_slice(value));
        Ok(Stored { value, revision })
    }

    /// Writes `value` (or deletes, for `None`) if the key is still at `expected` (`None`:
    /// absent); else returns what it is now.
    pub async fn commit(
        &self,
        key: &str,
        expected: Option<Revision>,
        value: Option<Bytes>,
    ) -> Result<Committed, StorageError> {
        use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
        let etcd_key = self.etcd_key(key)?;
        let condition = match expected {
            Some(rev) => Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, rev),
            None => Compare::create_revision(etcd_key.clone(), CompareOp::Equal, 0),
        };
        let then = match value {
            Some(v) => TxnOp::put(etcd_key.clone(), v.to_vec(), None),
            None => TxnOp::delete(etcd_key.clone(), None),
        };
        let txn =
            Txn::new().when([condition]).and_then([then]).or_else([TxnOp::get(etcd_key, None)]);
        let r = self
            .retrying(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        if r.succeeded() {
            return Ok(Committed::At(r.header().map_or(0, etcd_client::ResponseHeader::revision)));
        }
        for op in r.op_responses() {
            if let TxnOpResponse::Get(g) = op {
                return Ok(Committed::Conflict(self.first(key, g.kvs())?));
            }
        }
        Ok(Committed::Conflict(None))
    }

    /// `value` as stored at `revision` (its resourceVersion set to it).
    pub(crate) fn versioned(&self, value: &Bytes, revision: Revision) -> Bytes {
        match (self.versioner)(value, revision) {
            Ok(Some(v)) => v,
            Ok(None) | Err(_) => value.clone(),
        }
    }

    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    pub(crate) fn servers(&self) -> &str {
        &self.servers
    }
}

/// A request that never reached a working member (connection refused, no leader).
fn unavailable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => s.code() == tonic::Code::Unavailable,
        etcd_client::Error::TransportError(_) => true,
        _ => false,
    }
}

/// A URL as tonic takes it (`http://host:port`; a bare `host:port` is plain HTTP).
fn endpoint(s: &str) -> String {
    if s.contains("://") { s.to_string() } else { format!("http://{s}") }
}

/// The first key after every key with this prefix (etcd's range end for a prefix).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn tls_options(config: &EtcdConfig) -> Result<Option<TlsOptions>, StorageError> {
    let read = |what: &str, path: &PathBuf| {
        std::fs::read(path).map_err(|source| StorageError::Io {
            what: format!("reading {what} {}", path.display()),
            source,
        })
    };
    let https = config.servers.iter().any(|s| s.starts_with("https://"));
    if !https && config.ca_file.is_none() && config.cert_file.is_none() {
        return Ok(None);
    }
    let mut tls = TlsOptions::new();
    match &config.ca_file {
        Some(ca) => tls = tls.ca_certificate(Certificate::from_pem(read("--etcd-cafile", ca)?)),
        None => {
            return Err(StorageError::Config(
                "https:// etcd endpoints need --etcd-cafile (the CA that signs etcd's certificate)"
                    .into(),
            ));
        }
    }
    match (&config.cert_file, &config.key_file) {
        (Some(cert), Some(key)) => {
            tls = tls.identity(Identity::from_pem(
                read("--etcd-certfile", cert)?,
                read("--etcd-keyfile", key)?,
            ));
        }
        (None, None) => {}
        _ => {
            return Err(StorageError::Config(
                "--etcd-certfile and --etcd-keyfile go together".into(),
            ));
        }
    }
    Ok(Some(tls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_after_its_last_key() {
        assert_eq!(prefix_end(b"/registry/"), b"/registry0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), [0]);
    }

    #[test]
    fn bare_endpoints_are_plain_http() {
        assert_eq!(endpoint("127.0.0.1:2379"), "http://127.0.0.1:2379");
        assert_eq!(endpoint("https://e:2379"), "https://e:2379");
    }
}
