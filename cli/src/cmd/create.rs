//! `create -f`: each object of the files POSTed to its collection (with `--save-config`, carrying
//! the last-applied annotation `apply` reads); `<kind>/<name> created` per object, the failures
//! reported at the end with the file they came from.

use http::Method;
use serde_json::Value;

use crate::builder;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files (or directories, or `-` for stdin) holding the objects to create.
    #[arg(short = 'f', long = "filename", required = true)]
    pub filenames: Vec<String>,
    /// Process the directory used in -f recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Output format: name prints `<kind>/<name>` only.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Keep the configuration in the last-applied annotation, for a later `apply`.
    #[arg(long)]
    pub save_config: bool,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let (infos, mut errors) = builder::from_files(f, &a.filenames, a.recursive).await?;
    for info in infos {
        let Some(object) = &info.object else { continue };
        let saved = a.save_config.then(|| crate::cmd::apply::with_last_applied(object));
        let object = saved.as_ref().unwrap_or(object);
        // kubectl create's default `--field-manager`: what managedFields record as the manager.
        let url = format!(
            "{}?fieldManager=kubectl-create",
            info.resource.url(info.namespace.as_deref(), None)
        );
        let body = serde_json::to_vec(object).map_err(|e| CliError::Usage(e.to_string()))?;
        match f.send(Method::POST, &url, Some((body, "application/json")), "application/json").await
        {
            Ok(bytes) => {
                let created: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let name = created["metadata"]["name"].as_str().unwrap_or(&info.name).to_string();
                let shown = format!("{}/{name}", info.resource.group_kind_lower());
                match a.output.as_deref() {
                    Some("name") => println!("{shown}"),
                    _ => println!("{shown} created"),
                }
            }
            Err(e) => {
                errors.push(when(e, "creating", info.origin.as_ref().map(|o| o.path.as_str())))
            }
        }
    }
    crate::cmd::finish(errors)
}

/// A server's refusal of an object from a file, worded as kubectl's
/// `Error from server (Reason): error when creating "FILE": message`.
pub fn when(e: CliError, doing: &str, path: Option<&str>) -> CliError {
    match (e, path) {
        (CliError::Server(mut s), Some(p)) => {
            s.message = format!("error when {doing} \"{p}\": {}", s.message);
            CliError::Server(s)
        }
        (e, _) => e,
    }
}
