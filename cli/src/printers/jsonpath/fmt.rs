//! Values written as Go writes the unstructured object kubectl executes templates over
//! (`map[string]interface{}`, `[]interface{}`, `int64`, `float64`, `string`, `bool`, nil):
//! `fmt.Print` (`%v`), `%#v` (in kubectl's error dump) and `json.Marshal` (compact, HTML
//! characters escaped).

use std::fmt::Write;

use serde_json::Value;

use super::eval::V;

/// What `fmt.Print` writes for a scalar, `json.Marshal` for a map or list (kubectl's jsonpath
/// printer).
pub fn text(v: &V<'_>) -> String {
    match v {
        V::J(j @ (Value::Object(_) | Value::Array(_))) => json(j),
        other => go_v(other),
    }
}

/// Go's `%v`.
pub fn go_v(v: &V<'_>) -> String {
    match v {
        V::J(j) => value_v(j),
        V::Str(s) => s.clone(),
        V::Int(i) => i.to_string(),
        V::Float(f) => go_float(*f),
        V::Bool(b) => b.to_string(),
        V::Byte(b) => b.to_string(),
    }
}

/// Go's `%v` of an unstructured value: `map[a:1 b:x]`, `[a b]`, `<nil>`.
pub fn value_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(value_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => format!(
            "map[{}]",
            m.iter().map(|(k, v)| format!("{k}:{}", value_v(v))).collect::<Vec<_>>().join(" ")
        ),
    }
}

/// Go's type name for a value, as reflection prints it in errors.
pub fn go_type(v: &V<'_>) -> &'static str {
    match v {
        V::J(Value::Null) => "interface {}",
        V::J(Value::Bool(_)) | V::Bool(_) => "bool",
        V::J(Value::Number(n)) if n.as_i64().is_some() => "int64",
        V::J(Value::Number(_)) | V::Float(_) => "float64",
        V::J(Value::String(_)) | V::Str(_) => "string",
        V::J(Value::Array(_)) => "[]interface {}",
        V::J(Value::Object(_)) => "map[string]interface {}",
        V::Int(_) => "int",
        V::Byte(_) => "uint8",
    }
}

/// Go's `%#v` of an unstructured value.
pub fn go_sharp_v(v: &Value) -> String {
    let mut out = String::new();
    sharp(&mut out, v);
    out
}

fn sharp(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("interface {}(nil)"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => out.push_str(&go_quote(s)),
        Value::Array(a) => {
            out.push_str("[]interface {}{");
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                sharp(out, item);
            }
            out.push('}');
        }
        Value::Object(m) => {
            out.push_str("map[string]interface {}{");
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&go_quote(k));
                out.push(':');
                sharp(out, item);
            }
            out.push('}');
        }
    }
}

/// Go's `strconv.Quote`.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn number(n: &serde_json::Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (None, Some(u), _) => u.to_string(),
        (_, _, Some(f)) => go_float(f),
        _ => n.to_string(),
    }
}

/// Go's `%v` of a float64: the shortest representation, with an exponent below 1e-4 and
/// from 1e21 (`1e+21`, `1e-05`).
pub fn go_float(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f.is_nan() {
        return "NaN".into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..21).contains(&exp) || f == 0.0 {
        format!("{f}")
    } else {
        format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// Go's `json.Marshal`: compact, `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub fn json(v: &Value) -> String {
    let mut out = String::new();
    compact(&mut out, v);
    out
}

fn compact(out: &mut String, v: &Value) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                compact(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                crate::printers::json::write_string(out, k);
                out.push(':');
                compact(out, item);
            }
            out.push('}');
        }
        Value::String(s) => crate::printers::json::write_string(out, s),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_and_lists_print_as_go_json_and_scalars_as_go_print() {
        assert_eq!(
            text(&V::J(&json!({"b": "<&>", "a": [1, true]}))),
            r#"{"a":[1,true],"b":"\u003c\u0026\u003e"}"#
        );
        assert_eq!(text(&V::J(&json!(null))), "<nil>");
        assert_eq!(text(&V::J(&json!(1.5))), "1.5");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(3.0), "3");
    }

    #[test]
    fn sharp_v_writes_go_syntax_as_kubectls_error_dump() {
        let v = json!({"a": [1, "x\"y"], "b": {}, "c": null, "d": false});
        assert_eq!(
            go_sharp_v(&v),
            r#"map[string]interface {}{"a":[]interface {}{1, "x\"y"}, "b":map[string]interface {}{}, "c":interface {}(nil), "d":false}"#
        );
        assert_eq!(value_v(&json!({"a": [1, "x"], "b": null})), "map[a:[1 x] b:<nil>]");
    }
}
