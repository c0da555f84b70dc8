//! Server-side apply and `managedFields`, as upstream's structured-merge-diff and field
//! manager: which manager owns which field of an object.
//!
//! - [`path`]: field paths and their FieldsV1 spelling (`f:`, `k:`, `v:`, `i:`);
//! - [`set`]: sets of paths, FieldsV1 in and out, union, difference, intersection.

pub mod path;
pub mod set;
