//! The kubelet's own metrics, as upstream's `pkg/kubelet/metrics` (served at `/metrics`) and the
//! prober's (`/metrics/probes`): upstream's names, help texts with their stability level, types,
//! labels and buckets. Each is recorded where the work happens, with atomic updates; nothing is
//! computed by scanning at scrape time but the process figures, which client_golang reads from
//! `/proc` then too.
//!
//! - [`text`]: the Prometheus text format as client_golang writes it (also `/metrics/resource`'s).
//! - [`types`]: counters, gauges, histograms, and families of them by label values.
//! - [`runtime`]: `kubelet_runtime_operations_*`, the CRI client's observer.
//! - [`http`]: `kubelet_http_*`, both servers' requests.
//! - [`prober`]: `prober_probe_*`, counted by the probe workers.
//! - [`pod_start`]: when pods start, for `kubelet_pod_start_*`.
//! - [`process`]: `process_*` from `/proc/self`.
//!
//! [`KubeletMetrics`] holds them all; one per kubelet, shared by `Arc`.

pub mod http;
pub mod pod_start;
pub mod prober;
pub mod process;
pub mod runtime;
pub mod text;
pub mod types;

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use self::pod_start::PodStarts;
use self::process::ProcessCollector;
use self::text::{Family, Kind};
use self::types::{Counter, DEF_BUCKETS, Gauge, Histogram, Labeled, Plain};

/// Upstream's `podStartupDurationBuckets`.
const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// The `container_state` values of `kubelet_running_containers` (CRI's states, as upstream's
/// `kubecontainer.State` names them).
pub const CONTAINER_STATES: [&str; 4] = ["created", "running", "exited", "unknown"];

/// `kubelet_pod_worker_duration_seconds`'s `operation_type`: a pod's first sync, a later sync,
/// or a kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncType {
    Create,
    Sync,
    Kill,
}

impl SyncType {
    fn label(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Sync => "sync",
            Self::Kill => "kill",
        }
    }
}

/// `kubelet_started_containers_total`'s `container_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerType {
    Container,
    InitContainer,
}

impl ContainerType {
    pub fn label(self) -> &'static str {
        match self {
            Self::Container => "container",
            Self::InitContainer => "init_container",
        }
    }
}

/// Every metric the kubelet serves.
#[derive(Debug)]
pub struct KubeletMetrics {
    pub node_name: Labeled<Gauge>,
    pub running_pods: Plain<Gauge>,
    pub running_containers: Labeled<Gauge>,
    pub pod_start_duration: Plain<Histogram>,
    pub pod_start_sli_duration: Labeled<Histogram>,
    pub pod_worker_duration: Labeled<Histogram>,
    pub pleg_relist_duration: Plain<Histogram>,
    pub pleg_relist_interval: Plain<Histogram>,
    pub pleg_last_seen: Plain<Gauge>,
    pub evictions: Labeled<Counter>,
    pub started_pods: Plain<Counter>,
    pub started_pods_errors: Plain<Counter>,
    pub started_containers: Labeled<Counter>,
    pub started_containers_errors: Labeled<Counter>,
    pub runtime: Arc<runtime::RuntimeOperations>,
    pub http: http::HttpMetrics,
    pub prober: prober::ProberMetrics,
    pub pod_starts: PodStarts,
    process: ProcessCollector,
}

impl KubeletMetrics {
    /// The metrics of the kubelet of node `node`.
    pub fn new(node: &str) -> Self {
        Self::with_process(node, ProcessCollector::default())
    }

    /// As [`Self::new`], the process figures read by `process`.
    pub fn with_process(node: &str, process: ProcessCollector) -> Self {
        let node_name = Labeled::<Gauge>::new(
            "kubelet_node_name",
            "[ALPHA] The node's name. The count is always 1.",
            &["node"],
        );
        node_name.with(&[node]).set(1.0);
        Self {
            node_name,
            running_pods: Plain::new(
                "kubelet_running_pods",
                "[ALPHA] Number of pods that have a running pod sandbox",
            ),
            running_containers: Labeled::new(
                "kubelet_running_containers",
                "[ALPHA] Number of containers currently running",
                &["container_state"],
            ),
            pod_start_duration: Plain::with_buckets(
                "kubelet_pod_start_duration_seconds",
                "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
                POD_START_BUCKETS,
            ),
            pod_start_sli_duration: Labeled::with_buckets(
                "kubelet_pod_start_sli_duration_seconds",
                "[ALPHA] Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
                &["first_with_network"],
                POD_START_BUCKETS,
            ),
            pod_worker_duration: Labeled::with_buckets(
                "kubelet_pod_worker_duration_seconds",
                "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
                &["operation_type"],
                DEF_BUCKETS,
            ),
            pleg_relist_duration: Plain::with_buckets(
                "kubelet_pleg_relist_duration_seconds",
                "[ALPHA] Duration in seconds for relisting pods in PLEG.",
                DEF_BUCKETS,
            ),
            pleg_relist_interval: Plain::with_buckets(
                "kubelet_pleg_relist_interval_seconds",
                "[ALPHA] Interval in seconds between relisting in PLEG.",
                DEF_BUCKETS,
            ),
            pleg_last_seen: Plain::new(
                "kubelet_pleg_last_seen_seconds",
                "[ALPHA] Timestamp in seconds when PLEG was last seen active.",
            ),
            evictions: Labeled::new(
                "kubelet_evictions",
                "[ALPHA] Cumulative number of pod evictions by eviction signal",
                &["eviction_signal"],
            ),
            started_pods: Plain::new(
                "kubelet_started_pods_total",
                "[ALPHA] Cumulative number of pods started",
            ),
            started_pods_errors: Plain::new(
                "kubelet_started_pods_errors_total",
                "[ALPHA] Cumulative number of errors when starting pods",
            ),
            started_containers: Labeled::new(
                "kubelet_started_containers_total",
                "[ALPHA] Cumulative number of containers started",
                &["container_type"],
            ),
            started_containers_errors: Labeled::new(
                "kubelet_started_containers_errors_total",
                "[ALPHA] Cumulative number of errors when starting containers",
                &["container_type", "code"],
            ),
            runtime: Arc::default(),
            http: http::HttpMetrics::default(),
            prober: prober::ProberMetrics::default(),
            pod_starts: PodStarts::default(),
            process,
        }
    }

