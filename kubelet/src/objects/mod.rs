//! The ConfigMaps and Secrets pods reference, as upstream's `configmap`/`secret` managers with
//! the watch-based strategy.
//!
//! - [`ObjectManager`]: the trait volumes and env read objects through; a pod's objects are
//!   registered when the pod is added or updated and unregistered when it is removed.
//! - [`watch`]: [`WatchBasedManager`](watch::WatchBasedManager), one watch per referenced object
//!   (`fieldSelector=metadata.name=<name>`), started with the first pod that references it and
//!   stopped with the last; a change wakes the pods that reference the object.
//! - [`api`]: the watches against the apiserver (kube-rs).
//! - [`static_config`]: node-local ConfigMaps and Secrets for static pods, the files of
//!   `staticConfigPath`, a second manager.
//!
//! [`ObjectSources`] picks where a pod's objects come from: API pods from the apiserver's
//! manager; static pods from the node-local one (upstream refuses them API objects, and so do
//! we).

pub mod api;
pub mod static_config;
pub mod watch;

#[cfg(test)]
pub mod fake;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

use crate::config::Source;

/// The kinds of objects pods reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    ConfigMap,
    Secret,
}

impl ObjectKind {
    /// As upstream's managers name the resource in errors: `configmap "x" not found`.
    pub fn resource(self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "configmap",
            ObjectKind::Secret => "secret",
        }
    }

    /// As the kind is written: `couldn't find key k in ConfigMap ns/x`.
    pub fn kind(self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "ConfigMap",
            ObjectKind::Secret => "Secret",
        }
    }

    /// As a pod spec's field names it: `couldn't get configMap ns/x`.
    pub fn field(self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "configMap",
            ObjectKind::Secret => "secret",
        }
    }
}

/// One object: kind, namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(kind: ObjectKind, namespace: &str, name: &str) -> Self {
        Self { kind, namespace: namespace.to_string(), name: name.to_string() }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.field(), self.namespace, self.name)
    }
}

/// An object as last seen.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    ConfigMap(Arc<ConfigMap>),
    Secret(Arc<Secret>),
}

impl Object {
    pub fn resource_version(&self) -> Option<&str> {
        match self {
            Object::ConfigMap(o) => o.metadata.resource_version.as_deref(),
            Object::Secret(o) => o.metadata.resource_version.as_deref(),
        }
    }

    /// `immutable: true`: its data never changes, so nothing needs to watch it.
    pub fn immutable(&self) -> bool {
        match self {
            Object::ConfigMap(o) => o.immutable == Some(true),
            Object::Secret(o) => o.immutable == Some(true),
        }
    }
}

/// Why an object cannot be read. Each variant names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("{} {:?} not found", .0.kind.resource(), .0.name)]
    NotFound(ObjectKey),
    #[error("failed to sync {} cache: timed out waiting for the condition", .0.kind.resource())]
    NotSynced(ObjectKey),
    #[error("object {:?}/{:?} not registered", .0.namespace, .0.name)]
    NotRegistered(ObjectKey),
    #[error(
        "couldn't get {0}: the kubelet has no static config directory (staticConfigPath), where a static pod's ConfigMaps and Secrets are"
    )]
    NoStaticConfig(ObjectKey),
    #[error("couldn't get {object} from the static config directory: {reason}")]
    StaticConfig { object: ObjectKey, reason: String },
    #[error("couldn't get {0}: the kubelet has no API server")]
    NoApiServer(ObjectKey),
    #[error("{0}: the object is not a {kind}", kind = .0.kind.kind())]
    WrongKind(ObjectKey),
}

impl ObjectError {
    /// The object does not exist (an `optional` reference is then skipped).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ObjectError::NotFound(_))
    }
}

