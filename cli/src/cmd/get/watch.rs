//! `get --watch` / `--watch-only` / `--output-watch-events`, as kubectl's `GetOptions.watch`:
//! one type only; the list (as a `Table` for tables) printed unless `--watch-only`, then a watch
//! from the list's resource version printing each event (a named object is watched through a
//! `metadata.name` field selector from resource version 0, whose first, synthetic event is not
//! printed). The watch ends, exit 0, when the server ends it or `--request-timeout` runs out;
//! SIGINT, SIGTERM, SIGHUP or SIGQUIT end it with exit 1 (kubectl's interrupt handler).

use http::Method;
use serde_json::Value;
use tokio::signal::unix::{SignalKind, signal};

use super::{Args, TABLE};
use crate::builder::{self, Target};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::watch::{ObjectWatch, TableWatch};
use crate::printers::{Output, table};
use crate::watch::{EventType, Events};

/// The printer of the whole watch.
enum Printer {
    Table(TableWatch),
    Objects(ObjectWatch, bool),
}

impl Printer {
    fn new(a: &Args, output: &Output, kind: String) -> Printer {
        match output {
            // kubectl's watch asks for the namespace column whatever the type's scope.
            Output::Table | Output::Wide => {
                Printer::Table(TableWatch::new(a.table_options(output)))
            }
            Output::Name => Printer::Objects(ObjectWatch::Name { kind }, a.show_managed_fields),
            Output::Json => Printer::Objects(ObjectWatch::Json, a.show_managed_fields),
            Output::Yaml => {
                Printer::Objects(ObjectWatch::Yaml { printed: 0 }, a.show_managed_fields)
            }
            Output::Kyaml => Printer::Objects(ObjectWatch::Kyaml, a.show_managed_fields),
            Output::JsonPath(t) => Printer::Objects(
                ObjectWatch::JsonPath {
                    template: t.clone(),
                    allow_missing: a.allow_missing_template_keys,
                },
                true,
            ),
            Output::CustomColumns(c) => Printer::Objects(
                ObjectWatch::CustomColumns {
                    columns: c.clone(),
                    no_headers: a.no_headers,
                    printed: false,
                    aligner: table::Aligner::kubectl(),
                },
                true,
            ),
        }
    }

    /// One object (a table, or an object), or the event around it; nothing when not `show`n.
    fn print(&mut self, object: &Value, event: Option<EventType>, show: bool) -> Result<()> {
        let text = match self {
            // kubectl's skip printer passes a table on without rows, anything else not at all.
            Printer::Table(_) | Printer::Objects(..) if !show && event.is_some() => return Ok(()),
            Printer::Table(t) => t.print(object, event, show),
            Printer::Objects(..) if !show => return Ok(()),
            Printer::Objects(p, keep_managed_fields) => {
                let mut object = object.clone();
                // kubectl drops managedFields from objects, not from the events around them.
                if !*keep_managed_fields && event.is_none() {
                    crate::printers::omit_managed_fields(&mut object);
                }
                p.print(&object, event).map_err(|e| CliError::Usage(e.to_string()))?
            }
        };
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| CliError::Usage(format!("unable to output the provided object: {e}")))
    }
}

