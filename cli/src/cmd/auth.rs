//! `auth can-i` (a SelfSubjectAccessReview: `yes`, or `no` with exit code 1) and `auth whoami`
//! (a SelfSubjectReview printed as kubectl's attribute table).

use clap::Subcommand;
use http::Method;
use serde_json::{Value, json};

use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::table;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: AuthCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Check whether an action is allowed.
    CanI {
        /// VERB TYPE[/NAME] [NAME], or VERB NONRESOURCEURL.
        args: Vec<String>,
        /// Check in every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// A subresource, such as pod/log or deployment/scale.
        #[arg(long)]
        subresource: Option<String>,
        /// Print nothing; the exit code says.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Show who you are to the server.
    Whoami,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    match a.command {
        AuthCommand::CanI { args, all_namespaces, subresource, quiet } => {
            can_i(f, &args, all_namespaces, subresource, quiet).await
        }
        AuthCommand::Whoami => whoami(f).await,
    }
}

async fn can_i(
    f: &Factory,
    args: &[String],
    all_namespaces: bool,
    subresource: Option<String>,
    quiet: bool,
) -> Result<()> {
    let (verb, what, name) = match args {
        [v, w] => (v, w, None),
        [v, w, n] => (v, w, Some(n.clone())),
        _ => return Err(CliError::Usage(
            "you must specify two arguments: verb resource or verb resource/resourceName.\nSee 'kubectl-lite auth can-i -h' for help and examples."
                .into(),
        )),
    };
    let spec = if what.starts_with('/') {
        json!({"nonResourceAttributes": {"verb": verb, "path": what}})
    } else {
        let (type_arg, name) = match what.split_once('/') {
            Some((t, n)) => (t.to_string(), Some(n.to_string())),
            None => (what.clone(), name),
        };
        let mut namespaced = true;
        let (group, resource) = if type_arg == "*" {
            ("*".to_string(), "*".to_string())
        } else {
            match f.resource(&type_arg).await {
                Ok(r) => {
                    namespaced = r.namespaced;
                    (r.group.clone(), r.plural.clone())
                }
                Err(_) => {
                    eprintln!("Warning: the server doesn't have a resource type '{type_arg}'");
                    match type_arg.split_once('.') {
                        Some((r, g)) => (g.to_string(), r.to_string()),
                        None => (String::new(), type_arg.clone()),
                    }
                }
            }
        };
        if !namespaced && !all_namespaces {
            // kubectl's warning ends with a blank line.
            eprintln!("Warning: resource '{resource}' is not namespace scoped\n");
        }
        let namespace =
            if all_namespaces || !namespaced { String::new() } else { f.namespace().await? };
        json!({"resourceAttributes": {
            "namespace": namespace, "verb": verb, "group": group, "resource": resource,
            "subresource": subresource.unwrap_or_default(), "name": name.unwrap_or_default(),
        }})
    };
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec});
    let body = serde_json::to_vec(&review).map_err(|e| CliError::Usage(e.to_string()))?;
    let answer: Value = serde_json::from_slice(
        &f.send(
            Method::POST,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            Some((body, "application/json")),
            "application/json",
        )
        .await?,
    )
    .map_err(|e| CliError::Unreachable { reason: e.to_string() })?;
    let status = &answer["status"];
    if status["allowed"].as_bool().unwrap_or(false) {
        if !quiet {
            println!("yes");
        }
        return Ok(());
    }
    if !quiet {
        match status["reason"].as_str().filter(|r| !r.is_empty()) {
            Some(reason) => println!("no - {reason}"),
            None => println!("no"),
        }
    }
    Err(CliError::Silent)
}

async fn whoami(f: &Factory) -> Result<()> {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let body = serde_json::to_vec(&review).map_err(|e| CliError::Usage(e.to_string()))?;
    let answer: Value = serde_json::from_slice(
        &f.send(
            Method::POST,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some((body, "application/json")),
            "application/json",
        )
        .await?,
    )
    .map_err(|e| CliError::Unreachable { reason: e.to_string() })?;
    let user = &answer["status"]["userInfo"];
    let mut lines = vec![vec!["ATTRIBUTE".to_string(), "VALUE".to_string()]];
    lines.push(vec!["Username".into(), user["username"].as_str().unwrap_or_default().into()]);
    if let Some(uid) = user["uid"].as_str().filter(|u| !u.is_empty()) {
        lines.push(vec!["UID".into(), uid.into()]);
    }
    if let Some(groups) = user["groups"].as_array().filter(|g| !g.is_empty()) {
        let g: Vec<&str> = groups.iter().filter_map(Value::as_str).collect();
        lines.push(vec!["Groups".into(), format!("[{}]", g.join(" "))]);
    }
    if let Some(extra) = user["extra"].as_object() {
        for (k, v) in extra {
            let vs: Vec<&str> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            lines.push(vec![format!("Extra: {k}"), format!("[{}]", vs.join(" "))]);
        }
    }
    print!("{}", table::align(&lines));
    Ok(())
}
