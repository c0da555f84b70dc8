//! `api-versions` as kubectl's: the server's groups read fresh (`/api`, then `/apis`), every
//! version of each as `group/version` (the core group's bare), sorted, one a line. A failed
//! read is kubectl's `couldn't get available api versions from server: …`, the cause in Go's
//! `url.Error` words for a refused connection.

use http::Method;
use serde_json::Value;

use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// None: the command takes no arguments.
    pub args: Vec<String>,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    if !a.args.is_empty() {
        return Err(CliError::Usage(format!(
            "unexpected arguments: [{}]\nSee 'kubectl-lite api-versions -h' for help and examples",
            a.args.join(" ")
        )));
    }
    let mut docs = Vec::new();
    for path in ["/api", "/apis"] {
        let doc = match f.send(Method::GET, path, None, "application/json").await {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| CliError::Unreachable { reason: e.to_string() }),
            Err(e) => Err(e),
        };
        match doc {
            Ok(d) => docs.push(d),
            Err(e) => {
                return Err(CliError::Usage(format!(
                    "couldn't get available api versions from server: {}",
                    cause(f, path, &e).await
                )));
            }
        }
    }
    for v in group_versions(&docs) {
        println!("{v}");
    }
    Ok(())
}

/// Go's `url.Error` of a discovery read: `Get "<url>?timeout=32s": dial tcp <host:port>:
/// connect: connection refused`; other failures in our words.
pub async fn cause(f: &Factory, path: &str, e: &CliError) -> String {
    match (e, f.config().await) {
        (CliError::Refused { server }, Ok(c)) => {
            let base = c.kube.cluster_url.to_string();
            format!(
                "Get \"{}{path}?timeout=32s\": dial tcp {server}: connect: connection refused",
                base.trim_end_matches('/')
            )
        }
        _ => e.go_message(),
    }
}

/// Every `group/version` of an `APIVersions` (`/api`) and an `APIGroupList` (`/apis`), sorted
/// as Go's `sort.Strings`.
pub fn group_versions(docs: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for doc in docs {
        // `/api`: the legacy group's versions.
        for v in doc["versions"].as_array().into_iter().flatten() {
            if let Some(v) = v.as_str() {
                out.push(v.to_string());
            }
        }
        for g in doc["groups"].as_array().into_iter().flatten() {
            for v in g["versions"].as_array().into_iter().flatten() {
                if let Some(gv) = v["groupVersion"].as_str() {
                    out.push(gv.to_string());
                }
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_of_every_group_are_listed_sorted_with_the_core_bare() {
        let api = json!({"kind": "APIVersions", "versions": ["v1"]});
        let apis = json!({"kind": "APIGroupList", "groups": [
            {"name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}]},
            {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]},
            {"name": "autoscaling", "versions": [
                {"groupVersion": "autoscaling/v2", "version": "v2"},
                {"groupVersion": "autoscaling/v1", "version": "v1"}]},
        ]});
        assert_eq!(
            group_versions(&[api, apis]),
            ["apps/v1", "autoscaling/v1", "autoscaling/v2", "batch/v1", "v1"]
        );
    }

    #[test]
    fn documents_without_groups_list_nothing() {
        assert!(group_versions(&[json!({}), json!({"groups": "x"})]).is_empty());
    }
}
