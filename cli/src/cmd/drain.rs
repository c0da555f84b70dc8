//! `drain`: a node emptied for maintenance, as kubectl's `pkg/cmd/drain` over `pkg/drain`:
//! the nodes read, cordoned ([`cordon`](super::cordon)), then node by node the pods bound to it
//! (`spec.nodeName`, `--pod-selector`) put through kubectl's [`filters`]; refusals end that
//! node's drain (`error: unable to drain node …, continuing command...`), warnings are printed,
//! the chosen pods evicted or deleted and waited for ([`evict`]), and `node/<name> drained`.
//! Nodes left undrained are listed at the end and the command fails with their errors, worded
//! as kubectl's `checkErr` words an aggregate ([`Failure`]).

pub mod evict;
pub mod filters;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::cordon;
use super::dryrun::{self, DryRun};
use crate::builder::encode;
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use filters::{DaemonSet, Options, Plan};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NODE
    pub nodes: Vec<String>,
    /// Continue even if there are pods that do not declare a controller.
    #[arg(long)]
    pub force: bool,
    /// Ignore DaemonSet-managed pods.
    #[arg(long)]
    pub ignore_daemonsets: bool,
    /// Continue even if there are pods using emptyDir (local data that will be deleted when the node is drained).
    #[arg(long)]
    pub delete_emptydir_data: bool,
    /// Period of time in seconds given to each pod to terminate gracefully. If negative, the default value specified in the pod will be used.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub grace_period: i64,
    /// The length of time to wait before giving up, zero means infinite.
    #[arg(long, default_value = "0s", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Label selector to filter pods on the node.
    #[arg(long)]
    pub pod_selector: Option<String>,
    /// Force drain to use delete, even if eviction is supported. This will bypass checking PodDisruptionBudgets, use with caution.
    #[arg(long)]
    pub disable_eviction: bool,
    /// If pod DeletionTimestamp older than N seconds, skip waiting for the pod. Seconds must be greater than 0 to skip.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub skip_wait_for_delete_timeout: i64,
    /// Return large lists in chunks rather than all at once. Pass 0 to disable.
    #[arg(long, default_value_t = 500)]
    pub chunk_size: i64,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub dry_run: dryrun::Flag,
}

fn parse_timeout(s: &str) -> std::result::Result<Duration, String> {
    crate::duration::parse(s).ok_or_else(|| format!("time: invalid duration {s:?}"))
}

/// An error as kubectl's drain carries it.
#[derive(Debug)]
pub enum Failure {
    /// The server's or the connection's.
    Error(CliError),
    /// One of kubectl's own (`fmt.Errorf`).
    Plain(String),
    /// Several (`utilerrors.NewAggregate`).
    Aggregate(Vec<Failure>),
}

