//! `cordon` and `uncordon`: a node's `spec.unschedulable` set or cleared with a merge patch;
//! `node/<name> cordoned`, or `already cordoned` when there was nothing to change.

use http::Method;
use serde_json::json;

use crate::builder::{self, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NODE...
    pub nodes: Vec<String>,
    /// Selector (label query) to filter nodes on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
}

pub async fn run(f: &Factory, a: Args, unschedulable: bool) -> Result<()> {
    if a.nodes.is_empty() && a.selector.is_none() {
        return Err(CliError::Usage(
            "USAGE: cordon NODE [flags]\nSee 'kubectl-lite cordon -h' for help and examples".into(),
        ));
    }
    let mut args = vec!["nodes".to_string()];
    args.extend(a.nodes.iter().cloned());
    let sel = Selection { args, selector: a.selector.clone(), ..Selection::default() };
    let (infos, mut errors) = builder::infos(f, &sel).await?;
    let (done, already) = if unschedulable {
        ("cordoned", "already cordoned")
    } else {
        ("uncordoned", "already uncordoned")
    };
    for info in infos {
        let node = match f.get_json(&info.url()).await {
            Ok(n) => n,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if node["spec"]["unschedulable"].as_bool().unwrap_or(false) == unschedulable {
            println!("{} {already}", info.kind_name());
            continue;
        }
        let patch = json!({"spec": {"unschedulable": if unschedulable { json!(true) } else { json!(null) }}});
        let body = serde_json::to_vec(&patch).map_err(|e| CliError::Usage(e.to_string()))?;
        match f
            .send(
                Method::PATCH,
                &info.url(),
                Some((body, "application/merge-patch+json")),
                "application/json",
            )
            .await
        {
            Ok(_) => println!("{} {done}", info.kind_name()),
            Err(e) => errors.push(e),
        }
    }
    crate::cmd::finish(errors)
}
