//! `edit`, as kubectl's normal edit mode: the objects named (one, or a `List` of several) read
//! fresh from the server, written without managedFields as YAML under kubectl's header comment
//! (or as JSON with `-o json`, no header) to a temp file, handed to the editor (`file`:
//! `KUBE_EDITOR`, `EDITOR`, `vi`); unchanged content cancels. Each edited object is matched to
//! its original by UID and sent as the two-way strategic merge patch (`--output-patch` prints
//! it) under `--field-manager` (`kubectl-edit`). Objects the server finds invalid reopen the file
//! with the reasons in its header; a missing object or another refusal keeps the file and exits
//! 1, as kubectl does.

pub mod file;

use std::path::{Path, PathBuf};

use http::Method;
use serde_json::{Map, Value};

use crate::builder::{self, Selection, Target};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::{self, jsonpath::fmt};
use crate::strategicpatch;
use file::Reason;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE NAME, TYPE/NAME, or TYPE (every object of it).
    pub args: Vec<String>,
    /// Files identifying the resources to edit.
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    /// Process the directory used in -f recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Output format: yaml or json (also the format edited in).
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Output the patch if the resource is edited.
    #[arg(long)]
    pub output_patch: bool,
    /// Name of the manager used to track field ownership.
    #[arg(long, default_value = "kubectl-edit")]
    pub field_manager: String,
    /// Save the object's configuration in its last-applied annotation (for a later `apply`).
    #[arg(long)]
    pub save_config: bool,
    /// Write the file with Windows line endings (CRLF).
    #[arg(long)]
    pub windows_line_endings: bool,
    /// Edit this subresource of the object (`status`, `scale`) instead of the object.
    #[arg(long)]
    pub subresource: Option<String>,
}

/// One object being edited: where it lives and what it was.
struct Original {
    resource: std::sync::Arc<crate::discovery::Resource>,
    namespace: Option<String>,
    name: String,
    /// `--subresource`: what is read and patched is the object's `status` or `scale`.
    subresource: Option<String>,
    object: Value,
}

impl Original {
    fn url(&self) -> String {
        let object = self.resource.url(self.namespace.as_deref(), Some(&self.name));
        match &self.subresource {
            Some(sub) => format!("{object}/{}", builder::encode(sub)),
            None => object,
        }
    }
}

/// What one round of patches came to.
#[derive(Default)]
struct Results {
    reasons: Vec<Reason>,
    retryable: usize,
    not_found: usize,
    invalid: usize,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let json = match a.output.as_deref() {
        None | Some("yaml") => false,
        Some("json") => true,
        Some(other) => {
            return Err(CliError::Usage(format!(
                "unable to match a printer suitable for the output format \"{other}\", allowed formats are: json,kyaml,yaml"
            )));
        }
    };
    if a.args.is_empty() && a.filenames.is_empty() {
        return Err(CliError::Usage(builder::NOTHING_NAMED.into()));
    }
    let sel = Selection {
        filenames: a.filenames.clone(),
        recursive: a.recursive,
        args: a.args.clone(),
        ..Selection::default()
    };
    let (targets, errors) = builder::targets(f, &sel).await?;
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let subresource = a.subresource.clone().filter(|s| !s.is_empty());
    let originals = fetch(f, &targets, subresource).await?;
    if originals.is_empty() {
        return Err(CliError::Usage("edit cancelled, no objects found".into()));
    }
    let shown: Vec<Value> = originals.iter().map(|o| without_managed_fields(&o.object)).collect();
    // Several objects are edited as one `List` (kubectl's, with empty metadata).
    let whole = match &shown[..] {
        [one] => one.clone(),
        many => {
            serde_json::json!({"apiVersion": "v1", "items": many, "kind": "List", "metadata": {}})
        }
    };
    let body =
        if json { printers::json::to_string(&whole) } else { printers::yaml::to_string(&whole) };
    let original_text = if json { body.clone() } else { file::header(&[]) + &body };
    let namespace = f.namespace().await?;
    let mut reasons: Vec<Reason> = Vec::new();
    let mut edited = String::new();
    let mut previous_file: Option<PathBuf> = None;
    let mut contains_error = false;
    loop {
        let mut text = if json { String::new() } else { file::header(&reasons) };
        if contains_error {
            text.push_str(&file::manual_strip(&edited));
        } else {
            text.push_str(&body);
        }
        let before = std::mem::take(&mut edited);
        if a.windows_line_endings {
            text = text.replace("\r\n", "\n").replace('\n', "\r\n");
        }
        let path = temp_file(if json { ".json" } else { ".yaml" }, &text)?;
        edited = launch(&path)?;
        if contains_error && file::content(&before) == file::content(&edited) {
            return Err(preserved(
                CliError::Usage("Edit cancelled, no valid changes were saved.".into()),
                &path,
            ));
        }
        if let Some(p) = previous_file.take() {
            let _ = std::fs::remove_file(p);
        }
        previous_file = Some(path.clone());
        if let Err(why) = file::validate(&edited) {
            // kubectl's validator, before anything else: the first object named is invalid.
            let first = &originals[0];
            let what = format!("{} \"{}\"", first.resource.group_resource(), first.name);
            eprintln!("error: {what} is invalid");
            reasons = vec![Reason {
                head: format!("{what} was not valid"),
                other: vec![format!(
                    "<nil>: Invalid value: \"The edited file failed validation\": {why}"
                )],
            }];
            contains_error = true;
            continue;
        }
        if file::content(&original_text) == file::content(&edited) {
            let _ = std::fs::remove_file(&path);
            eprintln!("Edit cancelled, no changes made.");
            return Ok(());
        }
        if !file::has_lines(&edited) {
            let _ = std::fs::remove_file(&path);
            eprintln!("Edit cancelled, saved file was empty.");
            return Ok(());
        }
        reasons = Vec::new();
        let (docs, parse_errors) = builder::documents::parse("edited-file", &edited);
        if let Some(e) = parse_errors.first() {
            contains_error = true;
            reasons.push(Reason {
                head: format!("The edited file had a syntax error: {}", e.go_message()),
                other: Vec::new(),
            });
            continue;
        }
        let mut results = Results::default();
        for doc in &docs {
            patch_one(f, &a, &namespace, &originals, &doc.object, &mut results)
                .await
                .map_err(|e| preserved(e, &path))?;
        }
        let command = std::env::args()
            .next()
            .and_then(|a| Path::new(&a).file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "kubectl-lite".into());
        if results.retryable > 0 {
            eprintln!(
                "You can run `{command} replace -f {}` to try this update again.",
                path.display()
            );
            return Err(CliError::Silent);
        }
        if results.not_found > 0 {
            eprintln!(
                "The edits you made on deleted resources have been saved to \"{}\"",
                path.display()
            );
            return Err(CliError::Silent);
        }
        if results.invalid == 0 {
            let _ = std::fs::remove_file(&path);
            return Ok(());
        }
        reasons = results.reasons;
        contains_error = !reasons.is_empty();
    }
}

