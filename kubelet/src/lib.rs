//! The kubelet: runs pods from its sources through a CRI runtime, as upstream's kubelet does.
//!
//! - [`config`]: pod sources (the static pod directory, the apiserver) and the mux merging
//!   them; the `KubeletConfiguration`.
//! - [`sync_loop`]: one `select!` over config updates, PLEG events, tickers and finished
//!   workers.
//! - [`pod_workers`]: one task per pod; `Syncing → Terminating → Terminated`.
//! - [`prober`]: liveness, readiness and startup probes (exec, httpGet, tcpSocket, grpc).
//! - [`lifecycle`]: pod admission against the node and the admitted pods (`OutOfcpu`, …).
//! - [`active_deadline`]: the `activeDeadlineSeconds` of pods.
//! - [`ordering`]: a pod's first start held until the static pods it names are Ready.
//! - [`runtime`]: kuberuntime, pods through CRI (plan, sandbox, containers, env, images,
//!   pull secrets, backoff).
//! - [`volume`]: pod volumes (emptyDir, hostPath, configMap, secret, downwardAPI, projected),
//!   the atomic writer and tmpfs mounts.
//! - [`objects`]: the ConfigMaps and Secrets pods reference: the apiserver's (one watch per
//!   object) for API pods, the static config directory's for static pods.
//! - [`token`]: service account tokens for projected volumes, cached and refreshed.
//! - [`fieldpath`]: pod fields and container resources by path (env, downward API).
//! - [`credentialprovider`]: image pull credentials: pull secrets' and the node's keyring.
//! - [`pleg`]: relisting the runtime into pod lifecycle events.
//! - [`mirror`]: mirror pods, the apiserver's reflection of static pods.
//! - [`status`]: API pod statuses, the store that keeps them, and their sync to the apiserver.
//! - [`server`]: the HTTP APIs: read-only, and the secure one (logs, exec).
//! - [`logs`]: container log rotation (`containerLogMaxSize`, `containerLogMaxFiles`) through
//!   CRI `ReopenContainerLog`, older files gzipped.
//! - [`metrics`]: the kubelet's own metrics (`/metrics`, `/metrics/probes`), recorded where
//!   the work happens.
//! - [`stats`]: resource usage of the node, its pods and containers (the summary API).
//! - [`node_status`]: the Node object: registration and status.
//! - [`eviction`]: eviction signals, the hard and soft thresholds, and the eviction manager
//!   whose rounds decide the pressure conditions and evict pods; the hard thresholds' reservation
//!   out of allocatable.
//! - [`nodelease`]: the node's heartbeat Lease.
//! - [`cm`]: the container manager: `kubepods`, QoS and pod cgroups sized as upstream; node
//!   allocatable (`systemReserved`, `kubeReserved`).
//! - [`nodeshutdown`]: graceful node shutdown: logind's delay lock, pods stopped by priority
//!   group within `shutdownGracePeriod`.
//! - [`events`]: the local event list.
//! - [`heap`]: glibc's allocator tuned at start and trimmed every 30 s.
//! - [`watchdog`]: systemd notifications (`READY=1`, `STOPPING=1`, `STATUS=`) and the
//!   watchdog pings, sent only while the sync loop goes round.
//! - [`kubelet`]: wiring and the stop path.

pub mod active_deadline;
pub mod cm;
pub mod config;
pub mod credentialprovider;
pub mod events;
pub mod eviction;
pub mod fieldpath;
pub mod heap;
pub mod kubelet;
pub mod lifecycle;
pub mod logs;
pub mod metrics;
pub mod mirror;
pub mod node_status;
pub mod nodelease;
pub mod nodeshutdown;
pub mod objects;
pub mod ordering;
pub mod pleg;
pub mod pod_workers;
pub mod prober;
pub mod runtime;
pub mod server;
pub mod stats;
pub mod status;
pub mod sync_loop;
#[cfg(test)]
mod test_cri;
pub mod token;
pub mod volume;
pub mod watchdog;

pub use kubelet::run;

/// Why the kubelet could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error(transparent)]
    Config(#[from] config::kubelet_config::ConfigError),
    #[error("containerRuntimeEndpoint: {0}")]
    Endpoint(#[from] proto::EndpointError),
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig { path: std::path::PathBuf, source: kube::config::KubeconfigError },
    #[error("kubeconfig {path}: building the API client: {source}")]
    Client { path: std::path::PathBuf, source: kube::Error },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("kubelet API: {0}")]
    Secure(#[from] server::secure::SecureError),
    #[error(transparent)]
    Watchdog(#[from] watchdog::WatchdogError),
    #[error("systemReserved, kubeReserved and evictionHard: {0}")]
    Allocatable(#[from] cm::allocatable::AllocatableError),
    #[error("cgroups: {0}")]
    Cgroups(#[from] cm::manager::StartError),
}
