//! What `get --watch` prints, one object or event at a time, as kubectl's printers print across
//! a watch: [`TableWatch`] is its `HumanReadablePrinter` kept for the whole watch (headers when
//! the columns change and rows come, columns of header-less watch tables taken from the last
//! ones, an `EVENT` column with `--output-watch-events`) over one tabwriter that remembers its
//! column widths; [`ObjectWatch`] prints each object (or event) as `-o name|json|yaml|jsonpath|
//! custom-columns` prints one. Pure: text in, text out.

use serde_json::Value;

use super::jsonpath::fmt;
use super::table::{self, Aligner, Column, Table};
use super::{custom_columns, json, jsonpath, kyaml, yaml};
use crate::watch::EventType;

/// kubectl's event cell: the type padded to 8.
fn event_cell(kind: EventType) -> String {
    match kind {
        EventType::Added => "ADDED   ".into(),
        EventType::Modified => "MODIFIED".into(),
        EventType::Deleted => "DELETED ".into(),
        EventType::Error => "ERROR   ".into(),
        EventType::Bookmark => "BOOKMARK".into(),
    }
}

/// The table printer of a watch.
#[derive(Debug, Clone)]
pub struct TableWatch {
    options: table::Options,
    aligner: Aligner,
    last_columns: Option<Vec<Column>>,
    printed_headers: bool,
    /// Whether the header of the objects that are no table (a `Status`) was printed.
    printed_plain_header: bool,
}

impl TableWatch {
    pub fn new(options: table::Options) -> Self {
        TableWatch {
            options,
            aligner: Aligner::kubectl(),
            last_columns: None,
            printed_headers: false,
            printed_plain_header: false,
        }
    }

    /// One `Table` (the list's, or an event's), as the watch prints it. `show` false is
    /// kubectl's skip printer: the columns are learnt, no row is printed (`--watch-only`'s
    /// list, a watched object's first event).
    pub fn print(&mut self, table: &Value, event: Option<EventType>, show: bool) -> String {
        if table["kind"] != "Table" {
            return if show { self.print_plain(table, event) } else { String::new() };
        }
        let mut table = Table::of(table);
        if !show {
            table.rows.clear();
        }
        let columns = std::mem::take(&mut table.column_definitions);
        let same = self.last_columns.as_ref() == Some(&columns);
        let no_headers =
            self.options.no_headers || (self.printed_headers && (columns.is_empty() || same));
        if columns.is_empty() {
            table.column_definitions = self.last_columns.clone().unwrap_or_default();
        } else {
            table.column_definitions = columns.clone();
            if !same {
                self.last_columns = Some(columns);
                self.printed_headers = false;
            }
        }
        let has_rows = !table.rows.is_empty();
        if has_rows {
            self.printed_headers = true;
        }
        let (mut header, mut rows) = table::rows(&table, &self.options);
        if let Some(kind) = event {
            header.insert(0, "EVENT".into());
            for r in &mut rows {
                r.insert(0, event_cell(kind));
            }
        }
        let mut lines = Vec::new();
        if !no_headers && has_rows {
            lines.push(header);
        }
        lines.extend(rows);
        if lines.is_empty() {
            return String::new();
        }
        self.aligner.flush(&lines)
    }

    /// An object that is no table (an `ERROR` event's `Status`): kubectl's default columns,
    /// the name and the age it cannot tell.
    fn print_plain(&mut self, object: &Value, event: Option<EventType>) -> String {
        let mut lines = Vec::new();
        if !self.printed_plain_header && !self.options.no_headers {
            let mut header = Vec::new();
            if event.is_some() {
                header.push("EVENT".to_string());
            }
            if self.options.with_namespace {
                header.push("NAMESPACE".into());
            }
            header.extend(["NAME".to_string(), "AGE".to_string()]);
            lines.push(header);
        }
        self.printed_plain_header = true;
        let mut row = Vec::new();
        if let Some(kind) = event {
            row.push(event_cell(kind));
        }
        let meta = &object["metadata"];
        if self.options.with_namespace {
            row.push(meta["namespace"].as_str().unwrap_or_default().to_string());
        }
        row.push(meta["name"].as_str().unwrap_or_default().to_string());
        row.push("<unknown>".into());
        lines.push(row);
        self.aligner.flush(&lines)
    }
}

/// The object printers of a watch.
#[derive(Debug)]
pub enum ObjectWatch {
    /// `-o name`: `kind/name`, the kind as `pod` or `deployment.apps`.
    Name {
        kind: String,
    },
    Json,
    /// `-o yaml`: documents after the first preceded by `---`.
    Yaml {
        printed: usize,
    },
    /// `-o kyaml`: every document after `---`.
    Kyaml,
    JsonPath {
        template: Box<jsonpath::Template>,
        allow_missing: bool,
    },
    /// `-o custom-columns`: the header once, the rows on the watch's remembering tabwriter.
    CustomColumns {
        columns: Vec<custom_columns::Column>,
        no_headers: bool,
        printed: bool,
        aligner: Aligner,
    },
}

/// What an object printer may refuse.
#[derive(Debug, thiserror::Error)]
pub enum PrintError {
    #[error(transparent)]
    Template(#[from] jsonpath::TemplateError),
    #[error(transparent)]
    Columns(#[from] custom_columns::SpecError),
}

impl ObjectWatch {
    /// One object, or with `event` the watch event around it.
    pub fn print(
        &mut self,
        object: &Value,
        event: Option<EventType>,
    ) -> Result<String, PrintError> {
        let subject = match event {
            Some(kind) => serde_json::json!({"type": kind.as_str(), "object": object}),
            None => object.clone(),
        };
        Ok(match self {
            ObjectWatch::Name { kind } => {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                format!("{kind}/{name}\n")
            }
            ObjectWatch::Json => match event {
                // kubectl prints an event compact, its fields in Go's order: type, then object.
                Some(kind) => {
                    format!("{{\"type\":\"{}\",\"object\":{}}}\n", kind.as_str(), fmt::json(object))
                }
                None => json::to_string(object),
            },
            ObjectWatch::Yaml { printed } => {
                *printed += 1;
                let text = yaml::to_string(&subject);
                if *printed > 1 { format!("---\n{text}") } else { text }
            }
            ObjectWatch::Kyaml => match event {
                Some(kind) => kyaml::event_document(kind.as_str(), object),
                None => kyaml::document(object),
            },
            ObjectWatch::JsonPath { template, allow_missing } => {
                template.execute(&subject, *allow_missing)?
            }
            ObjectWatch::CustomColumns { columns, no_headers, printed, aligner } => {
                let (header, rows) = custom_columns::rows(columns, std::slice::from_ref(&subject))?;
                let mut lines = Vec::new();
                if !*no_headers && !*printed {
                    lines.push(header);
                }
                *printed = true;
                lines.extend(rows);
                aligner.flush(&lines)
            }
        })
    }
}

#[cfg(test)]
mod tests;