/// Where pods read their ConfigMaps and Secrets (upstream's `configmap.Manager` and
/// `secret.Manager` in one).
pub trait ObjectManager: Send + Sync + fmt::Debug {
    /// Keeps what `pod` references, and stops keeping what its previous version referenced
    /// and no other pod does.
    fn register_pod(&self, pod: &Pod);
    /// Forgets the pod's references; objects no pod references any more are dropped.
    fn unregister_pod(&self, uid: &str);
    /// The object as last seen; waits (briefly) for it to be read the first time.
    fn get<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Object, ObjectError>>;
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// Every ConfigMap and Secret the pod references: volumes (`configMap`, `secret`, projected
/// sources), and each container's `env` and `envFrom`.
pub fn references(pod: &Pod) -> BTreeSet<ObjectKey> {
    let ns = namespace(pod);
    let mut out = BTreeSet::new();
    let mut add = |kind, name: &str| {
        out.insert(ObjectKey::new(kind, ns, name));
    };
    let Some(spec) = pod.spec.as_ref() else { return BTreeSet::new() };
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            add(ObjectKind::ConfigMap, &cm.name);
        }
        if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) {
            add(ObjectKind::Secret, name);
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                add(ObjectKind::ConfigMap, &cm.name);
            }
            if let Some(s) = &source.secret {
                add(ObjectKind::Secret, &s.name);
            }
        }
    }
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    for c in containers {
        for from in c.env.iter().flatten().filter_map(|e| e.value_from.as_ref()) {
            if let Some(r) = &from.config_map_key_ref {
                add(ObjectKind::ConfigMap, &r.name);
            }
            if let Some(r) = &from.secret_key_ref {
                add(ObjectKind::Secret, &r.name);
            }
        }
        for from in c.env_from.iter().flatten() {
            if let Some(r) = &from.config_map_ref {
                add(ObjectKind::ConfigMap, &r.name);
            }
            if let Some(r) = &from.secret_ref {
                add(ObjectKind::Secret, &r.name);
            }
        }
    }
    out
}

/// Where each pod's objects come from, by the pod's source.
#[derive(Debug, Clone, Default)]
pub struct ObjectSources {
    /// The apiserver's objects, for API pods (`None` standalone).
    pub api: Option<Arc<dyn ObjectManager>>,
    /// The static config directory's objects, for static pods (`None` without
    /// `staticConfigPath`).
    pub local: Option<Arc<dyn ObjectManager>>,
}

impl ObjectSources {
    /// The manager the pod's objects are kept by (`None`: it has none).
    pub fn manager_of(&self, pod: &Pod) -> Option<&Arc<dyn ObjectManager>> {
        if crate::status::manager::source_of(pod).is_some_and(Source::is_static) {
            self.local.as_ref()
        } else {
            self.api.as_ref()
        }
    }

    /// The manager `pod` reads from, or why it has none.
    fn manager_for(&self, pod: &Pod, key: &ObjectKey) -> Result<&dyn ObjectManager, ObjectError> {
        match self.manager_of(pod) {
            Some(manager) => Ok(manager.as_ref()),
            None if crate::status::manager::source_of(pod).is_some_and(Source::is_static) => {
                Err(ObjectError::NoStaticConfig(key.clone()))
            }
            None => Err(ObjectError::NoApiServer(key.clone())),
        }
    }

    /// Registers what `pod` references with the manager it reads from.
    pub fn register_pod(&self, pod: &Pod) {
        if let Some(manager) = self.manager_of(pod) {
            manager.register_pod(pod);
        }
    }

    /// Forgets the pod in every manager (it may have moved between none).
    pub fn unregister_pod(&self, uid: &str) {
        for manager in self.api.iter().chain(self.local.iter()) {
            manager.unregister_pod(uid);
        }
    }

    pub async fn get(&self, pod: &Pod, key: &ObjectKey) -> Result<Object, ObjectError> {
        self.manager_for(pod, key)?.get(key).await
    }

    /// The pod's ConfigMap `name`.
    pub async fn config_map(&self, pod: &Pod, name: &str) -> Result<Arc<ConfigMap>, ObjectError> {
        let key = ObjectKey::new(ObjectKind::ConfigMap, namespace(pod), name);
        match self.get(pod, &key).await? {
            Object::ConfigMap(cm) => Ok(cm),
            Object::Secret(_) => Err(ObjectError::WrongKind(key)),
        }
    }

