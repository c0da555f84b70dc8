//! `delete`: objects by name, file or selector, with kubectl's grace period, force and cascade
//! options; `<kind> "<name>" deleted from <ns> namespace` per object; with `--wait` (the
//! default) each delete returns only once the object is gone.

use std::time::Duration;

use http::Method;
use serde_json::{Value, json};

use crate::builder::{self, Info, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE NAME..., TYPE/NAME..., or TYPE with -l or --all.
    pub args: Vec<String>,
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    #[arg(short = 'R', long)]
    pub recursive: bool,
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[arg(long)]
    pub field_selector: Option<String>,
    /// Delete every object of the types named.
    #[arg(long)]
    pub all: bool,
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Seconds the object has to terminate gracefully (-1: the object's own).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub grace_period: i64,
    /// Delete immediately (grace period 0 unless given).
    #[arg(long)]
    pub force: bool,
    /// background, foreground or orphan.
    #[arg(long, default_value = "background", num_args = 0..=1, default_missing_value = "background")]
    pub cascade: String,
    /// Wait for the objects to be gone before returning.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub wait: bool,
    /// Treat "resource not found" as a successful delete.
    #[arg(long)]
    pub ignore_not_found: bool,
    /// Output format: name prints `<kind>/<name>` only.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let propagation = propagation(&a.cascade)?;
    if a.args.is_empty() && a.filenames.is_empty() {
        return Err(CliError::Usage("You must provide one or more resources by argument or filename.\nExample resource specifications include:\n   '-f rsrc.yaml'\n   '--filename=rsrc.json'\n   '<resource> <name>'\n   '<resource>'".into()));
    }
    if a.args.len() == 1
        && !a.args[0].contains('/')
        && a.selector.is_none()
        && a.field_selector.is_none()
        && !a.all
    {
        return Err(CliError::Usage("resource(s) were provided, but no name was specified".into()));
    }
    let sel = Selection {
        filenames: a.filenames.clone(),
        recursive: a.recursive,
        args: a.args.clone(),
        selector: a.selector.clone(),
        field_selector: a.field_selector.clone(),
        all: a.all,
        all_namespaces: a.all_namespaces,
    };
    let (infos, mut errors) = builder::infos(f, &sel).await?;
    let grace = if a.force && a.grace_period < 0 { 0 } else { a.grace_period };
    let mut options =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation});
    if grace >= 0 {
        options["gracePeriodSeconds"] = json!(grace);
    }
    if a.force {
        eprintln!(
            "Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely."
        );
    }
    let mut deleted = Vec::new();
    for info in infos {
        let body = serde_json::to_vec(&options).map_err(|e| CliError::Usage(e.to_string()))?;
        match f
            .send(Method::DELETE, &info.url(), Some((body, "application/json")), "application/json")
            .await
        {
            Ok(_) => {
                match a.output.as_deref() {
                    Some("name") => println!("{}", info.kind_name()),
                    _ => println!("{}", deleted_line(&info, grace == 0 && a.force)),
                }
                deleted.push(info);
            }
            Err(e) if e.is_not_found() && a.ignore_not_found => {}
            Err(e) => errors.push(e),
        }
    }
    if a.wait {
        for info in &deleted {
            wait_gone(f, info).await?;
        }
    }
    crate::cmd::finish(errors)
}

/// Deletes one object as `run --rm` removes what it made (kubectl's delete options with their
/// defaults: background propagation, the object's own grace period, no wait); an object
/// already gone is no error; `pod "x" deleted from …` unless `quiet`.
pub async fn remove(f: &Factory, info: &Info, quiet: bool) -> Result<()> {
    let options =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"});
    let body = serde_json::to_vec(&options).map_err(|e| CliError::Usage(e.to_string()))?;
    match f
        .send(Method::DELETE, &info.url(), Some((body, "application/json")), "application/json")
        .await
    {
        Ok(_) if !quiet => println!("{}", deleted_line(info, false)),
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The propagation policy `--cascade` names (kubectl's `parseCascadingFlag`): `background`,
/// `foreground` or `orphan`, or a boolean with kubectl's deprecation warning.
pub fn propagation(cascade: &str) -> Result<&'static str> {
    if let Some(b) = crate::cmd::dryrun::go_bool(cascade) {
        let (policy, name) = if b { ("Background", "background") } else { ("Orphan", "orphan") };
        eprintln!(
            "warning: --cascade={cascade} is deprecated (boolean value) and can be replaced with --cascade={name}."
        );
        return Ok(policy);
    }
    match cascade {
        "background" => Ok("Background"),
        "foreground" => Ok("Foreground"),
        "orphan" => Ok("Orphan"),
        other => Err(CliError::Usage(format!(
            "invalid cascade value ({other}). Must be \"background\", \"foreground\", or \"orphan\""
        ))),
    }
}

/// `pod "x" deleted from a namespace`, or for cluster-scoped objects `namespace "x" deleted`.
fn deleted_line(info: &Info, forced: bool) -> String {
    let verb = if forced { "force deleted" } else { "deleted" };
    let kind = info.resource.group_kind_lower();
    match &info.namespace {
        Some(ns) => format!("{kind} \"{}\" {verb} from {ns} namespace", info.name),
        None => format!("{kind} \"{}\" {verb}", info.name),
    }
}

/// Polls until the object is gone (kubectl watches; a poll every 200 ms is as prompt here).
async fn wait_gone(f: &Factory, info: &Info) -> Result<()> {
    loop {
        match f.send(Method::GET, &info.url(), None, "application/json").await {
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
            Ok(bytes) => {
                let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                if v.is_null() {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
