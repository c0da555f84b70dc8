//! Output as kubectl prints it: `-o` parsed once into [`Output`]; tables from the server's
//! `Table` ([`table`]); objects as JSON the way Go's `json.MarshalIndent` writes them
//! ([`json`]); YAML as go-yaml v2 writes it ([`yaml`]); KYAML ([`kyaml`]); `-o name`; templates
//! ([`jsonpath`]) and columns of JSONPath expressions ([`custom_columns`]); what `get --watch`
//! prints one object or event at a time ([`watch`]).

pub mod custom_columns;
pub mod json;
pub mod jsonpath;
pub mod kyaml;
pub mod table;
pub mod watch;
pub mod yaml;

use std::path::Path;

use serde_json::Value;

use crate::errors::CliError;

/// What `-o` asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The server's table, priority-0 columns.
    Table,
    /// Every column.
    Wide,
    Name,
    Json,
    Yaml,
    /// `-o kyaml`.
    Kyaml,
    /// `-o jsonpath=…` or `-o jsonpath-file=…`.
    JsonPath(Box<jsonpath::Template>),
    /// `-o custom-columns=…` or `-o custom-columns-file=…`.
    CustomColumns(Vec<custom_columns::Column>),
}

impl Output {
    pub fn parse(o: Option<&str>) -> Result<Output, CliError> {
        Ok(match o.unwrap_or("") {
            "" => Output::Table,
            "wide" => Output::Wide,
            "name" => Output::Name,
            "json" => Output::Json,
            "yaml" => Output::Yaml,
            "kyaml" => Output::Kyaml,
            other => {
                let (format, value) = other.split_once('=').unwrap_or((other, ""));
                match format {
                    "jsonpath" => Output::JsonPath(Box::new(jsonpath::Template::parse(value)?)),
                    "jsonpath-file" => {
                        let text = read(value).map_err(|reason| jsonpath::TemplateError::Read {
                            path: value.to_string(),
                            reason,
                        })?;
                        Output::JsonPath(Box::new(jsonpath::Template::parse(&text)?))
                    }
                    "custom-columns" => Output::CustomColumns(custom_columns::parse_spec(value)?),
                    "custom-columns-file" => {
                        let text = read(value).map_err(|reason| {
                            custom_columns::SpecError::Read { path: value.to_string(), reason }
                        })?;
                        Output::CustomColumns(custom_columns::parse_file(&text)?)
                    }
                    _ => {
                        return Err(CliError::Usage(format!(
                            "unable to match a printer suitable for the output format \"{other}\", allowed formats are: custom-columns,custom-columns-file,json,jsonpath,jsonpath-file,name,wide,yaml"
                        )));
                    }
                }
            }
        })
    }

    /// Whether the output is the server's table (asked for as `as=Table`).
    pub fn is_table(&self) -> bool {
        matches!(self, Output::Table | Output::Wide)
    }
}

/// The object without `metadata.managedFields`, as kubectl's printers show objects unless
/// `--show-managed-fields` (its `OmitManagedFieldsPrinter`).
pub fn omit_managed_fields(object: &mut Value) {
    if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
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

/// Objects as `-o kyaml` prints them: one document for one object named alone or for the
/// `List` of everything.
pub fn kyaml_of(objects: &[Value], listed: bool) -> String {
    kyaml::document(&as_one(objects, listed))
}

/// A template file's text, or the reason it cannot be read worded as Go's `os.Open`.
fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(Path::new(path)).map_err(|e| {
        let reason = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        format!("open {path}: {reason}")
    })
}

/// Objects as `-o jsonpath` prints them: the template executed over one object named alone,
/// or over the `List` of everything.
pub fn jsonpath_of(
    t: &jsonpath::Template,
    objects: &[Value],
    listed: bool,
    allow_missing: bool,
) -> Result<String, jsonpath::TemplateError> {
    t.execute(&as_one(objects, listed), allow_missing)
}

/// Objects as `-o custom-columns` prints them: a row per object, aligned as tables are.
pub fn custom_columns_of(
    columns: &[custom_columns::Column],
    objects: &[Value],
    no_headers: bool,
) -> Result<String, custom_columns::SpecError> {
    let (header, rows) = custom_columns::rows(columns, objects)?;
    let mut lines = Vec::new();
    if !no_headers {
        lines.push(header);
    }
    lines.extend(rows);
    Ok(table::align(&lines))
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
