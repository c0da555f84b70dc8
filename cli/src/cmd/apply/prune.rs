//! `apply --prune`, as kubectl's allowlist pruning (`pkg/cmd/apply/prune.go`,
//! `pkg/util/prune`): once every object is applied, the live objects of the pruned types in
//! each namespace an applied object was in (and the cluster-scoped ones) that `-l` matches (or
//! all, with `--all`), that carry the last-applied annotation and were not among those just
//! applied (by UID), are deleted, one `<kind>/<name> pruned` line each. The types are
//! `--prune-allowlist`'s `group/version/Kind`s, else kubectl's default set.

use std::collections::{BTreeSet, HashSet};
use std::fmt;

use http::Method;
use serde_json::{Value, json};

use super::LAST_APPLIED;
use crate::builder::encode;
use crate::cmd::dryrun::DryRun;
use crate::discovery::{Resource, no_kind_match};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

/// The pruning flags (kubectl's `AddPruningFlags`, without the ApplySet alpha's).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Flags {
    /// Delete the objects that were applied before (they carry the last-applied annotation) but are not in the configs; use with -l or --all.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, default_value_t = false)]
    pub prune: bool,
    /// Select all resources in the namespace of the specified resource types.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, default_value_t = false)]
    pub all: bool,
    /// Overwrite the default allowlist with <group/version/kind> for --prune.
    #[arg(long = "prune-allowlist")]
    pub allowlist: Vec<String>,
}

/// A type to prune, as kubectl's `prune.Resource`: the namespaced flag is the default set's,
/// or the scope discovery gives an allowlisted kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespaced: bool,
}

impl PruneType {
    fn new(group: &str, version: &str, kind: &str, namespaced: bool) -> Self {
        PruneType { group: group.into(), version: version.into(), kind: kind.into(), namespaced }
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// kubectl's words for a prune type in its errors: `/v1, Kind=ConfigMap, Namespaced=true`.
impl fmt::Display for PruneType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}, Kind={}, Namespaced={}",
            self.group, self.version, self.kind, self.namespaced
        )
    }
}

/// The types kubectl prunes when no allowlist is given: these namespaced ones, then
/// Namespaces and PersistentVolumes.
pub fn default_types() -> Vec<PruneType> {
    let namespaced = [
        ("", "ConfigMap"),
        ("", "Endpoints"),
        ("", "PersistentVolumeClaim"),
        ("", "Pod"),
        ("", "ReplicationController"),
        ("", "Secret"),
        ("", "Service"),
        ("batch", "Job"),
        ("batch", "CronJob"),
        ("networking.k8s.io", "Ingress"),
        ("apps", "DaemonSet"),
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("apps", "StatefulSet"),
    ];
    let cluster = [("", "Namespace"), ("", "PersistentVolume")];
    namespaced
        .iter()
        .map(|(g, k)| PruneType::new(g, "v1", k, true))
        .chain(cluster.iter().map(|(g, k)| PruneType::new(g, "v1", k, false)))
        .collect()
}

/// One `--prune-allowlist` entry as `(group, version, kind)`; `core` is the core group.
pub fn parse_gvk(entry: &str) -> Result<(String, String, String)> {
    match entry.split('/').collect::<Vec<_>>().as_slice() {
        [g, v, k] => {
            let group = if *g == "core" { "" } else { g };
            Ok((group.to_string(), v.to_string(), k.to_string()))
        }
        _ => Err(CliError::Usage(format!(
            "invalid GroupVersionKind format: {entry}, please follow <group/version/kind>"
        ))),
    }
}

/// The allowlist's types, each mapped through discovery as kubectl maps them before applying
/// anything (`prune.ParseResources`): the first entry that is malformed or not served fails.
pub async fn allowlist(f: &Factory, entries: &[String]) -> Result<Vec<PruneType>> {
    let mut out = Vec::new();
    for entry in entries {
        let (group, version, kind) = parse_gvk(entry)?;
        let t = PruneType::new(&group, &version, &kind, false);
        let Some(r) = f.mapping(&t.api_version(), &kind).await? else {
            return Err(CliError::Usage(no_kind_match(&t.api_version(), &kind)));
        };
        out.push(PruneType { namespaced: r.namespaced, ..t });
    }
    Ok(out)
}

