//! Server-side apply and `managedFields`, as upstream's structured-merge-diff and field
//! manager: which manager owns which field of an object, recorded on every write, and the
//! apply operation that merges a manager's intent and reports conflicts.
//!
//! - [`path`]: field paths and their FieldsV1 spelling (`f:`, `k:`, `v:`, `i:`);
//! - [`set`]: sets of paths, FieldsV1 in and out, union, difference, intersection;
//! - [`schema`]: list types, list map keys and map types of the built-in types, the `api`
//!   crate's table (shared with strategic merge patch here and kubectl-lite's apply);
//! - [`typed`]: an object's field set, comparison, merge and pruning;
//! - [`merge`]: the updater: owners after an update or an apply, conflicts;
//! - [`conflict`]: conflicts and upstream's 409 wording;
//! - [`entries`]: `metadata.managedFields` entries in and out;
//! - [`manager`]: the field manager chain every write goes through.

pub mod conflict;
pub mod entries;
pub mod manager;
pub mod merge;
pub mod path;
pub mod set;
pub mod typed;

pub use api::schema;
pub use conflict::Conflicts;
pub use manager::{ApplyError, FieldManager};
