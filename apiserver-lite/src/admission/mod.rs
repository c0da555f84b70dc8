//! Admission: what the server changes in (and refuses of) an object a client sends, after
//! defaults and before validation, as upstream's default-on plugins do:
//!
//! - [`tolerations`]: `DefaultTolerationSeconds` (pods, create and update);
//! - [`service_account`]: `ServiceAccount` (pods, create): the account, its token volume, its
//!   pull secrets;
//! - [`node_restriction`]: `NodeRestriction`: what kubelets may write, narrowed to their own
//!   node, its pods and its lease. It needs the requesting user, so the HTTP layer runs it
//!   (before the registry's create, inside its update decision, before a delete).
//!
//! Which run is kube-apiserver's `--enable-admission-plugins`/`--disable-admission-plugins`
//! ([`plugins`]); all are on by default.

pub mod node_restriction;
pub mod service_account;
pub mod tolerations;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use serde_json::Value;

use crate::errors::ApiError;
use crate::objects::{typed, untyped};
use crate::resources::ResourceType;
use crate::serviceaccount::Objects;
pub use tolerations::{TAINT_NOT_READY, TAINT_UNREACHABLE};

/// The plugins this server has, by upstream's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plugin {
    DefaultTolerationSeconds,
    ServiceAccount,
    NodeRestriction,
}

impl Plugin {
    pub const ALL: [Plugin; 3] =
        [Plugin::DefaultTolerationSeconds, Plugin::ServiceAccount, Plugin::NodeRestriction];

    pub fn name(self) -> &'static str {
        match self {
            Plugin::DefaultTolerationSeconds => "DefaultTolerationSeconds",
            Plugin::ServiceAccount => "ServiceAccount",
            Plugin::NodeRestriction => "NodeRestriction",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error(
        "{flag} plugin {name:?} is unknown or not implemented by apiserver-lite (it has DefaultTolerationSeconds, ServiceAccount and NodeRestriction)"
    )]
    Unknown { flag: &'static str, name: String },
    #[error("{0:?} in enable-admission-plugins and disable-admission-plugins overlapped")]
    Overlap(String),
}

/// The plugins that run: every one (all are on by default upstream) but those disabled.
/// Enabling names one of ours (a no-op beyond checking the name).
pub fn plugins(enable: &[String], disable: &[String]) -> Result<Vec<Plugin>, PluginError> {
    let find = |flag: &'static str, name: &String| {
        Plugin::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| PluginError::Unknown { flag, name: name.clone() })
    };
    let enabled = enable
        .iter()
        .map(|n| find("enable-admission-plugins", n))
        .collect::<Result<Vec<_>, _>>()?;
    let disabled = disable
        .iter()
        .map(|n| find("disable-admission-plugins", n))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(p) = enabled.iter().find(|p| disabled.contains(p)) {
        return Err(PluginError::Overlap(p.name().to_string()));
    }
    Ok(Plugin::ALL.into_iter().filter(|p| !disabled.contains(p)).collect())
}

/// The admission plugins and their settings (kube-apiserver's flags of the same names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// `--default-not-ready-toleration-seconds`.
    pub default_not_ready_toleration_seconds: i64,
    /// `--default-unreachable-toleration-seconds`.
    pub default_unreachable_toleration_seconds: i64,
    /// The plugins that run.
    pub plugins: Vec<Plugin>,
}

impl Default for Admission {
    fn default() -> Self {
        Self {
            default_not_ready_toleration_seconds: 300,
            default_unreachable_toleration_seconds: 300,
            plugins: Plugin::ALL.to_vec(),
        }
    }
}

fn is_pod(r: &ResourceType) -> bool {
    *r == crate::resources::PODS
}

impl Admission {
    /// Without `plugin`.
    pub fn without(mut self, plugin: Plugin) -> Self {
        self.plugins.retain(|p| *p != plugin);
        self
    }

    fn on(&self, p: Plugin) -> bool {
        self.plugins.contains(&p)
    }

    /// Whether `p` runs.
    pub fn enabled(&self, p: Plugin) -> bool {
        self.on(p)
    }

    /// `DefaultTolerationSeconds` on a pod's JSON: only its tolerations are read, and written
    /// back when the plugin adds to them.
    fn tolerations(&self, obj: &mut Value) -> Result<(), ApiError> {
        if !self.on(Plugin::DefaultTolerationSeconds) {
            return Ok(());
        }
        let not_object = || ApiError::bad_request("a Pod and its spec must be objects");
        let spec = obj.as_object_mut().ok_or_else(not_object)?.entry("spec").or_insert(Value::Null);
        if spec.is_null() {
            *spec = Value::Object(serde_json::Map::new());
        }
        let spec = spec.as_object_mut().ok_or_else(not_object)?;
        let mut tolerations: Vec<Toleration> = match spec.get("tolerations") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => typed(v)?,
        };
        let (not_ready, unreachable) = (
            self.default_not_ready_toleration_seconds,
            self.default_unreachable_toleration_seconds,
        );
        if tolerations::admit(&mut tolerations, not_ready, unreachable) {
            spec.insert("tolerations".into(), untyped(&tolerations)?);
        }
        Ok(())
    }

    /// The plugins on an object being created in `namespace`; `objects` is where accounts are
    /// looked up.
    pub async fn admit_create(
        &self,
        r: &ResourceType,
        namespace: Option<&str>,
        obj: &mut Value,
        objects: &dyn Objects,
    ) -> Result<(), ApiError> {
        if !is_pod(r) {
            return Ok(());
        }
        self.tolerations(obj)?;
        if self.on(Plugin::ServiceAccount) {
            let mut pod: Pod = typed(obj)?;
            let ns = namespace.unwrap_or_default();
            let suffix = crate::objects::generate_name("");
            service_account::admit(&mut pod, ns, objects, &suffix).await.map_err(|why| {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                ApiError::forbidden_object(r, name, &why.to_string())
            })?;
            // The plugin changes the spec only.
            if let Some(obj) = obj.as_object_mut() {
                obj.insert("spec".into(), untyped(&pod.spec)?);
            }
        }
        Ok(())
    }

    /// The plugins on an object replaced through its main resource (not a subresource):
    /// `DefaultTolerationSeconds` only, as `ServiceAccount` admits creates only.
    pub fn admit_update(
        &self,
        r: &ResourceType,
        sub: Option<&str>,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        if !is_pod(r) || sub.is_some() {
            return Ok(());
        }
        self.tolerations(obj)
    }
}

#[cfg(test)]
mod tests;
