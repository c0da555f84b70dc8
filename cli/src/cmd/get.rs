//! `get`: tables from the server's `Table` (kubectl asks `as=Table` and prints what the server
//! computed), or the objects as JSON, YAML or names. Objects not found are reported after the
//! others are printed. `--sort-by` (`sort`) orders each table's rows by a field of the full
//! objects the table then carries (`includeObject=Object`), or the listed objects. `--watch`,
//! `--watch-only` and `--output-watch-events` go to `watch`: the list, then its changes.
//! `--subresource` reads named objects' `status` or `scale` (the server's table of it too).

pub mod sort;
pub mod watch;

use std::sync::Arc;

use http::Method;
use serde_json::Value;

use crate::builder::{self, Selection, Target};
use crate::discovery::Resource;
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::table::{self, Table};
use crate::printers::{self, Output};

/// kubectl's `Accept` for tables.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE[.VERSION][.GROUP] [NAME ...] or TYPE/NAME ...
    pub args: Vec<String>,
    /// Output format: json, yaml, name, wide, jsonpath=…, jsonpath-file=…, custom-columns=…,
    /// custom-columns-file=….
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Selector (field query) to filter on.
    #[arg(long)]
    pub field_selector: Option<String>,
    /// List the requested object(s) across all namespaces.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// When printing, show all labels as the last column.
    #[arg(long)]
    pub show_labels: bool,
    /// Label keys to show as columns.
    #[arg(short = 'L', long = "label-columns", value_delimiter = ',')]
    pub label_columns: Vec<String>,
    /// Don't print headers.
    #[arg(long)]
    pub no_headers: bool,
    /// Files identifying the resources to get.
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    /// Process the directory used in -f recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Keep managedFields in JSON and YAML output (templates always see them).
    #[arg(long)]
    pub show_managed_fields: bool,
    /// Ignore errors in templates when a field or map key is missing (jsonpath).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub allow_missing_template_keys: bool,
    /// Sort list types using this field specification (a JSONPath expression, `{.metadata.name}`).
    #[arg(long)]
    pub sort_by: Option<String>,
    /// After listing/getting the requested object, watch for changes.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Watch for changes to the requested object(s), without listing/getting first.
    #[arg(long)]
    pub watch_only: bool,
    /// Output watch event objects when --watch or --watch-only is used. Existing objects are
    /// output as initial ADDED events.
    #[arg(long)]
    pub output_watch_events: bool,
    /// If specified, gets the subresource of the requested object (`status`, `scale`).
    #[arg(long)]
    pub subresource: Option<String>,
}

impl Args {
    /// What the arguments select: files, `TYPE NAME...` or `TYPE/NAME`, selectors.
    pub fn selection(&self) -> Selection {
        Selection {
            filenames: self.filenames.clone(),
            recursive: self.recursive,
            args: self.args.clone(),
            selector: self.selector.clone(),
            field_selector: self.field_selector.clone(),
            all: false,
            all_namespaces: self.all_namespaces,
        }
    }

    /// The table printer's options the flags give for `output` (`table` or `wide`): the
    /// namespace column with `-A`, no kind prefix.
    pub fn table_options(&self, output: &Output) -> table::Options {
        table::Options {
            wide: *output == Output::Wide,
            with_namespace: self.all_namespaces,
            kind_prefix: None,
            show_labels: self.show_labels,
            label_columns: self.label_columns.clone(),
            no_headers: self.no_headers,
        }
    }
}

