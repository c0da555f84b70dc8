//! `-o kyaml`: KYAML, the explicit YAML dialect kubectl 1.35 prints (sigs.k8s.io/yaml's
//! `kyaml` encoder): each document after `---`, maps in braces with one `key: value,` a line,
//! keys bare unless YAML could read them as something else, every string value double-quoted
//! (a multi-line one folded a line per line with `\n\`), lists of maps or lists cuddled
//! (`[{` … `}, {` … `}]`), other lists a value a line. Written over anything [`Tree`]-shaped:
//! the server's objects (`serde_json::Value`, keys sorted) and the generators' (kept in field
//! order). Pure: tree in, text out.

use serde_json::Value;

use crate::cmd::create::tree::Node;

/// What a tree's node is, as the encoder sees it.
#[derive(Debug)]
pub enum Shape<'a, T> {
    Null,
    Bool(bool),
    /// A number as its JSON text.
    Number(String),
    Str(&'a str),
    List(Vec<&'a T>),
    Map(Vec<(&'a str, &'a T)>),
}

/// A tree KYAML can be written from.
pub trait Tree {
    fn shape(&self) -> Shape<'_, Self>
    where
        Self: Sized;
}

impl Tree for Value {
    fn shape(&self) -> Shape<'_, Value> {
        match self {
            Value::Null => Shape::Null,
            Value::Bool(b) => Shape::Bool(*b),
            Value::Number(n) => Shape::Number(n.to_string()),
            Value::String(s) => Shape::Str(s),
            Value::Array(a) => Shape::List(a.iter().collect()),
            Value::Object(m) => Shape::Map(m.iter().map(|(k, v)| (k.as_str(), v)).collect()),
        }
    }
}

impl Tree for Node {
    fn shape(&self) -> Shape<'_, Node> {
        match self {
            Node::Null => Shape::Null,
            Node::Bool(b) => Shape::Bool(*b),
            Node::Int(i) => Shape::Number(i.to_string()),
            Node::Str(s) => Shape::Str(s),
            Node::List(l) => Shape::List(l.iter().collect()),
            Node::Obj(o) => Shape::Map(o.0.iter().map(|(k, v)| (k.as_str(), v)).collect()),
        }
    }
}

/// One document: `---`, the value, a newline.
pub fn document<T: Tree>(value: &T) -> String {
    let mut out = String::from("---\n");
    node(value, 0, &mut out);
    out.push('\n');
    out
}

/// A watch event's document, its fields in Go's order (`type`, then `object`).
pub fn event_document<T: Tree>(kind: &str, object: &T) -> String {
    let mut out = String::from("---\n{\n  type: ");
    string(kind, 2, Style::Value, &mut out);
    out.push_str(",\n  object: ");
    node(object, 1, &mut out);
    out.push_str(",\n}\n");
    out
}

/// A typed `v1` `List` of `items`, its fields in Go's order (`kind`, `apiVersion`, `metadata`,
/// `items`), as kubectl prints the objects `apply` applied.
pub fn list_document<T: Tree>(items: &[T]) -> String {
    let mut out = String::from(
        "---\n{\n  kind: \"List\",\n  apiVersion: \"v1\",\n  metadata: {},\n  items: ",
    );
    list(&items.iter().collect::<Vec<_>>(), 1, &mut out);
    out.push_str(",\n}\n");
    out
}

fn indent(level: usize, out: &mut String) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn node<T: Tree>(value: &T, level: usize, out: &mut String) {
    match value.shape() {
        Shape::Null => out.push_str("null"),
        Shape::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Shape::Number(n) => out.push_str(&n),
        Shape::Str(s) => string(s, level + 1, Style::Value, out),
        Shape::List(items) => list(&items, level, out),
        Shape::Map(entries) => map(&entries, level, out),
    }
}

fn map<T: Tree>(entries: &[(&str, &T)], level: usize, out: &mut String) {
    if entries.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push_str("{\n");
    for (key, value) in entries {
        indent(level + 1, out);
        string(key, level + 1, Style::Key, out);
        out.push_str(": ");
        node(*value, level + 1, out);
        out.push_str(",\n");
    }
    indent(level, out);
    out.push('}');
}

