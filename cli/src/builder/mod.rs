//! The resource builder (kubectl's `resource.Builder`): what a command line names — files
//! (`-f`, `-R`), `TYPE NAME...`, `TYPE/NAME...`, `TYPE` with `-l`/`--field-selector`/`--all` —
//! turned into targets: single objects (with the object read from a file, if any) or
//! collections to list. Errors are gathered per document and per argument, never stopping the
//! others; the command reports them at the end.
//!
//! - [`documents`]: files → documents → objects (`-l` matched on this side for the objects of
//!   files, by the `api` crate's [`labels`](api::labels)).

pub mod documents;

use std::sync::Arc;

use serde_json::Value;

use crate::discovery::Resource;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

pub use documents::Origin;

/// One object to act on.
#[derive(Debug, Clone)]
pub struct Info {
    pub resource: Arc<Resource>,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
    /// The object as a file gave it (namespace filled in), for creates and applies.
    pub object: Option<Value>,
    pub origin: Option<Origin>,
}

impl Info {
    /// `pod/nginx` or `deployment.apps/web`, as kubectl names objects in its output.
    pub fn kind_name(&self) -> String {
        format!("{}/{}", self.resource.group_kind_lower(), self.name)
    }

    pub fn url(&self) -> String {
        self.resource.url(self.namespace.as_deref(), Some(&self.name))
    }
}

/// A collection to list: a type in a namespace (`None`: every namespace).
#[derive(Debug, Clone)]
pub struct Collection {
    pub resource: Arc<Resource>,
    pub namespace: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Target {
    Object(Info),
    Collection(Collection),
}

/// kubectl's builder's answer to a command line that names nothing.
pub const NOTHING_NAMED: &str = "You must provide one or more resources by argument or filename.
Example resource specifications include:
   '-f rsrc.yaml'
   '--filename=rsrc.json'
   '<resource> <name>'
   '<resource>'";

/// What the command line named.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub filenames: Vec<String>,
    pub recursive: bool,
    pub args: Vec<String>,
    /// `-l`: a collection per type, filtered by the server.
    pub selector: Option<String>,
    pub field_selector: Option<String>,
    /// `--all`: every object of the types named.
    pub all: bool,
    /// `-A`.
    pub all_namespaces: bool,
}

impl Selection {
    /// Whether a type was named with nothing to pick objects by (`kubectl get pods`).
    fn lists(&self) -> bool {
        self.selector.is_some() || self.field_selector.is_some() || self.all
    }
}

/// The targets a selection names, and the errors met on the way (reported by the caller after
/// it has acted on the targets that were found).
pub async fn targets(f: &Factory, sel: &Selection) -> Result<(Vec<Target>, Vec<CliError>)> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    if !sel.filenames.is_empty() {
        if !sel.args.is_empty() {
            return Err(CliError::Usage(
                "when paths, URLs, or stdin is provided as input, you may not specify resource arguments as well".into(),
            ));
        }
        let (infos, errs) = from_files(f, &sel.filenames, sel.recursive).await?;
        if infos.is_empty() && errs.is_empty() {
            return Err(no_objects("create"));
        }
        out.extend(infos.into_iter().map(Target::Object));
        errors.extend(errs);
        return Ok((out, errors));
    }
    let namespace = f.namespace().await?;
    let scope = |r: &Resource| -> Option<String> {
        (r.namespaced && !sel.all_namespaces).then(|| namespace.clone())
    };
    let slashed = sel.args.iter().any(|a| a.contains('/'));
    if slashed {
        // `TYPE/NAME ...`: every argument must be of that form.
        for a in &sel.args {
            let Some((t, name)) = a.split_once('/') else {
                return Err(CliError::Usage(
                    "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'kubectl get resource/<resource_name>' instead of 'kubectl get resource resource/<resource_name>'"
                    .into(),
                ));
            };
            let resource = f.resource(t).await?;
            let ns = if resource.namespaced { Some(namespace.clone()) } else { None };
            out.push(Target::Object(Info {
                resource,
                namespace: ns,
                name: name.into(),
                object: None,
                origin: None,
            }));
        }
        return Ok((out, errors));
    }
    let Some((types, names)) = sel.args.split_first() else {
        return Ok((out, errors));
    };
    let mut resources = Vec::new();
    for t in types.split(',').filter(|t| !t.is_empty()) {
        resources.push(f.resource(t).await?);
    }
    if names.is_empty() || sel.lists() {
        if !names.is_empty() {
            return Err(CliError::Usage(
                "name cannot be provided when a selector is specified".into(),
            ));
        }
        for resource in resources {
            let namespace = scope(&resource);
            out.push(Target::Collection(Collection { resource, namespace }));
        }
        return Ok((out, errors));
    }
    if resources.len() > 1 {
        return Err(CliError::Usage(
            "you must specify only one resource type when passing names (or use TYPE/NAME)".into(),
        ));
    }
    let resource = &resources[0];
    for name in names {
        let ns = resource.namespaced.then(|| namespace.clone());
        out.push(Target::Object(Info {
            resource: resource.clone(),
            namespace: ns,
            name: name.clone(),
            object: None,
            origin: None,
        }));
    }
    Ok((out, errors))
}

