//! Upstream's watch-based object manager: one watch per referenced object, kept while any pod
//! references it. Registering a pod starts a watch for each object it newly references and
//! stops those no pod references any more; each watch keeps the object's latest state, and a
//! change wakes the pods that reference it (their UIDs go to the sync loop). An immutable
//! object is read once and not watched further, as upstream stops its reflector.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Object, ObjectError, ObjectKey, ObjectManager, references};

/// How long a read waits for an object's first list (upstream's one second).
pub const SYNC_WAIT: Duration = Duration::from_secs(1);

/// The watch of one object: its state after each (re)list and each change, `None` while it
/// does not exist. Implementations retry on errors themselves.
pub trait ObjectWatcher: Send + Sync + std::fmt::Debug {
    fn watch(&self, key: &ObjectKey) -> BoxStream<'static, Option<Object>>;
}

/// Pod UIDs to sync again because an object they reference changed.
pub type Changes = mpsc::UnboundedSender<Vec<String>>;

#[derive(Debug, Clone)]
enum Cached {
    /// Not listed yet.
    Listing,
    Listed(Option<Object>),
}

#[derive(Debug)]
struct Entry {
    pods: BTreeSet<String>,
    state: Arc<watch::Sender<Cached>>,
    stop: CancellationToken,
    /// A read gave up waiting for the first list: its pods are told when the list comes.
    waited: Arc<AtomicBool>,
}

#[derive(Debug, Default)]
struct Registry {
    by_pod: HashMap<String, BTreeSet<ObjectKey>>,
    entries: HashMap<ObjectKey, Entry>,
}

#[derive(Debug)]
struct Shared {
    watcher: Arc<dyn ObjectWatcher>,
    registry: Mutex<Registry>,
    changes: Changes,
}

impl Shared {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pods_of(&self, key: &ObjectKey) -> Vec<String> {
        self.registry()
            .entries
            .get(key)
            .map(|e| e.pods.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// The watch-based [`ObjectManager`]. Its watches run on `tasks` and stop with `stop`.
#[derive(Debug)]
pub struct WatchBasedManager {
    shared: Arc<Shared>,
    tasks: TaskTracker,
    stop: CancellationToken,
}

/// Whether two states are the same version of the object.
fn same(old: &Option<Object>, new: &Option<Object>) -> bool {
    match (old, new) {
        (None, None) => true,
        (Some(a), Some(b)) => a.resource_version().is_some() && a == b,
        _ => false,
    }
}

async fn run_watch(
    shared: Arc<Shared>,
    key: ObjectKey,
    state: Arc<watch::Sender<Cached>>,
    waited: Arc<AtomicBool>,
    stop: CancellationToken,
) {
    let mut states = shared.watcher.watch(&key);
    let mut first = true;
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            next = states.next() => next,
        };
        let Some(new) = next else { return };
        let changed = match &*state.borrow() {
            Cached::Listing => true,
            Cached::Listed(old) => !same(old, &new),
        };
        let immutable = new.as_ref().is_some_and(Object::immutable);
        state.send_replace(Cached::Listed(new));
        let wake = if first { waited.load(Ordering::SeqCst) } else { changed };
        first = false;
        if wake {
            let pods = shared.pods_of(&key);
            tracing::debug!(object = %key, ?pods, "a referenced object changed");
            if !pods.is_empty() {
                let _ = shared.changes.send(pods);
            }
        }
        if immutable {
            tracing::debug!(object = %key, "immutable: no longer watched");
            return;
        }
    }
}

impl WatchBasedManager {
    pub fn new(
        watcher: Arc<dyn ObjectWatcher>,
        changes: Changes,
        tasks: TaskTracker,
        stop: CancellationToken,
    ) -> Self {
        let shared = Arc::new(Shared { watcher, registry: Mutex::default(), changes });
        Self { shared, tasks, stop }
    }

    /// Starts the watch of `key`.
    fn start(&self, key: &ObjectKey) -> Entry {
        let entry = Entry {
            pods: BTreeSet::new(),
            state: Arc::new(watch::Sender::new(Cached::Listing)),
            stop: self.stop.child_token(),
            waited: Arc::default(),
        };
        self.tasks.spawn(run_watch(
            self.shared.clone(),
            key.clone(),
            entry.state.clone(),
            entry.waited.clone(),
            entry.stop.clone(),
        ));
        entry
    }

    /// The objects being watched (for tests and introspection).
    pub fn watched(&self) -> BTreeSet<ObjectKey> {
        self.shared.registry().entries.keys().cloned().collect()
    }

    fn set_references(&self, uid: &str, keys: BTreeSet<ObjectKey>) {
        let mut registry = self.shared.registry();
        let old = if keys.is_empty() {
            registry.by_pod.remove(uid).unwrap_or_default()
        } else {
            registry.by_pod.insert(uid.to_string(), keys.clone()).unwrap_or_default()
        };
        for key in keys.difference(&old) {
            if !registry.entries.contains_key(key) {
                let entry = self.start(key);
                registry.entries.insert(key.clone(), entry);
            }
            if let Some(entry) = registry.entries.get_mut(key) {
                entry.pods.insert(uid.to_string());
            }
        }
        for key in old.difference(&keys) {
            let Some(entry) = registry.entries.get_mut(key) else { continue };
            entry.pods.remove(uid);
            if entry.pods.is_empty() {
                entry.stop.cancel();
                registry.entries.remove(key);
            }
        }
    }
}

impl ObjectManager for WatchBasedManager {
    fn register_pod(&self, pod: &Pod) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        self.set_references(uid, references(pod));
    }

    fn unregister_pod(&self, uid: &str) {
        self.set_references(uid, BTreeSet::new());
    }

    fn get<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Object, ObjectError>> {
        Box::pin(async move {
            let (mut state, waited) = {
                let registry = self.shared.registry();
                let entry = registry
                    .entries
                    .get(key)
                    .ok_or_else(|| ObjectError::NotRegistered(key.clone()))?;
                (entry.state.subscribe(), entry.waited.clone())
            };
            let listed = state.wait_for(|c| matches!(c, Cached::Listed(_)));
            match tokio::time::timeout(SYNC_WAIT, listed).await {
                Ok(Ok(cached)) => match &*cached {
                    Cached::Listed(Some(object)) => Ok(object.clone()),
                    _ => Err(ObjectError::NotFound(key.clone())),
                },
                _ => {
                    waited.store(true, Ordering::SeqCst);
                    Err(ObjectError::NotSynced(key.clone()))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
