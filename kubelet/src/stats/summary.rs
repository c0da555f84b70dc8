//! The summary API's types, `stats/v1alpha1` as upstream's `k8s.io/kubelet/pkg/apis/stats`:
//! field names, optional fields and their JSON as upstream writes them. Times are kept to the
//! nanosecond (the resource metrics' timestamps) and written as `metav1.Time` is, RFC 3339 to
//! the second.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time, nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time(pub i64);

impl Time {
    pub fn now() -> Self {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        Self(since.map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)))
    }

    pub fn from_seconds(s: i64) -> Self {
        Self(s.saturating_mul(1_000_000_000))
    }

    /// Milliseconds since the epoch, a Prometheus sample's timestamp.
    pub fn unix_millis(self) -> i64 {
        self.0.div_euclid(1_000_000)
    }

    pub fn unix_seconds_f64(self) -> f64 {
        // Precise to the microsecond for the next centuries; what a gauge of seconds needs.
        #[allow(clippy::cast_precision_loss)]
        let s = self.0 as f64 / 1e9;
        s
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = jiff::Timestamp::from_second(self.0.div_euclid(1_000_000_000))
            .map_err(serde::ser::Error::custom)?;
        // RFC 3339 in whole seconds (`2024-06-19T15:22:45Z`), as Go's `metav1.Time` writes it.
        s.collect_str(&format_args!("{t:.0}"))
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let t: jiff::Timestamp = text.parse().map_err(serde::de::Error::custom)?;
        i64::try_from(t.as_nanosecond()).map(Self).map_err(serde::de::Error::custom)
    }
}

/// The node and its pods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    /// The node's boot time.
    pub start_time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The kubelet's root directory's filesystem (`nodefs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RlimitStats {
    pub time: Time,
    /// The most tasks the kernel allows: the smaller of `kernel.pid_max` and
    /// `kernel.threads-max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxpid: Option<i64>,
    /// The tasks there are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curproc: Option<i64>,
}

/// Which pod, as the runtime's sandbox names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    /// When the pod's sandbox was created.
    pub start_time: Time,
    pub containers: Vec<ContainerStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The pod's processes, as the runtime counts them (CRI `ListPodSandboxStats`).
    #[serde(rename = "process_stats", default, skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
}

/// Upstream's `ProcessStats` (its JSON names are snake case).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    /// When the container was created.
    pub start_time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The container's writable layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    /// The container's log files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: Time,
    /// Core-nanoseconds per second, averaged over the last sample window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    /// Cumulative core-nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    pub time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

impl Summary {
    /// What `only_cpu_and_memory=true` and the resource metrics read: names, start times, CPU
    /// and memory.
    pub fn cpu_and_memory_only(mut self) -> Self {
        self.node.fs = None;
        self.node.runtime = None;
        self.node.rlimit = None;
        for c in self.pods.iter_mut().flat_map(|p| p.containers.iter_mut()) {
            c.rootfs = None;
            c.logs = None;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_metav1_time_and_read_back_to_the_second() {
        let t = Time(1_700_000_000_987_654_321);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2023-11-14T22:13:20Z\"");
        assert_eq!(serde_json::from_str::<Time>(&json).unwrap(), Time(1_700_000_000_000_000_000));
        assert_eq!(t.unix_millis(), 1_700_000_000_987);
        assert!(serde_json::from_str::<Time>("\"yesterday\"").is_err());
    }

    #[test]
    fn optional_figures_are_left_out_and_lists_are_always_written() {
        let s = Summary {
            node: NodeStats { node_name: "n".into(), ..Default::default() },
            pods: vec![PodStats::default()],
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "node": {"nodeName": "n", "startTime": "1970-01-01T00:00:00Z"},
                "pods": [{
                    "podRef": {"name": "", "namespace": "", "uid": ""},
                    "startTime": "1970-01-01T00:00:00Z",
                    "containers": [],
                }],
            })
        );
    }
}
