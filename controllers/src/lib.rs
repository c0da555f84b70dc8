//! The controller-manager, as upstream's kube-controller-manager: control loops that make
//! desired state actual, each on shared informers and its own rate-limited work queue, run only
//! by the holder of the `kube-system/kube-controller-manager` Lease.
//!
//! Shared machinery:
//! - [`key`]: what queues hold (`namespace/name`).
//! - [`informers`]: one watch and cache per kind, shared; handlers see old and new objects.
//! - [`workqueue`] + [`rate_limiter`]: dedup, one worker per key, per-key backoff and an overall
//!   bucket; [`worker`] runs N workers over a queue.
//! - [`expectations`]: creates and deletes asked for and not yet seen.
//! - [`selector`], [`pods`]: label selectors; pod readiness, availability, owner references.
//! - [`pod_control`]: pod writes controllers share (upstream's `PodControl`).
//! - [`controller_ref`]: adopting and releasing (one controller per object).
//! - [`ranking`]: which pods to delete first; [`slow_start`]: batches of 1, 2, 4, ….
//! - [`clock`]: the wall clock behind a trait (a fake for tests).
//! - [`client`]: every API call behind a trait; [`events`]: events behind a trait;
//!   [`client_builder`]: which identity each controller acts as (its own service account with
//!   `--use-service-account-credentials`); [`throttle`]: `--kube-api-qps`/`--kube-api-burst` on every request.
//! - [`metrics`]: `workqueue_*` and sync durations; [`server`]: `/healthz` and `/metrics` over
//!   TLS.
//!
//! Controllers (one room each, one row in [`manager::CONTROLLERS`]):
//! - [`replicaset`]: pods for ReplicaSets.
//! - [`deployment`]: ReplicaSets for Deployments (rolling update, recreate, rollback,
//!   conditions).
//! - [`serviceaccount`]: a `default` ServiceAccount in every namespace.
//! - [`rootcacertpublisher`]: the cluster CA as the ConfigMap `kube-root-ca.crt` in every
//!   namespace (what pods' service-account volumes read).
//! - [`gc`]: the garbage collector (a graph over every served kind, found by discovery;
//!   background, foreground and orphan cascades).
//! - [`cronjob`]: Jobs for CronJobs at their scheduled times (concurrency policy, missed
//!   runs, history limits).
//! - [`ttl_after_finished`]: finished Jobs deleted `ttlSecondsAfterFinished` later.
//! - [`job`]: pods for Jobs (completions, parallelism, back-off, deadlines, Indexed, pod
//!   failure policy, `Complete`/`Failed`).
//! - [`daemon`]: one pod of each DaemonSet per eligible node (rolling update, on delete).
//! - [`nodelifecycle`]: silent nodes go Unknown; condition taints; [`nodeapi`]: node writes.
//! - [`tainteviction`]: pods leave nodes with `NoExecute` taints they do not tolerate.
//! - [`podgc`]: finished pods over the threshold, orphaned and unscheduled terminating pods.
//!
//! [`manager`]: flags → config, leader election, informers, the controllers, stop order.

pub mod client;
pub mod client_builder;
pub mod clock;
pub mod controller_ref;
pub mod cronjob;
pub mod daemon;
pub mod deployment;
pub mod events;
pub mod expectations;
pub mod gc;
pub mod informers;
pub mod job;
pub mod key;
pub mod manager;
pub mod metrics;
pub mod nodeapi;
pub mod nodelifecycle;
pub mod pod_control;
pub mod podgc;
pub mod pods;
pub mod ranking;
pub mod rate_limiter;
pub mod replicaset;
pub mod rootcacertpublisher;
pub mod selector;
pub mod server;
pub mod serviceaccount;
pub mod slow_start;
pub mod tainteviction;
pub mod throttle;
pub mod ttl_after_finished;
pub mod worker;
pub mod workqueue;

#[cfg(test)]
pub mod fake;

pub use manager::{Config, RunError, run};
