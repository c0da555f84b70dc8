//! `create`: with `-f`, each object of the files POSTed to its collection (with `--save-config`,
//! carrying the last-applied annotation `apply` reads); `<kind>/<name> created` per object, the
//! failures reported at the end with the file they came from. With a subcommand, kubectl's
//! generators: an object built from flags, then sent or printed by [`emit`].
//!
//! - [`tree`]: objects in Go's field order (for `-o json` and the last-applied annotation).
//! - [`workloads`]: `deployment`, `job`, `cronjob`, and the pod of `run`.
//! - [`data`]: `configmap`, `secret generic|tls|docker-registry` and their sources.
//! - [`service`]: `service clusterip|nodeport|loadbalancer|externalname`.
//! - [`rbac`]: `role`, `clusterrole`, `rolebinding`, `clusterrolebinding`.
//! - [`simple`]: `namespace`, `serviceaccount`.

pub mod data;
pub mod rbac;
pub mod service;
pub mod simple;
pub mod tree;
pub mod workloads;

use http::Method;
use serde_json::Value;

use crate::builder;
use crate::cmd::apply::LAST_APPLIED;
use crate::cmd::dryrun::{self, DryRun};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::{self, Output};
use tree::{Node, Obj};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub generator: Option<Generator>,
    /// Files (or directories, or `-` for stdin) holding the objects to create.
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    /// Process the directory used in -f recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    #[command(flatten)]
    pub common: Common,
}

/// kubectl's generators, one subcommand each.
#[derive(Debug, clap::Subcommand)]
pub enum Generator {
    /// Create a deployment with the specified name.
    #[command(visible_alias = "deploy")]
    Deployment(workloads::DeploymentArgs),
    /// Create a job with the specified name.
    Job(workloads::JobArgs),
    /// Create a cronjob with the specified name.
    #[command(visible_alias = "cj")]
    Cronjob(workloads::CronJobArgs),
    /// Create a namespace with the specified name.
    #[command(visible_alias = "ns")]
    Namespace(simple::Args),
    /// Create a service account with the specified name.
    #[command(visible_alias = "sa")]
    Serviceaccount(simple::Args),
    /// Create a config map from a local file, directory or literal value.
    #[command(visible_alias = "cm")]
    Configmap(data::ConfigMapArgs),
    /// Create a secret using a specified subcommand.
    #[command(subcommand)]
    Secret(data::Secret),
    /// Create a service using a specified subcommand.
    #[command(subcommand, visible_alias = "svc")]
    Service(service::Service),
    /// Create a role with single rule.
    Role(rbac::RoleArgs),
    /// Create a cluster role.
    Clusterrole(rbac::RoleArgs),
    /// Create a role binding for a particular role or cluster role.
    Rolebinding(rbac::BindingArgs),
    /// Create a cluster role binding for a particular cluster role.
    Clusterrolebinding(rbac::BindingArgs),
}

/// The flags every generator takes: what to do with the object built.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    #[command(flatten)]
    pub dry_run: dryrun::Flag,
    /// Output format: json, yaml, name, jsonpath=…; the object instead of `… created`.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Keep the configuration in the last-applied annotation, for a later `apply`.
    #[arg(long)]
    pub save_config: bool,
    /// Name of the manager used to track field ownership.
    #[arg(long, default_value = "kubectl-create")]
    pub field_manager: String,
    /// How the server treats unknown or duplicate fields: strict, warn or ignore.
    #[arg(long, default_value = "strict", num_args = 0..=1, require_equals = true, default_missing_value = "strict")]
    pub validate: String,
}

/// Where a generated object is sent, and how kubectl names it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl Kind {
    /// `deployment.apps`, `namespace`: the resource in `-o name` and `… created`.
    pub fn shown(&self) -> String {
        let kind = self.kind.to_lowercase();
        if self.group.is_empty() { kind } else { format!("{kind}.{}", self.group) }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The object's head as Go marshals it: kind, apiVersion, then metadata.
    pub fn head(&self, metadata: Obj) -> Obj {
        Obj::new()
            .with("kind", self.kind)
            .with("apiVersion", self.api_version())
            .with("metadata", metadata)
    }

    fn collection(&self, namespace: &str) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{base}/namespaces/{namespace}/{}", self.plural)
        } else {
            format!("{base}/{}", self.plural)
        }
    }
}

/// ObjectMeta as a generator fills it: the name, the namespace when `-n` was given (kubectl's
/// `EnforceNamespace`), then labels if any (kubectl 1.35 omits the zero `creationTimestamp`).
pub fn metadata(name: &str, namespace: Option<&str>, labels: Option<Obj>) -> Obj {
    let mut m = Obj::new().with("name", name);
    if let Some(ns) = namespace {
        m.set("namespace", ns);
    }
    if let Some(l) = labels {
        m.set("labels", l);
    }
    m
}

/// The namespace a namespaced generator writes into its object: only an explicit `-n`.
pub async fn enforced_namespace(f: &Factory) -> Result<Option<String>> {
    if f.namespace_explicit() { Ok(Some(f.namespace().await?)) } else { Ok(None) }
}

