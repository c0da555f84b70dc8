//! `explain`'s rendering of an OpenAPI v3 document, as kubectl 1.35's `plaintext` template
//! (`pkg/explain/v2/templates/plaintext.tmpl`) renders it: the kind found by the operation of
//! the resource's path, its schema found by `x-kubernetes-group-version-kind`, the field path
//! followed through references, `allOf`, list items and map values, then the description
//! (wrapped at 76 columns) and the fields, sorted, each with its type guessed as the template
//! guesses it and its description (or, with `--recursive`, the tree of field names).
//!
//! The template writes as it goes: a field that does not exist fails after the header is out,
//! so [`render`] returns what was written with the error.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::Value;

pub mod wordwrap;

/// What `explain` asks for: a resource's group, version and plural, and a field path in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub field_path: &'a [String],
    pub recursive: bool,
}

/// A failed rendering: what was written before the failure, and the failure in kubectl's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RenderError {
    pub written: String,
    pub message: String,
}

/// Go templates' truth: absent, null, false, zero, and empty strings, lists and maps are false.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// A key of an object schema, if the schema is an object and the key is truthy.
fn get<'v>(schema: &'v Value, key: &str) -> Option<&'v Value> {
    schema.get(key).filter(|v| truthy(Some(v)))
}

/// The schema a local reference (`#/components/schemas/…`) points at in `doc`.
fn resolve<'d>(reference: &str, doc: &'d Value) -> Option<&'d Value> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return None;
    }
    let mut cur = doc;
    for k in fragment.split('/').filter(|k| !k.is_empty()) {
        cur = cur.get(k).filter(|v| v.is_object())?;
    }
    Some(cur)
}

/// A schema's `$ref`, or the empty string.
fn reference(schema: &Value) -> &str {
    schema.get("$ref").and_then(Value::as_str).unwrap_or("")
}

/// The schema itself, or what its reference points at.
fn resolved<'d>(schema: &'d Value, doc: &'d Value) -> &'d Value {
    resolve(reference(schema), doc).filter(|s| truthy(Some(s))).unwrap_or(schema)
}

/// `additionalProperties` when it is a schema rather than a boolean.
fn map_values(schema: &Value) -> Option<&Value> {
    get(schema, "additionalProperties").filter(|v| !v.is_boolean())
}

/// The properties of a schema, sorted by name (Go's `range` over a map).
fn properties(schema: &Value) -> Vec<(&String, &Value)> {
    let mut props: Vec<(&String, &Value)> =
        schema.get("properties").and_then(Value::as_object).into_iter().flatten().collect();
    props.sort_by(|a, b| a.0.cmp(b.0));
    props
}