impl Failure {
    fn visit(&self, out: &mut Vec<String>) {
        match self {
            Failure::Aggregate(all) => all.iter().for_each(|f| f.visit(out)),
            other => {
                let m = other.message();
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
    }

    /// Go's `err.Error()`: an aggregate's distinct messages, `[a, b]` when more than one.
    pub fn message(&self) -> String {
        match self {
            Failure::Error(e) => e.go_message(),
            Failure::Plain(m) => m.clone(),
            Failure::Aggregate(_) => {
                let mut all = Vec::new();
                self.visit(&mut all);
                match all.as_slice() {
                    [] => String::new(),
                    [one] => one.clone(),
                    many => format!("[{}]", many.join(", ")),
                }
            }
        }
    }

    /// kubectl's `messageForError`: a server's error in its standard form.
    fn standard(&self) -> String {
        match self {
            Failure::Error(e) => e.to_string(),
            other => other.message(),
        }
    }

    /// The error as kubectl's `checkErr` ends the command with it: an aggregate of one is
    /// unwrapped; an aggregate's errors one a line, without `error: `.
    pub fn into_cli_error(self) -> CliError {
        let err = match self {
            Failure::Aggregate(mut one) if one.len() == 1 => one.remove(0),
            other => other,
        };
        match err {
            Failure::Aggregate(all) => {
                CliError::Plain(all.iter().map(Failure::standard).collect::<Vec<_>>().join("\n"))
            }
            Failure::Error(e) => e,
            Failure::Plain(m) if m.starts_with("error: ") => CliError::Plain(m),
            Failure::Plain(m) => CliError::Plain(format!("error: {m}")),
        }
    }
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let help = "See 'kubectl-lite drain -h' for help and examples";
    if a.nodes.is_empty() && a.selector.is_none() {
        return Err(CliError::Usage(format!("USAGE: drain NODE [flags]\n{help}")));
    }
    if !a.nodes.is_empty() && a.selector.is_some() {
        return Err(CliError::Usage(format!(
            "cannot specify both a node name and a --selector option\n{help}"
        )));
    }
    let dry = a.dry_run.strategy()?;
    if a.pod_selector.as_deref().is_some_and(|s| api::labels::parse(s).is_err()) {
        return Err(CliError::Usage(
            "--pod-selector=<pod_selector> must be a valid label selector".into(),
        ));
    }
    let nodes = cordon::read(f, &a.nodes, a.selector.as_deref()).await?;
    cordon::set_unschedulable(f, &nodes, true, dry).await;
    let mut fatal = Vec::new();
    let mut remaining = Vec::new();
    for node in &nodes {
        match drain_node(f, node.name(), &a, dry).await {
            Ok(()) => println!("{} {}", node.info.kind_name(), dry.operation("drained")),
            Err(e) => {
                eprintln!(
                    "error: unable to drain node {:?} due to error: {}, continuing command...",
                    node.name(),
                    e.message()
                );
                fatal.push(e);
                remaining.push(node.name());
            }
        }
    }
    if !remaining.is_empty() {
        eprintln!("There are pending nodes to be drained:");
        for name in remaining {
            eprintln!(" {name}");
        }
    }
    if fatal.is_empty() { Ok(()) } else { Err(Failure::Aggregate(fatal).into_cli_error()) }
}

fn options(a: &Args) -> Options {
    Options {
        force: a.force,
        ignore_daemonsets: a.ignore_daemonsets,
        delete_emptydir_data: a.delete_emptydir_data,
        skip_wait_for_delete_timeout_seconds: a.skip_wait_for_delete_timeout,
    }
}

/// kubectl's `deleteOrEvictPodsSimple` for one node.
async fn drain_node(f: &Factory, node: &str, a: &Args, dry: DryRun) -> Result<(), Failure> {
    let (plan, errors) = pods_for_deletion(f, node, a).await;
    if !errors.is_empty() {
        return Err(Failure::Aggregate(errors));
    }
    let plan = plan.unwrap_or_default();
    let warnings = plan.warnings();
    if !warnings.is_empty() {
        eprintln!("Warning: {warnings}");
    }
    let pods = plan.pods();
    if dry == DryRun::Client {
        for pod in &pods {
            println!("evicting pod {} (dry run)", filters::key(pod));
        }
        return Ok(());
    }
    let settings = evict::Settings {
        grace_period: a.grace_period,
        timeout: a.timeout,
        skip_wait_for_delete_timeout: a.skip_wait_for_delete_timeout,
        disable_eviction: a.disable_eviction,
        dry_run: dry,
        verbose: f.flags.verbosity >= 2,
    };
    let Err(err) = evict::delete_or_evict(f, &pods, &settings).await else { return Ok(()) };
    let (pending, errors) = pods_for_deletion(f, node, a).await;
    let pending = pending.map(|p| p.pods()).unwrap_or_default();
    if !pending.is_empty() {
        eprintln!(
            "There are pending pods in node {node:?} when an error occurred: {}",
            err.message()
        );
        for pod in pending {
            eprintln!("pod/{}", pod["metadata"]["name"].as_str().unwrap_or_default());
        }
    }
    if !errors.is_empty() {
        // kubectl ends this without a newline.
        eprint!(
            "Following errors occurred while getting the list of pods to delete:\n{}",
            Failure::Aggregate(errors).message()
        );
    }
    Err(err)
}

/// kubectl's `GetPodsForDeletion`: the node's pods (in chunks), their DaemonSets looked up,
/// through the filters; the plan (unless the pods could not be listed) and the refusals.
async fn pods_for_deletion(f: &Factory, node: &str, a: &Args) -> (Option<Plan>, Vec<Failure>) {
    let pods = match list_pods(f, node, a).await {
        Ok(p) => p,
        Err(e) => return (None, vec![Failure::Error(e)]),
    };
    let mut daemon_sets = BTreeMap::new();
    for (ns, name) in pods.iter().filter_map(filters::daemon_set_of) {
        if daemon_sets.contains_key(&(ns.clone(), name.clone())) {
            continue;
        }
        let url = format!("/apis/apps/v1/namespaces/{ns}/daemonsets/{name}");
        let state = match f.get_json(&url).await {
            Ok(_) => DaemonSet::Found,
            Err(e) if e.is_not_found() => DaemonSet::Missing(e.go_message()),
            Err(e) => DaemonSet::Failed(e.go_message()),
        };
        daemon_sets.insert((ns, name), state);
    }
    let plan = filters::filter(pods, &daemon_sets, &options(a), jiff::Timestamp::now());
    let errors = plan.errors().into_iter().map(Failure::Plain).collect();
    (Some(plan), errors)
}

async fn list_pods(f: &Factory, node: &str, a: &Args) -> Result<Vec<Value>> {
    let mut query = Vec::new();
    if let Some(s) = a.pod_selector.as_deref().filter(|s| !s.trim().is_empty()) {
        query.push(format!("labelSelector={}", encode(s)));
    }
    query.push(format!("fieldSelector={}", encode(&format!("spec.nodeName={node}"))));
    if a.chunk_size > 0 {
        query.push(format!("limit={}", a.chunk_size));
    }
    let base = format!("/api/v1/pods?{}", query.join("&"));
    let mut pods = Vec::new();
    let mut url = base.clone();
    loop {
        let list = f.get_json(&url).await?;
        pods.extend(list["items"].as_array().cloned().unwrap_or_default());
        match list["metadata"]["continue"].as_str().filter(|c| !c.is_empty()) {
            Some(token) => url = format!("{base}&continue={}", encode(token)),
            None => return Ok(pods),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(m: &str) -> Failure {
        Failure::Plain(m.into())
    }

    #[test]
    fn an_aggregate_reads_as_gos_and_ends_the_command_as_check_err_does() {
        let one = Failure::Aggregate(vec![Failure::Aggregate(vec![plain("cannot delete x: d/a")])]);
        assert_eq!(one.message(), "cannot delete x: d/a");
        assert_eq!(one.into_cli_error().to_string(), "cannot delete x: d/a");
        let two =
            Failure::Aggregate(vec![Failure::Aggregate(vec![plain("a"), plain("b"), plain("a")])]);
        assert_eq!(two.message(), "[a, b]");
        assert_eq!(two.into_cli_error().to_string(), "a\nb\na");
        let single = Failure::Aggregate(vec![plain("context deadline exceeded")]);
        assert_eq!(single.into_cli_error().to_string(), "error: context deadline exceeded");
        let nodes = Failure::Aggregate(vec![
            Failure::Aggregate(vec![plain("a"), plain("b")]),
            Failure::Aggregate(vec![plain("c")]),
        ]);
        assert_eq!(nodes.message(), "[a, b, c]");
        assert_eq!(nodes.into_cli_error().to_string(), "[a, b]\nc");
    }
}