/// The object with its last-applied annotation (`--save-config`): the object's own JSON, in
/// field order, with Go's trailing newline, as kubectl's `CreateOrUpdateAnnotation`.
pub fn with_saved_config(mut object: Obj) -> Obj {
    let applied = format!("{}\n", Node::Obj(object.clone()).compact());
    if let Some(Node::Obj(meta)) = object.get_mut("metadata") {
        let mut annotations = match meta.get_mut("annotations") {
            Some(Node::Obj(a)) => a.clone(),
            _ => Obj::new(),
        };
        annotations.set(LAST_APPLIED, applied);
        meta.set("annotations", annotations);
    }
    object
}

/// A generated object sent (or, with `--dry-run=client`, only printed) as kubectl's generators
/// do; `wrap` prefixes a server's refusal (`failed to create deployment: `) where kubectl does.
pub async fn emit(
    f: &Factory,
    c: &Common,
    kind: Kind,
    name: &str,
    object: Obj,
    wrap: Option<&str>,
) -> Result<()> {
    make(f, c, kind, name, object, wrap).await?.print()
}

/// What [`make`] made, to print when the command prints it (`run --expose` prints its Service
/// before the pod it made first).
#[derive(Debug)]
pub struct Made {
    output: Output,
    shown: String,
    strategy: DryRun,
    object: Printed,
}

impl Made {
    pub fn print(&self) -> Result<()> {
        print(&self.output, &self.shown, self.strategy, &self.object)
    }

    /// Whether it prints as YAML (kubectl separates `run --expose`'s two objects with `---`).
    pub fn is_yaml(&self) -> bool {
        matches!(self.output, Output::Yaml)
    }
}

/// [`emit`] without the printing: the object sent (or not, under `--dry-run=client`).
pub async fn make(
    f: &Factory,
    c: &Common,
    kind: Kind,
    name: &str,
    object: Obj,
    wrap: Option<&str>,
) -> Result<Made> {
    let strategy = c.dry_run.strategy()?;
    let output = output_of(c.output.as_deref())?;
    let object = if c.save_config { with_saved_config(object) } else { object };
    let node = Node::Obj(object);
    let shown = format!("{}/{name}", kind.shown());
    let object = if strategy == DryRun::Client {
        Printed::Node(node)
    } else {
        Printed::Value(post(f, c, kind, node.compact().into_bytes(), strategy, wrap).await?)
    };
    Ok(Made { output, shown, strategy, object })
}

/// POSTs an object of `kind` (`body`, as JSON) as `create` sends it: the object the server
/// made ([`send`]). `wrap` prefixes a server's refusal.
pub async fn post(
    f: &Factory,
    c: &Common,
    kind: Kind,
    body: Vec<u8>,
    strategy: DryRun,
    wrap: Option<&str>,
) -> Result<Value> {
    let namespace = if kind.namespaced { f.namespace().await? } else { String::new() };
    send(f, c, &kind.collection(&namespace), body, strategy).await.map_err(|e| match wrap {
        Some(w) if e.status().is_some() => CliError::Usage(format!("{w}{}", e.go_message())),
        _ => e,
    })
}

/// POSTs `body` to `collection` under the field manager and validation `c` names
/// (`dryRun=All` under a server-side dry run): the object the server made, its managed fields
/// left out as kubectl's printers leave them out.
async fn send(
    f: &Factory,
    c: &Common,
    collection: &str,
    body: Vec<u8>,
    strategy: DryRun,
) -> Result<Value> {
    let mut url = format!(
        "{collection}?fieldManager={}&fieldValidation={}",
        builder::encode(&c.field_manager),
        validation(&c.validate)?
    );
    if strategy == DryRun::Server {
        url.push_str("&dryRun=All");
    }
    let created =
        f.send(Method::POST, &url, Some((body, "application/json")), "application/json").await?;
    let mut created: Value = serde_json::from_slice(&created).unwrap_or(Value::Null);
    printers::omit_managed_fields(&mut created);
    Ok(created)
}

#[derive(Debug)]
enum Printed {
    Node(Node),
    Value(Value),
}

