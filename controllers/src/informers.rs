//! Shared informers, as client-go's `SharedInformerFactory`: one watch per kind however many
//! controllers read it. Each [`Informer`] keeps a [`Cache`] of the objects (by namespace and
//! name) fed by a kube-rs watcher (list, then watch; relists on expiry; retries with backoff
//! while the apiserver is away, so controllers resume when it returns) and calls the handlers
//! controllers registered with what changed: [`Change::Added`], [`Change::Updated`] (old and new,
//! as upstream's `UpdateFunc`), [`Change::Deleted`]. After a relist, objects the new list lacks
//! are reported deleted. Handlers only enqueue keys; they run on the informer's task and must
//! not block.
//!
//! [`Informers`] is the factory: [`Informers::get`] returns the one informer of a kind
//! (creating it on first use), [`Informers::start`] runs every informer asked for, and
//! [`Informers::wait_synced`] waits until each has delivered its first list (upstream's
//! `WaitForCacheSync`).

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::key::Key;

/// What an informer reports to its handlers.
#[derive(Debug)]
pub enum Change<K> {
    Added(Arc<K>),
    Updated { old: Arc<K>, new: Arc<K> },
    Deleted(Arc<K>),
}

/// The objects of one kind as last seen, by namespace ("" for cluster-scoped) and name.
#[derive(Debug)]
pub struct Cache<K> {
    objects: RwLock<BTreeMap<String, HashMap<String, Arc<K>>>>,
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Self { objects: RwLock::new(BTreeMap::new()) }
    }
}

impl<K: Resource> Cache<K> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, HashMap<String, Arc<K>>>> {
        self.objects.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, HashMap<String, Arc<K>>>> {
        self.objects.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.read().get(namespace)?.get(name).cloned()
    }

    pub fn get_key(&self, key: &Key) -> Option<Arc<K>> {
        self.get(&key.namespace, &key.name)
    }

    /// Every object in `namespace`.
    pub fn list(&self, namespace: &str) -> Vec<Arc<K>> {
        self.read().get(namespace).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// Every object.
    pub fn list_all(&self) -> Vec<Arc<K>> {
        self.read().values().flat_map(|m| m.values().cloned()).collect()
    }

    pub fn len(&self) -> usize {
        self.read().values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores `obj`; what changed, or `None` when the same version was already there.
    pub fn apply(&self, obj: K) -> Option<Change<K>> {
        let new = Arc::new(obj);
        let (ns, name) = (new.namespace().unwrap_or_default(), new.name_any());
        let old = self.write().entry(ns).or_default().insert(name, new.clone());
        match old {
            None => Some(Change::Added(new)),
            Some(old)
                if old.resource_version().is_some()
                    && old.resource_version() == new.resource_version() =>
            {
                None
            }
            Some(old) => Some(Change::Updated { old, new }),
        }
    }

    /// Removes the object; its last state, if it was there.
    pub fn remove(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let mut objects = self.write();
        let in_ns = objects.get_mut(namespace)?;
        let old = in_ns.remove(name);
        if in_ns.is_empty() {
            objects.remove(namespace);
        }
        old
    }

    /// Removes every object whose key is not in `keep`; the removed ones.
    fn retain(&self, keep: &HashSet<Key>) -> Vec<Arc<K>> {
        let gone: Vec<Key> = self
            .read()
            .iter()
            .flat_map(|(ns, m)| m.keys().map(move |n| Key::new(ns, n)))
            .filter(|k| !keep.contains(k))
            .collect();
        gone.iter().filter_map(|k| self.remove(&k.namespace, &k.name)).collect()
    }
}

type Handler<K> = Box<dyn Fn(&Change<K>) + Send + Sync>;

/// One kind's cache and the handlers its changes go to.
pub struct Informer<K> {
    cache: Arc<Cache<K>>,
    handlers: RwLock<Vec<Handler<K>>>,
    synced: CancellationToken,
}

impl<K> Debug for Informer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer").field("kind", &std::any::type_name::<K>()).finish()
    }
}

impl<K> Default for Informer<K> {
    fn default() -> Self {
        Self {
            cache: Arc::new(Cache { objects: RwLock::new(BTreeMap::new()) }),
            handlers: RwLock::new(Vec::new()),
            synced: CancellationToken::new(),
        }
    }
}

impl<K: Resource> Informer<K> {
    pub fn cache(&self) -> Arc<Cache<K>> {
        self.cache.clone()
    }