fn all_of(schema: &Value) -> &[Value] {
    schema.get("allOf").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The template's `indent`: `amount` spaces before the text and after each newline in it.
fn indent(amount: usize, text: &str) -> String {
    let pad = " ".repeat(amount);
    format!("{pad}{}", text.replace('\n', &format!("\n{pad}")))
}

/// Go's `%v` of a value, as `throw` formats a group-version-kind.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let items: Vec<String> =
                keys.iter().map(|k| format!("{k}:{}", go_value(&o[k.as_str()]))).collect();
            format!("map[{}]", items.join(" "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        other => other.to_string(),
    }
}

/// The kind of the resource's path: the first operation tagged with one, searching the list
/// and object paths, cluster-scoped then namespaced.
fn kind_of<'d>(doc: &'d Value, r: &Request<'_>) -> Option<&'d Value> {
    let prefix = if r.group.is_empty() { "/api".to_owned() } else { format!("/apis/{}", r.group) };
    let (v, res) = (r.version, r.resource);
    let searched = [
        format!("{prefix}/{v}/{res}"),
        format!("{prefix}/{v}/{res}/{{name}}"),
        format!("{prefix}/{v}/namespaces/{{namespace}}/{res}"),
        format!("{prefix}/{v}/namespaces/{{namespace}}/{res}/{{name}}"),
    ];
    let mut gvk = None;
    for path in &searched {
        let Some(ops) = doc.get("paths").and_then(|p| get(p, path)) else { continue };
        for method in ["get", "post", "put", "patch", "delete"] {
            if let Some(op) = get(ops, method) {
                gvk = op.get("x-kubernetes-group-version-kind");
                if truthy(gvk) {
                    break;
                }
            }
        }
    }
    gvk.filter(|g| truthy(Some(g)))
}

/// Renders the explanation of `r` from `doc`, kubectl's `plaintext` output.
pub fn render(doc: &Value, r: &Request<'_>) -> Result<String, RenderError> {
    let mut out = String::new();
    let fail = |written: &str, message: String| RenderError { written: written.into(), message };
    let Some(gvk) = kind_of(doc, r) else {
        let gvr = format!("{}/{}, Resource={}", r.group, r.version, r.resource);
        return Err(fail(&out, format!("error: GVR ({gvr}) not found in OpenAPI schema")));
    };
    if let Some(group) = get(gvk, "group") {
        let _ = writeln!(out, "GROUP:      {}", go_value(group));
    }
    let field = |k: &str| gvk.get(k).map(go_value).unwrap_or_else(|| "<no value>".into());
    let _ = writeln!(out, "KIND:       {}", field("kind"));
    let _ = writeln!(out, "VERSION:    {}", field("version"));
    out.push('\n');
    let mut schemas: Vec<(&String, &Value)> = doc
        .pointer("/components/schemas")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .collect();
    schemas.sort_by(|a, b| a.0.cmp(b.0));
    let found = schemas.into_iter().find(|(_, s)| {
        s.get("x-kubernetes-group-version-kind")
            .and_then(Value::as_array)
            .is_some_and(|kinds| kinds.iter().any(|k| k == gvk))
    });
    let text = match found {
        Some((_, schema)) => {
            let e = Explainer { doc, recursive: r.recursive };
            let text = e.output(schema, &HashSet::new(), r.field_path);
            if text.is_empty() {
                let name = r.field_path.last().map_or("", String::as_str);
                return Err(fail(&out, format!("error: field \"{name}\" does not exist")));
            }
            text
        }
        None => String::new(),
    };
    if text.is_empty() {
        return Err(fail(
            &out,
            format!("error: GVK {} not found in OpenAPI schema", go_value(gvk)),
        ));
    }
    out.push_str(&text);
    out.push('\n');
    Ok(out)
}

/// The template's sub-templates, over one document.
struct Explainer<'d> {
    doc: &'d Value,
    recursive: bool,
}

impl<'d> Explainer<'d> {
    /// `output`: follows the field path, then prints the description and the fields.
    fn output(&self, schema: &'d Value, history: &HashSet<&'d str>, path: &[String]) -> String {
        let refs = reference(schema);
        let mut next = history.clone();
        next.insert(refs);
        let resolved = resolved(schema, self.doc);
        let mut out = String::new();
        if path.is_empty() {
            out.push_str("DESCRIPTION:\n");
            let mut description = self.description(resolved);
            if description.is_empty() {
                description = "<empty>".into();
            }
            out.push_str(&indent(4, &wordwrap::wrap(&description, 76)));
            out.push('\n');
            let fields = self.field_list(resolved, 1, &HashSet::new());
            if !fields.is_empty() {
                out.push_str("FIELDS:\n");
                out.push_str(&fields);
            }
        } else if !refs.is_empty() && history.contains(refs) {
            // A cycle: nothing.
        } else if let Some(sub) = get(resolved, "properties").and_then(|p| get(p, &path[0])) {
            if path.len() == 1 {
                let _ = writeln!(out, "FIELD: {} <{}>", path[0], self.type_guess(sub));
                out.push_str(&self.enums(sub, true, -1, 0));
                out.push_str("\n\n");
            }
            out.push_str(&self.output(sub, &HashSet::new(), &path[1..]));
        } else if let Some(items) = get(resolved, "items") {
            out.push_str(&self.output(items, &next, path));
        } else if let Some(values) = map_values(resolved) {
            out.push_str(&self.output(values, &next, path));
        } else {
            for sub in all_of(resolved) {
                let text = self.output(sub, &next, path);
                if !text.is_empty() {
                    out.push_str(&text);
                    break;
                }
            }
        }
        out
    }

    /// `fieldList`: each property's detail (or, recursively, its name and type with its own
    /// fields below), then those of `allOf`, list items and map values.
    fn field_list(&self, schema: &'d Value, level: usize, history: &HashSet<&'d str>) -> String {
        let refs = reference(schema);
        let mut out = String::new();
        if !refs.is_empty() && history.contains(refs) {
            return out;
        }
        let mut next = history.clone();
        next.insert(refs);
        let resolved = resolved(schema, self.doc);
        for (name, sub) in properties(resolved) {
            out.push_str(&self.field_detail(name, sub, resolved, level));
            if self.recursive {
                out.push_str(&self.field_list(sub, level + 1, &next));
            }
        }
        for sub in all_of(resolved) {
            out.push_str(&self.field_list(sub, level, &next));
        }
        if let Some(items) = get(resolved, "items") {
            out.push_str(&self.field_list(items, level, &next));
        }
        if let Some(values) = map_values(resolved) {
            out.push_str(&self.field_list(values, level, &next));
        }
        out
    }