pub async fn run(f: &Factory, a: &Args, output: &Output) -> Result<()> {
    if a.sort_by.is_some() {
        let flag = if a.watch { "--watch" } else { "--watch-only" };
        let what = if a.watch { " for watch events received" } else { "" };
        eprintln!("warning: {flag} requested, --sort-by will be ignored{what}");
    }
    let sel = a.selection();
    if a.args.is_empty() && a.filenames.is_empty() {
        return Err(CliError::Usage(builder::NOTHING_NAMED.into()));
    }
    let (targets, errors) = builder::targets(f, &sel).await?;
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let resource = match targets.first() {
        Some(Target::Object(i)) => i.resource.clone(),
        Some(Target::Collection(c)) => c.resource.clone(),
        None => return Err(CliError::Usage(builder::NOTHING_NAMED.into())),
    };
    let single_type = targets.iter().all(|t| match t {
        Target::Object(i) => i.resource.group_resource() == resource.group_resource(),
        Target::Collection(c) => c.resource.group_resource() == resource.group_resource(),
    });
    if !single_type {
        return Err(CliError::Usage("you may only specify a single resource type".into()));
    }
    let accept = if output.is_table() { TABLE } else { "application/json" };
    let mut printer = Printer::new(a, output, resource.group_kind_lower());
    let events = a.output_watch_events.then_some(EventType::Added);
    let show = !a.watch_only;

    // The list (or the objects), printed; the watch's URL and whether its first event is the
    // synthetic one of a watch from resource version 0.
    let (url, skip_first) = match &targets[..] {
        [Target::Collection(c)] => {
            let query = builder::query(&sel);
            let collection = c.resource.url(c.namespace.as_deref(), None);
            let mut list = if output.is_table() && a.sort_by.is_some() {
                // kubectl's sorting printer orders the list's rows (not the events').
                let sep = if query.is_empty() { "?" } else { "&" };
                get(f, &format!("{collection}{query}{sep}includeObject=Object"), accept).await?
            } else {
                get(f, &format!("{collection}{query}"), accept).await?
            };
            if let Some(by) = a.sort_by.as_deref().filter(|_| output.is_table()) {
                super::sort_rows(&mut list, by)?;
            }
            if output.is_table() {
                printer.print(&list, events, show)?;
            } else {
                for item in list["items"].as_array().into_iter().flatten() {
                    let mut item = item.clone();
                    item["apiVersion"] = Value::String(resource.api_version());
                    item["kind"] = Value::String(resource.kind.clone());
                    printer.print(&item, events, show)?;
                }
            }
            let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_default();
            let sep = if query.is_empty() { "?" } else { "&" };
            (
                format!(
                    "{collection}{query}{sep}resourceVersion={}&watch=true",
                    builder::encode(rv)
                ),
                false,
            )
        }
        objects => {
            let mut infos = Vec::new();
            for t in objects {
                if let Target::Object(i) = t {
                    infos.push(i);
                }
            }
            let mut fetched = Vec::new();
            for i in &infos {
                fetched.push(get(f, &i.url(), accept).await?);
            }
            for o in &fetched {
                printer.print(o, events, show)?;
            }
            let [info] = &infos[..] else {
                return Err(CliError::Usage(
                    "you may only watch a single resource or type of resource at a time".into(),
                ));
            };
            let collection = info.resource.url(info.namespace.as_deref(), None);
            let selector = builder::encode(&format!("metadata.name={}", info.name));
            (format!("{collection}?fieldSelector={selector}&resourceVersion=0&watch=true"), true)
        }
    };
    follow(f, &url, accept, &mut printer, a.output_watch_events, skip_first).await
}

async fn get(f: &Factory, url: &str, accept: &str) -> Result<Value> {
    let bytes = f.send(Method::GET, url, None, accept).await?;
    serde_json::from_slice(&bytes).map_err(|e| CliError::Unreachable { reason: e.to_string() })
}

/// The watch, each event printed, until the server ends it, `--request-timeout` runs out or a
/// signal comes.
async fn follow(
    f: &Factory,
    url: &str,
    accept: &str,
    printer: &mut Printer,
    with_events: bool,
    mut skip_first: bool,
) -> Result<()> {
    let timeout = f.flags.request_timeout.filter(|t| !t.is_zero());
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut events = tokio::select! {
        body = f.stream_accepting(url, accept) => Events::new(body?),
        () = &mut deadline => return Ok(()),
    };
    let signal_error = |e: std::io::Error| CliError::Usage(format!("watching signals: {e}"));
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut hangup = signal(SignalKind::hangup()).map_err(signal_error)?;
    let mut quit = signal(SignalKind::quit()).map_err(signal_error)?;
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            () = &mut deadline => return Ok(()),
            _ = interrupt.recv() => return Err(CliError::Silent),
            _ = terminate.recv() => return Err(CliError::Silent),
            _ = hangup.recv() => return Err(CliError::Silent),
            _ = quit.recv() => return Err(CliError::Silent),
        };
        // The stream ended, or carried something that is no event: kubectl's watch ends.
        let Some(Some(e)) = event else { return Ok(()) };
        let show = !skip_first;
        skip_first = false;
        printer.print(&e.object, with_events.then_some(e.kind), show)?;
    }
}
