//! kubectl's `metricsutil.TopCmdPrinter`, pure: NodeMetrics and PodMetrics (JSON) → the lines
//! `kubectl top` prints, aligned as its tab writer aligns them (every cell tab-terminated, so
//! every column, the last included, is padded). CPU as `MilliValue()` with `m`, memory as
//! `Value() / 2^20` with `Mi`, node percentages of allocatable (or capacity) truncated as Go's
//! `int64(float64)`; sorted by name (namespace first with `-A`), or by `cpu`/`memory` from
//! the largest; nodes without metrics at the end as `<unknown>`.

use std::collections::BTreeMap;

use api::quantity::Quantity;
use serde_json::Value;

use crate::printers::table::align;

/// `--sort-by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Name,
    Cpu,
    Memory,
}

impl SortBy {
    pub fn parse(s: Option<&str>) -> Result<SortBy, &'static str> {
        match s.unwrap_or_default() {
            "" => Ok(SortBy::Name),
            "cpu" => Ok(SortBy::Cpu),
            "memory" => Ok(SortBy::Memory),
            _ => Err("--sort-by accepts only cpu or memory"),
        }
    }
}

/// CPU and memory in billionths (cores, bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    cpu: i128,
    memory: i128,
}

fn nanos(v: &Value) -> i128 {
    v.as_str().and_then(|s| Quantity::parse(s).ok()).map_or(0, Quantity::nanos)
}

const NANO: i128 = 1_000_000_000;

fn ceil_div(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 { q + 1 } else { q }
}

impl Usage {
    fn of(usage: &Value) -> Usage {
        Usage { cpu: nanos(&usage["cpu"]), memory: nanos(&usage["memory"]) }
    }

    fn plus(self, o: Usage) -> Usage {
        Usage { cpu: self.cpu + o.cpu, memory: self.memory + o.memory }
    }

    fn milli_cpu(self) -> i128 {
        ceil_div(self.cpu, 1_000_000)
    }

    fn memory_bytes(self) -> i128 {
        ceil_div(self.memory, NANO)
    }

    /// The two cells kubectl prints for them.
    fn cells(self) -> [String; 2] {
        [format!("{}m", self.milli_cpu()), format!("{}Mi", self.memory_bytes() / (1024 * 1024))]
    }

    fn sort_key(self, by: SortBy) -> i128 {
        match by {
            SortBy::Cpu => self.milli_cpu(),
            SortBy::Memory => self.memory_bytes(),
            SortBy::Name => 0,
        }
    }
}

/// A pod's usage: its containers' summed.
fn pod_usage(m: &Value) -> Usage {
    containers(m).iter().fold(Usage::default(), |acc, c| acc.plus(Usage::of(&c["usage"])))
}

fn containers(m: &Value) -> Vec<Value> {
    m["containers"].as_array().cloned().unwrap_or_default()
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or_default().to_string()
}

fn namespace(v: &Value) -> String {
    v["metadata"]["namespace"].as_str().unwrap_or_default().to_string()
}

/// Go's `int64(float64(used) / float64(available) * 100)`.
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
fn percent(used_milli: i128, available_milli: i128) -> String {
    let fraction =
        if available_milli == 0 { 0.0 } else { used_milli as f64 / available_milli as f64 * 100.0 };
    format!("{}%", fraction as i64)
}

