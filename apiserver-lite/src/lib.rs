//! apiserver-lite: a Kubernetes API server for small clusters.
//!
//! - [`storage`]: the revisioned store (SQLite backend, in-memory state, watch history).

pub mod storage;
