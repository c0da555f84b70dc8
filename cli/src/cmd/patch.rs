//! `patch`: a strategic merge (the default), JSON merge or JSON patch sent to one object (or
//! its `--subresource`), from `-p` or `--patch-file`; `patched`, or `patched (no change)` when
//! the object came back unchanged, as kubectl reports it.

use http::Method;
use serde_json::Value;

use crate::builder::{self, Selection, Target};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE NAME or TYPE/NAME.
    pub args: Vec<String>,
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    /// The patch, JSON or YAML.
    #[arg(short = 'p', long)]
    pub patch: Option<String>,
    /// A file holding the patch.
    #[arg(long)]
    pub patch_file: Option<String>,
    /// json, merge or strategic.
    #[arg(long = "type", default_value = "strategic")]
    pub patch_type: String,
    /// status or scale: patch the subresource.
    #[arg(long)]
    pub subresource: Option<String>,
    /// Output format: name prints `<kind>/<name>` only.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let content_type = match a.patch_type.as_str() {
        "strategic" => "application/strategic-merge-patch+json",
        "merge" => "application/merge-patch+json",
        "json" => "application/json-patch+json",
        other => {
            return Err(CliError::Usage(format!(
                "--type must be one of [json merge strategic], not \"{other}\""
            )));
        }
    };
    let text = match (&a.patch, &a.patch_file) {
        (Some(p), None) => p.clone(),
        (None, Some(file)) => std::fs::read_to_string(file)
            .map_err(|e| CliError::Usage(format!("unable to read patch file: open {file}: {e}")))?,
        (Some(_), Some(_)) => {
            return Err(CliError::Usage("cannot specify --patch and --patch-file together".into()));
        }
        (None, None) => {
            return Err(CliError::Usage(
                "must specify --patch or --patch-file containing the contents of the patch".into(),
            ));
        }
    };
    // kubectl reads the patch as YAML (JSON is YAML) and sends it as JSON, whatever it is, for
    // the server to refuse in its own words; text that is not even YAML goes as it is.
    let body = match serde_yaml_ng::from_str::<Value>(&text) {
        Ok(v) => serde_json::to_vec(&v).unwrap_or_else(|_| text.clone().into_bytes()),
        Err(_) => text.clone().into_bytes(),
    };
    let sel =
        Selection { filenames: a.filenames.clone(), args: a.args.clone(), ..Selection::default() };
    let (targets, errors) = builder::targets(f, &sel).await?;
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let mut infos = targets.into_iter().filter_map(|t| match t {
        Target::Object(i) => Some(i),
        Target::Collection(_) => None,
    });
    let (Some(info), None) = (infos.next(), infos.next()) else {
        return Err(CliError::Usage(
            "one resource must be specified as <resource> <name> or <resource>/<name>".into(),
        ));
    };
    let mut url = info.url();
    if let Some(sub) = &a.subresource {
        url = format!("{url}/{sub}");
    }
    let before = f.get_json(&url).await?;
    let after: Value = serde_json::from_slice(
        &f.send(Method::PATCH, &url, Some((body, content_type)), "application/json").await?,
    )
    .unwrap_or(Value::Null);
    // kubectl's `reflect.DeepEqual` of the object read and the one answered (a patch that lets
    // the server remove the object, such as its last finalizer going, changes it too).
    let unchanged = before == after;
    match a.output.as_deref() {
        Some("name") => println!("{}", info.kind_name()),
        _ if unchanged => println!("{} patched (no change)", info.kind_name()),
        _ => println!("{} patched", info.kind_name()),
    }
    Ok(())
}
