//! The points of the last two scrapes, as metrics-server's storage: each scrape's [`Batch`]
//! replaces the last one, and the previous point of a node or container is kept only when the
//! new one is later (and, for a container, started before it). So the store holds at most two
//! points per node and container that the latest scrape saw: nodes and pods that are gone are
//! dropped by the next scrape. Usage is the rate between the two points ([`usage`]).

use std::collections::BTreeMap;

/// One reading: cumulative CPU time, working set, when it was read and when the container
/// started (milliseconds since the epoch; 0: unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Point {
    pub start_ms: i64,
    pub timestamp_ms: i64,
    pub cumulative_cpu_nanos: u64,
    pub memory_bytes: u64,
}

impl Point {
    /// Whether the reading has everything usage needs, as metrics-server checks.
    pub fn is_complete(&self) -> bool {
        self.timestamp_ms != 0 && self.cumulative_cpu_nanos != 0 && self.memory_bytes != 0
    }
}

/// A pod by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

/// What one scrape of every node read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub nodes: BTreeMap<String, Point>,
    /// Per pod, its containers' points by container name.
    pub pods: BTreeMap<PodKey, BTreeMap<String, Point>>,
}

impl Batch {
    /// Adds one node's batch; a node or pod already present is kept (metrics-server logs it
    /// as a duplicate).
    pub fn merge(&mut self, other: Batch) {
        for (node, point) in other.nodes {
            self.nodes.entry(node).or_insert(point);
        }
        for (pod, containers) in other.pods {
            self.pods.entry(pod).or_insert(containers);
        }
    }
}

/// Usage between two points: CPU in nanocores, memory in bytes, and the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub cpu_nanocores: u64,
    pub memory_bytes: u64,
    /// The later point's time (milliseconds since the epoch).
    pub timestamp_ms: i64,
    pub window_ms: i64,
}

/// Why two points give no usage (metrics-server's wording).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("unexpected decrease in startTime of node/container")]
    StartTimeDecreased,
    #[error("unexpected decrease in cumulative CPU usage value")]
    CpuDecreased,
    #[error("no time between the two points")]
    NoWindow,
}

/// metrics-server's `resourceUsage`: CPU as the rate of cumulative CPU time over the window,
/// memory as the later point's working set.
pub fn usage(last: &Point, prev: &Point) -> Result<Usage, UsageError> {
    if last.start_ms < prev.start_ms {
        return Err(UsageError::StartTimeDecreased);
    }
    if last.cumulative_cpu_nanos < prev.cumulative_cpu_nanos {
        return Err(UsageError::CpuDecreased);
    }
    let window_ms = last.timestamp_ms - prev.timestamp_ms;
    if window_ms <= 0 {
        return Err(UsageError::NoWindow);
    }
    let used = u128::from(last.cumulative_cpu_nanos - prev.cumulative_cpu_nanos);
    let window = u128::try_from(window_ms).unwrap_or(1);
    let cpu = used * 1000 / window;
    Ok(Usage {
        cpu_nanocores: u64::try_from(cpu).unwrap_or(u64::MAX),
        memory_bytes: last.memory_bytes,
        timestamp_ms: last.timestamp_ms,
        window_ms,
    })
}

/// A pod's usage: its containers' and the earliest timestamp's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    pub containers: Vec<(String, Usage)>,
    pub timestamp_ms: i64,
    pub window_ms: i64,
}

/// metrics-server's minimum age for a fresh container's first rate (from its start).
const FRESH_CONTAINER_MIN_MS: i64 = 10_000;

/// The last two scrapes.
#[derive(Debug, Default)]
pub struct Storage {
    resolution_ms: i64,
    last_nodes: BTreeMap<String, Point>,
    prev_nodes: BTreeMap<String, Point>,
    last_pods: BTreeMap<PodKey, BTreeMap<String, Point>>,
    prev_pods: BTreeMap<PodKey, BTreeMap<String, Point>>,
}

impl Storage {
    pub fn new(resolution: std::time::Duration) -> Storage {
        Storage {
            resolution_ms: i64::try_from(resolution.as_millis()).unwrap_or(i64::MAX),
            ..Storage::default()
        }
    }

    /// Whether node usage can be answered for some node (two scrapes have been stored).
    pub fn nodes_ready(&self) -> bool {
        !self.prev_nodes.is_empty()
    }

