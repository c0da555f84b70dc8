//! `taint` as kubectl's `pkg/cmd/taint`: `taint nodes NAME... KEY=VAL:EFFECT KEY:EFFECT- KEY-`
//! (or `-l`, `--all`). Checks in kubectl's order: `--dry-run`, the split of the arguments, the
//! taint specs (`spec`, usage errors), the type (only nodes), taints both added and removed,
//! the names or selector. Each node is read, its taints reorganised (`spec::reorganize`;
//! an existing key and effect refused without `--overwrite`, a removal that finds nothing an
//! error) and sent as a strategic merge patch of `spec.taints` under the `kubectl-taint` field
//! manager; `node/<name> tainted|untainted|modified`, with no dry-run suffix, as kubectl's.
//! Errors are kept and reported after the other nodes were done, as kubectl's aggregate.

pub mod spec;

use http::Method;
use serde_json::{Value, json};

use self::spec::Taint;
use super::dryrun::{self, DryRun};
use crate::builder::{self, Collection, Info, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

const HELP: &str = "See 'kubectl-lite taint -h' for help and examples";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NODE NAME... KEY_1=VAL_1:TAINT_EFFECT_1 ... KEY_N=VAL_N:TAINT_EFFECT_N
    #[arg(allow_hyphen_values = false)]
    pub args: Vec<String>,
    /// Selector (label query) to filter nodes on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Select all nodes in the cluster.
    #[arg(long)]
    pub all: bool,
    /// If true, allow taints to be overwritten, otherwise reject taint updates that overwrite
    /// existing taints.
    #[arg(long)]
    pub overwrite: bool,
    /// Output format: name, json or yaml.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Name of the manager used to track field ownership.
    #[arg(long, default_value = "kubectl-taint")]
    pub field_manager: String,
    #[command(flatten)]
    pub dry_run: dryrun::Flag,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let dry = a.dry_run.strategy()?;
    let (resources, taint_args) = spec::split_args(&a.args).map_err(CliError::Usage)?;
    if resources.is_empty() {
        return Err(CliError::Usage(
            "one or more resources must be specified as <resource> <name>".into(),
        ));
    }
    if taint_args.is_empty() {
        return Err(CliError::Usage("at least one taint update is required".into()));
    }
    let (add, remove) =
        spec::parse_taints(&taint_args).map_err(|e| CliError::Usage(format!("{e}\n{HELP}")))?;
    if !matches!(a.output.as_deref(), None | Some("name" | "json" | "yaml")) {
        crate::printers::Output::parse(a.output.as_deref())?;
    }
    let type_arg = resources[0].to_lowercase();
    let resource = match f.resource(&type_arg).await {
        Ok(r) => r,
        // kubectl's no-match error, printed without `error: `.
        Err(CliError::UnknownResource(t)) => {
            return Err(CliError::Plain(format!(
                "the server doesn't have a resource type \"{t}\""
            )));
        }
        Err(e) => return Err(e),
    };
    if resource.kind != "Node" {
        return Err(CliError::Usage(format!(
            "invalid resource type {type_arg}, only node types are supported"
        )));
    }
    let both = spec::conflicts(&add, &remove);
    if !both.is_empty() {
        return Err(CliError::Usage(format!(
            "can not both modify and remove the following taint(s) in the same command: {both}"
        )));
    }
    if a.all && a.selector.is_some() {
        return Err(CliError::Usage(
            "setting 'all' parameter with a non empty selector is prohibited".into(),
        ));
    }
    if !a.all && a.selector.is_none() && resources.len() < 2 {
        return Err(CliError::Usage(
            "at least one resource name must be specified since 'all' parameter is not set".into(),
        ));
    }

    let mut errors = Vec::new();
    let mut infos = Vec::new();
    if a.all || a.selector.is_some() {
        let sel = Selection { selector: a.selector.clone(), ..Selection::default() };
        let c = Collection { resource: resource.clone(), namespace: None };
        infos = builder::list(f, &c, &sel).await?;
    } else {
        for name in &resources[1..] {
            infos.push(Info {
                resource: resource.clone(),
                namespace: None,
                name: name.clone(),
                object: None,
                origin: None,
            });
        }
    }
    let change = Change { add, remove, overwrite: a.overwrite, dry, manager: &a.field_manager };
    for info in &infos {
        match change.apply(f, info).await {
            Ok((word, object)) => print(&a, info, word, &object),
            Err(e) => errors.extend(e),
        }
    }
    aggregate(errors)
}