fn list<T: Tree>(items: &[&T], level: usize, out: &mut String) {
    if items.is_empty() {
        out.push_str("[]");
        return;
    }
    let cuddled = items.iter().all(|i| matches!(i.shape(), Shape::List(_) | Shape::Map(_)));
    if cuddled {
        out.push('[');
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                out.push_str(", ");
            }
            node(*item, level, out);
        }
        out.push(']');
        return;
    }
    out.push_str("[\n");
    indent(level, out);
    for item in items {
        indent(1, out);
        node(*item, level + 1, out);
        out.push_str(",\n");
        indent(level, out);
    }
    out.push(']');
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Bare where YAML reads it back as the same string; never folded.
    Key,
    /// Always quoted; a multi-line one folded.
    Value,
}

/// The fold YAML joins back: a backslash ending the line.
const FOLD: &str = "\\\n";

fn string(s: &str, level: usize, style: Style, out: &mut String) {
    let multi = s.contains('\n');
    if style == Style::Key && !needs_quotes(s) {
        out.push_str(s);
        return;
    }
    let fold = style == Style::Value && multi;
    let mut buf = String::from("\"");
    if fold {
        buf.push_str(FOLD);
    }
    for c in s.chars() {
        if buf.ends_with('\n') {
            indent(level, &mut buf);
            // Leading whitespace is kept by escaping it; other lines get one space, which
            // YAML drops, so that the lines stay aligned.
            buf.push(if c.is_whitespace() && c != '\n' { '\\' } else { ' ' });
        }
        escaped(c, fold, &mut buf);
    }
    if fold {
        if !buf.ends_with('\n') {
            buf.push_str(FOLD);
        }
        indent(level, &mut buf);
    }
    buf.push('"');
    out.push_str(&buf);
}

