//! YAML as kubectl's `-o yaml` writes it (sigs.k8s.io/yaml over go-yaml v2): keys sorted, two
//! spaces per level, a sequence under a key at the key's own indentation (`key:\n- item`),
//! `{}` and `[]` for empty collections; strings plain when they read back as strings, double
//! quoted when they would read back as something else (`"1"`, `"true"`, a timestamp), single
//! quoted when an indicator forbids plain, multi-line strings as literal blocks (`|-`). A value
//! (never a key) in any of the three flow styles is folded as go-yaml folds it: at a space,
//! once the line is past 80 columns, a line break and the value's indentation (two more than
//! its key's or dash's) take the space's place ([`fold`]).

use std::fmt::Write as _;

use serde_json::Value;

pub fn to_string(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => write_map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other, Place { column: 0, indent: 2 }));
            out.push('\n');
        }
    }
    out
}

/// Where a value starts: its column, and the indentation a folded line continues at.
#[derive(Debug, Clone, Copy)]
struct Place {
    column: usize,
    indent: usize,
}

/// go-yaml's `best_width`: past this column a flow scalar breaks at its next space.
const BEST_WIDTH: usize = 80;

/// The flow styles a scalar may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
}

/// `s` written in `style` starting at `at` (after the opening quote's column, for quoted
/// styles), folded as go-yaml's emitter folds it: at a space that does not follow a space, when
/// the line is already past [`BEST_WIDTH`] (so a line ends after the word that crossed it), the
/// space becomes a line break and the continuation's indentation. A plain scalar breaks only
/// before a non-space; a quoted one not at its first or last character, and a double-quoted
/// one keeps a following space by escaping the break (`\`). Widths count characters.
fn fold(s: &str, style: Style, at: Option<Place>) -> String {
    let (open, close) = match style {
        Style::Plain => ("", ""),
        Style::SingleQuoted => ("'", "'"),
        Style::DoubleQuoted => ("\"", "\""),
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push_str(open);
    // A key never breaks: its place is as if at column 0 with no width limit.
    let (mut column, indent, width) = match at {
        Some(p) => (p.column + open.len(), p.indent, BEST_WIDTH),
        None => (0, 0, usize::MAX),
    };
    let mut spaces = false;
    let mut chars = s.chars().enumerate().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let next_is_space = next == Some(' ');
        if c == ' ' {
            let inner = i > 0 && next.is_some();
            let may_break = match style {
                Style::Plain => !next_is_space,
                Style::SingleQuoted => inner && !next_is_space,
                Style::DoubleQuoted => inner,
            };
            if !spaces && column > width && may_break {
                out.push('\n');
                pad(&mut out, indent);
                column = indent;
                if style == Style::DoubleQuoted && next_is_space {
                    out.push('\\');
                    column += 1;
                }
            } else {
                out.push(' ');
                column += 1;
            }
            spaces = true;
            continue;
        }
        spaces = false;
        let before = out.len();
        match (style, c) {
            (Style::SingleQuoted, '\'') => out.push_str("''"),
            (Style::DoubleQuoted, c) => push_escaped(&mut out, c),
            (_, c) => out.push(c),
        }
        column += out[before..].chars().count();
    }
    out.push_str(close);
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
    let key = string(k, Place { column: indent, indent: indent + 2 }, Folding::Key);
    out.push_str(&key);
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
            let column = indent + key.chars().count() + 2;
            out.push_str(&scalar(other, Place { column, indent: indent + 2 }));
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
                out.push_str(&scalar(other, Place { column: indent + 2, indent: indent + 2 }));
                out.push('\n');
            }
        }
    }
}

fn scalar(v: &Value, at: Place) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, at, Folding::Value),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// Whether a string may fold: a value may, a key never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Folding {
    Value,
    Key,
}

/// A string at `at` in the style go-yaml v2 picks for it, folded if a value.
fn string(s: &str, at: Place, folding: Folding) -> String {
    if s.contains('\n') {
        // A literal block's lines sit one level in.
        return literal(s, at.indent);
    }
    let style = if resolves_to_non_string(s) {
        Style::DoubleQuoted
    } else if plain_allowed(s) {
        Style::Plain
    } else if s.chars().all(|c| c == ' ' || !c.is_control()) {
        Style::SingleQuoted
    } else {
        Style::DoubleQuoted
    };
    fold(s, style, (folding == Folding::Value).then_some(at))
}

/// A literal block: `|` keeps a final newline, `|-` strips it; lines at `indent`.
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
            pad(&mut out, indent);
            out.push_str(line);
        }
    }
    out
}

/// A character inside double quotes, escaped if it must be.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\n' => out.push_str("\\n"),
        c if c.is_control() => {
            let _ = write!(out, "\\x{:02X}", u32::from(c));
        }
        c => out.push(c),
    }
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

    /// What kubectl v1.35 printed (`create --dry-run=client -o yaml`) for a pod with long
    /// strings of every flow style: plain, single and double quoted, with runs of spaces, a
    /// word longer than the line, non-ASCII text, in maps and in lists.
    const FOLDED: &str = include_str!("yaml/folded.yaml");

    #[test]
    fn long_values_fold_past_eighty_columns_as_kubectl_folds_them() {
        let v: Value = serde_yaml_ng::from_str(FOLDED).unwrap();
        assert_eq!(to_string(&v), FOLDED);
    }

    #[test]
    fn keys_never_fold_and_a_quoted_value_keeps_its_edges() {
        let key = "k ".repeat(50).trim_end().to_owned();
        // Past column 80 already, a quoted value's first space is still not a break.
        let text = to_string(&json!({ key.clone(): " v w" }));
        assert_eq!(text, format!("{key}: ' v\n  w'\n"));
        // Nor is its last.
        let x = "x".repeat(90);
        assert_eq!(to_string(&json!({"k": format!("{x} ")})), format!("k: '{x} '\n"));
    }

    #[test]
    fn a_string_without_final_newline_is_a_stripped_literal() {
        assert_eq!(to_string(&json!({"k": "a\nb"})), "k: |-\n  a\n  b\n");
    }
}