    /// Registers a handler for every later change (upstream's `AddEventHandler`).
    pub fn on_change(&self, handler: impl Fn(&Change<K>) + Send + Sync + 'static) {
        self.handlers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(handler));
    }

    /// Whether the first list has been delivered.
    pub fn has_synced(&self) -> bool {
        self.synced.is_cancelled()
    }

    fn notify(&self, change: &Change<K>) {
        for h in self.handlers.read().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
            h(change);
        }
    }

    /// Stores `obj` and tells the handlers (what the watch does; tests call it directly).
    pub fn apply(&self, obj: K) {
        if let Some(change) = self.cache.apply(obj) {
            self.notify(&change);
        }
    }

    /// Forgets the object and tells the handlers.
    pub fn delete(&self, obj: &K) {
        let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
        if let Some(old) = self.cache.remove(&ns, &name) {
            self.notify(&Change::Deleted(old));
        }
    }

    /// Marks the first list delivered (what the watch does; tests call it directly).
    pub fn mark_synced(&self) {
        self.synced.cancel();
    }
}

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// Lists and watches `api` until `stop`.
    pub async fn run(self: Arc<Self>, api: Api<K>, stop: CancellationToken) {
        let kind = K::kind(&K::DynamicType::default()).into_owned();
        let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut relisting: Option<HashSet<Key>> = None;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = events.next() => e,
            };
            let Some(event) = event else { return };
            match event {
                Err(e) => tracing::warn!(%kind, error = %e, "watching; retrying with backoff"),
                Ok(Event::Init) => relisting = Some(HashSet::new()),
                Ok(Event::InitApply(obj)) => {
                    relisting.get_or_insert_default().insert(Key::of(&obj));
                    self.apply(obj);
                }
                Ok(Event::InitDone) => {
                    let seen = relisting.take().unwrap_or_default();
                    for gone in self.cache.retain(&seen) {
                        self.notify(&Change::Deleted(gone));
                    }
                    if !self.synced.is_cancelled() {
                        tracing::debug!(%kind, objects = self.cache.len(), "informer synced");
                    }
                    self.synced.cancel();
                }
                Ok(Event::Apply(obj)) => self.apply(obj),
                Ok(Event::Delete(obj)) => self.delete(&obj),
            }
        }
    }
}

/// Something [`Informers::start`] runs.
trait Runnable: Send + Sync {
    fn spawn(&self, client: &kube::Client, tracker: &TaskTracker, stop: &CancellationToken);
    fn synced(&self) -> CancellationToken;
}

impl<K> Runnable for Arc<Informer<K>>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    fn spawn(&self, client: &kube::Client, tracker: &TaskTracker, stop: &CancellationToken) {
        tracker.spawn(self.clone().run(Api::all(client.clone()), stop.clone()));
    }

    fn synced(&self) -> CancellationToken {
        self.synced.clone()
    }
}

struct Entry {
    informer: Arc<dyn Any + Send + Sync>,
    runnable: Box<dyn Runnable>,
}

/// The factory: one informer per kind, shared.
#[derive(Default)]
pub struct Informers {
    entries: Mutex<HashMap<TypeId, Entry>>,
}

impl Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers").finish_non_exhaustive()
    }
}

impl Informers {
    /// The informer of kind `K`, created on first use.
    pub fn get<K>(&self) -> Arc<Informer<K>>
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone,
    {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = entries.entry(TypeId::of::<K>()).or_insert_with(|| {
            let informer = Arc::new(Informer::<K>::default());
            Entry { informer: Arc::new(informer.clone()), runnable: Box::new(informer) }
        });
        entry
            .informer
            .clone()
            .downcast::<Arc<Informer<K>>>()
            .map(|a| (*a).clone())
            .unwrap_or_default()
    }

    /// Runs every informer asked for so far on `tracker` until `stop`.
    pub fn start(&self, client: &kube::Client, tracker: &TaskTracker, stop: &CancellationToken) {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for e in entries.values() {
            e.runnable.spawn(client, tracker, stop);
        }
    }

    /// Waits until every informer has delivered its first list; false if `stop` came first.
    pub async fn wait_synced(&self, stop: &CancellationToken) -> bool {
        let tokens: Vec<CancellationToken> = {
            let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            entries.values().map(|e| e.runnable.synced()).collect()
        };
        for t in tokens {
            tokio::select! {
                () = stop.cancelled() => return false,
                () = t.cancelled() => {}
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(ns: &str, name: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn handlers_see_adds_updates_with_the_old_object_and_deletes() {
        let informer = Informer::<Pod>::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        informer.on_change(move |c| {
            let what = match c {
                Change::Added(p) => format!("add {}", p.name_any()),
                Change::Updated { old, new } => format!(
                    "update {} {}->{}",
                    new.name_any(),
                    old.resource_version().unwrap_or_default(),
                    new.resource_version().unwrap_or_default()
                ),
                Change::Deleted(p) => format!("delete {}", p.name_any()),
            };
            s.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(what);
        });
        informer.apply(pod("a", "p", "1"));
        informer.apply(pod("a", "p", "1"));
        informer.apply(pod("a", "p", "2"));
        informer.apply(pod("b", "q", "3"));
        informer.delete(&pod("a", "p", "2"));
        informer.delete(&pod("a", "p", "2"));
        let seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        assert_eq!(seen, ["add p", "update p 1->2", "add q", "delete p"]);
        let cache = informer.cache();
        assert_eq!(cache.list("b").len(), 1);
        assert!(cache.list("a").is_empty());
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_relist_reports_what_it_no_longer_holds_as_deleted() {
        let cache = Cache::<Pod>::default();
        cache.apply(pod("a", "keep", "1"));
        cache.apply(pod("a", "gone", "1"));
        let gone = cache.retain(&[Key::new("a", "keep")].into_iter().collect());
        assert_eq!(gone.iter().map(|p| p.name_any()).collect::<Vec<_>>(), ["gone"]);
        assert!(cache.get("a", "keep").is_some());
    }

    #[test]
    fn the_factory_shares_one_informer_per_kind() {
        let f = Informers::default();
        let a = f.get::<Pod>();
        let b = f.get::<Pod>();
        assert!(Arc::ptr_eq(&a, &b));
        let _ = f.get::<k8s_openapi::api::core::v1::Namespace>();
        assert_eq!(f.entries.lock().map(|e| e.len()).unwrap_or(0), 2);
    }
}
