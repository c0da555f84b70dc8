//! `apply -f`: client-side apply as kubectl's (the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation, a create when the object is absent, else the three-way strategic merge patch of
//! [`strategicpatch`](crate::strategicpatch): `created`, `configured` or `unchanged`), or with
//! `--server-side` an apply patch under a field manager (`serverside-applied`, conflicts as
//! kubectl words them); `-l` applies only the files' objects it matches; `--dry-run`.
//!
//! - [`prune`]: `--prune` with `-l` or `--all` (and `--prune-allowlist`, `--cascade`,
//!   `--grace-period`): the objects applied before but no longer in the files deleted.

pub mod prune;

use api::labels;
use http::Method;
use serde_json::{Map, Value};

use crate::builder::{self, Info};
use crate::cmd::create::when;
use crate::cmd::dryrun::{self, DryRun};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::{self, Output};
use crate::strategicpatch;

/// The annotation client-side apply keeps the applied configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The field manager of client-side apply's writes.
const CLIENT_SIDE_MANAGER: &str = "kubectl-client-side-apply";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files (or directories, or `-` for stdin) holding the configuration to apply.
    #[arg(short = 'f', long = "filename", required = true)]
    pub filenames: Vec<String>,
    /// Process the directory used in -f recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Apply on the server (an apply patch under a field manager) instead of the client.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, default_value_t = false)]
    pub server_side: bool,
    /// Take the fields other managers own (server-side only).
    #[arg(long)]
    pub force_conflicts: bool,
    /// The field manager of a server-side apply.
    #[arg(long)]
    pub field_manager: Option<String>,
    /// Output format: `name` prints `<kind>/<name>` only; json, yaml, kyaml and jsonpath print
    /// the objects applied, once all are.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Selector (label query): only the files' objects it matches are applied (and pruned).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub prune: prune::Flags,
    /// How a pruned object's dependents go: background, foreground or orphan.
    #[arg(long, default_value = "background", num_args = 0..=1, require_equals = true, default_missing_value = "background")]
    pub cascade: String,
    /// Seconds a pruned object has to terminate gracefully (-1: the object's own).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub grace_period: i64,
    #[command(flatten)]
    pub dry_run: dryrun::Flag,
}

