//! `explain RESOURCE[.FIELD...]` as kubectl 1.35's: the resource resolved through discovery
//! (the longest `plural.group` prefix the argument starts with, else its first name's
//! preferred resource), the server's OpenAPI v3 document of its group version read, and the
//! resource or field rendered by [`crate::explain`]. `--api-version` picks the group version
//! (every name after the first is then a field, as kubectl parses it), `--recursive` prints the
//! tree of field names. `-o plaintext-openapiv2` reads `/openapi/v2`, which this project's
//! server does not serve; kubectl-lite says so in the server's words, as kubectl does.

use std::sync::Arc;

use http::Method;
use serde_json::Value;

use crate::discovery::Resource;
use crate::errors::{CliError, Result};
use crate::explain::{self, Request};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// RESOURCE or RESOURCE.FIELD.FIELD...
    pub args: Vec<String>,
    /// The group/version of the resource (the preferred one by default).
    #[arg(long)]
    pub api_version: Option<String>,
    /// Print the fields of fields, names and types only.
    #[arg(long)]
    pub recursive: bool,
    /// `plaintext`, or `plaintext-openapiv2`.
    #[arg(short = 'o', long, default_value = "plaintext")]
    pub output: String,
}

const PLAINTEXT: &str = "plaintext";
const PLAINTEXT_V2: &str = "plaintext-openapiv2";
const INVALID_PATH: &str = "invalid jsonpath syntax, first node must be field node";

/// The names of `pods.spec.containers`, as kubectl's JSONPath reading of it: a trailing dot
/// is dropped, and anything but plain names (`..`, `[0]`, `*`) is refused (but see
/// [`resolve`]).
fn names(arg: &str) -> Result<Vec<&str>> {
    let names: Vec<&str> = arg.strip_suffix('.').unwrap_or(arg).split('.').collect();
    let plain =
        |n: &&str| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if names.iter().all(plain) { Ok(names) } else { Err(CliError::Usage(INVALID_PATH.into())) }
}

/// The resource and field path `arg` names (kubectl's
/// `SplitAndParseResourceRequestWithMatchingPrefix`, or without it under `--api-version`).
async fn resolve(
    f: &Factory,
    arg: &str,
    matching_prefix: bool,
) -> Result<(Arc<Resource>, Vec<String>)> {
    // The resource's name is checked first; the field names only on the way taken below.
    let first = arg.split('.').next().unwrap_or(arg);
    names(first)?;
    let unknown =
        || CliError::Plain(format!("the server doesn't have a resource type \"{first}\""));
    let preferred = f.resource(first).await.map_err(|e| match e {
        CliError::UnknownResource(_) => unknown(),
        other => other,
    })?;
    let fields = |names: Vec<&str>| names.into_iter().map(str::to_owned).collect::<Vec<_>>();
    if matching_prefix {
        for r in f.resources().await?.named(first) {
            if let Some(rest) = arg.strip_prefix(&r.group_resource()) {
                // `deployments.apps.spec`: the names after `deployments.apps`. kubectl drops
                // the suffix's first JSONPath node whatever it is: `pods..spec` is `pods.spec`.
                let rest = rest.trim_start_matches('.');
                let rest = if rest.is_empty() { Vec::new() } else { names(rest)? };
                return Ok((r, fields(rest)));
            }
        }
    }
    let mut all = names(arg)?;
    all.remove(0);
    Ok((preferred, fields(all)))
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let arg = match a.args.as_slice() {
        [] => {
            return Err(CliError::Usage(
                "You must specify the type of resource to explain. Use \"kubectl api-resources\" for a complete list of supported resources.".into(),
            ));
        }
        [arg] => arg,
        _ => return Err(CliError::Usage("We accept only this format: explain RESOURCE".into())),
    };
    let (resource, field_path) = resolve(f, arg, a.api_version.is_none()).await?;
    if a.output == PLAINTEXT_V2 {
        f.send(Method::GET, "/openapi/v2", None, "application/json").await?;
        return Err(CliError::Usage(format!(
            "-o {PLAINTEXT_V2}: OpenAPI v2 is not read by kubectl-lite"
        )));
    }
    let (group, version) = match &a.api_version {
        Some(gv) => match gv.split_once('/') {
            Some((g, v)) if !v.contains('/') => (g.to_owned(), v.to_owned()),
            Some(_) => {
                return Err(CliError::Usage(format!("unexpected GroupVersion string: {gv}")));
            }
            None => (String::new(), gv.clone()),
        },
        None => (resource.group.clone(), resource.version.clone()),
    };
    let root = f.get_json("/openapi/v3").await.map_err(|e| {
        CliError::Usage(format!("failed to fetch list of groupVersions: {}", e.go_message()))
    })?;
    let path =
        if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") };
    let Some(url) = root["paths"][&path]["serverRelativeURL"].as_str() else {
        return Err(CliError::Usage(format!(
            "couldn't find resource for \"{group}/{version}, Resource={}\"",
            resource.plural
        )));
    };
    let bytes = f.send(Method::GET, url, None, "application/json").await.map_err(|e| {
        CliError::Usage(format!("failed to fetch openapi schema for {path}: {}", e.go_message()))
    })?;
    let doc: Value = serde_json::from_slice(&bytes)
        .map_err(|e| CliError::Usage(format!("failed to parse openapi schema for {path}: {e}")))?;
    if a.output != PLAINTEXT {
        return Err(CliError::Usage(format!("unrecognized format: {}", a.output)));
    }
    let request = Request {
        group: &group,
        version: &version,
        resource: &resource.plural,
        field_path: &field_path,
        recursive: a.recursive,
    };
    match explain::render(&doc, &request) {
        Ok(text) => {
            print!("{text}");
            Ok(())
        }
        Err(e) => {
            print!("{}", e.written);
            Err(CliError::Plain(e.message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_fields_and_anything_else_is_kubectls_jsonpath_refusal() {
        assert_eq!(names("pods.spec.containers").unwrap(), ["pods", "spec", "containers"]);
        assert_eq!(names("pods.spec.").unwrap(), ["pods", "spec"]);
        for bad in ["pods..spec", "pods.spec.containers[0]", "pods.*", ".pods", ""] {
            let e = names(bad).unwrap_err().to_string();
            assert_eq!(e, format!("error: {INVALID_PATH}"), "{bad}");
        }
    }
}