/// What was applied: the namespaces visited (sorted; kubectl walks a Go map's random order)
/// and the UIDs of the objects applied.
#[derive(Debug, Default)]
pub struct Visited {
    pub namespaces: BTreeSet<String>,
    pub uids: HashSet<String>,
}

/// How to prune: the types (empty: the default set), the selector, and the delete's options.
#[derive(Debug)]
pub struct Plan {
    pub types: Vec<PruneType>,
    pub selector: Option<String>,
    pub dry_run: DryRun,
    /// `Background`, `Foreground` or `Orphan`.
    pub propagation: &'static str,
    /// Negative: the object's own.
    pub grace_period: i64,
    /// `-o name`: the names alone.
    pub names_only: bool,
}

/// Prunes what the plan selects and `visited` does not hold.
pub async fn run(f: &Factory, plan: &Plan, visited: &Visited) -> Result<()> {
    let types = if plan.types.is_empty() { default_types() } else { plan.types.clone() };
    let mut mapped = Vec::new();
    for t in types {
        match f.mapping(&t.api_version(), &t.kind).await? {
            Some(r) => mapped.push((t, r)),
            None => {
                return Err(CliError::Usage(format!(
                    "error retrieving RESTMappings to prune: invalid resource {t}: {}",
                    no_kind_match(&t.api_version(), &t.kind)
                )));
            }
        }
    }
    for ns in &visited.namespaces {
        for (t, r) in mapped.iter().filter(|(t, _)| t.namespaced) {
            prune(f, plan, visited, Some(ns), r).await.map_err(|e| wrap("namespaced", t, e))?;
        }
    }
    for (t, r) in mapped.iter().filter(|(t, _)| !t.namespaced) {
        prune(f, plan, visited, None, r).await.map_err(|e| wrap("nonNamespaced", t, e))?;
    }
    Ok(())
}

/// kubectl's `error pruning namespaced object /v1, Kind=ConfigMap: <error>` (the kind as
/// given: the mapping keeps it).
fn wrap(scope: &str, t: &PruneType, e: CliError) -> CliError {
    let message = e.go_message();
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    CliError::Usage(format!(
        "error pruning {scope} object {}/{}, Kind={}: {message}",
        t.group, t.version, t.kind
    ))
}

/// One type in one namespace (or cluster-wide): listed by the selector, the unvisited applied
/// objects deleted (or not, in a client dry run) and printed.
async fn prune(
    f: &Factory,
    plan: &Plan,
    visited: &Visited,
    namespace: Option<&str>,
    r: &Resource,
) -> Result<()> {
    let mut url = r.url(namespace, None);
    if let Some(s) = &plan.selector {
        url.push_str(&format!("?labelSelector={}", encode(s)));
    }
    let list = f.get_json(&url).await?;
    let items = list["items"].as_array().map(Vec::as_slice).unwrap_or_default();
    for name in to_prune(items, &visited.uids) {
        if plan.dry_run != DryRun::Client {
            delete(f, plan, r.url(namespace, Some(name))).await?;
        }
        let kind_name = format!("{}/{name}", r.group_kind_lower());
        if plan.names_only {
            println!("{kind_name}");
        } else {
            println!("{kind_name} {}", plan.dry_run.operation("pruned"));
        }
    }
    Ok(())
}

/// The names of the listed objects to prune: those apply made (they carry the last-applied
/// annotation, whatever its value) that were not applied this time.
pub fn to_prune<'a>(items: &'a [Value], applied: &HashSet<String>) -> Vec<&'a str> {
    items
        .iter()
        .filter(|o| o.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED)).is_some())
        .filter(|o| {
            let uid = o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
            !applied.contains(uid)
        })
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .collect()
}

/// The delete kubectl's pruner sends: the propagation policy always, the grace period when
/// given, `dryRun: [All]` in a server dry run.
pub fn delete_options(plan: &Plan) -> Value {
    let mut options =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": plan.propagation});
    if plan.grace_period >= 0 {
        options["gracePeriodSeconds"] = json!(plan.grace_period);
    }
    if plan.dry_run == DryRun::Server {
        options["dryRun"] = json!(["All"]);
    }
    options
}

async fn delete(f: &Factory, plan: &Plan, url: String) -> Result<()> {
    let body =
        serde_json::to_vec(&delete_options(plan)).map_err(|e| CliError::Usage(e.to_string()))?;
    f.send(Method::DELETE, &url, Some((body, "application/json")), "application/json").await?;
    Ok(())
}

#[cfg(test)]
mod tests;