impl Args {
    /// `-l`, an empty one being none (as kubectl's string flag).
    fn selector(&self) -> Option<&str> {
        self.selector.as_deref().filter(|s| !s.is_empty())
    }
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    // kubectl's order: the flags read (`ToOptions`), the allowlist mapped, then `Validate`.
    let dry_run = a.dry_run.strategy()?;
    let propagation = crate::cmd::delete::propagation(&a.cascade)?;
    let types =
        if a.prune.prune { prune::allowlist(f, &a.prune.allowlist).await? } else { Vec::new() };
    validate(&a, dry_run)?;
    let filter = match a.selector() {
        Some(s) => Some(labels::parse(s).map_err(|e| {
            CliError::Usage(format!("the provided selector {s:?} is not valid: {e}"))
        })?),
        None => None,
    };
    let (mut infos, mut errors) = builder::from_files(f, &a.filenames, a.recursive).await?;
    if let Some(sel) = &filter {
        infos.retain(|i| i.object.as_ref().is_some_and(|o| sel.matches(o)));
    }
    if infos.is_empty() && errors.is_empty() {
        return Err(builder::no_objects("apply"));
    }
    let mut visited = prune::Visited::default();
    let mut printed: Vec<Value> = Vec::new();
    if f.namespace_explicit() {
        visited.namespaces.insert(f.namespace().await?);
    }
    for info in infos {
        let Some(object) = &info.object else { continue };
        if let Some(ns) = &info.namespace {
            visited.namespaces.insert(ns.clone());
        }
        let done = if a.server_side {
            server_side(f, &a, dry_run, &info, object).await.map_err(conflict)
        } else {
            client_side(f, dry_run, &info, object).await
        };
        match done {
            Ok((operation, applied)) => {
                // A client dry run's create has no UID; a live object keeps its own.
                let applied_uid = if operation == "created" && dry_run == DryRun::Client {
                    uid(object)
                } else {
                    uid(&applied)
                };
                visited.uids.insert(applied_uid);
                match a.output.as_deref() {
                    Some("name") => println!("{}", info.kind_name()),
                    Some(o) if !o.is_empty() => printed.push(applied),
                    _ => println!("{} {}", info.kind_name(), dry_run.operation(operation)),
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return crate::cmd::finish(errors);
    }
    // kubectl prints the objects (`-o` other than `name`) once all are applied, before pruning.
    if let Some(format) = a.output.as_deref().filter(|o| !o.is_empty() && *o != "name") {
        print_applied(format, printed)?;
    }
    if !a.prune.prune {
        return Ok(());
    }
    let plan = prune::Plan {
        types,
        selector: a.selector().map(str::to_string),
        dry_run,
        propagation,
        grace_period: a.grace_period,
        names_only: a.output.as_deref() == Some("name"),
    };
    prune::run(f, &plan, &visited).await
}

/// The applied objects as kubectl's `printObjects` prints them: one alone, several as a typed
/// `v1` `List` (its fields in Go's order where the format keeps order), managed fields left out.
fn print_applied(format: &str, mut objects: Vec<Value>) -> Result<()> {
    let output = crate::cmd::create::output_of(Some(format))?;
    objects.iter_mut().for_each(printers::omit_managed_fields);
    let text = match (objects.len(), &output) {
        (0, _) => String::new(),
        (1, Output::Json) => printers::json::to_string(&objects[0]),
        (1, Output::Yaml) => printers::yaml::to_string(&objects[0]),
        (1, Output::Kyaml) => printers::kyaml::document(&objects[0]),
        (1, Output::JsonPath(t)) => t.execute(&objects[0], false)?,
        (_, Output::Json) => {
            let items = printers::json::to_string(&Value::Array(objects));
            let items = items.trim_end().replace('\n', "\n    ");
            format!(
                "{{\n    \"kind\": \"List\",\n    \"apiVersion\": \"v1\",\n    \"metadata\": {{}},\n    \"items\": {items}\n}}\n"
            )
        }
        (_, Output::Kyaml) => printers::kyaml::list_document(&objects),
        (_, output) => {
            let list = serde_json::json!({"apiVersion": "v1", "items": objects, "kind": "List", "metadata": {}});
            match output {
                Output::JsonPath(t) => t.execute(&list, false)?,
                _ => printers::yaml::to_string(&list),
            }
        }
    };
    print!("{text}");
    Ok(())
}

/// kubectl's `ApplyOptions.Validate`, for the flags kubectl-lite takes, in kubectl's order.
fn validate(a: &Args, dry_run: DryRun) -> Result<()> {
    let refuse = |m: &str| Err(CliError::Usage(m.into()));
    if a.force_conflicts && !a.server_side {
        return refuse("--force-conflicts only works with --server-side");
    }
    if dry_run == DryRun::Client && a.server_side {
        return refuse(
            "--dry-run=client doesn't work with --server-side (did you mean --dry-run=server instead?)",
        );
    }
    if a.prune.all && a.selector().is_some() {
        return refuse("cannot set --all and --selector at the same time");
    }
    if a.prune.prune {
        if !a.prune.all && a.selector().is_none() {
            return refuse(
                "all resources selected for prune without explicitly passing --all. To prune all resources, pass the --all flag. If you did not mean to prune all resources, specify a label selector",
            );
        }
        if a.server_side {
            return refuse(
                "--prune is in alpha and doesn't currently work on objects created by server-side apply",
            );
        }
    }
    Ok(())
}

/// kubectl's `WarnIfDeleting`: an object applied while it is being deleted.
fn warn_if_deleting(object: &Value) {
    if object.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        eprintln!("Warning: Detected changes to resource {name} which is currently being deleted.");
    }
}

/// An object's UID (empty when it has none: a client dry run's create).
fn uid(object: &Value) -> String {
    object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string()
}

/// A server-side apply: the object as the apply patch.
async fn server_side(
    f: &Factory,
    a: &Args,
    dry_run: DryRun,
    info: &Info,
    object: &Value,
) -> Result<(&'static str, Value)> {
    let manager = a.field_manager.as_deref().unwrap_or("kubectl");
    let mut url = format!("{}?fieldManager={}", info.url(), crate::builder::encode(manager));
    if a.force_conflicts {
        url.push_str("&force=true");
    }
    if dry_run == DryRun::Server {
        url.push_str("&dryRun=All");
    }
    let body = go_json(object);
    let applied = f
        .send(
            Method::PATCH,
            &url,
            Some((body.into_bytes(), "application/apply-patch+yaml")),
            "application/json",
        )
        .await?;
    let applied: Value = serde_json::from_slice(&applied).unwrap_or_default();
    warn_if_deleting(&applied);
    Ok(("serverside-applied", applied))
}

/// A conflict worded as kubectl words it: the server's message, then what to do about it.
fn conflict(e: CliError) -> CliError {
    match e.status() {
        Some(s) if s.code == 409 => CliError::Usage(format!(
            "{}\n{}",
            s.message,
            "Please review the fields above--they currently have other managers. Here
are the ways you can resolve this warning:
* If you intend to manage all of these fields, please re-run the apply
  command with the `--force-conflicts` flag.
* If you do not intend to manage all of the fields, please edit your
  manifest to remove references to the fields that should keep their
  current managers.
* You may co-own fields by updating your manifest to match the existing
  value; in this case, you'll become the manager if the other manager(s)
  stop managing the field (remove it from their configuration).
See https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts"
        )),
        _ => e,
    }
}

/// A client-side apply: create with the annotation, or patch the live object; the operation
/// and the object as kubectl then holds it (the server's answer; under a client dry run the
/// object to create, or the live one). A client dry run reads the live object and sends
/// nothing.
async fn client_side(
    f: &Factory,
    dry_run: DryRun,
    info: &Info,
    object: &Value,
) -> Result<(&'static str, Value)> {
    let modified = with_last_applied(object);
    let mut query = format!("?fieldManager={CLIENT_SIDE_MANAGER}");
    if dry_run == DryRun::Server {
        query.push_str("&dryRun=All");
    }
    let live = match f.get_json(&info.url()).await {
        Ok(v) => v,
        Err(e) if e.is_not_found() => {
            if dry_run == DryRun::Client {
                return Ok(("created", modified));
            }
            let url = format!("{}{query}", info.resource.url(info.namespace.as_deref(), None));
            let body = serde_json::to_vec(&modified).map_err(|e| CliError::Usage(e.to_string()))?;
            let path = info.origin.as_ref().map(|o| o.path.as_str());
            let created = f
                .send(Method::POST, &url, Some((body, "application/json")), "application/json")
                .await
                .map_err(|e| when(e, "creating", path))?;
            let created: Value = serde_json::from_slice(&created).unwrap_or_default();
            return Ok(("created", created));
        }
        Err(e) => return Err(e),
    };
    if dry_run == DryRun::Client {
        return Ok(("configured", live));
    }
    let original = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    if original.is_none() {
        eprintln!(
            "Warning: resource {}/{} is missing the {LAST_APPLIED} annotation which is required by kubectl-lite apply. kubectl-lite apply should only be used on resources created declaratively by either kubectl-lite create --save-config or kubectl-lite apply. The missing annotation will be patched automatically.",
            info.resource.plural, info.name
        );
    }
    let patch = strategicpatch::three_way(
        original.as_ref().and_then(Value::as_object).unwrap_or(&Map::new()),
        modified.as_object().unwrap_or(&Map::new()),
        live.as_object().unwrap_or(&Map::new()),
    )
    .map_err(|e| CliError::Usage(e.to_string()))?;
    if patch.is_empty() {
        warn_if_deleting(&live);
        return Ok(("unchanged", live));
    }
    let body = serde_json::to_vec(&patch).map_err(|e| CliError::Usage(e.to_string()))?;
    let patched = f
        .send(
            Method::PATCH,
            &format!("{}{query}", info.url()),
            Some((body, "application/strategic-merge-patch+json")),
            "application/json",
        )
        .await?;
    let patched: Value = serde_json::from_slice(&patched).unwrap_or_default();
    warn_if_deleting(&patched);
    Ok(("configured", patched))
}

/// The object with its last-applied annotation: the object's own JSON without that annotation
/// (and `annotations: {}` where it has none), compact, keys sorted and HTML characters escaped as
/// Go's encoder writes them, with Go's trailing newline; as kubectl's `GetModifiedConfiguration`.
pub fn with_last_applied(object: &Value) -> Value {
    let mut out = object.clone();
    let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) else {
        return out;
    };
    let annotations = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(a) = annotations.as_object_mut() {
        a.remove(LAST_APPLIED);
    }
    let mut applied = go_json(&out);
    applied.push('\n');
    if let Some(a) = out.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        a.insert(LAST_APPLIED.into(), Value::String(applied));
    }
    out
}

