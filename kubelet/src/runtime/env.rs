//! A container's environment, as upstream's `makeEnvironmentVariables`: `envFrom` first (each
//! key of the ConfigMap or Secret, with the prefix; keys that are no valid variable names are
//! skipped with an `InvalidEnvironmentVariableNames` event), then `env` in order, overriding;
//! a `value` is expanded against the variables defined before it, a `valueFrom` reads a pod
//! field, a container resource, or a ConfigMap or Secret key. A missing object or key fails the
//! container's start (`CreateContainerConfigError`) unless the reference is `optional`.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use proto::cri;

use super::container::expand;
use crate::events::{ObjectRef, Recorder};
use crate::fieldpath::{self, Allocatable, FieldPathError, PodAddresses};
use crate::objects::{ObjectError, ObjectKey, ObjectKind, ObjectSources};

/// Why a container's environment cannot be built. Each variant names what was read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error("couldn't find key {key} in {} {}/{}", .object.kind.kind(), .object.namespace, .object.name)]
    MissingKey { object: ObjectKey, key: String },
    #[error("env {name:?}: {source}")]
    Field { name: String, source: FieldPathError },
}

/// What the environment is built from.
#[derive(Debug, Clone, Copy)]
pub struct EnvContext<'a> {
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub addresses: PodAddresses<'a>,
    pub allocatable: Allocatable,
    pub objects: &'a ObjectSources,
    pub recorder: &'a Recorder,
}

/// Variables in the order first defined; a later definition replaces the value in place.
#[derive(Debug, Default)]
struct Vars {
    order: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl Vars {
    fn set(&mut self, name: String, value: String) {
        match self.index.get(&name) {
            Some(&i) => self.order[i].1 = value,
            None => {
                self.index.insert(name.clone(), self.order.len());
                self.order.push((name, value));
            }
        }
    }

    fn map(&self) -> HashMap<String, String> {
        self.order.iter().cloned().collect()
    }
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// The keys and values of the object an `envFrom` names (`None`: optional and absent).
async fn env_from_source(
    ctx: &EnvContext<'_>,
    kind: ObjectKind,
    name: &str,
    optional: bool,
) -> Result<Option<Vec<(String, String)>>, EnvError> {
    let found = match kind {
        ObjectKind::ConfigMap => ctx.objects.config_map(ctx.pod, name).await.map(|cm| {
            cm.data.iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>()
        }),
        ObjectKind::Secret => ctx.objects.secret(ctx.pod, name).await.map(|s| {
            s.data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
                .collect()
        }),
    };
    match found {
        Ok(pairs) => Ok(Some(pairs)),
        Err(e) if e.is_not_found() && optional => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The value of one key (`None`: optional and absent, object or key).
async fn key_ref(
    ctx: &EnvContext<'_>,
    kind: ObjectKind,
    name: &str,
    key: &str,
    optional: bool,
) -> Result<Option<String>, EnvError> {
    let object = ObjectKey::new(kind, namespace(ctx.pod), name);
    let value = match kind {
        ObjectKind::ConfigMap => ctx
            .objects
            .config_map(ctx.pod, name)
            .await
            .map(|cm| cm.data.as_ref().and_then(|d| d.get(key)).cloned()),
        ObjectKind::Secret => ctx.objects.secret(ctx.pod, name).await.map(|s| {
            let v = s.data.as_ref().and_then(|d| d.get(key));
            v.map(|v| String::from_utf8_lossy(&v.0).into_owned())
        }),
    };
    match value {
        Ok(Some(v)) => Ok(Some(v)),
        Ok(None) if optional => Ok(None),
        Ok(None) => Err(EnvError::MissingKey { object, key: key.to_string() }),
        Err(e) if e.is_not_found() && optional => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The container's environment for CRI.
pub async fn environment(ctx: &EnvContext<'_>) -> Result<Vec<cri::KeyValue>, EnvError> {
    let mut vars = Vars::default();
    for from in ctx.container.env_from.iter().flatten() {
        let (kind, name, optional) = if let Some(r) = &from.config_map_ref {
            (ObjectKind::ConfigMap, r.name.as_str(), r.optional.unwrap_or(false))
        } else if let Some(r) = &from.secret_ref {
            (ObjectKind::Secret, r.name.as_str(), r.optional.unwrap_or(false))
        } else {
            continue;
        };
        let Some(mut pairs) = env_from_source(ctx, kind, name, optional).await? else { continue };
        pairs.sort();
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let mut invalid = Vec::new();
        for (key, value) in pairs {
            let var = format!("{prefix}{key}");
            if api::validation::names::env_var_name(&var).is_empty() {
                vars.set(var, value);
            } else {
                invalid.push(var);
            }
        }
        if !invalid.is_empty() {
            let message = format!(
                "Keys [{}] from the EnvFrom {} {}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", "),
                kind.field(),
                namespace(ctx.pod),
            );
            ctx.recorder.warning(
                &ObjectRef::pod(ctx.pod),
                "InvalidEnvironmentVariableNames",
                message,
            );
        }
    }
    for e in ctx.container.env.iter().flatten() {
        let field = |source| EnvError::Field { name: e.name.clone(), source };
        let value = match (&e.value_from, e.value.as_deref().filter(|v| !v.is_empty())) {
            (_, Some(v)) => expand(v, &vars.map()),
            (None, None) => String::new(),
            (Some(from), None) => {
                if let Some(f) = &from.field_ref {
                    fieldpath::pod_field(ctx.pod, &f.field_path, ctx.addresses).map_err(field)?
                } else if let Some(r) = &from.resource_field_ref {
                    let c = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
                        Some(name) => fieldpath::find_container(ctx.pod, name).map_err(field)?,
                        None => ctx.container,
                    };
                    fieldpath::container_resource(r, c, ctx.allocatable).map_err(field)?
                } else if let Some(r) = &from.config_map_key_ref {
                    let optional = r.optional.unwrap_or(false);
                    let kind = ObjectKind::ConfigMap;
                    match key_ref(ctx, kind, &r.name, &r.key, optional).await? {
                        Some(v) => v,
                        None => continue,
                    }
                } else if let Some(r) = &from.secret_key_ref {
                    let optional = r.optional.unwrap_or(false);
                    match key_ref(ctx, ObjectKind::Secret, &r.name, &r.key, optional).await? {
                        Some(v) => v,
                        None => continue,
                    }
                } else {
                    String::new()
                }
            }
        };
        vars.set(e.name.clone(), value);
    }
    Ok(vars.order.into_iter().map(|(key, value)| cri::KeyValue { key, value }).collect())
}

#[cfg(test)]
mod tests;
