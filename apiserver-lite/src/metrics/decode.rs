//! A kubelet's `/metrics/resource` (Prometheus text format) → one node's [`Batch`], as
//! metrics-server's decoder reads it: `node_cpu_usage_seconds_total` and
//! `node_memory_working_set_bytes` for the node, `container_cpu_usage_seconds_total`,
//! `container_memory_working_set_bytes` and `container_start_time_seconds` (labels
//! `container`, `pod`, `namespace`) per container; every other family is skipped. A sample
//! without a timestamp takes the scrape's time. A node or a pod whose figures are incomplete
//! (no timestamp, or a zero CPU time or working set) is left out, as metrics-server does.

use std::collections::BTreeMap;

use super::storage::{Batch, PodKey, Point};

/// A sample line that is not Prometheus text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed parsing metrics: line {line}: {reason}: {text:?}")]
pub struct DecodeError {
    pub line: usize,
    pub reason: &'static str,
    pub text: String,
}

/// One sample: its family name, labels, value and timestamp (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

impl Sample<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }
}

/// Parses one non-comment line: `name{k="v",…} value [timestamp]`.
pub fn sample(line: &str) -> Result<Sample<'_>, &'static str> {
    let name_end = line.find(|c: char| c == '{' || c.is_ascii_whitespace()).unwrap_or(line.len());
    let name = &line[..name_end];
    let valid_name = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    if !valid_name(name) {
        return Err("invalid metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut s = body;
        loop {
            s = s.trim_start();
            if let Some(after) = s.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = s.find('=').ok_or("a label without a value")?;
            let key = s[..eq].trim();
            if !valid_name(key) || key.contains(':') {
                return Err("invalid label name");
            }
            s = s[eq + 1..].trim_start().strip_prefix('"').ok_or("a label value not quoted")?;
            let mut value = String::new();
            let mut chars = s.char_indices();
            let end = loop {
                match chars.next() {
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c @ ('\\' | '"'))) => value.push(c),
                        _ => return Err("an invalid escape in a label value"),
                    },
                    Some((_, c)) => value.push(c),
                    None => return Err("an unterminated label value"),
                }
            };
            labels.push((key, value));
            s = s[end + 1..].trim_start();
            if let Some(after) = s.strip_prefix(',') {
                s = after;
            } else if !s.starts_with('}') {
                return Err("labels not separated by commas");
            }
        }
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = fields.next().ok_or("a sample without a value")?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().map_err(|_| "a value that is not a number")?,
    };
    let timestamp_ms = match fields.next() {
        Some(t) => Some(t.parse::<i64>().map_err(|_| "a timestamp that is not an integer")?),
        None => None,
    };
    if fields.next().is_some() {
        return Err("text after the timestamp");
    }
    Ok(Sample { name, labels, value, timestamp_ms })
}

/// Seconds (a float) → nanoseconds, as metrics-server's `uint64(value * 1e9)` (negative and
/// non-finite values are 0, so the point is dropped as incomplete).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn nanos(seconds: f64) -> u64 {
    if seconds.is_finite() && seconds > 0.0 { (seconds * 1e9) as u64 } else { 0 }
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 { v as u64 } else { 0 }
}