/// kubectl's refusal of files that hold no object: `no objects passed to <verb>`.
pub fn no_objects(verb: &str) -> CliError {
    CliError::Usage(format!("no objects passed to {verb}"))
}

/// The objects of `-f` files: each mapped to its resource and namespace. A document whose type
/// the server does not serve, or whose namespace disagrees with `-n`, is an error of its own.
/// Files holding no object give neither (the command words that, [`no_objects`]).
pub async fn from_files(
    f: &Factory,
    filenames: &[String],
    recursive: bool,
) -> Result<(Vec<Info>, Vec<CliError>)> {
    let mut infos = Vec::new();
    let mut errors = Vec::new();
    let mut paths = Vec::new();
    for name in filenames {
        match documents::expand(name, recursive) {
            Ok(p) => paths.extend(p),
            Err(e) => errors.push(e),
        }
    }
    let mut docs = Vec::new();
    for p in paths {
        let (d, e) = documents::read(&p);
        docs.extend(d);
        errors.extend(e);
    }
    let namespace = if docs.is_empty() { String::new() } else { f.namespace().await? };
    for d in docs {
        match info_of(f, d, &namespace).await {
            Ok(i) => infos.push(i),
            Err(e) => errors.push(e),
        }
    }
    Ok((infos, errors))
}

async fn info_of(f: &Factory, d: documents::Document, namespace: &str) -> Result<Info> {
    let mut object = d.object;
    let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let resource = f.resource_for_kind(&api_version, &kind).await?;
    let name =
        object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let ns = if resource.namespaced {
        match object.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(own) if !own.is_empty() => {
                if f.namespace_explicit() && own != namespace {
                    return Err(CliError::Usage(format!(
                        "the namespace from the provided object \"{own}\" does not match the namespace \"{namespace}\". You must pass '--namespace={own}' to perform this operation."
                    )));
                }
                Some(own.to_string())
            }
            _ => {
                if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("namespace".into(), Value::String(namespace.to_string()));
                }
                Some(namespace.to_string())
            }
        }
    } else {
        None
    };
    Ok(Info { resource, namespace: ns, name, object: Some(object), origin: Some(d.origin) })
}

/// Every object a selection names, collections listed into their objects (for commands that
/// act on each: delete, label, scale, cordon), and the errors met on the way.
pub async fn infos(f: &Factory, sel: &Selection) -> Result<(Vec<Info>, Vec<CliError>)> {
    let (targets, mut errors) = targets(f, sel).await?;
    let mut infos = Vec::new();
    for t in targets {
        match t {
            Target::Object(i) => infos.push(i),
            Target::Collection(c) => match list(f, &c, sel).await {
                Ok(found) => infos.extend(found),
                Err(e) => errors.push(e),
            },
        }
    }
    Ok((infos, errors))
}

/// The objects of a collection, by name (for commands that act on each: delete, label, …).
pub async fn list(f: &Factory, c: &Collection, sel: &Selection) -> Result<Vec<Info>> {
    let url = c.resource.url(c.namespace.as_deref(), None) + &query(sel);
    let list = f.get_json(&url).await?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    Ok(items
        .iter()
        .map(|o| Info {
            resource: c.resource.clone(),
            namespace: o["metadata"]["namespace"].as_str().map(str::to_string),
            name: o["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            object: None,
            origin: None,
        })
        .collect())
}

/// `?labelSelector=…&fieldSelector=…` for a selection's selectors, or nothing.
pub fn query(sel: &Selection) -> String {
    let mut q = Vec::new();
    if let Some(l) = &sel.selector {
        q.push(format!("labelSelector={}", encode(l)));
    }
    if let Some(fs) = &sel.field_selector {
        q.push(format!("fieldSelector={}", encode(fs)));
    }
    if q.is_empty() { String::new() } else { format!("?{}", q.join("&")) }
}

/// Percent-encodes a query value.
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
