//! NodeMetrics and PodMetrics as metrics-server writes them: `metadata` (name, namespace,
//! `creationTimestamp` the time of the answer, the object's labels), `timestamp`, `window`
//! (Go's duration form), and `usage` with CPU in nanocores and memory in bytes, printed as
//! apimachinery's canonical quantities (`cpu` decimal SI, `memory` binary SI).

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::storage::{PodKey, Storage, Usage};

pub const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";

const DECIMAL: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];

/// A quantity of `value × 10^-9` in canonical decimal SI form (`250m`, `12345n`, `2`).
pub fn decimal_nanos(value: u64) -> String {
    if value == 0 {
        return "0".into();
    }
    let (mut v, mut i) = (value, 0);
    while i + 1 < DECIMAL.len() && v % 1000 == 0 {
        v /= 1000;
        i += 1;
    }
    format!("{v}{}", DECIMAL[i])
}

/// A byte count in canonical binary SI form (`120Ki`, `1Gi`; not a multiple of 1024: plain;
/// below 1024: decimal SI, as apimachinery prints it).
pub fn binary_bytes(value: u64) -> String {
    if value < 1024 {
        return decimal_nanos(value.saturating_mul(1_000_000_000));
    }
    let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (mut v, mut i) = (value, 0);
    while i + 1 < suffixes.len() && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    format!("{v}{}", suffixes[i])
}

/// Go's `time.Duration.String()` of a number of milliseconds.
pub fn go_duration_ms(ms: i64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    if ms < 1000 {
        return format!("{sign}{ms}ms");
    }
    let (h, m, s, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let seconds = if frac == 0 {
        format!("{s}s")
    } else {
        let f = format!("{frac:03}");
        format!("{s}.{}s", f.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => format!("{sign}{seconds}"),
        (0, m) => format!("{sign}{m}m{seconds}"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}"),
    }
}

/// A `metav1.Time`: RFC 3339 in seconds, UTC.
pub fn time_ms(ms: i64) -> String {
    let t = Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn usage(u: &Usage) -> Value {
    json!({"cpu": decimal_nanos(u.cpu_nanocores), "memory": binary_bytes(u.memory_bytes)})
}

fn metadata(obj: &Value, namespaced: bool, now: Timestamp) -> Value {
    let m = &obj["metadata"];
    let mut out = Map::new();
    out.insert("name".into(), m["name"].clone());
    if namespaced {
        out.insert("namespace".into(), m["namespace"].clone());
    }
    out.insert("creationTimestamp".into(), json!(time_ms(now.as_millisecond())));
    if m["labels"].as_object().is_some_and(|l| !l.is_empty()) {
        out.insert("labels".into(), m["labels"].clone());
    }
    Value::Object(out)
}

/// The NodeMetrics of `node` (a Node object), once two scrapes of it are held.
pub fn node_metrics(storage: &Storage, node: &Value, now: Timestamp) -> Option<Value> {
    let u = storage.node(node["metadata"]["name"].as_str()?)?;
    Some(json!({
        "kind": "NodeMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": metadata(node, false, now),
        "timestamp": time_ms(u.timestamp_ms),
        "window": go_duration_ms(u.window_ms),
        "usage": usage(&u),
    }))
}

/// The PodMetrics of `pod` (a Pod object), once two scrapes of its containers are held.
pub fn pod_metrics(storage: &Storage, pod: &Value, now: Timestamp) -> Option<Value> {
    let m = &pod["metadata"];
    let key = PodKey {
        namespace: m["namespace"].as_str()?.to_string(),
        name: m["name"].as_str()?.to_string(),
    };
    let u = storage.pod(&key)?;
    let containers: Vec<Value> =
        u.containers.iter().map(|(name, c)| json!({"name": name, "usage": usage(c)})).collect();
    Some(json!({
        "kind": "PodMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": metadata(pod, true, now),
        "timestamp": time_ms(u.timestamp_ms),
        "window": go_duration_ms(u.window_ms),
        "containers": containers,
    }))
}

/// A list of metrics objects (their `kind` and `apiVersion` dropped, as in a typed list).
pub fn list(kind: &str, items: Vec<Value>) -> Value {
    let items: Vec<Value> = items
        .into_iter()
        .map(|mut i| {
            if let Some(o) = i.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            i
        })
        .collect();
    json!({"kind": format!("{kind}List"), "apiVersion": GROUP_VERSION, "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::storage::{Batch, Point};

    #[test]
    fn quantities_print_as_apimachinery_canonicalizes_them() {
        assert_eq!(decimal_nanos(0), "0");
        assert_eq!(decimal_nanos(123_456_789), "123456789n");
        assert_eq!(decimal_nanos(5_000_000), "5m");
        assert_eq!(decimal_nanos(1_500_000_000), "1500m");
        assert_eq!(decimal_nanos(2_000_000_000), "2");
        assert_eq!(decimal_nanos(3_000), "3u");
        assert_eq!(binary_bytes(2_138_112), "2088Ki");
        assert_eq!(binary_bytes(1 << 30), "1Gi");
        assert_eq!(binary_bytes(1_000_001), "1000001");
        assert_eq!(binary_bytes(1000), "1k");
        assert_eq!(binary_bytes(512), "512");
    }

    #[test]
    fn windows_print_as_go_durations_and_times_as_rfc3339() {
        assert_eq!(go_duration_ms(15_003), "15.003s");
        assert_eq!(go_duration_ms(1_500), "1.5s");
        assert_eq!(go_duration_ms(500), "500ms");
        assert_eq!(go_duration_ms(60_000), "1m0s");
        assert_eq!(go_duration_ms(3_690_250), "1h1m30.25s");
        assert_eq!(time_ms(1_700_000_000_999), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn node_and_pod_metrics_carry_the_objects_names_labels_and_usage() {
        let mut s = Storage::new(std::time::Duration::from_secs(15));
        for (at, cpu) in [(1_000, 1_000_000), (2_000, 251_000_000)] {
            let p = Point {
                start_ms: 1,
                timestamp_ms: at,
                cumulative_cpu_nanos: cpu,
                memory_bytes: 1 << 20,
            };
            let mut b = Batch::default();
            b.nodes.insert("n".into(), p);
            let key = PodKey { namespace: "d".into(), name: "web".into() };
            b.pods.insert(key, [("c".to_string(), p)].into());
            s.store(b);
        }
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let node = json!({"metadata": {"name": "n", "labels": {"a": "b"}, "uid": "x"}});
        assert_eq!(
            node_metrics(&s, &node, now).unwrap(),
            json!({
                "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": "n", "creationTimestamp": "2023-11-14T22:13:20Z", "labels": {"a": "b"}},
                "timestamp": "1970-01-01T00:00:02Z", "window": "1s",
                "usage": {"cpu": "250m", "memory": "1Mi"},
            })
        );
        let pod = json!({"metadata": {"name": "web", "namespace": "d"}});
        let m = pod_metrics(&s, &pod, now).unwrap();
        assert_eq!(
            m["metadata"],
            json!({"name": "web", "namespace": "d", "creationTimestamp": "2023-11-14T22:13:20Z"})
        );
        assert_eq!(
            m["containers"],
            json!([{"name": "c", "usage": {"cpu": "250m", "memory": "1Mi"}}])
        );
        assert!(node_metrics(&s, &json!({"metadata": {"name": "other"}}), now).is_none());
        let l = list("PodMetrics", vec![m]);
        assert_eq!((l["kind"].as_str(), l["items"][0].get("kind")), (Some("PodMetricsList"), None));
    }
}