/// One type's table: the rows of every target of that type under one header.
struct Printed {
    resource: Arc<Resource>,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// What one target printed: a table, or objects.
enum Got {
    /// `objects`: each row's whole object, when rows are sorted (`--sort-by`).
    Table {
        resource: Arc<Resource>,
        table: Table,
        objects: Vec<Value>,
    },
    Objects {
        items: Vec<Value>,
        listed: bool,
    },
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let output = Output::parse(a.output.as_deref())?;
    if a.output_watch_events && !(a.watch || a.watch_only) {
        return Err(CliError::Usage(
            "--output-watch-events option can only be used with --watch or --watch-only".into(),
        ));
    }
    if a.watch || a.watch_only {
        if a.subresource.is_some() {
            return Err(CliError::Usage(
                "--subresource with --watch or --watch-only: kubectl-lite watches objects, not their subresources".into(),
            ));
        }
        return watch::run(f, &a, &output).await;
    }
    if a.args.is_empty() && a.filenames.is_empty() {
        return Err(CliError::Usage(
            "You must specify the type of resource to get. Use \"kubectl api-resources\" for a complete list of supported resources.".into(),
        ));
    }
    let sel = a.selection();
    let (targets, mut errors) = builder::targets(f, &sel).await?;
    if a.subresource.is_some() && targets.iter().any(|t| matches!(t, Target::Collection(_))) {
        return Err(CliError::Usage(
            "subresource cannot be used when bulk resources are specified".into(),
        ));
    }
    let mut got = Vec::new();
    for t in &targets {
        match fetch(f, t, &output, &sel, a.sort_by.is_some(), a.subresource.as_deref()).await {
            Ok(g) => got.push(g),
            Err(e) => errors.push(e),
        }
    }
    print(f, &a, &output, &targets, got, errors.is_empty()).await?;
    crate::cmd::finish(errors)
}

async fn fetch(
    f: &Factory,
    t: &Target,
    output: &Output,
    sel: &Selection,
    sorting: bool,
    subresource: Option<&str>,
) -> Result<Got> {
    let (resource, url, listed) = match (t, subresource) {
        (Target::Object(i), None) => (i.resource.clone(), i.url(), false),
        (Target::Object(i), Some(sub)) => (i.resource.clone(), format!("{}/{sub}", i.url()), false),
        (Target::Collection(c), _) => {
            let url = c.resource.url(c.namespace.as_deref(), None) + &builder::query(sel);
            (c.resource.clone(), url, true)
        }
    };
    if output.is_table() {
        // Sorting reads the whole object of each row.
        let url = match (sorting, url.contains('?')) {
            (false, _) => url,
            (true, true) => url + "&includeObject=Object",
            (true, false) => url + "?includeObject=Object",
        };
        let bytes = f.send(Method::GET, &url, None, TABLE).await?;
        if !sorting {
            return Ok(Got::Table { resource, table: parse(&bytes)?, objects: Vec::new() });
        }
        let mut v: Value = parse(&bytes)?;
        let table = Table::of(&v);
        let objects = match v.get_mut("rows").and_then(Value::as_array_mut) {
            Some(rows) => rows.iter_mut().map(|r| r["object"].take()).collect(),
            None => Vec::new(),
        };
        return Ok(Got::Table { resource, table, objects });
    }
    let v: Value = parse(&f.send(Method::GET, &url, None, "application/json").await?)?;
    let items = if listed {
        v["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|mut item| {
                item["apiVersion"] = Value::String(resource.api_version());
                item["kind"] = Value::String(resource.kind.clone());
                item
            })
            .collect()
    } else {
        vec![v]
    };
    Ok(Got::Objects { items, listed })
}

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| CliError::Unreachable { reason: e.to_string() })
}

async fn print(
    f: &Factory,
    a: &Args,
    output: &Output,
    targets: &[Target],
    got: Vec<Got>,
    all_fetched: bool,
) -> Result<()> {
    let types: Vec<String> = {
        let mut t: Vec<String> = Vec::new();
        for target in targets {
            let r = match target {
                Target::Object(i) => i.resource.group_resource(),
                Target::Collection(c) => c.resource.group_resource(),
            };
            if !t.contains(&r) {
                t.push(r);
            }
        }
        t
    };
    let several_types = types.len() > 1;
    match output {
        Output::Table | Output::Wide => {
            let tables = got.iter().filter(|g| matches!(g, Got::Table { .. })).count();
            if let Some(by) = &a.sort_by
                && tables > 1
            {
                let e = sort::SortError::NotFound(sort::table_field(by));
                return Err(CliError::Usage(e.to_string()));
            }
            // One table per type, in the order the types came; blank lines between.
            let mut tables: Vec<Printed> = Vec::new();
            for g in got {
                let Got::Table { resource, mut table, objects } = g else { continue };
                if let Some(by) = &a.sort_by {
                    let order = sort_order(&objects.iter().collect::<Vec<_>>(), by)?;
                    reorder(&mut table.rows, order);
                }
                let o = table::Options {
                    with_namespace: a.all_namespaces && resource.namespaced,
                    kind_prefix: several_types.then(|| resource.group_kind_lower()),
                    ..a.table_options(output)
                };
                let (header, rows) = table::rows(&table, &o);
                let same =
                    |t: &&mut Printed| t.resource.group_resource() == resource.group_resource();
                match tables.iter_mut().find(same) {
                    Some(t) => t.rows.extend(rows),
                    None => tables.push(Printed { resource, header, rows }),
                }
            }
            let mut printed = false;
            let mut out = String::new();
            for Printed { header, rows, .. } in tables.iter().filter(|t| !t.rows.is_empty()) {
                if printed {
                    out.push('\n');
                }
                let mut lines = Vec::new();
                if !a.no_headers {
                    lines.push(header.clone());
                }
                lines.extend(rows.iter().cloned());
                out.push_str(&table::align(&lines));
                printed = true;
            }
            print!("{out}");
            if !printed && all_fetched && targets.iter().all(|t| matches!(t, Target::Collection(_)))
            {
                eprintln!("{}", no_resources(f, a, targets).await?);
            }
        }
        Output::Name => {
            let mut all = Vec::new();
            let mut listed = targets.len() != 1;
            for g in got {
                if let Got::Objects { items, listed: l } = g {
                    listed |= l;
                    all.extend(items);
                }
            }
            if listed && let Some(by) = &a.sort_by {
                all = sorted(all, by)?;
            }
            for item in all {
                println!("{}", name_of(f, &item).await?);
            }
        }
        Output::Json
        | Output::Yaml
        | Output::Kyaml
        | Output::JsonPath(_)
        | Output::CustomColumns(_) => {
            if got.is_empty() {
                // Every target failed: nothing to print but the errors.
                return Ok(());
            }
            let mut all = Vec::new();
            let mut listed = targets.len() != 1;
            for g in got {
                if let Got::Objects { items, listed: l } = g {
                    listed |= l;
                    all.extend(items);
                }
            }
            if listed && let Some(by) = &a.sort_by {
                all = sorted(all, by)?;
            }
            // kubectl omits managedFields from JSON and YAML only; templates and columns see
            // the object whole.
            if !a.show_managed_fields
                && matches!(output, Output::Json | Output::Yaml | Output::Kyaml)
            {
                all.iter_mut().for_each(printers::omit_managed_fields);
            }
            let text = match output {
                Output::Json => printers::json_of(&all, listed),
                Output::JsonPath(t) => {
                    printers::jsonpath_of(t, &all, listed, a.allow_missing_template_keys)?
                }
                Output::CustomColumns(c) => printers::custom_columns_of(c, &all, a.no_headers)?,
                Output::Kyaml => printers::kyaml_of(&all, listed),
                _ => printers::yaml_of(&all, listed),
            };
            print!("{text}");
        }
    }
    Ok(())
}

