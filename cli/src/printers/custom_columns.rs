//! `-o custom-columns=NAME:.metadata.name,…` and `-o custom-columns-file=FILE` (a line of
//! headers, a line of paths, whitespace-separated), as kubectl's `CustomColumnsPrinter`:
//! each path a JSONPath expression with its braces optional, missing keys allowed; a row per
//! object, a cell's values joined by `,` as Go's `%v` prints them, `<none>` when there are none.

use serde_json::Value;

use super::jsonpath::{self, Template, TemplateError, eval::V};

/// One column: its header and its parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub header: String,
    pub path: Template,
}

/// A spec kubectl refuses, in kubectl's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("custom-columns format specified but no custom columns given")]
    Empty,
    #[error("unexpected custom-columns spec: {0}, expected <header>:<json-path-expr>")]
    Column(String),
    #[error(
        "unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{{name1.name2}}' or '{{.name1.name2}}'"
    )]
    Path(String),
    #[error("{0}")]
    Template(TemplateError),
    #[error("error reading template {path}, {reason}")]
    Read { path: String, reason: String },
    #[error(
        "invalid template, missing {0} line. Expected format is one line of space separated headers, one line of space separated column specs."
    )]
    MissingLine(&'static str),
    #[error("number of headers ({headers}) and field specifications ({specs}) don't match")]
    Count { headers: usize, specs: usize },
    /// A path failed on an object (an index out of bounds, say).
    #[error("{0}")]
    Execute(String),
}

/// `NAME:.metadata.name,RV:.metadata.resourceVersion`.
pub fn parse_spec(spec: &str) -> Result<Vec<Column>, SpecError> {
    if spec.is_empty() {
        return Err(SpecError::Empty);
    }
    spec.split(',')
        .map(|part| {
            let (header, path) =
                part.split_once(':').ok_or_else(|| SpecError::Column(part.to_string()))?;
            column(header, path)
        })
        .collect()
}

/// The `-file` form: headers on the first line, paths on the second.
pub fn parse_file(text: &str) -> Result<Vec<Column>, SpecError> {
    let mut lines = text.lines();
    let headers: Vec<&str> =
        lines.next().ok_or(SpecError::MissingLine("header"))?.split_whitespace().collect();
    let specs: Vec<&str> =
        lines.next().ok_or(SpecError::MissingLine("spec"))?.split_whitespace().collect();
    if headers.len() != specs.len() {
        return Err(SpecError::Count { headers: headers.len(), specs: specs.len() });
    }
    headers.iter().zip(&specs).map(|(h, s)| column(h, s)).collect()
}

fn column(header: &str, path: &str) -> Result<Column, SpecError> {
    let template = relaxed(path)?;
    let path = Template::parse(&template).map_err(SpecError::Template)?;
    Ok(Column { header: header.to_string(), path })
}

/// kubectl's `RelaxedJSONPathExpression`: `a.b`, `.a.b`, `{a.b}` and `{.a.b}` all → `{.a.b}`.
pub fn relaxed(path: &str) -> Result<String, SpecError> {
    if path.is_empty() {
        return Ok(String::new());
    }
    let bad = || SpecError::Path(path.to_string());
    let inner = match path.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}').ok_or_else(bad)?,
        None => path,
    };
    let inner = inner.strip_prefix('.').filter(|s| !s.is_empty()).unwrap_or(inner);
    if inner.is_empty() || inner.contains(['{', '}']) {
        return Err(bad());
    }
    Ok(format!("{{.{inner}}}"))
}

/// The header and a row per object.
pub type Rows = (Vec<String>, Vec<Vec<String>>);

/// The header and a row per object; a path failing on an object fails the whole.
pub fn rows(columns: &[Column], objects: &[Value]) -> Result<Rows, SpecError> {
    let header = columns.iter().map(|c| c.header.clone()).collect();
    let rows = objects
        .iter()
        .map(|o| columns.iter().map(|c| cell(&c.path, o)).collect())
        .collect::<Result<_, _>>()?;
    Ok((header, rows))
}

fn cell(path: &Template, object: &Value) -> Result<String, SpecError> {
    let groups = path.find(object, true).map_err(SpecError::Execute)?;
    if groups.first().is_none_or(Vec::is_empty) {
        return Ok("<none>".into());
    }
    Ok(groups.iter().flatten().map(v).collect::<Vec<_>>().join(","))
}

fn v(value: &V<'_>) -> String {
    jsonpath::fmt::go_v(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::printers::table::align;
    use serde_json::json;

    fn objects() -> Vec<Value> {
        vec![
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "bb"}}),
        ]
    }

    #[test]
    fn inline_spec_gives_a_row_per_object_with_none_for_missing() {
        let cols = parse_spec("NAME:.metadata.name,X:{.metadata.labels.x},DATA:data").unwrap();
        let (h, r) = rows(&cols, &objects()).unwrap();
        let mut lines = vec![h];
        lines.extend(r);
        assert_eq!(
            align(&lines),
            "NAME   X        DATA\na      1        map[k:v]\nbb     <none>   <none>\n"
        );
    }

    #[test]
    fn several_values_in_a_cell_are_joined_by_commas() {
        let cols = parse_spec("N:.items[*].metadata.name").unwrap();
        let (_, r) = rows(&cols, &[json!({"items": objects()})]).unwrap();
        assert_eq!(r, [["a,bb"]]);
        let bad = parse_spec("N:.items[5]").unwrap();
        assert_eq!(
            rows(&bad, &[json!({"items": []})]).unwrap_err().to_string(),
            "array index out of bounds: index 5, length 0"
        );
    }

    #[test]
    fn the_file_form_reads_headers_then_paths() {
        let cols = parse_file("NAME   LABEL\n.metadata.name  metadata.labels.x\n").unwrap();
        assert_eq!(cols[1].header, "LABEL");
        assert_eq!(cols[1].path.raw, "{.metadata.labels.x}");
        assert_eq!(
            parse_file("A B\n.x\n").unwrap_err().to_string(),
            "number of headers (2) and field specifications (1) don't match"
        );
        assert_eq!(parse_file("A\n").unwrap_err(), SpecError::MissingLine("spec"));
    }

    #[test]
    fn bad_specs_are_refused_in_kubectls_words() {
        assert_eq!(parse_spec("").unwrap_err(), SpecError::Empty);
        assert_eq!(
            parse_spec("NAME").unwrap_err().to_string(),
            "unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"
        );
        assert!(matches!(parse_spec("N:{.a}}").unwrap_err(), SpecError::Path(_)));
        assert_eq!(
            parse_spec("N:.a[").unwrap_err().to_string(),
            "error parsing jsonpath {.a[}, unterminated array"
        );
    }
}
