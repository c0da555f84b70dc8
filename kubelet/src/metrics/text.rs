//! The Prometheus text exposition format (version 0.0.4) as client_golang's `expfmt` writes
//! it: families sorted by name, each with `# HELP` and `# TYPE` and only when it has samples;
//! labels sorted by name (a histogram's `le` last); values in Go's shortest `%g` form;
//! timestamps in milliseconds. Shared by `/metrics`, `/metrics/probes` and `/metrics/resource`.
//!
//! Why not the `prometheus-client` crate (which the controller-manager uses): it writes
//! OpenMetrics (`_total` appended to counter names, `# EOF`) and has no sample timestamps,
//! which the resource metrics carry, as upstream's do, so that a scraper such as
//! metrics-server rates CPU over the runtime's own sample times.

use std::fmt::Write;

/// What Prometheus's text format is served as.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A histogram's state: cumulative counts per upper bound (`+Inf` implied by `count`).
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    pub cumulative: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar(f64),
    Histogram(Buckets),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
    pub timestamp_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

fn owned(labels: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    labels.iter().map(|(k, v)| (*k, (*v).to_string())).collect()
}

impl Family {
    pub fn new(name: &'static str, help: &'static str, kind: Kind) -> Self {
        Self { name, help, kind, samples: Vec::new() }
    }

