//! apiserver-lite: a Kubernetes API server for small clusters.
//!
//! - [`storage`]: the revisioned store (SQLite backend, in-memory state, watch history).
//! - [`resources`]: the served resource types.
//! - [`request`]: routing and query parameters.
//! - [`selectors`]: label and field selectors.
//! - [`errors`]: `Status` errors as upstream words them.
//! - [`objects`]: decoding, defaults, create and update rules, validation.
//! - [`registry`]: get, list, create, update, delete and watch over the store.

pub mod errors;
pub mod objects;
pub mod registry;
pub mod request;
pub mod resources;
pub mod selectors;
pub mod storage;