    /// A relist saw `running_pods` pods with a ready sandbox and `containers` by state.
    pub fn relisted(&self, running_pods: usize, containers: [usize; 4]) {
        self.running_pods.set(float(running_pods));
        for (state, n) in CONTAINER_STATES.iter().zip(containers) {
            self.running_containers.with(&[state]).set(float(n));
        }
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        self.pleg_last_seen.set(now.as_secs_f64());
    }

    /// A pod worker's sync or kill took `seconds`.
    pub fn pod_worker(&self, kind: SyncType, seconds: f64) {
        self.pod_worker_duration.with(&[kind.label()]).observe(seconds);
    }

    /// A pod's status was set: the startup latencies it completes.
    pub fn pod_status(&self, pod: &Pod, was_pending: bool, status: &PodStatus, now: SystemTime) {
        let observed = self.pod_starts.observe(pod, was_pending, status, now);
        if let Some(s) = observed.start {
            self.pod_start_duration.observe(s);
        }
        if let Some((s, first)) = observed.sli {
            let label = if first { "true" } else { "false" };
            self.pod_start_sli_duration.with(&[label]).observe(s);
        }
    }

    /// `/metrics`: the kubelet's metrics and the process's.
    pub fn render(&self) -> String {
        let mut families = vec![
            self.node_name.family(),
            self.running_pods.family(),
            self.running_containers.family(),
            self.pod_start_duration.family(),
            self.pod_start_sli_duration.family(),
            self.pod_worker_duration.family(),
            self.pleg_relist_duration.family(),
            self.pleg_relist_interval.family(),
            self.pleg_last_seen.family(),
            self.evictions.family(),
            self.started_pods.family(),
            self.started_pods_errors.family(),
            self.started_containers.family(),
            self.started_containers_errors.family(),
        ];
        families.extend(self.runtime.families());
        families.extend(self.http.families());
        families.extend(self.process.families());
        text::encode(families)
    }

    /// `/metrics/probes`: the probes' metrics and the process's start time, as upstream's
    /// prober registry (component-base's own start time gauge).
    pub fn render_probes(&self) -> String {
        let mut families = self.prober.families();
        if let Some(start) = self.process.start_time_seconds() {
            let mut f = Family::new(
                "process_start_time_seconds",
                "[ALPHA] Start time of the process since unix epoch in seconds.",
                Kind::Gauge,
            );
            f.push(&[], start, None);
            families.push(f);
        }
        text::encode(families)
    }
}

#[allow(clippy::cast_precision_loss)]
fn float(n: usize) -> f64 {
    n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_kubelet_writes_its_plain_metrics_and_no_empty_vectors() {
        let m = KubeletMetrics::new("node-a");
        let text = m.render();
        assert!(text.contains("# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1.\n# TYPE kubelet_node_name gauge\nkubelet_node_name{node=\"node-a\"} 1\n"), "{text}");
        assert!(
            text.contains("# TYPE kubelet_running_pods gauge\nkubelet_running_pods 0\n"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_pod_start_duration_seconds_bucket{le=\"0.5\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_pod_start_duration_seconds_bucket{le=\"3600\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("kubelet_started_pods_total 0\n"), "{text}");
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"), "{text}");
        for absent in [
            "kubelet_evictions",
            "kubelet_running_containers",
            "kubelet_pod_worker_duration_seconds",
            "kubelet_runtime_operations_total",
        ] {
            assert!(!text.contains(absent), "{absent} has no series yet:\n{text}");
        }
        let probes = m.render_probes();
        assert!(probes.starts_with("# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"), "{probes}");
    }

    #[test]
    fn a_relist_sets_the_running_pods_containers_by_state_and_last_seen() {
        let m = KubeletMetrics::new("n");
        m.relisted(3, [1, 4, 2, 0]);
        let text = m.render();
        assert!(text.contains("kubelet_running_pods 3\n"), "{text}");
        assert!(
            text.contains("kubelet_running_containers{container_state=\"running\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_running_containers{container_state=\"unknown\"} 0\n"),
            "{text}"
        );
        assert!(m.pleg_last_seen.get() > 1.7e9);
    }
}
