//! `prober_probe_total` and `prober_probe_duration_seconds` (`/metrics/probes`), as upstream's
//! prober manager: each probe worker counts its probes by result and times the successful and
//! unknown ones, under its pod's and container's labels, and deletes its series when it stops.

use super::text::Family;
use super::types::{Counter, DEF_BUCKETS, Histogram, Labeled};

/// A probe's result, as the metric names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    Successful,
    Failed,
    Unknown,
}

impl ProbeOutcome {
    fn label(self) -> &'static str {
        match self {
            Self::Successful => "successful",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}

#[derive(Debug)]
pub struct ProberMetrics {
    pub results: Labeled<Counter>,
    pub duration: Labeled<Histogram>,
}

impl Default for ProberMetrics {
    fn default() -> Self {
        Self {
            results: Labeled::new(
                "prober_probe_total",
                "[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
                &["probe_type", "result", "container", "pod", "namespace", "pod_uid"],
            ),
            duration: Labeled::with_buckets(
                "prober_probe_duration_seconds",
                "[ALPHA] Duration in seconds for a probe response.",
                &["probe_type", "container", "pod", "namespace"],
                DEF_BUCKETS,
            ),
        }
    }
}

/// One worker's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeLabels {
    /// `Liveness`, `Readiness` or `Startup`.
    pub probe_type: &'static str,
    pub container: String,
    pub pod: String,
    pub namespace: String,
    pub pod_uid: String,
}

impl ProbeLabels {
    fn result(&self, outcome: ProbeOutcome) -> [&str; 6] {
        [
            self.probe_type,
            outcome.label(),
            &self.container,
            &self.pod,
            &self.namespace,
            &self.pod_uid,
        ]
    }

    fn duration(&self) -> [&str; 4] {
        [self.probe_type, &self.container, &self.pod, &self.namespace]
    }
}

impl ProberMetrics {
    /// A probe of `labels`' worker ended with `outcome` after `seconds`: counted, and timed
    /// unless it failed (as upstream).
    pub fn record(&self, labels: &ProbeLabels, outcome: ProbeOutcome, seconds: f64) {
        self.results.with(&labels.result(outcome)).inc();
        if outcome != ProbeOutcome::Failed {
            self.duration.with(&labels.duration()).observe(seconds);
        }
    }

    /// The worker stopped: its series go.
    pub fn forget(&self, labels: &ProbeLabels) {
        for outcome in [ProbeOutcome::Successful, ProbeOutcome::Failed, ProbeOutcome::Unknown] {
            self.results.delete(&labels.result(outcome));
        }
        self.duration.delete(&labels.duration());
    }

    pub fn families(&self) -> Vec<Family> {
        vec![self.results.family(), self.duration.family()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::text::encode;

    #[test]
    fn probes_are_counted_by_result_and_forgotten_with_their_worker() {
        let m = ProberMetrics::default();
        let labels = ProbeLabels {
            probe_type: "Readiness",
            container: "app".into(),
            pod: "web".into(),
            namespace: "default".into(),
            pod_uid: "u1".into(),
        };
        m.record(&labels, ProbeOutcome::Successful, 0.002);
        m.record(&labels, ProbeOutcome::Successful, 0.002);
        m.record(&labels, ProbeOutcome::Failed, 1.0);
        let text = encode(m.families());
        assert!(text.contains("# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.\n"), "{text}");
        assert!(text.contains("prober_probe_total{container=\"app\",namespace=\"default\",pod=\"web\",pod_uid=\"u1\",probe_type=\"Readiness\",result=\"successful\"} 2\n"), "{text}");
        assert!(text.contains("result=\"failed\"} 1\n"), "{text}");
        assert!(text.contains("prober_probe_duration_seconds_count{container=\"app\",namespace=\"default\",pod=\"web\",probe_type=\"Readiness\"} 2\n"), "{text}");
        m.forget(&labels);
        assert_eq!(encode(m.families()), "");
    }
}