/// What the command asks of each node.
struct Change<'a> {
    add: Vec<Taint>,
    remove: Vec<Taint>,
    overwrite: bool,
    dry: DryRun,
    manager: &'a str,
}

impl Change<'_> {
    /// Reads the node, changes its taints; the word to print and the object to print.
    async fn apply(
        &self,
        f: &Factory,
        info: &Info,
    ) -> std::result::Result<(&'static str, Value), Vec<CliError>> {
        let mut node = f.get_json(&info.url()).await.map_err(|e| vec![e])?;
        let old: Vec<Taint> = node["spec"]["taints"]
            .as_array()
            .map(|ts| ts.iter().map(Taint::from_json).collect())
            .unwrap_or_default();
        if !self.overwrite {
            let there = spec::already_there(&old, &self.add);
            if !there.is_empty() {
                return Err(vec![CliError::Usage(format!(
                    "node {} already has {there} taint(s) with same effect(s) and --overwrite is false",
                    info.name
                ))]);
            }
        }
        let (word, new, errs) = spec::reorganize(&old, self.overwrite, &self.add, &self.remove);
        if !errs.is_empty() {
            return Err(errs.into_iter().map(CliError::Usage).collect());
        }
        let taints: Vec<Value> = new.iter().map(Taint::to_json).collect();
        // The two-way strategic merge patch of `spec.taints`, a list without a merge key:
        // replaced whole, or `null` once empty.
        let patch = if old == new {
            json!({})
        } else if taints.is_empty() {
            json!({"spec": {"taints": null}})
        } else {
            json!({"spec": {"taints": taints}})
        };
        if self.dry == DryRun::Client {
            if let Some(spec) = node.as_object_mut().map(|o| o.entry("spec").or_insert(json!({})))
                && let Some(s) = spec.as_object_mut()
            {
                if taints.is_empty() {
                    s.remove("taints");
                } else {
                    s.insert("taints".into(), Value::Array(taints));
                }
            }
            return Ok((word, node));
        }
        let mut url = format!("{}?fieldManager={}", info.url(), builder::encode(self.manager));
        if self.dry == DryRun::Server {
            url.push_str("&dryRun=All");
        }
        let body = patch.to_string().into_bytes();
        let bytes = f
            .send(
                Method::PATCH,
                &url,
                Some((body, "application/strategic-merge-patch+json")),
                "application/json",
            )
            .await
            .map_err(|e| vec![e])?;
        let object = serde_json::from_slice(&bytes).unwrap_or(node);
        Ok((word, object))
    }
}

fn print(a: &Args, info: &Info, word: &str, object: &Value) {
    let mut object = object.clone();
    crate::printers::omit_managed_fields(&mut object);
    let one = std::slice::from_ref(&object);
    match a.output.as_deref() {
        Some("name") => println!("{}", info.kind_name()),
        Some("json") => print!("{}", crate::printers::json_of(one, false)),
        Some("yaml") => print!("{}", crate::printers::yaml_of(one, false)),
        _ => println!("{} {word}", info.kind_name()),
    }
}

/// kubectl's flattened aggregate: one error as itself, several one a line, those decided on
/// this side without `error: `.
fn aggregate(errors: Vec<CliError>) -> Result<()> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.into_iter().next().unwrap_or(CliError::Many(Vec::new()))),
        _ => Err(CliError::Many(
            errors
                .into_iter()
                .map(|e| match e {
                    CliError::Usage(m) => CliError::Plain(m),
                    other => other,
                })
                .collect(),
        )),
    }
}
