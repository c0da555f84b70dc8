//! Storage: a revisioned key-value log behind [`Backend`] (SQLite embedded by default; etcd
//! later), with the current state and recent history in memory ([`Store`], the watch cache).
//!
//! Revisions are the API's resourceVersions: one counter for the whole store, strictly
//! increasing, never reused across restarts. A write is durable before it is acknowledged.

mod committer;
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
}

/// A durable, revisioned log.
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// Every live key with its latest value, and the highest revision ever written.
    fn load(&self) -> Result<(Vec<Record>, Revision), StorageError>;
    /// Appends `writes` at revisions `first`, `first + 1`, … atomically and durably.
    fn append(&self, first: Revision, writes: &[Write]) -> Result<(), StorageError>;
    /// Forgets history below `revision`, keeping each live key's latest value.
    fn compact(&self, revision: Revision) -> Result<(), StorageError>;
}