/// The objects the targets name, read fresh (a type alone: every object of it), or with
/// `subresource` that subresource of each.
async fn fetch(
    f: &Factory,
    targets: &[Target],
    subresource: Option<String>,
) -> Result<Vec<Original>> {
    let mut out = Vec::new();
    for t in targets {
        let named = match t {
            Target::Object(i) => {
                vec![(i.resource.clone(), i.namespace.clone(), i.name.clone(), None)]
            }
            Target::Collection(c) => {
                let list = f.get_json(&c.resource.url(c.namespace.as_deref(), None)).await?;
                let mut named = Vec::new();
                for item in list["items"].as_array().into_iter().flatten() {
                    let mut object = item.clone();
                    object["apiVersion"] = Value::String(c.resource.api_version());
                    object["kind"] = Value::String(c.resource.kind.clone());
                    let meta = &object["metadata"];
                    let namespace = meta["namespace"].as_str().map(str::to_string);
                    let name = meta["name"].as_str().unwrap_or_default().to_string();
                    named.push((c.resource.clone(), namespace, name, Some(object)));
                }
                named
            }
        };
        for (resource, namespace, name, listed) in named {
            let mut original = Original {
                resource,
                namespace,
                name,
                subresource: subresource.clone(),
                object: Value::Null,
            };
            original.object = match listed {
                Some(object) if subresource.is_none() => object,
                _ => f.get_json(&original.url()).await?,
            };
            out.push(original);
        }
    }
    Ok(out)
}

fn without_managed_fields(o: &Value) -> Value {
    let mut o = o.clone();
    printers::omit_managed_fields(&mut o);
    o
}

