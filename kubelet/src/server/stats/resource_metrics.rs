//! `/metrics/resource`, as upstream's resource metrics collector: the node's, each pod's and
//! each running container's CPU time and working set, and the containers' start times, from a
//! CPU-and-memory summary, under upstream's names, help texts (with their stability level) and
//! labels, each sample stamped with its reading's time. A summary that could not be made gives
//! `resource_scrape_error 1` and nothing else.

use crate::metrics::text::{Family, Kind, encode};
use crate::stats::summary::{CpuStats, MemoryStats, Summary};

const NANOS: f64 = 1e9;

#[allow(clippy::cast_precision_loss)]
fn seconds(ns: u64) -> f64 {
    ns as f64 / NANOS
}

#[allow(clippy::cast_precision_loss)]
fn float(v: u64) -> f64 {
    v as f64
}

fn cpu_sample(f: &mut Family, labels: &[(&'static str, &str)], cpu: Option<&CpuStats>) {
    if let Some((c, total)) = cpu.and_then(|c| Some((c, c.usage_core_nano_seconds?))) {
        f.push(labels, seconds(total), Some(c.time.unix_millis()));
    }
}

fn memory_sample(f: &mut Family, labels: &[(&'static str, &str)], memory: Option<&MemoryStats>) {
    if let Some((m, ws)) = memory.and_then(|m| Some((m, m.working_set_bytes?))) {
        f.push(labels, float(ws), Some(m.time.unix_millis()));
    }
}

/// The exposition for `summary`, or for a scrape that failed (`None`).
pub fn render(summary: Option<&Summary>) -> String {
    let mut node_cpu = Family::new(
        "node_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
        Kind::Counter,
    );
    let mut node_memory = Family::new(
        "node_memory_working_set_bytes",
        "[STABLE] Current working set of the node in bytes",
        Kind::Gauge,
    );
    let mut container_cpu = Family::new(
        "container_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
        Kind::Counter,
    );
    let mut container_memory = Family::new(
        "container_memory_working_set_bytes",
        "[STABLE] Current working set of the container in bytes",
        Kind::Gauge,
    );
    let mut container_start = Family::new(
        "container_start_time_seconds",
        "[STABLE] Start time of the container since unix epoch in seconds",
        Kind::Gauge,
    );
    let mut pod_cpu = Family::new(
        "pod_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
        Kind::Counter,
    );
    let mut pod_memory = Family::new(
        "pod_memory_working_set_bytes",
        "[STABLE] Current working set of the pod in bytes",
        Kind::Gauge,
    );
    let mut scrape_error = Family::new(
        "resource_scrape_error",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
        Kind::Gauge,
    );
    scrape_error.push(&[], if summary.is_some() { 0.0 } else { 1.0 }, None);
    if let Some(s) = summary {
        cpu_sample(&mut node_cpu, &[], s.node.cpu.as_ref());
        memory_sample(&mut node_memory, &[], s.node.memory.as_ref());
        for p in &s.pods {
            let (pod, namespace) = (p.pod_ref.name.as_str(), p.pod_ref.namespace.as_str());
            for c in &p.containers {
                let labels =
                    [("container", c.name.as_str()), ("pod", pod), ("namespace", namespace)];
                if c.start_time.0 >= 1_000_000_000 {
                    container_start.push(&labels, c.start_time.unix_seconds_f64(), None);
                }
                cpu_sample(&mut container_cpu, &labels, c.cpu.as_ref());
                memory_sample(&mut container_memory, &labels, c.memory.as_ref());
            }
            let labels = [("pod", pod), ("namespace", namespace)];
            cpu_sample(&mut pod_cpu, &labels, p.cpu.as_ref());
            memory_sample(&mut pod_memory, &labels, p.memory.as_ref());
        }
    }
    encode(vec![
        node_cpu,
        node_memory,
        container_cpu,
        container_memory,
        container_start,
        pod_cpu,
        pod_memory,
        scrape_error,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summary::{ContainerStats, NodeStats, PodReference, PodStats, Time};

    const T: i64 = 1_700_000_000_123_000_000;

    fn cpu(ns: u64) -> Option<CpuStats> {
        Some(CpuStats { time: Time(T), usage_nano_cores: None, usage_core_nano_seconds: Some(ns) })
    }

    fn memory(ws: u64) -> Option<MemoryStats> {
        Some(MemoryStats { time: Time(T), working_set_bytes: Some(ws), ..Default::default() })
    }

    #[test]
    fn the_node_pods_and_containers_under_upstreams_names_and_labels() {
        let s = Summary {
            node: NodeStats {
                node_name: "n".into(),
                cpu: cpu(357_354_910_000),
                memory: memory(1_616_273_408),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "web".into(),
                    namespace: "default".into(),
                    uid: "u".into(),
                },
                start_time: Time(T),
                containers: vec![
                    ContainerStats {
                        name: "nginx".into(),
                        start_time: Time(1_700_000_000_500_000_000),
                        cpu: cpu(9_034_000_000),
                        memory: memory(2_138_112),
                        ..Default::default()
                    },
                    // No readings yet: no samples, but its start time (nanoseconds over 1e9,
                    // rounded as Go's float64 division rounds).
                    ContainerStats {
                        name: "new".into(),
                        start_time: Time(T),
                        ..Default::default()
                    },
                ],
                cpu: cpu(9_100_000_000),
                memory: memory(3_000_000),
                process_stats: None,
            }],
        };
        let text = render(Some(&s));
        assert_eq!(
            text,
            "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container=\"nginx\",namespace=\"default\",pod=\"web\"} 9.034 1700000000123
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container=\"nginx\",namespace=\"default\",pod=\"web\"} 2.138112e+06 1700000000123
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container=\"new\",namespace=\"default\",pod=\"web\"} 1.7000000001230001e+09
container_start_time_seconds{container=\"nginx\",namespace=\"default\",pod=\"web\"} 1.7000000005e+09
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 357.35491 1700000000123
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.616273408e+09 1700000000123
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 9.1 1700000000123
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} 3e+06 1700000000123
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
"
        );
    }

    #[test]
    fn a_failed_scrape_is_only_the_error_gauge_at_one() {
        assert_eq!(
            render(None),
            "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\nresource_scrape_error 1\n"
        );
    }
}