    /// The pod's Secret `name`.
    pub async fn secret(&self, pod: &Pod, name: &str) -> Result<Arc<Secret>, ObjectError> {
        let key = ObjectKey::new(ObjectKind::Secret, namespace(pod), name);
        match self.get(pod, &key).await? {
            Object::Secret(s) => Ok(s),
            Object::ConfigMap(_) => Err(ObjectError::WrongKind(key)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_cover_volumes_projections_env_and_env_from() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "volumes": [
                    {"name": "a", "configMap": {"name": "cm-vol"}},
                    {"name": "b", "secret": {"secretName": "s-vol"}},
                    {"name": "c", "projected": {"sources": [
                        {"configMap": {"name": "cm-proj"}},
                        {"secret": {"name": "s-proj"}},
                        {"downwardAPI": {"items": []}},
                    ]}},
                    {"name": "d", "emptyDir": {}},
                ],
                "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s-from"}}]}],
                "containers": [{"name": "c", "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s-env", "key": "k"}}},
                    {"name": "C", "value": "plain"},
                ], "envFrom": [{"configMapRef": {"name": "cm-from"}, "prefix": "P_"}]}],
            },
        }))
        .expect("pod");
        let got: Vec<String> = references(&pod).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "configMap ns/cm-env",
                "configMap ns/cm-from",
                "configMap ns/cm-proj",
                "configMap ns/cm-vol",
                "secret ns/s-env",
                "secret ns/s-from",
                "secret ns/s-proj",
                "secret ns/s-vol",
            ]
        );
    }

    #[test]
    fn errors_read_as_upstreams() {
        let cm = ObjectKey::new(ObjectKind::ConfigMap, "default", "x");
        assert_eq!(ObjectError::NotFound(cm.clone()).to_string(), "configmap \"x\" not found");
        let s = ObjectKey::new(ObjectKind::Secret, "default", "y");
        assert_eq!(ObjectError::NotFound(s.clone()).to_string(), "secret \"y\" not found");
        assert_eq!(
            ObjectError::NotSynced(s).to_string(),
            "failed to sync secret cache: timed out waiting for the condition"
        );
        assert_eq!(
            ObjectError::NoStaticConfig(cm).to_string(),
            "couldn't get configMap default/x: the kubelet has no static config directory (staticConfigPath), where a static pod's ConfigMaps and Secrets are"
        );
    }

    #[tokio::test]
    async fn api_pods_read_the_apiserver_and_static_pods_the_node_local_objects() {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("ns".into());
        let sources = ObjectSources::default();
        let err = sources.config_map(&pod, "x").await.unwrap_err();
        assert!(matches!(err, ObjectError::NoApiServer(_)), "{err}");
        let api = Arc::new(fake::FakeObjects::default());
        api.put_secret("ns", serde_json::json!({"metadata": {"name": "x"}, "data": {"k": "YXBp"}}));
        let local = Arc::new(fake::FakeObjects::default());
        local.put_secret(
            "ns",
            serde_json::json!({"metadata": {"name": "x"}, "data": {"k": "bG9jYWw="}}),
        );
        let data = |s: Arc<Secret>| s.data.as_ref().unwrap()["k"].0.clone();
        let sources = ObjectSources { api: Some(api.clone()), local: None };
        assert_eq!(data(sources.secret(&pod, "x").await.unwrap()), b"api");
        pod.metadata.annotations =
            Some([(::api::keys::CONFIG_SOURCE.to_string(), "file".to_string())].into());
        let err = sources.secret(&pod, "x").await.unwrap_err();
        assert!(matches!(err, ObjectError::NoStaticConfig(_)), "{err}");
        let sources = ObjectSources { api: Some(api.clone()), local: Some(local.clone()) };
        assert_eq!(data(sources.secret(&pod, "x").await.unwrap()), b"local");
        pod.metadata.uid = Some("static".into());
        sources.register_pod(&pod);
        assert!(api.registered.lock().unwrap().is_empty(), "a static pod is not the apiserver's");
        assert!(local.registered.lock().unwrap().contains_key("static"));
        sources.unregister_pod("static");
        assert!(local.registered.lock().unwrap().is_empty());
    }
}
