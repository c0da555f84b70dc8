//! `cordon` and `uncordon` (kubectl's `RunCordonOrUncordon`, which `drain` starts with): the
//! nodes named, read one after the other (the first that cannot be read stops the command);
//! each node's `spec.unschedulable` set or cleared with a merge patch; `node/<name> cordoned`,
//! or `already cordoned` when there was nothing to change; under `--dry-run=client` nothing is
//! sent, under `server` the patch is sent with `dryRun=All`. A node whose patch fails is
//! reported (`error: unable to cordon node …`) and the others go on.

use http::Method;
use serde_json::{Value, json};

use super::dryrun::{self, DryRun};
use crate::builder::{self, Info, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NODE...
    pub nodes: Vec<String>,
    /// Selector (label query) to filter nodes on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub dry_run: dryrun::Flag,
}

/// A node as the command read it.
#[derive(Debug, Clone)]
pub struct Node {
    pub info: Info,
    pub object: Value,
}

impl Node {
    pub fn name(&self) -> &str {
        &self.info.name
    }
}

pub async fn run(f: &Factory, a: Args, unschedulable: bool) -> Result<()> {
    let command = if unschedulable { "cordon" } else { "uncordon" };
    if a.nodes.is_empty() && a.selector.is_none() {
        return Err(CliError::Usage(format!(
            "USAGE: {command} NODE [flags]\nSee 'kubectl-lite {command} -h' for help and examples"
        )));
    }
    let dry = a.dry_run.strategy()?;
    let nodes = read(f, &a.nodes, a.selector.as_deref()).await?;
    set_unschedulable(f, &nodes, unschedulable, dry).await;
    Ok(())
}

/// The nodes named (or selected), each read; the first error stops, as kubectl's builder does.
pub async fn read(f: &Factory, names: &[String], selector: Option<&str>) -> Result<Vec<Node>> {
    let mut args = vec!["nodes".to_string()];
    args.extend(names.iter().cloned());
    let sel = Selection { args, selector: selector.map(str::to_string), ..Selection::default() };
    let (infos, errors) = builder::infos(f, &sel).await?;
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let mut nodes = Vec::new();
    for info in infos {
        let object = f.get_json(&info.url()).await?;
        nodes.push(Node { info, object });
    }
    Ok(nodes)
}

/// kubectl's `RunCordonOrUncordon`: prints what it did to each node; failures are printed and
/// the other nodes go on.
pub async fn set_unschedulable(f: &Factory, nodes: &[Node], unschedulable: bool, dry: DryRun) {
    let (done, already, verb) = if unschedulable {
        ("cordoned", "already cordoned", "cordon")
    } else {
        ("uncordoned", "already uncordoned", "uncordon")
    };
    for node in nodes {
        let current = node.object["spec"]["unschedulable"].as_bool().unwrap_or(false);
        if current == unschedulable {
            println!("{} {}", node.info.kind_name(), dry.operation(already));
            continue;
        }
        if dry != DryRun::Client {
            let value = if unschedulable { json!(true) } else { Value::Null };
            let patch = json!({"spec": {"unschedulable": value}}).to_string().into_bytes();
            let url = node.info.url() + dry.query();
            let sent = f
                .send(
                    Method::PATCH,
                    &url,
                    Some((patch, "application/merge-patch+json")),
                    "application/json",
                )
                .await;
            if let Err(e) = sent {
                eprintln!("error: unable to {verb} node {:?}: {}", node.name(), e.go_message());
                continue;
            }
        }
        println!("{} {}", node.info.kind_name(), dry.operation(done));
    }
}
