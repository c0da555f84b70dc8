//! `kubectl-lite`: kubectl's everyday commands, with kubectl's arguments, output and exit codes,
//! in kubectl's shape (a command tree over a factory, a resource builder, printers).
//!
//! - [`flags`]: the flags every command takes; [`config`]: kubeconfig loading rules and overrides.
//! - [`factory`]: what commands are built from: the client, the namespace, discovery.
//! - [`discovery`]: served resources from aggregated discovery, cached on disk; type lookup.
//! - [`builder`]: files, directories, stdin and `TYPE NAME` arguments → objects to act on;
//!   `-l` matched on files' objects (by the `api` crate's `labels`).
//! - [`printers`]: tables from the server's `Table`, `-o
//!   name|json|yaml|kyaml|jsonpath|custom-columns`; what `get --watch` prints one object or
//!   event at a time.
//! - [`describe`]: kubectl's describers, one room per kind, and the generic one.
//! - [`explain`]: `explain`'s rendering of the server's OpenAPI v3 schemas (kubectl's
//!   `plaintext` template), and its word wrapping.
//! - [`cmd`]: one room per command (`create`'s generators in `cmd::create`, `apply --prune` in
//!   `cmd::apply::prune`, `run --attach` in `cmd::run::attached`); [`errors`]: kubectl's error
//!   wording and exit codes.
//! - [`kubelet`]: node mode (`--kubelet URL`): a kubelet's own API, with no API server.
//! - [`duration`]: Go durations in, kubectl's ages out.
//! - [`watch`]: watch bodies as events (also `get --watch`'s); one object followed (list, then
//!   watch) until a step function says done.
//! - [`strategicpatch`]: kubectl apply's three-way strategic merge patch, pure.

pub mod builder;
pub mod cmd;
pub mod config;
pub mod describe;
pub mod discovery;
pub mod duration;
pub mod errors;
pub mod explain;
pub mod factory;
pub mod flags;
pub mod kubelet;
pub mod printers;
pub mod strategicpatch;
pub mod watch;

pub use cmd::run;
