//! [`Objects`] in memory, for the hermetic tests of tokens, the authenticator and admission.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Objects;

#[derive(Debug, Default)]
pub struct FakeObjects {
    accounts: Mutex<HashMap<(String, String), ServiceAccount>>,
    pods: Mutex<HashMap<(String, String), Pod>>,
    secrets: Mutex<HashMap<(String, String), Secret>>,
    nodes: Mutex<HashMap<String, Node>>,
}

fn key(meta: &ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Metadata with a name, namespace and UID.
pub fn meta(ns: &str, name: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()).filter(|n: &String| !n.is_empty()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

impl FakeObjects {
    pub fn put_account(&self, sa: ServiceAccount) {
        lock(&self.accounts).insert(key(&sa.metadata), sa);
    }
    pub fn put_pod(&self, pod: Pod) {
        lock(&self.pods).insert(key(&pod.metadata), pod);
    }
    pub fn put_secret(&self, s: Secret) {
        lock(&self.secrets).insert(key(&s.metadata), s);
    }
    pub fn put_node(&self, n: Node) {
        lock(&self.nodes).insert(n.metadata.name.clone().unwrap_or_default(), n);
    }
    pub fn remove_pod(&self, ns: &str, name: &str) {
        lock(&self.pods).remove(&(ns.to_string(), name.to_string()));
    }
    pub fn remove_account(&self, ns: &str, name: &str) {
        lock(&self.accounts).remove(&(ns.to_string(), name.to_string()));
    }
}

impl Objects for FakeObjects {
    fn service_account(&self, namespace: &str, name: &str) -> Option<ServiceAccount> {
        lock(&self.accounts).get(&(namespace.to_string(), name.to_string())).cloned()
    }
    fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        lock(&self.pods).get(&(namespace.to_string(), name.to_string())).cloned()
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        lock(&self.secrets).get(&(namespace.to_string(), name.to_string())).cloned()
    }
    fn node(&self, name: &str) -> Option<Node> {
        lock(&self.nodes).get(name).cloned()
    }
}
