//! `config`: the kubeconfig read and changed as kubectl's `config` subcommands do —
//! `current-context`, `get-contexts`, `use-context`, `set-context` (`--current`), `view`
//! (`--minify`, `--raw`; certificate data shown as `DATA+OMITTED` and tokens as `REDACTED`
//! unless raw). Changes are written to the first file of the loading rules.

use std::path::PathBuf;

use clap::Subcommand;
use kube::config::{Context, Kubeconfig, NamedContext};
use serde_json::Value;

use crate::config::{kubeconfig_paths, load_kubeconfig};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::{table, yaml};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Display the current-context.
    CurrentContext,
    /// Describe one or many contexts.
    GetContexts {
        /// Only these contexts.
        names: Vec<String>,
        /// Don't print headers.
        #[arg(long)]
        no_headers: bool,
    },
    /// Set the current-context in a kubeconfig file.
    UseContext { name: String },
    /// Set a context entry in kubeconfig.
    SetContext {
        name: Option<String>,
        /// Modify the current context (`--cluster`, `--user` and `--namespace` set its fields).
        #[arg(long)]
        current: bool,
    },
    /// Display merged kubeconfig settings or a specified kubeconfig file.
    View {
        /// Only the current context's entries.
        #[arg(long)]
        minify: bool,
        /// Show certificate data and tokens.
        #[arg(long)]
        raw: bool,
    },
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let flags = &f.flags;
    let mut kc = load_kubeconfig(flags)?;
    match a.command {
        ConfigCommand::CurrentContext => match kc.current_context.as_deref() {
            Some(c) if !c.is_empty() => println!("{c}"),
            _ => return Err(CliError::Usage("current-context is not set".into())),
        },
        ConfigCommand::GetContexts { names, no_headers } => {
            let current = kc.current_context.clone().unwrap_or_default();
            for n in &names {
                if !kc.contexts.iter().any(|c| &c.name == n) {
                    return Err(CliError::Usage(format!("context {n} not found")));
                }
            }
            let mut lines = Vec::new();
            if !no_headers {
                lines.push(
                    ["CURRENT", "NAME", "CLUSTER", "AUTHINFO", "NAMESPACE"]
                        .map(String::from)
                        .to_vec(),
                );
            }
            let mut contexts: Vec<&NamedContext> = kc
                .contexts
                .iter()
                .filter(|c| names.is_empty() || names.contains(&c.name))
                .collect();
            contexts.sort_by(|x, y| x.name.cmp(&y.name));
            for c in contexts {
                let ctx = c.context.clone().unwrap_or_default();
                lines.push(vec![
                    if c.name == current { "*".into() } else { String::new() },
                    c.name.clone(),
                    ctx.cluster,
                    ctx.user.unwrap_or_default(),
                    ctx.namespace.unwrap_or_default(),
                ]);
            }
            print!("{}", table::align(&lines));
        }
        ConfigCommand::UseContext { name } => {
            if !kc.contexts.iter().any(|c| c.name == name) {
                return Err(CliError::Usage(format!(
                    "no context exists with the name: \"{name}\""
                )));
            }
            let mut file = first_file(f)?;
            file.1.current_context = Some(name.clone());
            save(&file)?;
            println!("Switched to context \"{name}\".");
        }
        ConfigCommand::SetContext { name, current } => {
            // kubectl's set-context flags share their names with the global ones.
            let (cluster, user, namespace) =
                (flags.cluster.clone(), flags.user.clone(), flags.namespace.clone());
            let name = match (name, current) {
                (Some(n), false) => n,
                (None, true) => kc
                    .current_context
                    .clone()
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| CliError::Usage("no current context is set".into()))?,
                (Some(_), true) => {
                    return Err(CliError::Usage(
                        "you cannot specify both a context name and --current".into(),
                    ));
                }
                (None, false) => {
                    return Err(CliError::Usage(
                        "you must specify a non-empty context name or --current".into(),
                    ));
                }
            };
            let mut file = first_file(f)?;
            let existing = file.1.contexts.iter().position(|c| c.name == name);
            // A context defined only in another file is copied here before it is changed.
            let base = kc.contexts.iter().find(|c| c.name == name).and_then(|c| c.context.clone());
            let created = base.is_none();
            let mut ctx: Context = base.unwrap_or_default();
            if let Some(c) = cluster {
                ctx.cluster = c;
            }
            if let Some(u) = user {
                ctx.user = Some(u);
            }
            if let Some(n) = namespace {
                ctx.namespace = Some(n);
            }
            let named =
                NamedContext { name: name.clone(), context: Some(ctx), ..Default::default() };
            match existing {
                Some(i) => file.1.contexts[i] = named,
                None => file.1.contexts.push(named),
            }
            save(&file)?;
            println!("Context \"{name}\" {}.", if created { "created" } else { "modified" });
        }
        ConfigCommand::View { minify, raw } => {
            if minify {
                kc = minified(kc)?;
            }
            let mut v = serde_json::to_value(&kc).map_err(|e| CliError::Config(e.to_string()))?;
            if let Some(m) = v.as_object_mut() {
                m.insert("apiVersion".into(), "v1".into());
                m.insert("kind".into(), "Config".into());
                if m.get("preferences").is_some_and(|p| p.as_object().is_none_or(|o| o.is_empty()))
                {
                    m.remove("preferences");
                }
            }
            if !raw {
                redact(&mut v);
            }
            print!("{}", yaml::to_string(&v));
        }
    }
    Ok(())
}

