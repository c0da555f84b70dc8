//! The pieces every describer prints the same way: labels, annotations, taints and
//! tolerations as multi-line fields, selectors, times (RFC 1123 with a numeric zone, in the
//! local zone) and ages, and Go's `%v` of unstructured values.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value;

use super::Clock;
use super::writer::{LEVEL_0, PrefixWriter};

/// Annotations longer than this are folded onto lines of their own.
const MAX_ANNOTATION_LEN: usize = 140;

/// kubectl never shows the last-applied configuration.
const SKIPPED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// A string map (labels, annotations, node selectors), sorted.
pub fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect()
        })
        .unwrap_or_default()
}

/// `Title:\tk=v` with each further label on a line of its own (`printLabelsMultiline`).
pub fn labels_multiline(w: &mut PrefixWriter, title: &str, labels: Option<&Value>) {
    labels_multiline_indent(w, "", title, "\t", labels);
}

pub fn labels_multiline_indent(
    w: &mut PrefixWriter,
    initial: &str,
    title: &str,
    inner: &str,
    labels: Option<&Value>,
) {
    w.write(LEVEL_0, &format!("{initial}{title}:{inner}"));
    let labels = string_map(labels);
    if labels.is_empty() {
        w.line("<none>");
        return;
    }
    for (i, (k, v)) in labels.iter().enumerate() {
        if i != 0 {
            w.write(LEVEL_0, initial);
            w.write(LEVEL_0, inner);
        }
        w.write(LEVEL_0, &format!("{k}={v}\n"));
    }
}

/// `Annotations:\tk: v`, long or multi-line values folded (`printAnnotationsMultiline`).
pub fn annotations_multiline(w: &mut PrefixWriter, title: &str, annotations: Option<&Value>) {
    w.write(LEVEL_0, &format!("{title}:\t"));
    let mut a = string_map(annotations);
    a.retain(|k, _| !SKIPPED_ANNOTATIONS.contains(&k.as_str()));
    if a.is_empty() {
        w.line("<none>");
        return;
    }
    let indent = "\t";
    for (i, (k, v)) in a.iter().enumerate() {
        if i != 0 {
            w.write(LEVEL_0, indent);
        }
        let value = v.strip_suffix('\n').unwrap_or(v);
        if value.len() + k.len() + 2 > MAX_ANNOTATION_LEN || value.contains('\n') {
            w.write(LEVEL_0, &format!("{k}:\n"));
            for s in value.split('\n') {
                w.write(LEVEL_0, &format!("{indent}  {}\n", shorten(s, MAX_ANNOTATION_LEN - 2)));
            }
        } else {
            w.write(LEVEL_0, &format!("{k}: {value}\n"));
        }
    }
}

/// The first `max` bytes and `...`, for longer strings.
fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// `Taints:\tkey=value:Effect`, sorted by effect and key.
pub fn taints_multiline(w: &mut PrefixWriter, title: &str, taints: &[Value]) {
    w.write(LEVEL_0, &format!("{title}:\t"));
    if taints.is_empty() {
        w.line("<none>");
        return;
    }
    let mut t: Vec<&Value> = taints.iter().collect();
    let key = |t: &Value| format!("{},{}", super::s(t, "/effect"), super::s(t, "/key"));
    t.sort_by_key(|x| key(x));
    for (i, taint) in t.iter().enumerate() {
        if i != 0 {
            w.write(LEVEL_0, "\t");
        }
        w.write(LEVEL_0, &format!("{}\n", taint_string(taint)));
    }
}

/// A taint as `Taint.ToString()`.
pub fn taint_string(t: &Value) -> String {
    let (k, v, e) = (super::s(t, "/key"), super::s(t, "/value"), super::s(t, "/effect"));
    match (v.is_empty(), e.is_empty()) {
        (true, true) => k.to_string(),
        (false, true) => format!("{k}={v}:"),
        (true, false) => format!("{k}:{e}"),
        (false, false) => format!("{k}={v}:{e}"),
    }
}

/// `Tolerations:\tkey=value:Effect op=Exists for 300s`, sorted by key.
pub fn tolerations_multiline(w: &mut PrefixWriter, title: &str, tolerations: &[Value]) {
    w.write(LEVEL_0, &format!("{title}:\t"));
    if tolerations.is_empty() {
        w.line("<none>");
        return;
    }
    let mut t: Vec<&Value> = tolerations.iter().collect();
    t.sort_by(|a, b| super::s(a, "/key").cmp(super::s(b, "/key")));
    for (i, tol) in t.iter().enumerate() {
        if i != 0 {
            w.write(LEVEL_0, "\t");
        }
        let (k, v, e) = (super::s(tol, "/key"), super::s(tol, "/value"), super::s(tol, "/effect"));
        let mut out = k.to_string();
        if !v.is_empty() {
            out.push_str(&format!("={v}"));
        }
        if !e.is_empty() {
            out.push_str(&format!(":{e}"));
        }
        if super::s(tol, "/operator") == "Exists" && v.is_empty() {
            if !k.is_empty() || !e.is_empty() {
                out.push_str(" op=Exists");
            } else {
                out.push_str("op=Exists");
            }
        }
        if let Some(secs) = tol.get("tolerationSeconds").and_then(Value::as_i64) {
            out.push_str(&format!(" for {secs}s"));
        }
        w.write(LEVEL_0, &format!("{out}\n"));
    }
}