    /// How many points are held (both scrapes, nodes and containers).
    pub fn points(&self) -> usize {
        let containers = |m: &BTreeMap<PodKey, BTreeMap<String, Point>>| {
            m.values().map(BTreeMap::len).sum::<usize>()
        };
        self.last_nodes.len()
            + self.prev_nodes.len()
            + containers(&self.last_pods)
            + containers(&self.prev_pods)
    }

    /// Stores a scrape, as metrics-server's node and pod storage do.
    pub fn store(&mut self, batch: Batch) {
        let mut prev_nodes = BTreeMap::new();
        for (name, new) in &batch.nodes {
            if let Some(last) = self.last_nodes.get(name) {
                if new.timestamp_ms > last.timestamp_ms {
                    prev_nodes.insert(name.clone(), *last);
                } else if let Some(prev) =
                    self.prev_nodes.get(name).filter(|p| p.timestamp_ms < new.timestamp_ms)
                {
                    prev_nodes.insert(name.clone(), *prev);
                }
            }
        }
        let mut prev_pods = BTreeMap::new();
        for (pod, containers) in &batch.pods {
            let mut prev_containers = BTreeMap::new();
            for (name, new) in containers {
                let age = new.timestamp_ms - new.start_ms;
                let last = self.last_pods.get(pod).and_then(|c| c.get(name));
                if new.start_ms != 0
                    && new.start_ms < new.timestamp_ms
                    && age < self.resolution_ms
                    && age >= FRESH_CONTAINER_MIN_MS
                {
                    // A fresh container: its first rate is from its start, at zero.
                    let from_start =
                        Point { timestamp_ms: new.start_ms, cumulative_cpu_nanos: 0, ..*new };
                    prev_containers.insert(name.clone(), from_start);
                } else if let Some(last) = last.filter(|l| new.start_ms < l.timestamp_ms) {
                    if new.timestamp_ms > last.timestamp_ms {
                        prev_containers.insert(name.clone(), *last);
                    } else if let Some(prev) = self
                        .prev_pods
                        .get(pod)
                        .and_then(|c| c.get(name))
                        .filter(|p| p.timestamp_ms < new.timestamp_ms)
                    {
                        prev_containers.insert(name.clone(), *prev);
                    }
                }
            }
            if !prev_containers.is_empty() {
                prev_pods.insert(pod.clone(), prev_containers);
            }
        }
        self.last_nodes = batch.nodes;
        self.prev_nodes = prev_nodes;
        self.last_pods = batch.pods;
        self.prev_pods = prev_pods;
    }

    /// A node's usage, once two points of it are held.
    pub fn node(&self, name: &str) -> Option<Usage> {
        let (last, prev) = (self.last_nodes.get(name)?, self.prev_nodes.get(name)?);
        usage(last, prev)
            .inspect_err(|e| tracing::warn!(node = name, error = %e, "skipping node usage metric"))
            .ok()
    }