    pub fn push(&mut self, labels: &[(&'static str, &str)], value: f64, timestamp_ms: Option<i64>) {
        let labels = owned(labels);
        self.samples.push(Sample { labels, value: Value::Scalar(value), timestamp_ms });
    }

    pub fn push_histogram(&mut self, labels: &[(&'static str, &str)], buckets: Buckets) {
        let labels = owned(labels);
        self.samples.push(Sample { labels, value: Value::Histogram(buckets), timestamp_ms: None });
    }
}

fn write_labels(out: &mut String, labels: &[(&'static str, String)], le: Option<f64>) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape_into(out, v, true);
        out.push('"');
    }
    if let Some(le) = le {
        if !labels.is_empty() {
            out.push(',');
        }
        out.push_str("le=\"");
        write_go_float(out, le);
        out.push('"');
    }
    out.push('}');
}

fn write_line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&'static str, String)],
    le: Option<f64>,
    value: f64,
    timestamp_ms: Option<i64>,
) {
    out.push_str(name);
    out.push_str(suffix);
    write_labels(out, labels, le);
    out.push(' ');
    write_go_float(out, value);
    if let Some(ts) = timestamp_ms {
        let _ = write!(out, " {ts}");
    }
    out.push('\n');
}

#[allow(clippy::cast_precision_loss)]
fn float(n: u64) -> f64 {
    n as f64
}

/// The exposition of `families`.
pub fn encode(mut families: Vec<Family>) -> String {
    families.retain(|f| !f.samples.is_empty());
    families.sort_by(|a, b| a.name.cmp(b.name));
    let mut out = String::new();
    for f in &mut families {
        for s in &mut f.samples {
            s.labels.sort_by(|a, b| a.0.cmp(b.0));
        }
        f.samples.sort_by(|a, b| a.labels.cmp(&b.labels));
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = write!(out, "# HELP {} ", f.name);
        escape_into(&mut out, f.help, false);
        out.push('\n');
        let _ = writeln!(out, "# TYPE {} {kind}", f.name);
        for s in &f.samples {
            match &s.value {
                Value::Scalar(v) => {
                    write_line(&mut out, f.name, "", &s.labels, None, *v, s.timestamp_ms)
                }
                Value::Histogram(h) => {
                    for (le, n) in &h.cumulative {
                        write_line(
                            &mut out,
                            f.name,
                            "_bucket",
                            &s.labels,
                            Some(*le),
                            float(*n),
                            None,
                        );
                    }
                    let count = float(h.count);
                    write_line(
                        &mut out,
                        f.name,
                        "_bucket",
                        &s.labels,
                        Some(f64::INFINITY),
                        count,
                        None,
                    );
                    write_line(&mut out, f.name, "_sum", &s.labels, None, h.sum, None);
                    write_line(&mut out, f.name, "_count", &s.labels, None, count, None);
                }
            }
        }
    }
    out
}

/// Backslashes and newlines escaped, and in label values double quotes too, onto `out`.
fn escape_into(out: &mut String, s: &str, quotes: bool) {
    let special = |c: char| c == '\\' || c == '\n' || (quotes && c == '"');
    if !s.contains(special) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`: the shortest digits that read back as `f`, in
/// exponent form (`1.6e+09`, two exponent digits at least) when the decimal exponent is below
/// -4 or at least 6, as Go decides for the shortest form.
pub fn go_float(f: f64) -> String {
    let mut out = String::new();
    write_go_float(&mut out, f);
    out
}

/// [`go_float`] onto `out`, with no allocation of its own (a scrape writes a thousand).
pub fn write_go_float(out: &mut String, f: f64) {
    if f.is_nan() {
        return out.push_str("NaN");
    }
    if f.is_infinite() {
        return out.push_str(if f > 0.0 { "+Inf" } else { "-Inf" });
    }
    if f == 0.0 {
        return out.push_str(if f.is_sign_negative() { "-0" } else { "0" });
    }
    // Rust's `{:e}` gives the same shortest digits: `-1.2345e6`.
    let mut e = StackText::default();
    let _ = write!(e, "{f:e}");
    let e = e.as_str();
    let (mantissa, exp) = e.split_once('e').unwrap_or((e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if let Some(m) = mantissa.strip_prefix('-') {
        out.push('-');
        return write_go_digits(out, m, exp);
    }
    write_go_digits(out, mantissa, exp);
}

/// A positive `{:e}` mantissa (`d` or `d.ddd`) with its decimal exponent, as Go's `%g` writes it.
fn write_go_digits(out: &mut String, mantissa: &str, exp: i32) {
    if !(-4..6).contains(&exp) {
        out.push_str(mantissa);
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs());
        return;
    }
    let (first, rest) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let zeros = |out: &mut String, n: usize| out.extend(std::iter::repeat_n('0', n));
    match usize::try_from(exp) {
        // 0.000ddd: the point before the first digit, `-exp - 1` zeros after it.
        Err(_) => {
            out.push_str("0.");
            zeros(out, usize::try_from(-exp - 1).unwrap_or(0));
            out.push_str(first);
            out.push_str(rest);
        }
        // dddd00: every digit before the point, zeros to make up the exponent.
        Ok(exp) if rest.len() <= exp => {
            out.push_str(first);
            out.push_str(rest);
            zeros(out, exp - rest.len());
        }
        Ok(exp) => {
            out.push_str(first);
            out.push_str(&rest[..exp]);
            out.push('.');
            out.push_str(&rest[exp..]);
        }
    }
}

/// A float's `{:e}` text, on the stack (the longest is 24 bytes: `-1.7976931348623157e308`).
#[derive(Default)]
struct StackText {
    buf: [u8; 32],
    len: usize,
}

impl StackText {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let to = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        to.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_as_go_writes_them() {
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (0.5, "0.5"),
            (1.83048075, "1.83048075"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1.616273408e9, "1.616273408e+09"),
            (1e8, "1e+08"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (1.7e21, "1.7e+21"),
            (1e-300, "1e-300"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (-0.0, "-0"),
            (100.0, "100"),
            (12.5, "12.5"),
            (999_999.0, "999999"),
            (120_000.5, "120000.5"),
            (1e6, "1e+06"),
            (0.001234, "0.001234"),
            (-0.00012, "-0.00012"),
            (1.5e-5, "1.5e-05"),
            (-1.7976931348623157e308, "-1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float(f), want, "{f}");
        }
        let mut out = String::from("x ");
        write_go_float(&mut out, 2.5);
        assert_eq!(out, "x 2.5", "appended");
    }

    #[test]
    fn families_are_sorted_and_empty_ones_left_out_and_values_escaped() {
        let mut b = Family::new("b_total", "B's help \\ with\nnewline", Kind::Counter);
        b.push(&[("pod", "z"), ("container", "x\"y")], 2.5, Some(1700000000123));
        b.push(&[("pod", "a"), ("container", "c")], 1.0, None);
        let a = Family::new("a_empty", "none", Kind::Gauge);
        let mut c = Family::new("c", "plain", Kind::Gauge);
        c.push(&[], 0.0, None);
        assert_eq!(
            encode(vec![c, b, a]),
            "# HELP b_total B's help \\\\ with\\nnewline\n# TYPE b_total counter\n\
             b_total{container=\"c\",pod=\"a\"} 1\n\
             b_total{container=\"x\\\"y\",pod=\"z\"} 2.5 1700000000123\n\
             # HELP c plain\n# TYPE c gauge\nc 0\n"
        );
    }

    #[test]
    fn histograms_write_cumulative_buckets_with_le_last_then_sum_and_count() {
        let mut h = Family::new("d_seconds", "D", Kind::Histogram);
        let buckets = Buckets { cumulative: vec![(0.005, 1), (0.0125, 3)], sum: 0.02, count: 4 };
        h.push_histogram(&[("operation_type", "x")], buckets);
        assert_eq!(
            encode(vec![h]),
            "# HELP d_seconds D\n# TYPE d_seconds histogram\n\
             d_seconds_bucket{operation_type=\"x\",le=\"0.005\"} 1\n\
             d_seconds_bucket{operation_type=\"x\",le=\"0.0125\"} 3\n\
             d_seconds_bucket{operation_type=\"x\",le=\"+Inf\"} 4\n\
             d_seconds_sum{operation_type=\"x\"} 0.02\n\
             d_seconds_count{operation_type=\"x\"} 4\n"
        );
    }
}