/// `kubectl top node`: `metrics` (NodeMetrics items) against each node's allocatable (or
/// capacity) by node name.
pub fn nodes(
    metrics: &[Value],
    available: &BTreeMap<String, Value>,
    no_headers: bool,
    by: SortBy,
) -> String {
    if metrics.is_empty() {
        return String::new();
    }
    let mut rows: Vec<(String, Usage)> =
        metrics.iter().map(|m| (name(m), Usage::of(&m["usage"]))).collect();
    match by {
        SortBy::Name => rows.sort_by(|a, b| a.0.cmp(&b.0)),
        _ => rows.sort_by_key(|r| std::cmp::Reverse(r.1.sort_key(by))),
    }
    let mut lines = Vec::new();
    if !no_headers {
        lines.push(cells(&["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]));
    }
    let mut missing: BTreeMap<&String, &Value> = available.iter().collect();
    for (node, u) in rows {
        let [cpu, memory] = u.cells();
        let mut line = vec![node.clone(), cpu];
        let avail = missing.remove(&node);
        if let Some(a) = avail {
            let milli = |k: &str| ceil_div(nanos(&a[k]), 1_000_000);
            line.push(percent(u.milli_cpu(), milli("cpu")));
            line.push(memory);
            line.push(percent(u.memory_bytes() * 1000, milli("memory")));
        } else {
            line.push(memory);
        }
        line.push(String::new());
        lines.push(line);
    }
    for node in missing.keys() {
        let unknown = "<unknown>".to_string();
        lines.push(vec![
            (*node).clone(),
            unknown.clone(),
            unknown.clone(),
            unknown.clone(),
            unknown,
            String::new(),
        ]);
    }
    align(&lines)
}

fn cells(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| (*s).to_string()).collect();
    v.push(String::new());
    v
}

/// What `kubectl top pod` shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodOptions {
    pub containers: bool,
    pub with_namespace: bool,
    pub no_headers: bool,
    pub sum: bool,
}

/// `kubectl top pod`: `metrics` (PodMetrics items).
pub fn pods(metrics: &[Value], o: PodOptions, by: SortBy) -> String {
    if metrics.is_empty() {
        return String::new();
    }
    let mut width = 3;
    let mut lines = Vec::new();
    if !o.no_headers {
        let mut header = Vec::new();
        if o.with_namespace {
            header.push("NAMESPACE");
            width += 1;
        }
        if o.containers {
            header.push("POD");
            width += 1;
        }
        header.extend(["NAME", "CPU(cores)", "MEMORY(bytes)"]);
        lines.push(cells(&header));
    }
    let mut sorted: Vec<&Value> = metrics.iter().collect();
    match by {
        SortBy::Name => sorted.sort_by(|a, b| {
            if o.with_namespace && namespace(a) != namespace(b) {
                namespace(a).cmp(&namespace(b))
            } else {
                name(a).cmp(&name(b))
            }
        }),
        _ => sorted.sort_by_key(|m| std::cmp::Reverse(pod_usage(m).sort_key(by))),
    }
    let prefix = |m: &Value| if o.with_namespace { vec![namespace(m)] } else { Vec::new() };
    for m in &sorted {
        if o.containers {
            let mut cs = containers(m);
            match by {
                SortBy::Name => cs.sort_by_key(name_of),
                _ => cs.sort_by(|a, b| {
                    Usage::of(&b["usage"]).sort_key(by).cmp(&Usage::of(&a["usage"]).sort_key(by))
                }),
            }
            for c in cs {
                let mut line = prefix(m);
                line.push(name(m));
                line.push(name_of(&c));
                line.extend(Usage::of(&c["usage"]).cells());
                line.push(String::new());
                lines.push(line);
            }
        } else {
            let mut line = prefix(m);
            line.push(name(m));
            line.extend(pod_usage(m).cells());
            line.push(String::new());
            lines.push(line);
        }
    }
    if o.sum {
        let total = sorted.iter().fold(Usage::default(), |acc, m| acc.plus(pod_usage(m)));
        let mut line: Vec<String> = vec![String::new(); width - 2];
        line.extend(["________".to_string(), "________".to_string(), String::new()]);
        lines.push(line);
        let mut line: Vec<String> = vec![String::new(); width - 3];
        line.push(String::new());
        line.extend(total.cells());
        line.push(String::new());
        lines.push(line);
    }
    align(&lines)
}

fn name_of(c: &Value) -> String {
    c["name"].as_str().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cpu: &str, memory: &str) -> Value {
        json!({"metadata": {"name": name}, "usage": {"cpu": cpu, "memory": memory}})
    }

    fn pod(ns: &str, name: &str, containers: &[(&str, &str, &str)]) -> Value {
        let cs: Vec<Value> = containers
            .iter()
            .map(|(n, c, m)| json!({"name": n, "usage": {"cpu": c, "memory": m}}))
            .collect();
        json!({"metadata": {"name": name, "namespace": ns}, "containers": cs})
    }

    #[test]
    fn nodes_print_usage_and_percentages_of_allocatable_with_unknown_rows_last() {
        let metrics = [node("b", "250123456n", "1048576Ki"), node("a", "1500m", "512Mi")];
        let available: BTreeMap<String, Value> = [
            ("a".to_string(), json!({"cpu": "2", "memory": "2Gi"})),
            ("b".to_string(), json!({"cpu": "4", "memory": "3000000Ki"})),
            ("c".to_string(), json!({"cpu": "1", "memory": "1Gi"})),
        ]
        .into();
        assert_eq!(
            nodes(&metrics, &available, false, SortBy::Name),
            "NAME   CPU(cores)   CPU(%)      MEMORY(bytes)   MEMORY(%)   \n\
             a      1500m        75%         512Mi           25%         \n\
             b      251m         6%          1024Mi          34%         \n\
             c      <unknown>    <unknown>   <unknown>       <unknown>   \n"
        );
        let by_memory = nodes(&metrics, &BTreeMap::new(), true, SortBy::Memory);
        assert_eq!(by_memory, "b     251m    1024Mi   \na     1500m   512Mi    \n");
        assert_eq!(nodes(&[], &available, false, SortBy::Name), "");
    }

    #[test]
    fn pods_sum_their_containers_and_sort_by_namespace_then_name() {
        let metrics = [
            pod("kube-system", "dns", &[("coredns", "3m", "20Mi")]),
            pod("default", "web", &[("nginx", "1m", "10Mi"), ("side", "500u", "1536Ki")]),
        ];
        let o = PodOptions { with_namespace: true, ..PodOptions::default() };
        assert_eq!(
            pods(&metrics, o, SortBy::Name),
            "NAMESPACE     NAME   CPU(cores)   MEMORY(bytes)   \n\
             default       web    2m           11Mi            \n\
             kube-system   dns    3m           20Mi            \n"
        );
        let o = PodOptions { containers: true, sum: true, ..PodOptions::default() };
        assert_eq!(
            pods(&metrics, o, SortBy::Cpu),
            "POD   NAME      CPU(cores)   MEMORY(bytes)   \n\
             dns   coredns   3m           20Mi            \n\
             web   nginx     1m           10Mi            \n\
             web   side      1m           1Mi             \n"
                .to_string()
                + &" ".repeat(16)
                + "________     ________        \n"
                + &" ".repeat(16)
                + "5m           31Mi            \n"
        );
    }

    #[test]
    fn sort_by_accepts_only_cpu_or_memory() {
        assert_eq!(SortBy::parse(Some("cpu")), Ok(SortBy::Cpu));
        assert_eq!(SortBy::parse(None), Ok(SortBy::Name));
        assert_eq!(SortBy::parse(Some("name")), Err("--sort-by accepts only cpu or memory"));
    }
}
