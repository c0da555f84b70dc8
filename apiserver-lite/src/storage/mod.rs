//! Storage: the current state and recent history in memory ([`Store`], the watch cache) over
//! a durable source of truth, either
//! - a revisioned key-value log behind [`Backend`] that this server alone writes ([`sqlite`],
//!   embedded, the default; [`committer`] makes writes durable in batches), or
//! - [`etcd`], which several apiservers may share: etcd decides revisions, the store follows it.
//!
//! Revisions are the API's resourceVersions: one counter for the whole store, strictly
//! increasing, never reused across restarts. A write is durable before it is acknowledged.

mod committer;
pub mod etcd;
pub mod memory;
pub mod sqlite;

use bytes::Bytes;

pub use memory::{Event, EventType, Store, Stored, Watch};

pub type Revision = i64;

/// One live key with its latest value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: String,
    pub value: Bytes,
    pub revision: Revision,
}

/// A change to append to the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Put { key: String, value: Bytes },
    Delete { key: String },
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("storage: {what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("storage task failed: {0}")]
    Task(String),
    #[error("storage: the batch holding this write failed to commit: {0}")]
    Batch(std::sync::Arc<StorageError>),
    #[error("storage: shutting down")]
    Closed,
    #[error("etcd ({servers}) is unreachable: {reason}")]
    Unreachable { servers: String, reason: String },
    #[error("etcd ({servers}): {reason}")]
    Etcd { servers: String, reason: String, timed_out: bool },
    #[error("etcd: the value of {key} does not decode: {reason}")]
    Corrupt { key: String, reason: String },
    #[error("storage: no etcd key for {0}")]
    Unmapped(String),
    #[error("storage: {0}")]
    Config(String),
    /// The store did not catch up with etcd in time (a consistent read, or a write's echo).
    #[error("storage: the watch cache did not reach revision {wanted} in time (at {at})")]
    Lagging { wanted: Revision, at: Revision },
}

/// Makes a stored value carry the revision it is stored at (its resourceVersion), as
/// upstream's `APIObjectVersioner`: `Ok(None)` when it already does, `Err` (a reason) when
/// the value is not an object this server can read.
pub type Versioner = fn(&[u8], Revision) -> Result<Option<Bytes>, String>;

/// A durable, revisioned log.
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// Every live key with its latest value, and the highest revision ever written.
    fn load(&self) -> Result<(Vec<Record>, Revision), StorageError>;
    /// Appends `writes` at revisions `first`, `first + 1`, … atomically and durably.
    fn append(&self, first: Revision, writes: &[Write]) -> Result<(), StorageError>;
    /// Forgets history below `revision`, keeping each live key's latest value.
    fn compact(&self, revision: Revision) -> Result<(), StorageError>;
}