/// `pod/nginx`: an object's kind (group-qualified) and name.
pub async fn name_of(f: &Factory, o: &Value) -> Result<String> {
    let api_version = o["apiVersion"].as_str().unwrap_or_default();
    let kind = o["kind"].as_str().unwrap_or_default();
    let r = f.resource_for_kind(api_version, kind).await?;
    Ok(format!("{}/{}", r.group_kind_lower(), o["metadata"]["name"].as_str().unwrap_or_default()))
}

/// kubectl's message for an empty listing.
async fn no_resources(f: &Factory, a: &Args, targets: &[Target]) -> Result<String> {
    let namespaced =
        targets.iter().any(|t| matches!(t, Target::Collection(c) if c.resource.namespaced));
    if a.all_namespaces || !namespaced {
        return Ok("No resources found".into());
    }
    Ok(format!("No resources found in {} namespace.", f.namespace().await?))
}

/// The order of a table's rows by their objects sorted by `by` (a table of one row as it is);
/// `None` when the rows cannot be sorted: none is printed then, as kubectl drops its sorting
/// printer's error; values that do not compare end the command (kubectl exits through its log).
fn sort_order(objects: &[&Value], by: &str) -> Result<Option<Vec<usize>>> {
    if objects.len() < 2 {
        return Ok(Some((0..objects.len()).collect()));
    }
    match sort::order(objects, &sort::table_field(by)) {
        Ok(o) => Ok(Some(o)),
        Err(e @ sort::SortError::Unsortable { .. }) => Err(CliError::Usage(e.to_string())),
        Err(_) => Ok(None),
    }
}

/// `items` in `order` (none of them without one).
fn reorder<T>(items: &mut Vec<T>, order: Option<Vec<usize>>) {
    let Some(order) = order else {
        items.clear();
        return;
    };
    let mut taken: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|i| taken.get_mut(i).and_then(Option::take)));
}

/// A `Table`'s rows (as decoded, each with its object) sorted by `by`.
fn sort_rows(table: &mut Value, by: &str) -> Result<()> {
    let Some(rows) = table.get_mut("rows").and_then(Value::as_array_mut) else { return Ok(()) };
    let order = sort_order(&rows.iter().map(|r| &r["object"]).collect::<Vec<_>>(), by)?;
    reorder(rows, order);
    Ok(())
}

/// Listed objects sorted by `by`.
fn sorted(mut objects: Vec<Value>, by: &str) -> Result<Vec<Value>> {
    let usage = |e: sort::SortError| CliError::Usage(e.to_string());
    let field = sort::object_field(by).map_err(usage)?;
    let order = sort::order(&objects.iter().collect::<Vec<_>>(), &field).map_err(usage)?;
    reorder(&mut objects, Some(order));
    Ok(objects)
}