    /// `fieldDetail`: `name <type>`, `-required-` if `parent` requires it, its values if an
    /// enum, and (unless recursive) its description.
    fn field_detail(&self, name: &str, schema: &'d Value, parent: &Value, level: usize) -> String {
        let amount = level * 2;
        let mut out = format!("{}\t<{}>", indent(amount, name), self.type_guess(schema));
        let required = parent.get("required").and_then(Value::as_array);
        if required.is_some_and(|r| r.iter().any(|n| n == name)) {
            out.push_str(" -required-");
        }
        out.push_str(&self.enums(schema, false, 4, amount));
        out.push('\n');
        if !self.recursive {
            let description = get(schema, "description").and_then(Value::as_str);
            let description = description.unwrap_or("<no description>");
            let width = 78usize.saturating_sub(amount);
            out.push_str(&indent(amount + 2, &wordwrap::wrap(description, width)));
            out.push_str("\n\n");
        }
        out
    }

    /// `description`: the schema's (or its reference's) description, then those of `allOf`,
    /// list items and map values, each followed by a newline.
    fn description(&self, schema: &'d Value) -> String {
        let s = resolved(schema, self.doc);
        let mut out = String::new();
        if !truthy(Some(s)) {
            return out;
        }
        if let Some(d) = get(s, "description") {
            out.push_str(d.as_str().map_or_else(|| go_value(d), str::to_owned).as_str());
            out.push('\n');
        }
        for sub in all_of(s) {
            out.push_str(&self.description(sub));
        }
        if let Some(items) = get(s, "items") {
            out.push_str(&self.description(items));
        }
        if let Some(values) = map_values(s) {
            out.push_str(&self.description(values));
        }
        out
    }

    /// `typeGuess`: `[]T` for lists, `map[string]T` for maps, a referenced object's type name,
    /// a primitive's type, or `Object`.
    fn type_guess(&self, schema: &'d Value) -> String {
        if let Some(items) = get(schema, "items") {
            return format!("[]{}", self.type_guess(items));
        }
        if let Some(values) = map_values(schema) {
            return format!("map[string]{}", self.type_guess(values));
        }
        let all = all_of(schema);
        if all.len() == 1 && !truthy(schema.get("properties")) {
            return self.type_guess(&all[0]);
        }
        let refs = reference(schema);
        if !refs.is_empty() {
            let target = resolve(refs, self.doc).filter(|s| truthy(Some(s)));
            let target_type = target.and_then(|t| get(t, "type"));
            return match target_type {
                Some(t) if t != "object" => go_value(t),
                _ => {
                    let name = refs.rsplit('/').next().unwrap_or("");
                    let short = name.rsplit('.').next().unwrap_or("");
                    if short.is_empty() { "Object".into() } else { short.into() }
                }
            };
        }
        match get(schema, "type") {
            Some(t) if t == "object" => "Object".into(),
            Some(t) => go_value(t),
            None => "Object".into(),
        }
    }

    /// `extractEnum`: `ENUM:` and a value a line (the field's own view), or `enum: a, b, …`
    /// under the field's line, at most `limit` values (`-1`: all).
    fn enums(&self, schema: &Value, long_view: bool, limit: i64, amount: usize) -> String {
        let Some(values) = get(schema, "enum").and_then(Value::as_array) else {
            return String::new();
        };
        let mut out =
            if long_view { "ENUM:".to_owned() } else { format!("\n{}enum: ", " ".repeat(amount)) };
        for (i, v) in values.iter().enumerate() {
            if limit > -1 && i64::try_from(i).unwrap_or(i64::MAX) >= limit {
                out.push_str(", ....");
                break;
            }
            if i > 0 && !long_view {
                out.push_str(", ");
            } else if long_view {
                out.push_str("\n    ");
            }
            match v {
                Value::String(s) if s.is_empty() => out.push_str("\"\""),
                other => out.push_str(&go_value(other)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