/// Decodes `text`, scraped from node `node` at `scraped_ms` (milliseconds since the epoch).
pub fn decode(text: &str, node: &str, scraped_ms: i64) -> Result<Batch, DecodeError> {
    let mut node_point = Point::default();
    let mut pods: BTreeMap<PodKey, BTreeMap<String, Point>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let s = sample(line).map_err(|reason| DecodeError {
            line: i + 1,
            reason,
            text: line.chars().take(200).collect(),
        })?;
        let at = s.timestamp_ms.unwrap_or(scraped_ms);
        let container = || -> Option<(PodKey, String)> {
            let key = PodKey {
                namespace: s.label("namespace")?.to_string(),
                name: s.label("pod")?.to_string(),
            };
            Some((key, s.label("container")?.to_string()))
        };
        let mut point = |f: &mut dyn FnMut(&mut Point)| {
            if let Some((pod, c)) = container() {
                f(pods.entry(pod).or_default().entry(c).or_default());
            }
        };
        match s.name {
            "node_cpu_usage_seconds_total" => {
                node_point.cumulative_cpu_nanos = nanos(s.value);
                node_point.timestamp_ms = at;
            }
            "node_memory_working_set_bytes" => {
                node_point.memory_bytes = whole(s.value);
                node_point.timestamp_ms = at;
            }
            "container_cpu_usage_seconds_total" => point(&mut |p| {
                p.cumulative_cpu_nanos = nanos(s.value);
                p.timestamp_ms = at;
            }),
            "container_memory_working_set_bytes" => point(&mut |p| {
                p.memory_bytes = whole(s.value);
                p.timestamp_ms = at;
            }),
            "container_start_time_seconds" => point(&mut |p| {
                p.start_ms = i64::try_from(nanos(s.value) / 1_000_000).unwrap_or(i64::MAX);
            }),
            _ => {}
        }
    }
    let mut batch = Batch::default();
    if node_point.is_complete() {
        batch.nodes.insert(node.to_string(), node_point);
    } else {
        tracing::debug!(node, "incomplete node metrics");
    }
    for (pod, containers) in pods {
        // A container seen only by its start time (not running) is no point at all; any
        // other incomplete container leaves its whole pod out.
        let seen: BTreeMap<String, Point> =
            containers.into_iter().filter(|(_, p)| p.timestamp_ms != 0).collect();
        if seen.is_empty() {
            continue;
        }
        if seen.values().all(Point::is_complete) {
            batch.pods.insert(pod, seen);
        } else {
            tracing::debug!(namespace = %pod.namespace, pod = %pod.name, "incomplete pod metrics");
        }
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBELET: &str = r#"# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="nginx",namespace="default",pod="web"} 9.034 1700000000123
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web"} 1 1700000000123
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="nginx",namespace="default",pod="web"} 2.138112e+06 1700000000123
container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 4096 1700000000123
container_start_time_seconds{container="nginx",namespace="default",pod="web"} 1.7000000005e+09
container_start_time_seconds{container="done",namespace="default",pod="web"} 1.6e+09
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 1234.5 1700000000100
node_memory_working_set_bytes 1.048576e+09 1700000000100
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 10.034 1700000000123
resource_scrape_error 0
"#;

    #[test]
    fn reads_the_node_and_each_running_container_of_a_kubelets_resource_metrics() {
        let b = decode(KUBELET, "node-a", 1).unwrap();
        let n = &b.nodes["node-a"];
        assert_eq!(
            (n.cumulative_cpu_nanos, n.memory_bytes, n.timestamp_ms),
            (1_234_500_000_000, 1_048_576_000, 1_700_000_000_100)
        );
        let web = &b.pods[&PodKey { namespace: "default".into(), name: "web".into() }];
        assert_eq!(web.keys().collect::<Vec<_>>(), ["nginx", "side"], "not the exited one");
        let nginx = &web["nginx"];
        assert_eq!(nginx.cumulative_cpu_nanos, 9_034_000_000);
        assert_eq!(nginx.memory_bytes, 2_138_112);
        assert_eq!(nginx.start_ms, 1_700_000_000_500);
        assert_eq!(nginx.timestamp_ms, 1_700_000_000_123);
    }

    #[test]
    fn samples_without_a_timestamp_take_the_scrape_time() {
        let b =
            decode("node_cpu_usage_seconds_total 2\nnode_memory_working_set_bytes 3\n", "n", 42)
                .unwrap();
        assert_eq!(b.nodes["n"].timestamp_ms, 42);
    }

    #[test]
    fn an_incomplete_node_or_container_is_left_out() {
        let text = "node_cpu_usage_seconds_total 0 5\nnode_memory_working_set_bytes 3 5\n\
            container_cpu_usage_seconds_total{container=\"a\",namespace=\"d\",pod=\"p\"} 1 5\n\
            container_cpu_usage_seconds_total{container=\"b\",namespace=\"d\",pod=\"q\"} 1 5\n\
            container_memory_working_set_bytes{container=\"b\",namespace=\"d\",pod=\"q\"} 7 5\n";
        let b = decode(text, "n", 1).unwrap();
        assert!(b.nodes.is_empty(), "a zero CPU time");
        let names: Vec<&str> = b.pods.keys().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["q"], "p has no working set");
    }

    #[test]
    fn label_values_are_unescaped_and_spacing_is_tolerated() {
        let s = sample(r#"m{ a = "x\"y\\z\n" , b="" } 1.5e3 12"#).unwrap();
        assert_eq!(s.labels, [("a", "x\"y\\z\n".to_string()), ("b", String::new())]);
        assert_eq!((s.value, s.timestamp_ms), (1500.0, Some(12)));
        assert!(sample("m +Inf").unwrap().value.is_infinite());
        assert!(sample("m NaN").unwrap().value.is_nan());
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number_and_reason() {
        for (line, reason) in [
            ("9m 1", "invalid metric name"),
            ("m{a=1} 1", "a label value not quoted"),
            ("m{a=\"1} 1", "an unterminated label value"),
            ("m{a=\"1\" b=\"2\"} 1", "labels not separated by commas"),
            ("m{a=\"\\q\"} 1", "an invalid escape in a label value"),
            ("m", "a sample without a value"),
            ("m one", "a value that is not a number"),
            ("m 1 1.5", "a timestamp that is not an integer"),
            ("m 1 2 3", "text after the timestamp"),
        ] {
            let err = decode(&format!("# ok\n{line}\n"), "n", 0).unwrap_err();
            assert_eq!((err.line, err.reason), (2, reason), "{line}");
        }
        let err = decode("m{a=1} 1", "n", 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed parsing metrics: line 1: a label value not quoted: \"m{a=1} 1\""
        );
    }
}
