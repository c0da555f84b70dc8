//! `apply -f`: client-side apply as kubectl's (the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation, a create when the object is absent, else the three-way strategic merge patch of
//! [`strategicpatch`](crate::strategicpatch): `created`, `configured` or `unchanged`), or with
//! `--server-side` an apply patch under a field manager (`serverside-applied`, conflicts as
//! kubectl words them).

use http::Method;
use serde_json::{Map, Value};

use crate::builder::{self, Info};
use crate::cmd::create::when;
use crate::errors::{CliError, Result};
use crate::factory::Factory;
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
    /// Output format: name prints `<kind>/<name>` only.
    #[arg(short = 'o', long, value_parser = ["name"])]
    pub output: Option<String>,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    if a.force_conflicts && !a.server_side {
        return Err(CliError::Usage("--force-conflicts only works with --server-side".into()));
    }
    let (infos, mut errors) = builder::from_files(f, &a.filenames, a.recursive).await?;
    for info in infos {
        let Some(object) = &info.object else { continue };
        let done = if a.server_side {
            server_side(f, &a, &info, object).await.map_err(conflict)
        } else {
            client_side(f, &info, object).await
        };
        match done {
            Ok(operation) => match a.output.as_deref() {
                Some("name") => println!("{}", info.kind_name()),
                _ => println!("{} {operation}", info.kind_name()),
            },
            Err(e) => errors.push(e),
        }
    }
    crate::cmd::finish(errors)
}

/// A server-side apply: the object as the apply patch.
async fn server_side(f: &Factory, a: &Args, info: &Info, object: &Value) -> Result<&'static str> {
    let manager = a.field_manager.as_deref().unwrap_or("kubectl");
    let mut url = format!("{}?fieldManager={}", info.url(), crate::builder::encode(manager));
    if a.force_conflicts {
        url.push_str("&force=true");
    }
    let body = go_json(object);
    f.send(
        Method::PATCH,
        &url,
        Some((body.into_bytes(), "application/apply-patch+yaml")),
        "application/json",
    )
    .await?;
    Ok("serverside-applied")
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

/// A client-side apply: create with the annotation, or patch the live object.
async fn client_side(f: &Factory, info: &Info, object: &Value) -> Result<&'static str> {
    let modified = with_last_applied(object);
    let query = format!("?fieldManager={CLIENT_SIDE_MANAGER}");
    let live = match f.get_json(&info.url()).await {
        Ok(v) => v,
        Err(e) if e.is_not_found() => {
            let url = format!("{}{query}", info.resource.url(info.namespace.as_deref(), None));
            let body = serde_json::to_vec(&modified).map_err(|e| CliError::Usage(e.to_string()))?;
            let path = info.origin.as_ref().map(|o| o.path.as_str());
            f.send(Method::POST, &url, Some((body, "application/json")), "application/json")
                .await
                .map_err(|e| when(e, "creating", path))?;
            return Ok("created");
        }
        Err(e) => return Err(e),
    };
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
        return Ok("unchanged");
    }
    let body = serde_json::to_vec(&patch).map_err(|e| CliError::Usage(e.to_string()))?;
    f.send(
        Method::PATCH,
        &format!("{}{query}", info.url()),
        Some((body, "application/strategic-merge-patch+json")),
        "application/json",
    )
    .await?;
    Ok("configured")
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