    /// A pod's usage, once every container it had at the last scrape has two points.
    pub fn pod(&self, key: &PodKey) -> Option<PodUsage> {
        let (last, prev) = (self.last_pods.get(key)?, self.prev_pods.get(key)?);
        let mut containers = Vec::new();
        let mut earliest: Option<Usage> = None;
        for (name, l) in last {
            let p = prev.get(name)?;
            match usage(l, p) {
                Ok(u) => {
                    if earliest.is_none_or(|e| e.timestamp_ms > u.timestamp_ms) {
                        earliest = Some(u);
                    }
                    containers.push((name.clone(), u));
                }
                Err(e) => tracing::warn!(
                    namespace = %key.namespace, pod = %key.name, container = %name, error = %e,
                    "skipping container usage metric"
                ),
            }
        }
        let (timestamp_ms, window_ms) = earliest.map_or((0, 0), |e| (e.timestamp_ms, e.window_ms));
        Some(PodUsage { containers, timestamp_ms, window_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at: i64, cpu_ms: u64, mem: u64) -> Point {
        Point {
            start_ms: 1,
            timestamp_ms: at,
            cumulative_cpu_nanos: cpu_ms * 1_000_000,
            memory_bytes: mem,
        }
    }

    fn key(name: &str) -> PodKey {
        PodKey { namespace: "default".into(), name: name.into() }
    }

    fn batch(at: i64, cpu_ms: u64, pods: &[&str]) -> Batch {
        let mut b = Batch::default();
        b.nodes.insert("n".into(), point(at, cpu_ms, 100));
        for p in pods {
            b.pods.insert(key(p), [("c".to_string(), point(at, cpu_ms, 7))].into());
        }
        b
    }

    #[test]
    fn cpu_is_the_rate_between_two_scrapes_and_memory_the_latest_working_set() {
        // 150 ms of CPU over 1.5 s: a tenth of a core.
        let u = usage(&point(3_000, 300, 9), &point(1_500, 150, 5)).unwrap();
        assert_eq!(
            u,
            Usage {
                cpu_nanocores: 100_000_000,
                memory_bytes: 9,
                timestamp_ms: 3_000,
                window_ms: 1_500
            }
        );
    }

    #[test]
    fn decreasing_counters_restarts_and_empty_windows_give_no_usage() {
        assert_eq!(usage(&point(2, 1, 1), &point(1, 2, 1)), Err(UsageError::CpuDecreased));
        let restarted = Point { start_ms: 0, ..point(2, 3, 1) };
        assert_eq!(usage(&restarted, &point(1, 2, 1)), Err(UsageError::StartTimeDecreased));
        assert_eq!(usage(&point(1, 3, 1), &point(1, 2, 1)), Err(UsageError::NoWindow));
    }

    #[test]
    fn usage_is_answered_only_after_the_second_scrape() {
        let mut s = Storage::new(std::time::Duration::from_secs(15));
        s.store(batch(1_000, 100, &["a"]));
        assert!(!s.nodes_ready());
        assert_eq!((s.node("n"), s.pod(&key("a"))), (None, None));
        s.store(batch(2_000, 300, &["a"]));
        assert!(s.nodes_ready());
        assert_eq!(s.node("n").unwrap().cpu_nanocores, 200_000_000);
        let a = s.pod(&key("a")).unwrap();
        assert_eq!((a.containers.len(), a.window_ms, a.timestamp_ms), (1, 1_000, 2_000));
    }

    #[test]
    fn the_store_holds_only_what_the_last_two_scrapes_saw() {
        let mut s = Storage::new(std::time::Duration::from_secs(15));
        s.store(batch(1_000, 1, &["a", "b"]));
        s.store(batch(2_000, 2, &["a", "b"]));
        assert_eq!(s.points(), 2 + 2 * 2);
        // b is gone, c is new: b is dropped at once, c has no rate yet.
        s.store(batch(3_000, 3, &["a", "c"]));
        assert_eq!(s.points(), 2 + 2 + 1);
        assert!(s.pod(&key("b")).is_none() && s.pod(&key("c")).is_none());
        assert!(s.pod(&key("a")).is_some());
        // A node that no longer answers is dropped with its pods.
        s.store(Batch::default());
        assert_eq!(s.points(), 0);
        assert!(s.node("n").is_none());
    }

    #[test]
    fn an_older_point_keeps_the_previous_one_and_a_restarted_container_starts_over() {
        let mut s = Storage::new(std::time::Duration::from_secs(15));
        s.store(batch(1_000, 1, &["a"]));
        s.store(batch(2_000, 2, &["a"]));
        // The kubelet answered with a reading no newer than the last: the previous is kept.
        s.store(batch(1_500, 2, &["a"]));
        assert_eq!(s.node("n").unwrap().window_ms, 500);
        // A container started after the last reading has no previous point.
        let mut b = batch(4_000, 1, &[]);
        b.pods.insert(
            key("a"),
            [("c".to_string(), Point { start_ms: 3_000, ..point(4_000, 1, 7) })].into(),
        );
        s.store(b);
        assert!(s.pod(&key("a")).is_none());
    }

    #[test]
    fn a_fresh_container_is_rated_from_its_start() {
        let mut s = Storage::new(std::time::Duration::from_secs(60));
        let mut b = Batch::default();
        b.pods.insert(
            key("a"),
            [("c".to_string(), Point { start_ms: 1_000, ..point(21_000, 2_000, 7) })].into(),
        );
        s.store(b);
        let a = s.pod(&key("a")).unwrap();
        assert_eq!(a.containers[0].1.cpu_nanocores, 100_000_000);
        assert_eq!(a.window_ms, 20_000);
    }
}