fn escaped(c: char, fold: bool, buf: &mut String) {
    match c {
        '"' | '\\' => {
            buf.push('\\');
            buf.push(c);
        }
        '\n' => {
            buf.push_str("\\n");
            if fold {
                buf.push_str(FOLD);
            }
        }
        // kubectl 1.35's encoder writes tabs as they are.
        '\t' => buf.push('\t'),
        c if printable(c) => buf.push(c),
        '\u{7}' => buf.push_str("\\a"),
        '\u{8}' => buf.push_str("\\b"),
        '\u{c}' => buf.push_str("\\f"),
        '\r' => buf.push_str("\\r"),
        '\u{b}' => buf.push_str("\\v"),
        '\0' => buf.push_str("\\0"),
        '\u{1b}' => buf.push_str("\\e"),
        '\u{85}' => buf.push_str("\\N"),
        '\u{a0}' => buf.push_str("\\_"),
        '\u{2028}' => buf.push_str("\\L"),
        '\u{2029}' => buf.push_str("\\P"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            buf.push_str(&format!("\\x{:02x}", c as u32));
        }
        c if (c as u32) < 0x10000 => buf.push_str(&format!("\\u{:04x}", c as u32)),
        c => buf.push_str(&format!("\\U{:08x}", c as u32)),
    }
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space;
/// not other spaces, controls, or format characters.
fn printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    // Format characters (Unicode's Cf) and the private and unassigned ranges Go rejects are
    // rare in objects; the zero-width and directional marks are the ones that occur.
    !matches!(c, '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}'
        | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// Whether a key must be quoted: empty, read by YAML as another type, or holding anything but
/// letters, digits and `_` (and `-`, `.`, `/` inside).
fn needs_quotes(s: &str) -> bool {
    if s.is_empty() || yaml_guesses_wrong(s) {
        return true;
    }
    let chars: Vec<char> = s.chars().collect();
    chars.iter().enumerate().any(|(i, &c)| {
        let interior = i > 0 && i + 1 < chars.len() && matches!(c, '-' | '.' | '/');
        !(c.is_alphanumeric() || c == '_' || interior)
    })
}

/// Whether YAML 1.1 would read `s` as a null, a boolean, a number, a sexagesimal, an infinity
/// or NaN, or a timestamp.
fn yaml_guesses_wrong(s: &str) -> bool {
    let lower = s.to_lowercase();
    if s.len() <= 5
        && matches!(
            lower.as_str(),
            "null"
                | "~"
                | ""
                | "true"
                | "y"
                | "yes"
                | "on"
                | "false"
                | "n"
                | "no"
                | "off"
                | ".inf"
                | "-.inf"
                | "+.inf"
                | ".nan"
        )
    {
        return true;
    }
    if crate::cmd::dryrun::go_bool(s).is_some() {
        return true;
    }
    let bare = s.replace('_', "");
    go_int(&bare) || go_float(&bare) || sexagesimal(s) || timestamp(s)
}

/// Go's `strconv.ParseInt(s, 0, 64)` succeeding or failing only by range.
fn go_int(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (radix, body) = if let Some(b) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        (16, b)
    } else if let Some(b) = digits.strip_prefix("0b").or(digits.strip_prefix("0B")) {
        (2, b)
    } else if let Some(b) = digits.strip_prefix("0o").or(digits.strip_prefix("0O")) {
        (8, b)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    !body.is_empty() && body.chars().all(|c| c.is_digit(radix))
}

/// Go's `strconv.ParseFloat(s, 64)` succeeding or failing only by range: what Rust's float
/// parsing reads (signed decimals with exponents, `inf`, `infinity`, `nan`), and hex mantissas
/// with a `p` exponent.
fn go_float(s: &str) -> bool {
    if s.parse::<f64>().is_ok() {
        return true;
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s).to_lowercase();
    let Some((mantissa, exp)) = body.strip_prefix("0x").and_then(|h| h.split_once('p')) else {
        return false;
    };
    let digits = mantissa.replacen('.', "", 1);
    let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_hexdigit())
        && !exp.is_empty()
        && exp.chars().all(|c| c.is_ascii_digit())
}

/// YAML 1.1's base-60 numbers: `[+-]?[1-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?`.
fn sexagesimal(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (whole, fraction) = match s.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (s, None),
    };
    if fraction.is_some_and(|f| !f.chars().all(|c| c.is_ascii_digit() || c == '_')) {
        return false;
    }
    let mut parts = whole.split(':');
    let Some(head) = parts.next() else { return false };
    let head_ok = head.starts_with(|c: char| ('1'..='9').contains(&c))
        && head.chars().all(|c| c.is_ascii_digit() || c == '_');
    let rest: Vec<&str> = parts.collect();
    head_ok
        && !rest.is_empty()
        && rest.iter().all(|p| match p.as_bytes() {
            [d] => d.is_ascii_digit(),
            [a, b] => (b'0'..=b'5').contains(a) && b.is_ascii_digit(),
            _ => false,
        })
}

/// The timestamps YAML 1.1 reads (`2006-1-2`, with a time, `T` or `t` or a space): four
/// digits, `-`, then a date Go's time parsing accepts in one of those layouts.
fn timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let rest = &s[5..];
    let (date, time) = match rest.find(['T', 't', ' ']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut d = date.split('-');
    let (Some(month), Some(day), None) = (d.next(), d.next(), d.next()) else { return false };
    let small = |p: &str, max: u32| {
        (1..=2).contains(&p.len()) && p.parse::<u32>().is_ok_and(|n| (1..=max).contains(&n))
    };
    if !small(month, 12) || !small(day, 31) {
        return false;
    }
    time.is_none_or(clock)
}

/// `15:4:5`, a fraction, then for the `T` forms an optional `Z` or `±07:00` zone.
fn clock(t: &str) -> bool {
    let (hms, _zone) = match t.find(['Z', 'z', '+', '-']) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let (hms, fraction) = match hms.split_once('.') {
        Some((h, f)) => (h, Some(f)),
        None => (hms, None),
    };
    let parts: Vec<&str> = hms.split(':').collect();
    let short = |p: &&str| (1..=2).contains(&p.len()) && p.chars().all(|c| c.is_ascii_digit());
    parts.len() == 3
        && parts.iter().all(short)
        && fraction.is_none_or(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests;
