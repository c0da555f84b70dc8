//! Tables as kubectl prints the server's `meta.k8s.io/v1` `Table`: the priority-0 columns (all
//! with `-o wide`), upper-cased headers, `NAMESPACE` first with `-A`, `kind/name` when several
//! types are printed, `LABELS` with `--show-labels` and a column per `-L` key; aligned as Go's
//! `tabwriter` with kubectl's settings (minimum width 6, padding 3, the last column unpadded).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// How rows are decorated.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub wide: bool,
    pub with_namespace: bool,
    /// `pod` or `deployment.apps`: prefixes names when several types are printed.
    pub kind_prefix: Option<String>,
    pub show_labels: bool,
    pub label_columns: Vec<String>,
    pub no_headers: bool,
}

/// What of a `meta.k8s.io/v1` `Table` the printer reads: the columns, each row's cells and its
/// object's namespace and labels. Decoded straight from the response, everything else (the
/// rows' managed fields, annotations, owner references) skipped unread, so 10,000 rows cost
/// their cells and not a tree of the whole response.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Table {
    pub column_definitions: Vec<Column>,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Column {
    pub name: String,
    pub priority: i64,
    pub format: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Row {
    pub cells: Vec<Value>,
    pub object: RowObject,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RowObject {
    pub metadata: RowMetadata,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RowMetadata {
    pub namespace: Option<String>,
    /// Sorted by key, as kubectl prints them.
    pub labels: Option<BTreeMap<String, String>>,
}

impl Table {
    /// A table from a decoded one (a watch event's object, a sorted list); what does not fit
    /// the shape (no table at all) reads as an empty table.
    pub fn of(v: &Value) -> Table {
        Table::deserialize(v).unwrap_or_default()
    }
}

/// The header and rows of one `Table` response, as cells.
pub fn rows(table: &Table, o: &Options) -> (Vec<String>, Vec<Vec<String>>) {
    let columns = &table.column_definitions;
    let shown: Vec<usize> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| o.wide || c.priority == 0)
        .map(|(i, _)| i)
        .collect();
    let mut header = Vec::new();
    if o.with_namespace {
        header.push("NAMESPACE".to_string());
    }
    for &i in &shown {
        header.push(columns[i].name.to_uppercase());
    }
    for key in &o.label_columns {
        header.push(label_header(key));
    }
    if o.show_labels {
        header.push("LABELS".into());
    }
    let mut out = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let meta = &row.object.metadata;
        let labels = meta.labels.as_ref();
        let mut line = Vec::with_capacity(header.len());
        if o.with_namespace {
            line.push(meta.namespace.clone().unwrap_or_default());
        }
        for &i in &shown {
            let mut cell = cell_text(row.cells.get(i).unwrap_or(&Value::Null));
            if columns[i].format == "name"
                && let Some(k) = &o.kind_prefix
            {
                cell = format!("{k}/{cell}");
            }
            line.push(cell);
        }
        for key in &o.label_columns {
            line.push(labels.and_then(|l| l.get(key)).cloned().unwrap_or_default());
        }
        if o.show_labels {
            line.push(labels_text(labels));
        }
        out.push(line);
    }
    (header, out)
}

/// `-L app.kubernetes.io/name` → `NAME`: the key's last path segment, upper-cased.
fn label_header(key: &str) -> String {
    key.rsplit('/').next().unwrap_or(key).to_uppercase()
}

/// A cell as Go's `%v` prints it.
fn cell_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// `a=b,c=d` in key order, or `<none>`.
pub fn labels_text(labels: Option<&BTreeMap<String, String>>) -> String {
    match labels {
        Some(m) if !m.is_empty() => {
            m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
        }
        _ => "<none>".into(),
    }
}

/// Lines aligned as Go's `tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)` aligns tab-separated
/// cells (kubectl's tables): each column but the last as wide as its widest cell plus 3, and at
/// least 6.
pub fn align(lines: &[Vec<String>]) -> String {
    tabbed(lines, 6, 3)
}

/// Lines aligned as a Go `tabwriter` with `minwidth` and `padding` (space-padded, no flags)
/// aligns tab-separated cells.
pub fn tabbed(lines: &[Vec<String>], minwidth: usize, padding: usize) -> String {
    Aligner::new(minwidth, padding).flush(lines)
}

/// A tabwriter across flushes: with `remember` (kubectl's `RememberWidths`, as its watch
/// output is written) a column is never narrower than it was in an earlier flush; without,
/// each flush is aligned on its own.
#[derive(Debug, Clone)]
pub struct Aligner {
    minwidth: usize,
    padding: usize,
    remember: bool,
    widths: Vec<usize>,
}

impl Aligner {
    pub fn new(minwidth: usize, padding: usize) -> Self {
        Aligner { minwidth, padding, remember: false, widths: Vec::new() }
    }

    /// kubectl's table writer (`printers.GetNewTabWriter`): minimum width 6, padding 3,
    /// widths remembered across flushes.
    pub fn kubectl() -> Self {
        Aligner { remember: true, ..Aligner::new(6, 3) }
    }

    /// The lines aligned: each column but a line's last as wide as its widest cell plus the
    /// padding, at least the minimum width (and, remembering, at least as wide as before).
    pub fn flush(&mut self, lines: &[Vec<String>]) -> String {
        let columns = lines.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for line in lines {
            for (i, cell) in line.iter().enumerate() {
                if i + 1 < line.len() {
                    widths[i] =
                        widths[i].max(cell.chars().count() + self.padding).max(self.minwidth);
                }
            }
        }
        if self.remember {
            for (i, w) in widths.iter_mut().enumerate() {
                if *w == 0 {
                    continue;
                }
                match self.widths.get_mut(i) {
                    Some(old) if *old > *w => *w = *old,
                    Some(old) => *old = *w,
                    None => self.widths.push(*w),
                }
            }
        }
        let mut out = String::new();
        for line in lines {
            for (i, cell) in line.iter().enumerate() {
                out.push_str(cell);
                if i + 1 < line.len() {
                    for _ in cell.chars().count()..widths[i] {
                        out.push(' ');
                    }
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table() -> Table {
        Table::of(&json!({"kind": "Table", "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "priority": 0},
            {"name": "Ready", "type": "string", "priority": 0},
            {"name": "IP", "type": "string", "priority": 1},
            {"name": "Age", "type": "string", "priority": 0}],
          "rows": [{"cells": ["nginx", "1/1", "10.0.0.1", "5m"],
                    "object": {"metadata": {"name": "nginx", "namespace": "a", "labels": {"run": "x", "app": "y"}}}}]}))
    }

    #[test]
    fn priority_zero_columns_print_aligned_as_kubectl() {
        let (h, r) = rows(&table(), &Options::default());
        let mut lines = vec![h];
        lines.extend(r);
        assert_eq!(align(&lines), "NAME    READY   AGE\nnginx   1/1     5m\n");
    }

    #[test]
    fn wide_namespace_kind_and_labels_decorate_the_rows() {
        let o = Options {
            wide: true,
            with_namespace: true,
            kind_prefix: Some("pod".into()),
            show_labels: true,
            label_columns: vec!["app".into()],
            no_headers: false,
        };
        let (h, r) = rows(&table(), &o);
        assert_eq!(h, ["NAMESPACE", "NAME", "READY", "IP", "AGE", "APP", "LABELS"]);
        assert_eq!(r[0], ["a", "pod/nginx", "1/1", "10.0.0.1", "5m", "y", "app=y,run=x"]);
    }

    #[test]
    fn a_decoded_response_keeps_cells_namespace_and_labels_and_skips_the_rest() {
        let body = br#"{"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "9"},
          "columnDefinitions": [{"name": "Name", "type": "string", "format": "name", "description": "d", "priority": 0},
                                {"name": "Restarts", "type": "integer", "format": "", "priority": 0}],
          "rows": [{"cells": ["a", 3], "conditions": null,
                    "object": {"kind": "PartialObjectMetadata", "metadata": {"name": "a", "namespace": "n",
                      "labels": {"z": "1", "b": "2"}, "annotations": {"x": "y"},
                      "managedFields": [{"manager": "m", "fieldsV1": {"f:metadata": {}}}]}}},
                   {"cells": ["b", null]}]}"#;
        let t: Table = serde_json::from_slice(body).unwrap();
        let o = Options { with_namespace: true, show_labels: true, ..Options::default() };
        let (h, r) = rows(&t, &o);
        assert_eq!(h, ["NAMESPACE", "NAME", "RESTARTS", "LABELS"]);
        assert_eq!(r[0], ["n", "a", "3", "b=2,z=1"]);
        assert_eq!(r[1], ["", "b", "<nil>", "<none>"]);
    }

    fn cells(line: &[&str]) -> Vec<String> {
        line.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn a_remembering_aligner_never_narrows_a_column_across_flushes() {
        let mut a = Aligner::kubectl();
        let first = a.flush(&[cells(&["NAME", "AGE"]), cells(&["a-long-name", "1s"])]);
        assert_eq!(first, "NAME          AGE\na-long-name   1s\n");
        // Narrower: padded to the first flush's width.
        assert_eq!(a.flush(&[cells(&["b", "2s"])]), "b             2s\n");
        // Wider: the column grows, and stays grown.
        assert_eq!(a.flush(&[cells(&["a-longer-name-yet", "3s"])]), "a-longer-name-yet   3s\n");
        assert_eq!(a.flush(&[cells(&["c", "4s"])]), "c                   4s\n");
        // Without remembering, each flush stands alone.
        let mut plain = Aligner::new(6, 3);
        plain.flush(&[cells(&["a-long-name", "1s"])]);
        assert_eq!(plain.flush(&[cells(&["b", "2s"])]), "b     2s\n");
    }
}
