//! Objects in memory, for tests of what reads them (volumes, env).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

use super::{Object, ObjectError, ObjectKey, ObjectKind, ObjectManager, references};

#[derive(Debug, Default)]
pub struct FakeObjects {
    objects: Mutex<BTreeMap<ObjectKey, Object>>,
    /// Pods registered, with what they reference.
    pub registered: Mutex<BTreeMap<String, BTreeSet<ObjectKey>>>,
}

impl FakeObjects {
    pub fn put_config_map(&self, namespace: &str, cm: serde_json::Value) {
        let cm: ConfigMap = serde_json::from_value(cm).unwrap_or_default();
        let name = cm.metadata.name.clone().unwrap_or_default();
        let key = ObjectKey::new(ObjectKind::ConfigMap, namespace, &name);
        self.lock().insert(key, Object::ConfigMap(Arc::new(cm)));
    }

    pub fn put_secret(&self, namespace: &str, secret: serde_json::Value) {
        let secret: Secret = serde_json::from_value(secret).unwrap_or_default();
        let name = secret.metadata.name.clone().unwrap_or_default();
        let key = ObjectKey::new(ObjectKind::Secret, namespace, &name);
        self.lock().insert(key, Object::Secret(Arc::new(secret)));
    }

    pub fn remove(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ObjectKey, Object>> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ObjectManager for FakeObjects {
    fn register_pod(&self, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut registered = self.registered.lock().unwrap_or_else(PoisonError::into_inner);
        registered.insert(uid, references(pod));
    }

    fn unregister_pod(&self, uid: &str) {
        self.registered.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
    }

    fn get<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Object, ObjectError>> {
        let found = self.lock().get(key).cloned();
        Box::pin(async move { found.ok_or_else(|| ObjectError::NotFound(key.clone())) })
    }
}
