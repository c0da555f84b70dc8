//! YAML as kubectl's `-o yaml` writes it (sigs.k8s.io/yaml over go-yaml v2): keys sorted, two
//! spaces per level, a sequence under a key at the key's own indentation (`key:\n- item`),
//! `{}` and `[]` for empty collections; strings plain when they read back as strings, double
//! quoted when they would read back as something else (`"1"`, `"true"`, a timestamp), single
//! quoted when an indicator forbids plain, multi-line strings as literal blocks (`|-`).
//! Not done: go-yaml's folding of plain strings longer than 80 columns at spaces.

use serde_json::Value;

pub fn to_string(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => write_map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other, 0));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push(' ');
    }
}

fn write_map(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    for (k, v) in m {
        pad(out, indent);
        write_entry(out, k, v, indent);
    }
}

/// `key: value` at the current position (indentation already written).
fn write_entry(out: &mut String, k: &str, v: &Value, indent: usize) {
    out.push_str(&string(k, indent));
    out.push(':');
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_map(out, m, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_seq(out, a, indent);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other, indent));
            out.push('\n');
        }
    }
}

fn write_seq(out: &mut String, a: &[Value], indent: usize) {
    for item in a {
        pad(out, indent);
        out.push_str("- ");
        match item {
            Value::Object(m) if !m.is_empty() => {
                let mut first = true;
                for (k, v) in m {
                    if !first {
                        pad(out, indent + 2);
                    }
                    first = false;
                    write_entry(out, k, v, indent + 2);
                }
            }
            Value::Array(inner) if !inner.is_empty() => {
                // go-yaml puts a nested sequence's first item on the dash's line.
                let mut nested = String::new();
                write_seq(&mut nested, inner, indent + 2);
                out.push_str(nested.trim_start());
            }
            other => {
                out.push_str(&scalar(other, indent + 2));
                out.push('\n');
            }
        }
    }
}

fn scalar(v: &Value, indent: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, indent),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// A string in the style go-yaml v2 picks for it.
fn string(s: &str, indent: usize) -> String {
    if s.contains('\n') {
        return literal(s, indent);
    }
    if resolves_to_non_string(s) {
        return double_quoted(s);
    }
    if plain_allowed(s) {
        return s.to_string();
    }
    if s.chars().all(|c| c == ' ' || !c.is_control()) {
        return format!("'{}'", s.replace('\'', "''"));
    }
    double_quoted(s)
}

/// A literal block: `|` keeps a final newline, `|-` strips it; lines indented one level.
fn literal(s: &str, indent: usize) -> String {
    let (body, chomp) = match s.strip_suffix('\n') {
        Some(b) if !b.ends_with('\n') => (b, ""),
        Some(_) => (s.trim_end_matches('\n'), "+"),
        None => (s, "-"),
    };
    let lead = if s.starts_with(' ') { "2" } else { "" };
    let mut out = format!("|{lead}{chomp}");
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            for _ in 0..indent + 2 {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    out
}

fn double_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether go-yaml v2 would read the plain text back as a non-string: null, a bool of YAML 1.1,
/// a number (decimal, octal, hex, binary, float, `.inf`, `.nan`, with `_`), or a timestamp.
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
        ".NaN", ".NAN", "<<",
    ];
    if WORDS.contains(&s) {
        return true;
    }
    let plain = s.replace('_', "");
    let digits = plain.strip_prefix(['+', '-']).unwrap_or(&plain);
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        return true;
    }
    if let Some(hex) = digits.strip_prefix("0x")
        && !hex.is_empty()
        && hex.chars().all(|c| c.is_ascii_hexdigit())
    {
        return true;
    }
    if let Some(bin) = digits.strip_prefix("0b")
        && !bin.is_empty()
        && bin.chars().all(|c| c == '0' || c == '1')
    {
        return true;
    }
    if digits.parse::<f64>().is_ok()
        && digits.chars().any(|c| c.is_ascii_digit())
        && !digits.contains(['i', 'n', 'I', 'N'])
    {
        return true;
    }
    is_timestamp(s)
}

/// `2006-01-02`, or a date followed by `T` or a space and a time.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 10 {
        return false;
    }
    let date = b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit);
    date && (b.len() == 10 || matches!(b[10], b'T' | b't' | b' ' | b'\t'))
}

/// Whether the YAML emitter may write `s` plain (libyaml's analysis, as go-yaml v2 does it).
fn plain_allowed(s: &str) -> bool {
    let first = match s.chars().next() {
        Some(c) => c,
        None => return false,
    };
    if s.starts_with(' ') || s.ends_with(' ') {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        // `-`, `?` and `:` are allowed first only when not followed by a space.
        let second = s.chars().nth(1);
        if !(matches!(first, '-' | '?' | ':') && second.is_some_and(|c| c != ' ')) {
            return false;
        }
        if first == '-' && s.starts_with("---") {
            return false;
        }
    }
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_control() || c == '\u{feff}' {
            return false;
        }
        if matches!(c, ',' | '[' | ']' | '{' | '}') {
            // Flow indicators are fine in block context for go-yaml v2.
            continue;
        }
        if c == ':' && chars.get(i + 1).is_none_or(|n| *n == ' ') {
            return false;
        }
        if c == '#' && i > 0 && chars[i - 1] == ' ' {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_prints_as_kubectl_prints_it() {
        let v = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "data": {"a": "1", "html": "<b>&", "t": "true", "s": "a: b", "m": "x\ny\n", "e": ""},
            "metadata": {"creationTimestamp": "2026-11-26T10:52:00Z", "labels": {"app": "x"}, "name": "c1", "resourceVersion": "63", "finalizers": []},
            "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}], "args": ["-c", "sleep 1"]}]}
        });
        let want = "apiVersion: v1
data:
  a: \"1\"
  e: \"\"
  html: <b>&
  m: |
    x
    y
  s: 'a: b'
  t: \"true\"
kind: ConfigMap
metadata:
  creationTimestamp: \"2026-11-26T10:52:00Z\"
  finalizers: []
  labels:
    app: x
  name: c1
  resourceVersion: \"63\"
spec:
  containers:
  - args:
    - -c
    - sleep 1
    name: a
    ports:
    - containerPort: 80
";
        assert_eq!(to_string(&v), want);
    }

    #[test]
    fn a_string_without_final_newline_is_a_stripped_literal() {
        assert_eq!(to_string(&json!({"k": "a\nb"})), "k: |-\n  a\n  b\n");
    }
}