/// Compact JSON as Go's `encoding/json` writes it: keys sorted, `<`, `>`, `&`, U+2028 and
/// U+2029 escaped (they occur only inside strings, so escaping the text is exact).
fn go_json(v: &Value) -> String {
    serde_json::to_string(v)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_last_applied_configuration_is_the_object_without_itself_with_a_newline() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default"}, "data": {"html": "<b>&"}});
        let out = with_last_applied(&cm);
        assert_eq!(
            out["metadata"]["annotations"][LAST_APPLIED],
            "{\"apiVersion\":\"v1\",\"data\":{\"html\":\"\\u003cb\\u003e\\u0026\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"name\":\"c\",\"namespace\":\"default\"}}\n"
        );
        // Applying the annotated object again gives the same annotation (no recursion).
        assert_eq!(with_last_applied(&out), out);
    }

    #[test]
    fn other_annotations_stay_beside_it() {
        let o = json!({"metadata": {"name": "c", "annotations": {"a": "1"}}});
        let out = with_last_applied(&o);
        assert_eq!(out["metadata"]["annotations"]["a"], "1");
        assert_eq!(
            out["metadata"]["annotations"][LAST_APPLIED],
            "{\"metadata\":{\"annotations\":{\"a\":\"1\"},\"name\":\"c\"}}\n"
        );
    }

    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        args: Args,
    }

    /// `apply <argv>`'s refusal before anything is read or sent, if any.
    fn refusal(argv: &[&str]) -> Option<String> {
        let line = <Line as clap::Parser>::try_parse_from(
            ["apply", "-f", "x.yaml"].iter().chain(argv).copied(),
        )
        .unwrap();
        let dry_run = line.args.dry_run.strategy().unwrap();
        validate(&line.args, dry_run).err().map(|e| e.to_string())
    }

    #[test]
    fn prune_needs_a_selector_or_all_and_not_both() {
        assert_eq!(
            refusal(&["--prune"]).unwrap(),
            "error: all resources selected for prune without explicitly passing --all. To prune all resources, pass the --all flag. If you did not mean to prune all resources, specify a label selector"
        );
        assert_eq!(refusal(&["--prune", "-l", ""]), refusal(&["--prune"]));
        assert_eq!(
            refusal(&["--prune", "--all", "-l", "app=x"]).unwrap(),
            "error: cannot set --all and --selector at the same time"
        );
        // Without --prune too, as kubectl checks it.
        assert_eq!(refusal(&["--all", "-l", "app=x"]), refusal(&["--prune", "--all", "-l", "a"]));
        assert_eq!(refusal(&["--prune", "-l", "app=x"]), None);
        assert_eq!(refusal(&["--prune", "--all"]), None);
        assert_eq!(refusal(&["--prune=false"]), None);
    }

    #[test]
    fn prune_and_client_dry_runs_do_not_work_with_server_side() {
        assert_eq!(
            refusal(&["--prune", "--all", "--server-side"]).unwrap(),
            "error: --prune is in alpha and doesn't currently work on objects created by server-side apply"
        );
        assert_eq!(
            refusal(&["--server-side", "--dry-run=client"]).unwrap(),
            "error: --dry-run=client doesn't work with --server-side (did you mean --dry-run=server instead?)"
        );
        assert_eq!(refusal(&["--server-side", "--dry-run=server"]), None);
        assert_eq!(
            refusal(&["--force-conflicts", "--prune"]).unwrap(),
            "error: --force-conflicts only works with --server-side"
        );
    }

    #[test]
    fn a_conflict_is_worded_with_what_to_do_and_other_errors_pass() {
        let s = kube::core::Status {
            code: 409,
            reason: "Conflict".into(),
            message: "Apply failed with 1 conflict: conflict with \"kubectl\" using v1: .data.a"
                .into(),
            ..kube::core::Status::default()
        };
        let text = conflict(CliError::Server(Box::new(s))).to_string();
        assert!(text.starts_with("error: Apply failed with 1 conflict"), "{text}");
        assert!(text.contains("--force-conflicts"));
        let nf = kube::core::Status { code: 404, ..kube::core::Status::default() };
        assert!(conflict(CliError::Server(Box::new(nf))).is_not_found());
    }
}
