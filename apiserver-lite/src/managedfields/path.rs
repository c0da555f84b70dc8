//! Field paths as structured-merge-diff's `fieldpath` names them: a path is a list of elements,
//! each a struct or map field (`f:name`), an associative list item by its key fields
//! (`k:{"name":"web"}`), a set item by its value (`v:"x"`) or an atomic list item by index
//! (`i:0`). An element is kept in its FieldsV1 spelling, which is canonical (key fields sorted,
//! JSON compact), so two elements are equal exactly when their spellings are.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// One step of a field path, in its FieldsV1 spelling. Shared, not copied: field sets are
/// cloned, united and subtracted many times per write, and each copy of an element is then a
/// reference count.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathElement(Arc<str>);

/// What an element names, read back from its spelling.
#[derive(Debug, Clone, PartialEq)]
pub enum Element {
    Field(String),
    Key(Vec<(String, Value)>),
    Value(Value),
    Index(usize),
}

/// A FieldsV1 key that is no path element.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid path element {0:?}: expected f:, k:, v: or i: followed by its value")]
pub struct BadElement(pub String);

impl PathElement {
    pub fn field(name: &str) -> Self {
        Self(format!("f:{name}").into())
    }

    /// An associative list item by its key fields (sorted here, as upstream sorts them).
    pub fn key(fields: &[(&str, &Value)]) -> Self {
        let mut sorted: Vec<&(&str, &Value)> = fields.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        let parts: Vec<String> =
            sorted.iter().map(|(k, v)| format!("{}:{}", json(&Value::from(*k)), json(v))).collect();
        Self(format!("k:{{{}}}", parts.join(",")).into())
    }

    pub fn value(v: &Value) -> Self {
        Self(format!("v:{}", json(v)).into())
    }

    pub fn index(i: usize) -> Self {
        Self(format!("i:{i}").into())
    }

    /// Reads a FieldsV1 key.
    pub fn parse(s: &str) -> Result<Self, BadElement> {
        let bad = || BadElement(s.to_string());
        let (prefix, rest) = s.split_at_checked(2).ok_or_else(bad)?;
        match prefix {
            "f:" => Ok(Self::field(rest)),
            "i:" => rest.parse::<usize>().map(Self::index).map_err(|_| bad()),
            "v:" => serde_json::from_str::<Value>(rest).map(|v| Self::value(&v)).map_err(|_| bad()),
            "k:" => {
                let obj: serde_json::Map<String, Value> =
                    serde_json::from_str(rest).map_err(|_| bad())?;
                if obj.is_empty() {
                    return Err(bad());
                }
                let fields: Vec<(&str, &Value)> =
                    obj.iter().map(|(k, v)| (k.as_str(), v)).collect();
                Ok(Self::key(&fields))
            }
            _ => Err(bad()),
        }
    }

    /// The FieldsV1 spelling.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The field name, for a field element.
    pub fn field_name(&self) -> Option<&str> {
        self.0.strip_prefix("f:")
    }

    pub fn element(&self) -> Element {
        let rest = &self.0[2..];
        match &self.0[..2] {
            "f:" => Element::Field(rest.to_string()),
            "i:" => Element::Index(rest.parse().unwrap_or_default()),
            "v:" => Element::Value(serde_json::from_str(rest).unwrap_or(Value::Null)),
            _ => {
                let obj: serde_json::Map<String, Value> =
                    serde_json::from_str(rest).unwrap_or_default();
                Element::Key(obj.into_iter().collect())
            }
        }
    }
}

fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// upstream's `value.ToString`: strings quoted, everything else as JSON.
fn value_text(v: &Value) -> String {
    json(v)
}

/// As upstream prints a path element in conflict messages: `.name`, `[name="web"]`, `[="x"]`,
/// `[0]`.
impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.element() {
            Element::Field(name) => write!(f, ".{name}"),
            Element::Key(fields) => {
                let parts: Vec<String> =
                    fields.iter().map(|(k, v)| format!("{k}={}", value_text(v))).collect();
                write!(f, "[{}]", parts.join(","))
            }
            Element::Value(v) => write!(f, "[={}]", value_text(&v)),
            Element::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// A path of struct fields: `Path::fields(&["spec", "replicas"])`.
    pub fn fields(names: &[&str]) -> Self {
        Self(names.iter().map(|n| PathElement::field(n)).collect())
    }

    pub fn child(&self, pe: PathElement) -> Self {
        let mut p = self.0.clone();
        p.push(pe);
        Self(p)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn elements_are_spelled_as_fields_v1_spells_them() {
        assert_eq!(PathElement::field("spec").as_str(), "f:spec");
        let (port, tcp) = (json!(80), json!("TCP"));
        let key = PathElement::key(&[("protocol", &tcp), ("containerPort", &port)]);
        assert_eq!(key.as_str(), r#"k:{"containerPort":80,"protocol":"TCP"}"#, "key fields sorted");
        assert_eq!(PathElement::value(&json!("a")).as_str(), r#"v:"a""#);
        assert_eq!(PathElement::index(3).as_str(), "i:3");
    }

    #[test]
    fn parsing_canonicalises_and_refuses_what_is_no_element() {
        let parsed = PathElement::parse(r#"k:{"protocol":"TCP", "containerPort":80}"#).unwrap();
        assert_eq!(parsed.as_str(), r#"k:{"containerPort":80,"protocol":"TCP"}"#);
        assert_eq!(PathElement::parse("f:a.b").unwrap().field_name(), Some("a.b"));
        assert_eq!(PathElement::parse("v:1").unwrap(), PathElement::value(&json!(1)));
        for bad in ["", "x", "q:a", "i:-1", "i:x", "v:{", "k:[]", "k:{}", "k:"] {
            assert_eq!(PathElement::parse(bad), Err(BadElement(bad.to_string())), "{bad}");
        }
    }

    #[test]
    fn paths_print_as_in_upstreams_conflict_messages() {
        let name = json!("nginx");
        let p = Path::fields(&["spec", "template", "spec", "containers"])
            .child(PathElement::key(&[("name", &name)]))
            .child(PathElement::field("image"));
        assert_eq!(p.to_string(), r#".spec.template.spec.containers[name="nginx"].image"#);
        let (port, tcp) = (json!(80), json!("TCP"));
        let ports = Path::fields(&["ports"])
            .child(PathElement::key(&[("port", &port), ("protocol", &tcp)]));
        assert_eq!(ports.to_string(), r#".ports[port=80,protocol="TCP"]"#);
        let fin = Path::fields(&["metadata", "finalizers"]).child(PathElement::value(&json!("x")));
        assert_eq!(fin.to_string(), r#".metadata.finalizers[="x"]"#);
        assert_eq!(Path::fields(&["args"]).child(PathElement::index(2)).to_string(), ".args[2]");
    }
}
