//! Manifest text to JSON values, strictly: what the static pod files, the manifest URL and the
//! node-local object files share.
//! - a leading UTF-8 byte-order mark (which editors on other systems write) is dropped;
//! - a mapping key given twice is an error naming the key and its line, in the words of
//!   upstream's strict YAML decoder (`line 4: key "name" already set in map`), for YAML and
//!   JSON alike, where a plain decode would let the last value win silently.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// `text` without a leading byte-order mark.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// One JSON document, duplicate keys refused (the message as `JSON syntax: …`).
pub fn json(text: &str) -> Result<Value, String> {
    let text = strip_bom(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Strict::deserialize(&mut de).and_then(|v| de.end().map(|()| v.0));
    parsed.map_err(|e| match duplicate_of(&e.to_string()) {
        Some(key) => format!("JSON syntax: line {}: key {key:?} already set in map", e.line()),
        None => format!("JSON syntax: {e}"),
    })
}

/// Each YAML document of `text`, duplicate keys refused (messages as `YAML: …`); the caller
/// stops at the first error.
pub fn yaml_documents(text: &str) -> impl Iterator<Item = Result<Value, String>> + '_ {
    let text = strip_bom(text);
    serde_yaml_ng::Deserializer::from_str(text).map(move |document| {
        Strict::deserialize(document).map(|v| v.0).map_err(|e| {
            match (duplicate_of(&e.to_string()), e.location()) {
                (Some(key), Some(at)) => {
                    let line = duplicate_line(text, at.line(), at.column(), &key);
                    format!("YAML: line {line}: key {key:?} already set in map")
                }
                _ => format!("YAML: {e}"),
            }
        })
    })
}

/// The line of the second `key` of the block mapping that starts at `line`:`column` (the
/// parser's error points at the mapping, not the key); the mapping's line for a flow mapping
/// or when the key is not found where expected.
fn duplicate_line(text: &str, line: usize, column: usize, key: &str) -> usize {
    let indent = column.saturating_sub(1);
    let starts_with_key = |rest: &str| {
        [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")].iter().any(|k| {
            rest.strip_prefix(k.as_str())
                .is_some_and(|after| after.is_empty() || after.starts_with([' ', '\t']))
        })
    };
    let mut seen = 0;
    for (i, l) in text.lines().enumerate().skip(line.saturating_sub(1)) {
        let trimmed = l.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let first = i + 1 == line;
        if !first && l.len() - trimmed.len() < indent {
            break;
        }
        let Some(rest) = l.get(indent..) else { break };
        if first && rest.starts_with('{') {
            break;
        }
        if (first || l.len() - trimmed.len() == indent) && starts_with_key(rest) {
            seen += 1;
            if seen == 2 {
                return i + 1;
            }
        }
    }
    line
}

/// The marker a duplicate key's error carries through the deserializer (which adds its
/// position), and the key.
const DUPLICATE: &str = "\u{0}duplicate key\u{0}";

fn duplicate_of(message: &str) -> Option<String> {
    let rest = message.split_once(DUPLICATE)?.1;
    Some(rest.split_once(DUPLICATE).map_or(rest, |(key, _)| key).to_string())
}

/// A JSON value whose maps never repeat a key.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Strict::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE}{key}{DUPLICATE}")));
            }
            let Strict(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_dropped_for_yaml_and_json() {
        let yaml: Vec<_> = yaml_documents("\u{feff}apiVersion: v1\nkind: Pod\n").collect();
        assert_eq!(yaml, [Ok(serde_json::json!({"apiVersion": "v1", "kind": "Pod"}))]);
        assert_eq!(json("\u{feff}{\"kind\": \"Pod\"}"), Ok(serde_json::json!({"kind": "Pod"})));
    }

    #[test]
    fn a_duplicated_key_is_refused_with_its_name_and_line() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n";
        let err = yaml_documents(text).next().unwrap().unwrap_err();
        assert_eq!(err, "YAML: line 5: key \"name\" already set in map");
        let flow = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, name: b}\n";
        let err = yaml_documents(flow).next().unwrap().unwrap_err();
        assert_eq!(err, "YAML: line 3: key \"name\" already set in map");
        let nested = "spec:\n  containers:\n  - name: c\n    image: x\n    image: y\n";
        let err = yaml_documents(nested).next().unwrap().unwrap_err();
        assert_eq!(err, "YAML: line 5: key \"image\" already set in map");
        let deeper = "metadata:\n  name: a\n  labels:\n    name: x\n  # c\n\n  'name': b\n";
        let err = yaml_documents(deeper).next().unwrap().unwrap_err();
        assert_eq!(err, "YAML: line 7: key \"name\" already set in map");
        let j =
            "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"a\",\n    \"name\": \"b\"}\n}";
        assert_eq!(json(j).unwrap_err(), "JSON syntax: line 4: key \"name\" already set in map");
    }

    #[test]
    fn other_syntax_errors_keep_their_words() {
        let err = json("{\"a\": ").unwrap_err();
        assert!(err.starts_with("JSON syntax: EOF while parsing"), "{err}");
        let err = yaml_documents("a: [\n").next().unwrap().unwrap_err();
        assert!(err.starts_with("YAML: "), "{err}");
        assert_eq!(
            json("{\"a\": 1} x").unwrap_err(),
            "JSON syntax: trailing characters at line 1 column 10"
        );
    }
}