fn print(output: &Output, shown: &str, strategy: DryRun, object: &Printed) -> Result<()> {
    let value = match object {
        Printed::Node(n) => n.to_value(),
        Printed::Value(v) => v.clone(),
    };
    match output {
        Output::Name => println!("{shown}"),
        Output::Json => match object {
            Printed::Node(n) => print!("{}", n.pretty()),
            Printed::Value(v) => print!("{}", printers::json::to_string(v)),
        },
        Output::Yaml => print!("{}", printers::yaml::to_string(&value)),
        Output::Kyaml => match object {
            Printed::Node(n) => print!("{}", printers::kyaml::document(n)),
            Printed::Value(v) => print!("{}", printers::kyaml::document(v)),
        },
        Output::JsonPath(t) => print!("{}", printers::jsonpath_of(t, &[value], false, false)?),
        _ => println!("{shown} {}", strategy.operation("created")),
    }
    Ok(())
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    if let Some(g) = a.generator {
        return generate(f, g).await;
    }
    if a.filenames.is_empty() {
        return Err(CliError::Usage("must specify one of -f and -k".into()));
    }
    let c = &a.common;
    let strategy = c.dry_run.strategy()?;
    let output = output_of(c.output.as_deref())?;
    let (infos, mut errors) = builder::from_files(f, &a.filenames, a.recursive).await?;
    if infos.is_empty() && errors.is_empty() {
        return Err(builder::no_objects("create"));
    }
    // A bad `--validate` is refused before anything is sent (or printed).
    validation(&c.validate)?;
    let mut printed = 0;
    for info in infos {
        let Some(object) = &info.object else { continue };
        let saved = c.save_config.then(|| crate::cmd::apply::with_last_applied(object));
        let object = saved.as_ref().unwrap_or(object);
        let made = if strategy == DryRun::Client {
            let mut object = object.clone();
            printers::omit_managed_fields(&mut object);
            Ok(object)
        } else {
            let collection = info.resource.url(info.namespace.as_deref(), None);
            let body = serde_json::to_vec(object).map_err(|e| CliError::Usage(e.to_string()))?;
            send(f, c, &collection, body, strategy).await
        };
        match made {
            Ok(made) => {
                let name = made["metadata"]["name"].as_str().unwrap_or(&info.name).to_string();
                let shown = format!("{}/{name}", info.resource.group_kind_lower());
                // kubectl's YAML printer separates the objects it prints after the first.
                if printed > 0 && output == Output::Yaml {
                    println!("---");
                }
                print(&output, &shown, strategy, &Printed::Value(made))?;
                printed += 1;
            }
            Err(e) => {
                errors.push(when(e, "creating", info.origin.as_ref().map(|o| o.path.as_str())))
            }
        }
    }
    crate::cmd::finish(errors)
}

/// `-o` as `create` reads it: the formats it prints, refused in kubectl's words
/// otherwise.
pub fn output_of(format: Option<&str>) -> Result<Output> {
    let f = format.unwrap_or_default();
    let known = ["", "json", "yaml", "kyaml", "name"].contains(&f)
        || ["jsonpath=", "jsonpath-file="].iter().any(|p| f.starts_with(p));
    if !known {
        return Err(CliError::Usage(format!(
            "unable to match a printer suitable for the output format \"{f}\", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,yaml"
        )));
    }
    Output::parse(format)
}

/// `--validate` as the server's `fieldValidation`.
fn validation(validate: &str) -> Result<&'static str> {
    match validate {
        "strict" | "true" => Ok("Strict"),
        "warn" => Ok("Warn"),
        "ignore" | "false" => Ok("Ignore"),
        other => Err(CliError::Usage(format!(
            "invalid - validate option \"{other}\"; must be one of: strict (or true), warn, ignore (or false)"
        ))),
    }
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

async fn generate(f: &Factory, g: Generator) -> Result<()> {
    match g {
        Generator::Deployment(a) => workloads::deployment(f, a).await,
        Generator::Job(a) => workloads::job(f, a).await,
        Generator::Cronjob(a) => workloads::cronjob(f, a).await,
        Generator::Namespace(a) => simple::namespace(f, a).await,
        Generator::Serviceaccount(a) => simple::serviceaccount(f, a).await,
        Generator::Configmap(a) => data::configmap(f, a).await,
        Generator::Secret(s) => data::secret(f, s).await,
        Generator::Service(s) => service::run(f, s).await,
        Generator::Role(a) => rbac::role(f, a, false).await,
        Generator::Clusterrole(a) => rbac::role(f, a, true).await,
        Generator::Rolebinding(a) => binding(f, a, false).await,
        Generator::Clusterrolebinding(a) => binding(f, a, true).await,
    }
}

/// A binding's `--user` shadows the global flag of the same name (as cobra's local flags do):
/// clap hands it to the global flags as well, so the client is made without it.
async fn binding(f: &Factory, mut a: rbac::BindingArgs, cluster: bool) -> Result<()> {
    let Some(user) = f.flags.user.clone() else {
        return rbac::binding(f, a, cluster).await;
    };
    if a.user.is_empty() {
        a.user.push(user);
    }
    let own = Factory::new(crate::flags::ConfigFlags { user: None, ..f.flags.clone() });
    rbac::binding(&own, a, cluster).await
}

/// kubectl's `NameFromCommandArgs`: exactly one NAME.
pub fn one_name(args: &[String], command: &str) -> Result<String> {
    match args {
        [one] => Ok(one.clone()),
        _ => Err(CliError::Usage(format!(
            "exactly one NAME is required, got {}\nSee 'kubectl create {command} -h' for help and examples",
            args.len()
        ))),
    }
}

/// cobra's refusal of a command missing required flags (names sorted).
pub fn required_flags(names: &[&str]) -> CliError {
    let mut names = names.to_vec();
    names.sort_unstable();
    let list = names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
    CliError::Usage(format!("required flag(s) {list} not set"))
}