/// One edited object: matched to its original, skipped when unchanged, else patched; the
/// server's refusal counted in `results` (an error ends the edit).
async fn patch_one(
    f: &Factory,
    a: &Args,
    namespace: &str,
    originals: &[Original],
    edited: &Value,
    results: &mut Results,
) -> Result<()> {
    if let Some(ns) = edited["metadata"]["namespace"].as_str()
        && !ns.is_empty()
        && ns != namespace
    {
        return Err(CliError::Usage(format!(
            "the namespace from the provided object \"{ns}\" does not match the namespace \"{namespace}\". You must pass '--namespace={ns}' to perform this operation."
        )));
    }
    let uid = edited["metadata"]["uid"].as_str().unwrap_or_default();
    let Some(original) = originals.iter().find(|o| o.object["metadata"]["uid"] == uid) else {
        return Err(CliError::Usage(format!("no original object found for {}", fmt::json(edited))));
    };
    let before = without_managed_fields(&original.object);
    let after = if a.save_config {
        // kubectl annotates the edited object with its managedFields put back.
        let mut restored = edited.clone();
        if let Some(mf) = original.object["metadata"].get("managedFields")
            && let Some(m) = restored.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.insert("managedFields".into(), mf.clone());
        }
        without_managed_fields(&crate::cmd::apply::with_last_applied(&restored))
    } else {
        without_managed_fields(edited)
    };
    let kind_name = format!("{}/{}", original.resource.group_kind_lower(), original.name);
    if before == after {
        print_result(a, &kind_name, "skipped", &original.object);
        return Ok(());
    }
    let (Some(b), Some(e)) = (before.as_object(), after.as_object()) else {
        return Err(CliError::Usage("the edited object is no object".into()));
    };
    let patch = strategicpatch::two_way(b, e).map_err(|e| CliError::Usage(e.to_string()))?;
    if changes_identity(&patch) {
        return Err(CliError::Usage(
            "At least one of apiVersion, kind and name was changed".into(),
        ));
    }
    let patch = Value::Object(patch);
    if a.output_patch {
        println!("Patch: {}", fmt::json(&patch));
    }
    let url = format!("{}?fieldManager={}", original.url(), builder::encode(&a.field_manager));
    let body = serde_json::to_vec(&patch).map_err(|e| CliError::Usage(e.to_string()))?;
    let sent = f
        .send(
            Method::PATCH,
            &url,
            Some((body, "application/strategic-merge-patch+json")),
            "application/json",
        )
        .await;
    let what = format!("{} \"{}\"", original.resource.group_resource(), original.name);
    match sent {
        Ok(bytes) => {
            let patched: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            print_result(a, &kind_name, "edited", &patched);
        }
        Err(e) => match e.status().map(|s| (s.code, s.details.clone())) {
            Some((422, details)) => {
                results.invalid += 1;
                let other = details
                    .map(|d| {
                        d.causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
                    })
                    .unwrap_or_default();
                results.reasons.push(Reason { head: format!("{what} was not valid"), other });
                eprintln!("error: {what} is invalid");
            }
            Some((404, _)) => {
                results.not_found += 1;
                eprintln!("error: {what} could not be found on the server");
            }
            _ => {
                results.retryable += 1;
                eprintln!("error: {what} could not be patched: {}", e.go_message());
            }
        },
    }
    Ok(())
}

/// Whether a patch touches what an edit may not change (kubectl's preconditions).
fn changes_identity(patch: &Map<String, Value>) -> bool {
    patch.contains_key("apiVersion")
        || patch.contains_key("kind")
        || patch.get("metadata").and_then(|m| m.get("name")).is_some()
        || patch.contains_key("managedFields")
}

/// `pod/x edited`, or the object as `-o` asks.
fn print_result(a: &Args, kind_name: &str, operation: &str, object: &Value) {
    match a.output.as_deref() {
        Some("json") => print!("{}", printers::json_of(&[without_managed_fields(object)], false)),
        Some("yaml") => print!("{}", printers::yaml_of(&[without_managed_fields(object)], false)),
        _ => println!("{kind_name} {operation}"),
    }
}

/// A new file in the temp dir (`kubectl-lite-edit-<n><ext>`) holding `text`.
fn temp_file(ext: &str, text: &str) -> Result<PathBuf> {
    use std::io::Write;
    let dir = std::env::temp_dir();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    for n in 0..1000u32 {
        let path = dir.join(format!(
            "kubectl-lite-edit-{}{ext}",
            seed.wrapping_add(n.wrapping_mul(7919)) ^ std::process::id()
        ));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut file) => {
                file.write_all(text.as_bytes())
                    .map_err(|e| CliError::Usage(format!("writing {}: {e}", path.display())))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(CliError::Usage(format!("creating a temp file: {e}"))),
        }
    }
    Err(CliError::Usage("creating a temp file: every name taken".into()))
}

/// Runs the editor on `path` and reads what it left there.
fn launch(path: &Path) -> Result<String> {
    let var = |k: &str| std::env::var(k).ok();
    let argv = file::editor_argv(
        var("KUBE_EDITOR").as_deref(),
        var("EDITOR").as_deref(),
        var("SHELL").as_deref(),
        &path.to_string_lossy(),
    );
    let Some((program, args)) = argv.split_first() else {
        return Err(CliError::Usage("no editor".into()));
    };
    let status = std::process::Command::new(program).args(args).status();
    match status {
        Ok(s) if s.success() => {}
        _ => {
            return Err(preserved(
                CliError::Usage(format!("there was a problem with the editor \"{program}\"")),
                path,
            ));
        }
    }
    std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("reading {}: {e}", path.display())))
}

/// kubectl's note of where the changes were kept, printed before the error.
fn preserved(e: CliError, path: &Path) -> CliError {
    if path.exists() {
        eprintln!("A copy of your changes has been stored to \"{}\"", path.display());
    }
    e
}
