//! `kubelet_http_requests_total`, `kubelet_http_requests_duration_seconds` and
//! `kubelet_http_inflight_requests`, as upstream's server metrics: every request to either
//! server, by method (unknown verbs as `other`), path bucket (the first path segment, or
//! `metrics/<name>`, among the routes upstream knows; else `other`), server type (`readonly`
//! or `readwrite`) and whether it is long-running.

use std::sync::Arc;
use std::time::Instant;

use super::text::Family;
use super::types::{Counter, DEF_BUCKETS, Gauge, Histogram, Labeled};

/// Which server a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerType {
    ReadOnly,
    ReadWrite,
}

impl ServerType {
    fn label(self) -> &'static str {
        match self {
            Self::ReadOnly => "readonly",
            Self::ReadWrite => "readwrite",
        }
    }
}

const LABELS: &[&str] = &["method", "path", "server_type", "long_running"];

/// The methods upstream counts by name.
const METHODS: &[&str] = &["OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT"];

/// The path buckets upstream's servers register.
const BUCKETS: &[&str] = &[
    "healthz",
    "pods",
    "stats",
    "metrics",
    "metrics/cadvisor",
    "metrics/probes",
    "metrics/resource",
    "run",
    "exec",
    "attach",
    "portForward",
    "containerLogs",
    "configz",
    "runningpods",
    "logs",
    "debug",
    "pprof",
    "checkpoint",
];

/// Upstream's long-running buckets; `portforward` spelled so, which no bucket matches.
const LONG_RUNNING: &[&str] = &["exec", "attach", "portforward", "debug"];

/// The bucket of `path`: `metrics/<x>` under `/metrics/`, else the first segment.
pub fn path_bucket(path: &str) -> &'static str {
    let mut parts = path.trim_start_matches('/').splitn(3, '/');
    let first = parts.next().unwrap_or_default();
    let root = match (first, parts.next()) {
        ("metrics", Some(second)) => {
            BUCKETS.iter().find(|b| b.strip_prefix("metrics/").is_some_and(|rest| rest == second))
        }
        _ => BUCKETS.iter().find(|b| **b == first),
    };
    root.copied().unwrap_or("other")
}

fn method_bucket(method: &str) -> &'static str {
    METHODS.iter().find(|m| **m == method).copied().unwrap_or("other")
}

#[derive(Debug)]
pub struct HttpMetrics {
    pub requests: Labeled<Counter>,
    pub duration: Labeled<Histogram>,
    pub inflight: Labeled<Gauge>,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        Self {
            requests: Labeled::new(
                "kubelet_http_requests_total",
                "[ALPHA] Number of the http requests received since the server started",
                LABELS,
            ),
            duration: Labeled::with_buckets(
                "kubelet_http_requests_duration_seconds",
                "[ALPHA] Duration in seconds to serve http requests",
                LABELS,
                DEF_BUCKETS,
            ),
            inflight: Labeled::new(
                "kubelet_http_inflight_requests",
                "[ALPHA] Number of the inflight http requests",
                LABELS,
            ),
        }
    }
}

/// A request being served: in flight until dropped, then timed.
#[derive(Debug)]
#[must_use = "the request is in flight until this is dropped"]
pub struct InFlight {
    inflight: Arc<Gauge>,
    duration: Arc<Histogram>,
    started: Instant,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.inflight.add(-1.0);
        self.duration.observe_duration(self.started.elapsed());
    }
}

impl HttpMetrics {
    /// Counts a request to `path` on `server` and holds it in flight.
    pub fn track(&self, method: &str, path: &str, server: ServerType) -> InFlight {
        let bucket = path_bucket(path);
        let long_running = if LONG_RUNNING.contains(&bucket) { "true" } else { "false" };
        let labels = [method_bucket(method), bucket, server.label(), long_running];
        self.requests.with(&labels).inc();
        let inflight = self.inflight.with(&labels);
        inflight.add(1.0);
        InFlight { inflight, duration: self.duration.with(&labels), started: Instant::now() }
    }

    pub fn families(&self) -> Vec<Family> {
        vec![self.requests.family(), self.duration.family(), self.inflight.family()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fall_in_upstream_buckets() {
        for (path, bucket) in [
            ("/metrics", "metrics"),
            ("/metrics/probes", "metrics/probes"),
            ("/metrics/resource/x", "metrics/resource"),
            ("/metrics/nope", "other"),
            ("/pods/", "pods"),
            ("/stats/summary", "stats"),
            ("/exec/ns/pod/c", "exec"),
            ("/portForward/ns/pod", "portForward"),
            ("/manifests", "other"),
            ("/", "other"),
        ] {
            assert_eq!(path_bucket(path), bucket, "{path}");
        }
    }

    #[test]
    fn a_request_is_counted_in_flight_until_done_and_then_timed() {
        let m = HttpMetrics::default();
        let labels = ["GET", "exec", "readwrite", "true"];
        let req = m.track("GET", "/exec/ns/p/c", ServerType::ReadWrite);
        assert_eq!(m.inflight.get(&labels).map(|g| g.get()), Some(1.0));
        drop(req);
        assert_eq!(m.inflight.get(&labels).map(|g| g.get()), Some(0.0));
        assert_eq!(m.duration.get(&labels).map(|h| h.count()), Some(1));
        drop(m.track("BREW", "/portForward/a/b", ServerType::ReadOnly));
        let other = ["other", "portForward", "readonly", "false"];
        assert_eq!(m.requests.get(&other).map(|c| c.get()), Some(1));
    }
}
