//! apiserver-lite: a Kubernetes API server for small clusters.
//!
//! - [`admission`]: what the server changes in (and refuses of) objects before validation
//!   (`DefaultTolerationSeconds`, `ServiceAccount`).
//! - [`audit`]: the audit policy, events per request stage, the rotated audit log.
//! - [`storage`]: the revisioned store: in-memory state and watch history over the embedded
//!   SQLite log or etcd (several apiservers on one etcd cluster).
//! - [`identity`]: this apiserver's identity Lease in `kube-system`.
//! - [`resources`]: the served resource types.
//! - [`request`]: routing and query parameters.
//! - [`selectors`]: label and field selectors.
//! - [`auth`]: client certificates, the token file, service-account tokens, impersonation;
//!   the `--authorization-mode` chain (Node, RBAC with its bootstrap policy, AlwaysAllow).
//! - [`serviceaccount`]: service-account keys, tokens and claims, `serviceaccounts/token`, the
//!   issuer's discovery documents.
//! - [`certs`]: the PKI made on first start and the admin kubeconfig.
//! - [`discovery`]: version, legacy and aggregated discovery.
//! - [`openapi`]: the OpenAPI v3 documents: each kind's operations and schema (`kubectl
//!   explain`).
//! - [`table`]: `as=Table` responses with kubectl's columns.
//! - [`http`]: requests to responses; [`server`]: TLS and connections.
//! - [`errors`]: `Status` errors as upstream words them.
//! - [`kinds`]: each kind's strategy: decoding, defaults, create and update rules, validation,
//!   field selectors, Table printer, scale and delete behaviour.
//! - [`objects`]: the lifecycle every kind shares, and the kinds' rules the strategies call.
//! - [`protobuf`]: protobuf request bodies from kubectl's typed clients.
//! - [`patch`]: merge, JSON and strategic merge patches.
//! - [`managedfields`]: server-side apply and `managedFields`: field sets, the merge, owners and
//!   conflicts.
//! - [`list`]: list options, paging over one snapshot, which revision a list reads.
//! - [`registry`]: get, list, create, update, delete and watch over the store.
//! - [`reviews`]: `auth can-i` (and `--list`), SubjectAccessReview, TokenReview and `auth whoami`
//!   answered, never stored.
//! - [`binding`]: `pods/binding`, assigning a pod to a node.
//! - [`eviction`]: `pods/eviction`, a pod deleted on request (no disruption budgets are served).
//! - [`metrics`]: `metrics.k8s.io` (`kubectl top`): kubelets' resource metrics scraped, usage
//!   as metrics-server computes it.

pub mod admission;
pub mod audit;
pub mod auth;
pub mod binding;
pub mod certs;
pub mod discovery;
pub mod errors;
pub mod eviction;
pub mod http;
pub mod identity;
pub mod kinds;
pub mod list;
pub mod managedfields;
pub mod metrics;
pub mod objects;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod request;
pub mod resources;
pub mod reviews;
pub mod selectors;
pub mod server;
pub mod serviceaccount;
pub mod storage;
pub mod table;
