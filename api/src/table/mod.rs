//! Tables as the API server serves them (`as=Table`): kubectl's columns per kind
//! ([`printers`]) and the `meta.k8s.io/v1` Table around their rows. apiserver-lite answers
//! list and get requests with them; kubectl-lite builds the same Table from a kubelet's own
//! lists, where no API server converts them.

pub mod printers;

use serde_json::{Value, json};

pub use printers::{Column, Printer, Row};

/// What a row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// Upstream's `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h) = (s / 60, s / 3600);
    let (d, y) = (h / 24, h / (24 * 365));
    let pair = |a: i64, ua: &str, b: i64, ub: &str| {
        if b == 0 { format!("{a}{ua}") } else { format!("{a}{ua}{b}{ub}") }
    };
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => pair(m, "m", s % 60, "s"),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => pair(h, "h", m % 60, "m"),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => pair(d, "d", h % 24, "h"),
        _ if h < 24 * 365 * 2 => format!("{d}d"),
        _ if h < 24 * 365 * 8 => pair(y, "y", d % 365, "d"),
        _ => format!("{y}y"),
    }
}

fn row(printer: Printer, o: &Value, include: IncludeObject, now: jiff::Timestamp) -> Value {
    let cells: Vec<Value> = printer(o, now).into_iter().map(|(_, cell)| cell).collect();
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = o.clone(),
        IncludeObject::Metadata => {
            row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
        }
    }
    row
}

/// The column definitions of a printer's rows, for objects called `singular`.
pub fn column_definitions(printer: Printer, singular: &str) -> Value {
    json!(
        printers::columns(printer)
            .iter()
            .map(|c| json!({
                "name": c.name, "type": c.ty, "format": if c.name == "Name" { "name" } else { "" },
                "description": format!("{} of the {singular}", c.name), "priority": c.priority,
            }))
            .collect::<Vec<_>>()
    )
}

/// A Table of `objects` (each printed by `printer`, called `singular`); `with_columns` is false
/// for watch events after the first.
pub fn table(
    printer: Printer,
    singular: &str,
    objects: &[Value],
    include: IncludeObject,
    metadata: Value,
    with_columns: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": objects.iter().map(|o| row(printer, o, include, now)).collect::<Vec<_>>(),
    });
    if with_columns {
        t["columnDefinitions"] = column_definitions(printer, singular);
    }
    t
}
