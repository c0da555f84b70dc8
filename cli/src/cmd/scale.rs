//! `scale`: `spec.replicas` of each object's `scale` subresource, with kubectl's
//! `--current-replicas` and `--resource-version` preconditions; `<kind>/<name> scaled`.

use http::Method;
use serde_json::json;

use crate::builder::{self, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE NAME... or TYPE/NAME...
    pub args: Vec<String>,
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[arg(long)]
    pub all: bool,
    /// The new number of replicas.
    #[arg(long, allow_negative_numbers = true)]
    pub replicas: Option<i64>,
    /// Scale only if the current replica count is this (-1: no condition).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub current_replicas: i64,
    /// Scale only if the object's resourceVersion is this.
    #[arg(long)]
    pub resource_version: Option<String>,
    /// Output format: name prints `<kind>/<name>` only.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let replicas = match a.replicas {
        Some(r) if r >= 0 => r,
        _ => {
            return Err(CliError::Usage(
                "The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0".into(),
            ));
        }
    };
    let sel = Selection {
        filenames: a.filenames.clone(),
        args: a.args.clone(),
        selector: a.selector.clone(),
        all: a.all,
        ..Selection::default()
    };
    let (infos, mut errors) = builder::infos(f, &sel).await?;
    for info in infos {
        let url = format!("{}/scale", info.url());
        if a.current_replicas >= 0 || a.resource_version.is_some() {
            let scale = f.get_json(&url).await?;
            let now = scale["spec"]["replicas"].as_i64().unwrap_or(0);
            if a.current_replicas >= 0 && now != a.current_replicas {
                errors.push(CliError::Usage(format!(
                    "Expected replicas to be {}, was {now}",
                    a.current_replicas
                )));
                continue;
            }
            if let Some(rv) = &a.resource_version
                && scale["metadata"]["resourceVersion"].as_str() != Some(rv)
            {
                errors.push(CliError::Usage(format!(
                    "Expected resourceVersion to be {rv}, was {}",
                    scale["metadata"]["resourceVersion"].as_str().unwrap_or_default()
                )));
                continue;
            }
        }
        let mut patch = json!({"spec": {"replicas": replicas}});
        if let Some(rv) = &a.resource_version {
            patch["metadata"] = json!({"resourceVersion": rv});
        }
        let body = serde_json::to_vec(&patch).map_err(|e| CliError::Usage(e.to_string()))?;
        match f
            .send(
                Method::PATCH,
                &url,
                Some((body, "application/merge-patch+json")),
                "application/json",
            )
            .await
        {
            Ok(_) => match a.output.as_deref() {
                Some("name") => println!("{}", info.kind_name()),
                _ => println!("{} scaled", info.kind_name()),
            },
            Err(e) => errors.push(e),
        }
    }
    crate::cmd::finish(errors)
}
