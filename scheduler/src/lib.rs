//! The scheduler: watches pods without a node and the nodes, picks a node for each pod with
//! upstream's default filters and scores, and binds it through `pods/binding`, as upstream's
//! kube-scheduler. Only the holder of the `kube-system/kube-scheduler` Lease schedules.
//!
//! - [`resources`]: what a pod requests and a node offers (millicores, bytes), the `api`
//!   crate's, shared with the kubelet's admission.
//! - [`cache`]: nodes with the pods bound or assumed to them (`NodeInfo`).
//! - [`queue`]: activeQ, backoffQ and unschedulable pods, with upstream's backoff.
//! - [`plugins`]: the filters and scores, each a pure function of (pod, node).
//! - [`schedule_one`]: one cycle: filter, score, pick, assume, bind asynchronously.
//! - [`binder`]: `pods/binding`, behind a trait.
//! - [`informers`]: reflectors over pods and nodes feeding the cache and the queue.
//! - [`events`]: `Scheduled`/`FailedScheduling` events and the `PodScheduled` condition.
//! - [`scheduler`]: the wiring and the stop path.

pub mod binder;
pub mod cache;
pub mod events;
pub mod informers;
pub mod plugins;
pub mod queue;
pub use api::resources;
pub mod schedule_one;
pub mod scheduler;

pub use scheduler::{Config, RunError, run};
