//! Output as kubectl prints it: `-o` parsed once into [`Output`]; tables from the server's
//! `Table` ([`table`]); objects as JSON the way Go's `json.MarshalIndent` writes them
//! ([`json`]); YAML as go-yaml v2 writes it ([`yaml`]); `-o name`.

pub mod json;
pub mod table;
pub mod yaml;

use serde_json::Value;

use crate::errors::CliError;

/// What `-o` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// The server's table, priority-0 columns.
    Table,
    /// Every column.
    Wide,
    Name,
    Json,
    Yaml,
}

impl Output {
    pub fn parse(o: Option<&str>) -> Result<Output, CliError> {
        Ok(match o.unwrap_or("") {
            "" => Output::Table,
            "wide" => Output::Wide,
            "name" => Output::Name,
            "json" => Output::Json,
            "yaml" => Output::Yaml,
            other => {
                return Err(CliError::Usage(format!(
                    "unable to match a printer suitable for the output format \"{other}\", allowed formats are: json,name,wide,yaml"
                )));
            }
        })
    }

    /// Whether the output is the server's table (asked for as `as=Table`).
    pub fn is_table(&self) -> bool {
        matches!(self, Output::Table | Output::Wide)
    }
}

/// Objects as `-o json` prints them: one object named alone as itself, anything listed (or
/// several objects) as a `List`.
pub fn json_of(objects: &[Value], listed: bool) -> String {
    json::to_string(&as_one(objects, listed))
}

/// Objects as `-o yaml` prints them.
pub fn yaml_of(objects: &[Value], listed: bool) -> String {
    yaml::to_string(&as_one(objects, listed))
}

fn as_one(objects: &[Value], listed: bool) -> Value {
    match objects {
        [one] if !listed => one.clone(),
        many => serde_json::json!({
            "apiVersion": "v1",
            "items": many,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }),
    }
}