/// `labels.FormatLabels`: `k=v,k2=v2` sorted, or `<none>`.
pub fn format_labels(labels: Option<&Value>) -> String {
    let m = string_map(labels);
    if m.is_empty() {
        return "<none>".into();
    }
    m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// A `LabelSelector` as a selector string (`LabelSelectorAsSelector(..).String()`):
/// requirements sorted by key, set values sorted.
pub fn label_selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return String::new();
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in string_map(sel.get("matchLabels")) {
        reqs.push((k.clone(), format!("{k}={v}")));
    }
    for e in super::items(sel, "/matchExpressions") {
        let key = super::s(e, "/key");
        let mut values: Vec<&str> =
            super::items(e, "/values").iter().filter_map(Value::as_str).collect();
        values.sort_unstable();
        values.dedup();
        let text = match super::s(e, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",")
}

/// `metav1.FormatLabelSelector`: the selector string, or `<none>`.
pub fn format_label_selector(sel: Option<&Value>) -> String {
    let s = label_selector(sel);
    if s.is_empty() { "<none>".into() } else { s }
}

fn timestamp(v: Option<&Value>) -> Option<Timestamp> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty()).and_then(|s| s.parse().ok())
}

/// A time as Go's `time.RFC1123Z` in the clock's zone; Go's zero time when unset.
pub fn time(clock: &Clock, v: Option<&Value>) -> String {
    match timestamp(v) {
        Some(t) => t.to_zoned(clock.tz.clone()).strftime("%a, %d %b %Y %H:%M:%S %z").to_string(),
        None => "Mon, 01 Jan 0001 00:00:00 +0000".into(),
    }
}

/// The age of a time (`translateTimestampSince`), `<unknown>` when unset.
pub fn age(clock: &Clock, v: Option<&Value>) -> String {
    match timestamp(v) {
        Some(t) => {
            let d = clock.now.duration_since(t);
            let d = std::time::Duration::try_from(d).unwrap_or_default();
            crate::duration::human(d)
        }
        None => "<unknown>".into(),
    }
}

/// Go's `%v` of an unstructured value.
pub fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.as_f64().map(go_float).unwrap_or_else(|| n.to_string()),
        },
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut kv: Vec<(&String, &Value)> = m.iter().collect();
            kv.sort_by(|a, b| a.0.cmp(b.0));
            let parts: Vec<String> = kv.iter().map(|(k, v)| format!("{k}:{}", go_v(v))).collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go's `%v` of a float64 (`%g` with the shortest representation).
fn go_float(f: f64) -> String {
    let exp = if f == 0.0 { 0 } else { f.abs().log10().floor() as i32 };
    if (-4..21).contains(&exp) {
        format!("{f}")
    } else {
        let s = format!("{f:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn out(f: impl FnOnce(&mut PrefixWriter)) -> String {
        let mut w = PrefixWriter::new();
        f(&mut w);
        w.finish()
    }

    #[test]
    fn labels_print_one_a_line_after_the_title() {
        let l = json!({"b": "2", "a": "1"});
        assert_eq!(
            out(|w| labels_multiline(w, "Labels", Some(&l))),
            "Labels:  a=1\n         b=2\n"
        );
        assert_eq!(out(|w| labels_multiline(w, "Labels", None)), "Labels:  <none>\n");
    }

    #[test]
    fn long_annotations_fold_and_last_applied_is_hidden() {
        let long = "x".repeat(150);
        let a = json!({"kubectl.kubernetes.io/last-applied-configuration": "{}", "k": long, "m": "a\nb\n"});
        let got = out(|w| annotations_multiline(w, "Annotations", Some(&a)));
        let want = format!(
            "Annotations:  k:\n                {}...\n              m:\n                a\n                b\n",
            "x".repeat(138)
        );
        assert_eq!(got, want);
    }

    #[test]
    fn selectors_sort_by_key() {
        let s = json!({"matchLabels": {"b": "1"}, "matchExpressions": [
            {"key": "a", "operator": "In", "values": ["y", "x"]},
            {"key": "c", "operator": "DoesNotExist"}]});
        assert_eq!(label_selector(Some(&s)), "a in (x,y),b=1,!c");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
    }

    #[test]
    fn taints_and_tolerations_read_as_kubectl_prints_them() {
        assert_eq!(
            taint_string(&json!({"key": "k", "value": "v", "effect": "NoSchedule"})),
            "k=v:NoSchedule"
        );
        assert_eq!(taint_string(&json!({"key": "k", "effect": "NoExecute"})), "k:NoExecute");
        let t = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                       {"operator": "Exists"}]);
        let got = out(|w| tolerations_multiline(w, "Tolerations", t.as_array().unwrap()));
        assert_eq!(
            got,
            "Tolerations:  op=Exists\n              node.kubernetes.io/unreachable:NoExecute op=Exists for 300s\n"
        );
    }

    #[test]
    fn times_print_as_rfc1123z_in_the_zone_and_ages_as_kubectl() {
        let clock =
            Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC };
        let t = json!("2024-01-01T00:05:38Z");
        assert_eq!(time(&clock, Some(&t)), "Mon, 01 Jan 2024 00:05:38 +0000");
        assert_eq!(age(&clock, Some(&t)), "4m22s");
        assert_eq!(age(&clock, None), "<unknown>");
    }

    #[test]
    fn unstructured_values_print_as_go_v() {
        assert_eq!(go_v(&json!([1, "a", true])), "[1 a true]");
        assert_eq!(go_v(&json!({"b": 1, "a": null})), "map[a:<nil> b:1]");
        assert_eq!(go_v(&json!(1.5)), "1.5");
    }
}
