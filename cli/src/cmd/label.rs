//! `label` and `annotate`: `KEY=VALUE` sets, `KEY-` removes, on objects named by argument, file
//! or selector; each object read, changed, and written back as a JSON merge patch of the
//! difference, as kubectl's. What each prints follows kubectl: `labeled`, `unlabeled`,
//! `not labeled`; `annotated` whatever changed.

use std::collections::BTreeMap;

use http::Method;
use serde_json::{Map, Value, json};

use crate::builder::{self, Info, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

/// Which map of `metadata` a command edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    Labels,
    Annotations,
}

impl Meta {
    fn field(self) -> &'static str {
        match self {
            Meta::Labels => "labels",
            Meta::Annotations => "annotations",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE NAME... KEY_1=VAL_1 ... KEY_N=VAL_N (or TYPE/NAME, or -f), KEY- to remove.
    pub args: Vec<String>,
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    #[arg(short = 'R', long)]
    pub recursive: bool,
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[arg(long)]
    pub field_selector: Option<String>,
    /// Every object of the types named.
    #[arg(long)]
    pub all: bool,
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Allow changing a key that already has a value.
    #[arg(long)]
    pub overwrite: bool,
    /// Output format: name prints `<kind>/<name>` only.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

/// The changes the arguments ask for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub set: BTreeMap<String, String>,
    pub remove: Vec<String>,
}

/// Splits the arguments into resource arguments and `KEY=VALUE`/`KEY-` changes.
pub fn parse_changes(meta: Meta, args: &[String]) -> Result<(Vec<String>, Changes)> {
    let mut resources = Vec::new();
    let mut changes = Changes::default();
    let what = match meta {
        Meta::Labels => "label",
        Meta::Annotations => "annotation",
    };
    for a in args {
        if let Some((k, v)) = a.split_once('=') {
            if k.is_empty() || (meta == Meta::Labels && v.contains('=')) {
                return Err(CliError::Usage(format!("invalid {what} spec: {a}")));
            }
            changes.set.insert(k.to_string(), v.to_string());
        } else if let Some(k) = a.strip_suffix('-')
            && !k.is_empty()
            && !a.contains('/')
        {
            changes.remove.push(k.to_string());
        } else if changes.set.is_empty() && changes.remove.is_empty() {
            resources.push(a.clone());
        } else {
            return Err(CliError::Usage(format!("invalid {what} spec: {a}")));
        }
    }
    if changes.set.is_empty() && changes.remove.is_empty() {
        return Err(CliError::Usage(format!("at least one {what} update is required")));
    }
    Ok((resources, changes))
}

/// The edited map, or kubectl's refusal of an existing key without `--overwrite`.
pub fn apply(
    meta: Meta,
    current: &Map<String, Value>,
    changes: &Changes,
    overwrite: bool,
) -> Result<Map<String, Value>> {
    if !overwrite {
        let taken: Vec<String> = changes
            .set
            .iter()
            .filter_map(|(k, v)| {
                current
                    .get(k)
                    .and_then(Value::as_str)
                    .filter(|old| *old != v)
                    .map(|old| format!("'{k}' already has a value ({old})"))
            })
            .collect();
        if !taken.is_empty() {
            return Err(CliError::Usage(match meta {
                Meta::Labels => format!("{}, and --overwrite is false", taken.join(", ")),
                Meta::Annotations => format!(
                    "--overwrite is false but found the following declared annotation(s): {}",
                    taken.join(", ")
                ),
            }));
        }
    }
    let mut out = current.clone();
    for (k, v) in &changes.set {
        out.insert(k.clone(), Value::String(v.clone()));
    }
    for k in &changes.remove {
        out.remove(k);
    }
    Ok(out)
}

pub async fn run(f: &Factory, meta: Meta, a: Args) -> Result<()> {
    let (resources, changes) = parse_changes(meta, &a.args)?;
    if a.filenames.is_empty() && resources.is_empty() {
        return Err(CliError::Usage(
            "one or more resources must be specified as <resource> <name> or <resource>/<name>"
                .into(),
        ));
    }
    let sel = Selection {
        filenames: a.filenames.clone(),
        recursive: a.recursive,
        args: resources,
        selector: a.selector.clone(),
        field_selector: a.field_selector.clone(),
        all: a.all,
        all_namespaces: a.all_namespaces,
    };
    let (infos, mut errors) = builder::infos(f, &sel).await?;
    for info in infos {
        if let Err(e) = one(f, meta, &a, &changes, &info).await {
            errors.push(e);
        }
    }
    crate::cmd::finish(errors)
}

async fn one(f: &Factory, meta: Meta, a: &Args, changes: &Changes, info: &Info) -> Result<()> {
    let live = f.get_json(&info.url()).await?;
    let empty = Map::new();
    let current = live["metadata"][meta.field()].as_object().unwrap_or(&empty);
    for k in &changes.remove {
        if meta == Meta::Labels && !current.contains_key(k) {
            println!("label \"{k}\" not found.");
        }
    }
    let edited = apply(meta, current, changes, a.overwrite)?;
    // The merge patch of the difference: set keys, null for removed ones.
    let mut patch = Map::new();
    for (k, v) in &edited {
        if current.get(k) != Some(v) {
            patch.insert(k.clone(), v.clone());
        }
    }
    for k in current.keys().filter(|k| !edited.contains_key(*k)) {
        patch.insert(k.clone(), Value::Null);
    }
    let message = match meta {
        Meta::Annotations => "annotated",
        Meta::Labels if patch.is_empty() => "not labeled",
        // kubectl's rule: a change that shrinks the object without --overwrite is "unlabeled".
        Meta::Labels if !a.overwrite && edited.len() < current.len() => "unlabeled",
        Meta::Labels => "labeled",
    };
    if !patch.is_empty() {
        let body = json!({"metadata": {meta.field(): patch}});
        let body = serde_json::to_vec(&body).map_err(|e| CliError::Usage(e.to_string()))?;
        f.send(
            Method::PATCH,
            &info.url(),
            Some((body, "application/merge-patch+json")),
            "application/json",
        )
        .await?;
    }
    match a.output.as_deref() {
        Some("name") => println!("{}", info.kind_name()),
        _ => println!("{} {message}", info.kind_name()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn arguments_split_into_resources_sets_and_removals() {
        let (r, c) = parse_changes(Meta::Labels, &strings(&["pods", "p1", "a=b", "c-"])).unwrap();
        assert_eq!(r, ["pods", "p1"]);
        assert_eq!(c.set.get("a").map(String::as_str), Some("b"));
        assert_eq!(c.remove, ["c"]);
    }

    #[test]
    fn a_label_spec_with_two_equals_or_no_change_is_refused_as_kubectl_words_it() {
        let e = parse_changes(Meta::Labels, &strings(&["pod", "p1", "a=b=c"])).unwrap_err();
        assert_eq!(e.to_string(), "error: invalid label spec: a=b=c");
        let e = parse_changes(Meta::Labels, &strings(&["pod", "p1"])).unwrap_err();
        assert_eq!(e.to_string(), "error: at least one label update is required");
        // An annotation value may hold '='.
        assert!(parse_changes(Meta::Annotations, &strings(&["pod", "p", "a=b=c"])).is_ok());
    }

    #[test]
    fn an_existing_key_is_changed_only_with_overwrite() {
        let current: Map<String, Value> = serde_json::from_str(r#"{"a": "b"}"#).unwrap();
        let (_, c) = parse_changes(Meta::Labels, &strings(&["pod", "p", "a=c"])).unwrap();
        let e = apply(Meta::Labels, &current, &c, false).unwrap_err();
        assert_eq!(e.to_string(), "error: 'a' already has a value (b), and --overwrite is false");
        let e = apply(Meta::Annotations, &current, &c, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error: --overwrite is false but found the following declared annotation(s): 'a' already has a value (b)"
        );
        assert_eq!(apply(Meta::Labels, &current, &c, true).unwrap()["a"], "c");
        // The same value again is no conflict.
        let (_, same) = parse_changes(Meta::Labels, &strings(&["pod", "p", "a=b"])).unwrap();
        assert!(apply(Meta::Labels, &current, &same, false).is_ok());
    }
}
