//! Objects as kubectl's generators build them: Go structs, whose JSON keeps the fields in
//! declaration order (`kind`, `apiVersion`, `metadata`…), unlike a `serde_json::Map`. A
//! [`Node`] keeps the order it was built in; `-o json` and the last-applied annotation are
//! written from it, `-o yaml` (sorted, as kubectl's YAML printer sorts) from its [`Value`].

use serde_json::{Map, Value};

use crate::printers::json::write_string;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    List(Vec<Node>),
    Obj(Obj),
}

/// A struct's fields, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Obj(pub Vec<(String, Node)>);

impl Obj {
    pub fn new() -> Obj {
        Obj(Vec::new())
    }

    /// The object with one more field, last.
    pub fn with(mut self, key: &str, value: impl Into<Node>) -> Obj {
        self.set(key, value);
        self
    }

    /// Sets a field, in place if present, else last.
    pub fn set(&mut self, key: &str, value: impl Into<Node>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A string map (`labels`, `data`): keys sorted, as Go marshals maps.
    pub fn map<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> Obj {
        let mut v: Vec<(String, Node)> = pairs
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), Node::Str(v.as_ref().to_string())))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        Obj(v)
    }
}

impl From<Obj> for Node {
    fn from(o: Obj) -> Node {
        Node::Obj(o)
    }
}
impl From<&str> for Node {
    fn from(s: &str) -> Node {
        Node::Str(s.to_string())
    }
}
impl From<String> for Node {
    fn from(s: String) -> Node {
        Node::Str(s)
    }
}
impl From<&String> for Node {
    fn from(s: &String) -> Node {
        Node::Str(s.clone())
    }
}
impl From<i64> for Node {
    fn from(n: i64) -> Node {
        Node::Int(n)
    }
}
impl From<i32> for Node {
    fn from(n: i32) -> Node {
        Node::Int(n.into())
    }
}
impl From<bool> for Node {
    fn from(b: bool) -> Node {
        Node::Bool(b)
    }
}
impl<T: Into<Node>> From<Vec<T>> for Node {
    fn from(v: Vec<T>) -> Node {
        Node::List(v.into_iter().map(Into::into).collect())
    }
}

impl Node {
    /// The same object as JSON, keys sorted.
    pub fn to_value(&self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(n) => Value::from(*n),
            Node::Str(s) => Value::String(s.clone()),
            Node::List(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Obj(o) => Value::Object(
                o.0.iter().map(|(k, v)| (k.clone(), v.to_value())).collect::<Map<_, _>>(),
            ),
        }
    }

    /// Go's `json.MarshalIndent(v, "", "    ")` and a newline, as `-o json` prints.
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(0));
        out.push('\n');
        out
    }

    /// Go's `json.Marshal`: compact, HTML characters escaped.
    pub fn compact(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None);
        out
    }

    fn write(&self, out: &mut String, level: Option<usize>) {
        let nl = |out: &mut String, l: usize| {
            out.push('\n');
            out.push_str(&"    ".repeat(l));
        };
        match self {
            Node::Null => out.push_str("null"),
            Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Node::Int(n) => out.push_str(&n.to_string()),
            Node::Str(s) => write_string(out, s),
            Node::List(items) if items.is_empty() => out.push_str("[]"),
            Node::Obj(o) if o.0.is_empty() => out.push_str("{}"),
            Node::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if let Some(l) = level {
                        nl(out, l + 1);
                    }
                    item.write(out, level.map(|l| l + 1));
                }
                if let Some(l) = level {
                    nl(out, l);
                }
                out.push(']');
            }
            Node::Obj(o) => {
                out.push('{');
                for (i, (k, v)) in o.0.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if let Some(l) = level {
                        nl(out, l + 1);
                    }
                    write_string(out, k);
                    out.push(':');
                    if level.is_some() {
                        out.push(' ');
                    }
                    v.write(out, level.map(|l| l + 1));
                }
                if let Some(l) = level {
                    nl(out, l);
                }
                out.push('}');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_order_in_json_and_sort_in_the_value() {
        let o = Node::from(
            Obj::new()
                .with("kind", "X")
                .with("apiVersion", "v1")
                .with("spec", Obj::new())
                .with("list", vec![Node::Int(1), Node::Null]),
        );
        assert_eq!(o.compact(), r#"{"kind":"X","apiVersion":"v1","spec":{},"list":[1,null]}"#);
        assert_eq!(
            o.pretty(),
            "{\n    \"kind\": \"X\",\n    \"apiVersion\": \"v1\",\n    \"spec\": {},\n    \"list\": [\n        1,\n        null\n    ]\n}\n"
        );
        assert_eq!(
            serde_json::to_string(&o.to_value()).unwrap(),
            r#"{"apiVersion":"v1","kind":"X","list":[1,null],"spec":{}}"#
        );
    }

    #[test]
    fn maps_are_sorted_and_html_is_escaped() {
        let m = Node::from(Obj::map([("b", "<"), ("a", "&")]));
        assert_eq!(m.compact(), r#"{"a":"\u0026","b":"\u003c"}"#);
    }
}
