//! What several components must agree on, with no IO: the kubelet validates static pods with
//! the same code apiserver-lite uses for API requests.
//!
//! - [`cron`]: CronJob schedules, parsed and stepped as upstream's parser does.
//! - [`decode`]: typed decoding with field paths and unknown-field reporting.
//! - [`defaults`]: pod defaulting as the API server does it.
//! - [`duration`]: Go's `time.Duration` syntax, parsed and printed (config files, CLI flags).
//! - [`restart_backoff`]: a pod's own crash back-off from our annotations, bounded.
//! - [`validation`]: `ValidatePodCreate` with upstream's field paths and messages.
//! - [`quantity`]: resource quantities, parsed exactly.
//! - [`qos`]: the pod QoS class.
//! - [`resources`]: what a pod requests (upstream's `PodRequests`), in millicores and bytes.
//! - [`scheduling`]: whether a pod's node selector and required affinity match a node, and
//!   whether its tolerations tolerate a node's taints (upstream's `component-helpers`).
//! - [`keys`]: well-known label and annotation keys.
//! - [`labels`]: label selectors' text, read and matched as apimachinery's `labels.Parse`.
//! - [`schema`]: how the built-in types' lists and maps merge (list types, merge keys), for
//!   server-side apply, strategic merge patch and kubectl-lite's three-way patch.
//! - [`secret`]: Secret types, their required keys, the size limit of Secrets and ConfigMaps.
//! - [`static_pod`]: static pod naming and UIDs.
//! - [`table`]: kubectl's columns per kind and the `meta.k8s.io/v1` Table around them.

pub mod cron;
pub mod decode;
pub mod defaults;
pub mod duration;
pub mod keys;
pub mod labels;
pub mod qos;
pub mod quantity;
pub mod resources;
pub mod restart_backoff;
pub mod scheduling;
pub mod schema;
pub mod secret;
pub mod static_pod;
pub mod table;
pub mod validation;