/// The first kubeconfig file of the loading rules, read (empty if it does not exist yet).
fn first_file(f: &Factory) -> Result<(PathBuf, Kubeconfig)> {
    let path = kubeconfig_paths(&f.flags).into_iter().next().ok_or_else(|| {
        CliError::Config("no kubeconfig file to write: set $HOME or --kubeconfig".into())
    })?;
    let kc = if path.exists() {
        Kubeconfig::read_from(&path).map_err(|e| {
            CliError::Config(format!("error loading config file \"{}\": {e}", path.display()))
        })?
    } else {
        Kubeconfig::default()
    };
    Ok((path, kc))
}

fn save((path, kc): &(PathBuf, Kubeconfig)) -> Result<()> {
    let mut v = serde_json::to_value(kc).map_err(|e| CliError::Config(e.to_string()))?;
    if let Some(m) = v.as_object_mut() {
        m.entry("apiVersion").or_insert_with(|| "v1".into());
        m.entry("kind").or_insert_with(|| "Config".into());
    }
    let text = yaml::to_string(&v);
    let tmp = path.with_extension("kubectl-lite.tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| CliError::Config(format!("writing {}: {e}", path.display())))
}

/// Only the current context, its cluster and its user.
fn minified(mut kc: Kubeconfig) -> Result<Kubeconfig> {
    let current =
        kc.current_context.clone().filter(|c| !c.is_empty()).ok_or_else(|| {
            CliError::Usage("current-context must exist in order to minify".into())
        })?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .cloned()
        .ok_or_else(|| CliError::Usage(format!("cannot locate context {current}")))?;
    let inner = ctx.context.clone().unwrap_or_default();
    if !kc.clusters.iter().any(|c| c.name == inner.cluster) {
        return Err(CliError::Usage(format!("cannot locate cluster {}", inner.cluster)));
    }
    let user = inner.user.clone().unwrap_or_default();
    kc.contexts.retain(|c| c.name == current);
    kc.clusters.retain(|c| c.name == inner.cluster);
    kc.auth_infos.retain(|u| u.name == user);
    Ok(kc)
}

/// `DATA+OMITTED` for certificate and key data, `REDACTED` for tokens and passwords.
fn redact(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, item) in m.iter_mut() {
                match k.as_str() {
                    "certificate-authority-data"
                    | "client-certificate-data"
                    | "client-key-data"
                        if item.is_string() =>
                    {
                        *item = "DATA+OMITTED".into();
                    }
                    "token" | "password" if item.is_string() => *item = "REDACTED".into(),
                    _ => redact(item),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact),
        _ => {}
    }
}
