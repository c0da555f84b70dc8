//! [`Store`]: the current objects and recent history in memory, over a durable [`Backend`].
//! Every write goes through [`Store::mutate`] (upstream's `GuaranteedUpdate`): decisions are
//! taken one at a time against the latest value (durable or still pending), then the
//! [`committer`](super::committer) makes a whole batch of them durable in one backend append
//! before they are applied, broadcast and acknowledged (group commit). Over etcd, etcd decides:
//! see [`super::etcd`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, PoisonError, RwLock, mpsc};

use bytes::Bytes;
use tokio::sync::{broadcast, oneshot};

use super::committer::{self, Queued};
use super::{Backend, Revision, StorageError, Write};

/// Events kept for watches that resume from a past revision; older ones get 410 Expired.
pub const HISTORY: usize = 10_000;
/// How long a read at a resourceVersion the store has not reached waits for it (upstream's 3 s).
pub const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(3);
/// A watcher may fall this many events behind before it is closed (the server is not).
pub const WATCH_BUFFER: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub value: Bytes,
    pub revision: Revision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// A change, as watchers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub revision: Revision,
    pub key: String,
    pub kind: EventType,
    /// The new value; for a deletion, the last value.
    pub value: Bytes,
    /// The value before, with its revision, for modifications and deletions.
    pub prev: Option<Stored>,
}

/// What a mutation decided.
#[derive(Debug)]
pub enum Mutation {
    Put(Bytes),
    Delete,
    Unchanged,
}

/// What a mutation did: the revision and value now in effect (for a deletion, the last value).
#[derive(Debug, Clone)]
pub struct Applied {
    pub revision: Revision,
    pub value: Option<Bytes>,
    pub kind: Option<EventType>,
}

/// What is durable: readers only ever see this.
#[derive(Debug)]
pub(super) struct State {
    pub(super) objects: BTreeMap<String, Stored>,
    pub(super) revision: Revision,
    pub(super) history: VecDeque<Arc<Event>>,
    /// The lowest revision a watch may resume after.
    pub(super) oldest_watchable: Revision,
}

impl State {
    /// Applies a durable event and tells watchers. Called under the state lock, so a watch
    /// that subscribes under the read lock either finds the event in the history it copies or
    /// receives it live, never neither or both.
    pub(super) fn apply(&mut self, event: Arc<Event>, watchers: &broadcast::Sender<Arc<Event>>) {
        match event.kind {
            EventType::Deleted => {
                self.objects.remove(&event.key);
            }
            EventType::Added | EventType::Modified => {
                let stored = Stored { value: event.value.clone(), revision: event.revision };
                self.objects.insert(event.key.clone(), stored);
            }
        }
        self.revision = event.revision;
        self.history.push_back(event.clone());
        while self.history.len() > HISTORY {
            if let Some(old) = self.history.pop_front() {
                self.oldest_watchable = old.revision;
            }
        }
        let _ = watchers.send(event);
    }
}

/// Loaded records as the store keeps them, by key.
pub(super) fn objects(records: Vec<super::Record>) -> BTreeMap<String, Stored> {
    records.into_iter().map(|r| (r.key, Stored { value: r.value, revision: r.revision })).collect()
}

impl State {
    /// Forgets the history below `revision` (compacted away, as etcd's compaction at that
    /// revision): watches and lists from before it are expired.
    pub(super) fn forget_before(&mut self, revision: Revision) {
        while self.history.front().is_some_and(|e| e.revision < revision) {
            self.history.pop_front();
        }
        self.oldest_watchable = self.oldest_watchable.max((revision - 1).min(self.revision));
    }
}

/// Writes decided but not yet durable, which the next decision must see; held by the writer.
#[derive(Debug)]
pub(super) struct Pending {
    /// The latest undurable value of each key (`None`: deleted), with its revision.
    pub(super) overlay: HashMap<String, (Revision, Option<Bytes>)>,
    /// The revision the next write gets.
    pub(super) next: Revision,
}

/// What the store and its committer (or etcd follower) share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) state: RwLock<State>,
    pub(super) writer: tokio::sync::Mutex<Pending>,
    pub(super) events: broadcast::Sender<Arc<Event>>,
    /// The revision readers see, for those waiting for one (a write's echo, a consistent read).
    pub(super) visible: tokio::sync::watch::Sender<Revision>,
    /// Bumped when the state is reloaded rather than followed: watches from before end.
    pub(super) generation: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub(super) fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn new(objects: BTreeMap<String, Stored>, revision: Revision) -> Self {
        let (events, _) = broadcast::channel(WATCH_BUFFER);
        Self {
            state: RwLock::new(State {
                objects,
                revision,
                history: VecDeque::new(),
                oldest_watchable: revision,
            }),
            writer: tokio::sync::Mutex::new(Pending {
                overlay: HashMap::new(),
                next: revision + 1,
            }),
            events,
            visible: tokio::sync::watch::channel(revision).0,
            generation: 0.into(),
        }
    }

    /// Waits (at most `within`) until readers see revision `want`.
    pub(super) async fn wait_for(
        &self,
        want: Revision,
        within: std::time::Duration,
    ) -> Result<(), StorageError> {
        let mut visible = self.visible.subscribe();
        if *visible.borrow_and_update() >= want {
            return Ok(());
        }
        match tokio::time::timeout(within, visible.wait_for(|at| *at >= want)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(StorageError::Closed),
            Err(_) => Err(StorageError::Lagging { wanted: want, at: *self.visible.borrow() }),
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A watch on keys under a prefix: the history it missed, then live events.
#[derive(Debug)]
pub struct Watch {
    pub initial: Vec<Arc<Event>>,
    rx: broadcast::Receiver<Arc<Event>>,
    prefix: String,
    after: Revision,
    shared: Arc<Shared>,
    generation: u64,
}

/// Why a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// The watcher fell more than [`WATCH_BUFFER`] events behind.
    Lagged,
    /// The store is shutting down.
    Closed,
    /// The store was reloaded from etcd (its history was compacted away while it was cut
    /// off): what this watch saw no longer leads to what the store holds.
    Reloaded,
}

impl Watch {
    /// The next live event under the prefix.
    pub async fn next(&mut self) -> Result<Arc<Event>, WatchEnd> {
        loop {
            let received = self.rx.recv().await;
            if self.shared.generation() != self.generation {
                return Err(WatchEnd::Reloaded);
            }
            match received {
                Ok(e) if e.revision > self.after && e.key.starts_with(&self.prefix) => {
                    return Ok(e);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return Err(WatchEnd::Lagged),
                Err(broadcast::error::RecvError::Closed) => return Err(WatchEnd::Closed),
            }
        }
    }
}

/// A watch asked to resume before the oldest kept event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too old resource version: {requested} ({oldest})")]
pub struct Expired {
    pub requested: Revision,
    pub oldest: Revision,
}

/// The watch cache over a durable backend or etcd. Dropping it lets the committer finish what
/// is queued and joins it (or stops following etcd).
#[derive(Debug)]
pub struct Store {
    shared: Arc<Shared>,
    durable: Durable,
}

/// Where the store's writes go.
#[derive(Debug)]
enum Durable {
    /// A log this server alone appends to: it decides revisions, the committer makes them
    /// durable.
    Log {
        backend: Arc<dyn Backend>,
        queue: Option<mpsc::Sender<Queued>>,
        committer: Option<std::thread::JoinHandle<()>>,
    },
    /// etcd decides revisions; the store follows its watch.
    Etcd(Box<super::etcd::follow::Following>),
}

impl Store {
    /// Loads the backend's current state and starts the committer thread.
    pub fn open(backend: Arc<dyn Backend>) -> Result<Self, StorageError> {
        let (records, revision) = backend.load()?;
        let shared = Arc::new(Shared::new(objects(records), revision));
        let (queue, rx) = mpsc::channel();
        let committer = std::thread::Builder::new()
            .name("store-committer".into())
            .spawn({
                let (shared, backend) = (shared.clone(), backend.clone());
                move || committer::run(&shared, backend.as_ref(), &rx)
            })
            .map_err(|source| StorageError::Io { what: "starting the committer".into(), source })?;
        let durable = Durable::Log { backend, queue: Some(queue), committer: Some(committer) };
        Ok(Self { shared, durable })
    }

    /// Loads everything under the layout's prefix from etcd and follows it from there.
    pub async fn open_etcd(remote: super::etcd::Remote) -> Result<Self, StorageError> {
        let (records, revision) = remote.load().await?;
        let shared = Arc::new(Shared::new(objects(records), revision));
        let (history, oldest) = super::etcd::history::read(&remote, revision).await?;
        {
            let mut state = shared.write();
            state.history = history.into();
            state.oldest_watchable = oldest;
        }
        let following = super::etcd::follow::start(remote, shared.clone());
        Ok(Self { shared, durable: Durable::Etcd(Box::new(following)) })
    }

    /// Whether the store can serve: always over SQLite; over etcd, while its watch is up.
    pub fn ready(&self) -> Result<(), String> {
        match &self.durable {
            Durable::Log { .. } => Ok(()),
            Durable::Etcd(f) => f.ready(),
        }
    }

    /// Over etcd, waits (up to [`CATCH_UP`]) until the store has reached `revision`, a
    /// resourceVersion a client may have read from another apiserver, as upstream's cacher
    /// waits before answering "too large resource version". Over SQLite no other writer
    /// exists: a revision past the store's is answered at once.
    pub async fn catch_up(&self, revision: Revision) {
        if let Durable::Etcd(_) = &self.durable {
            // Not reached in time: the read answers "too large resource version" itself.
            let _ = self.shared.wait_for(revision, CATCH_UP).await;
        }
    }

    /// Waits until the store has caught up with everything durable when called (a consistent
    /// read, as upstream's consistent reads from its cache). Immediate over SQLite, where the
    /// store is the only writer.
    pub async fn sync(&self) -> Result<(), StorageError> {
        match &self.durable {
            Durable::Log { .. } => Ok(()),
            Durable::Etcd(f) => f.sync(&self.shared).await,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.shared.read()
    }

    /// The current revision (what a list reports as its resourceVersion).
    pub fn revision(&self) -> Revision {
        self.read().revision
    }

    pub fn get(&self, key: &str) -> Option<Stored> {
        self.read().objects.get(key).cloned()
    }

    /// Every key under `prefix` in key order, and the revision of this snapshot.
    pub fn list(&self, prefix: &str) -> (Vec<(String, Stored)>, Revision) {
        let state = self.read();
        let items = state
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (items, state.revision)
    }

    /// Every key under `prefix` after `after_key`, in key order, as it was at revision `at`:
    /// the current objects with the kept history after `at` undone. A revision before the
    /// oldest kept event is [`Expired`]; one past the current revision reads the current state.
    pub fn list_at(
        &self,
        prefix: &str,
        after_key: Option<&str>,
        at: Revision,
    ) -> Result<Vec<(String, Stored)>, Expired> {
        let s = self.read();
        if at < s.oldest_watchable {
            return Err(Expired { requested: at, oldest: s.oldest_watchable });
        }
        let wanted = |k: &str| k.starts_with(prefix) && after_key.is_none_or(|a| k > a);
        let start = after_key.map_or_else(|| prefix.to_string(), str::to_string);
        let mut items: BTreeMap<String, Stored> = s
            .objects
            .range(start..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| wanted(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for e in s.history.iter().rev().take_while(|e| e.revision > at) {
            if !wanted(&e.key) {
                continue;
            }
            match &e.prev {
                Some(before) => items.insert(e.key.clone(), before.clone()),
                None => items.remove(&e.key),
            };
        }
        Ok(items.into_iter().collect())
    }

    /// Applies `decide` to the key's latest value and makes what it decided durable. `decide`
    /// receives the revision the write will probably get (so the value can carry it as its
    /// resourceVersion; [`Applied::revision`] is the one it got). Over etcd, `decide` runs
    /// again when the key changed under it (another apiserver's write), as upstream's
    /// `GuaranteedUpdate`. Returns once the write is durable and visible to readers and
    /// watchers.
    pub async fn mutate<E, F>(&self, key: &str, decide: F) -> Result<Applied, E>
    where
        E: From<StorageError>,
        F: FnMut(Option<&Stored>, Revision) -> Result<Mutation, E>,
    {
        match &self.durable {
            Durable::Log { .. } => self.mutate_log(key, decide).await,
            Durable::Etcd(f) => f.mutate(&self.shared, key, decide).await,
        }
    }

    async fn mutate_log<E, F>(&self, key: &str, mut decide: F) -> Result<Applied, E>
    where
        E: From<StorageError>,
        F: FnMut(Option<&Stored>, Revision) -> Result<Mutation, E>,
    {
        let mut pending = self.shared.writer.lock().await;
        let committed = self.revision();
        pending.overlay.retain(|_, (rev, _)| *rev > committed);
        let (current, undurable) = match pending.overlay.get(key) {
            Some((revision, value)) => {
                (value.clone().map(|value| Stored { value, revision: *revision }), true)
            }
            None => (self.get(key), false),
        };
        let next = pending.next;
        let (write, kind) = match decide(current.as_ref(), next)? {
            Mutation::Put(value) => {
                let kind = if current.is_some() { EventType::Modified } else { EventType::Added };
                (Write::Put { key: key.to_string(), value }, kind)
            }
            Mutation::Delete if current.is_some() => {
                (Write::Delete { key: key.to_string() }, EventType::Deleted)
            }
            Mutation::Unchanged | Mutation::Delete => {
                let seen = Applied {
                    revision: current.as_ref().map_or(0, |c| c.revision),
                    value: current.map(|c| c.value),
                    kind: None,
                };
                // What was seen must be durable before it is reported.
                if undurable {
                    let (ack, done) = oneshot::channel();
                    self.enqueue(Queued::Barrier { ack })?;
                    drop(pending);
                    done.await.map_err(|_| StorageError::Closed)??;
                }
                return Ok(seen);
            }
        };
        let event = Arc::new(Event {
            revision: next,
            key: key.to_string(),
            kind,
            value: match &write {
                Write::Put { value, .. } => value.clone(),
                Write::Delete { .. } => {
                    current.as_ref().map(|c| c.value.clone()).unwrap_or_default()
                }
            },
            prev: current,
        });
        let value = match &write {
            Write::Put { value, .. } => Some(value.clone()),
            Write::Delete { .. } => None,
        };
        let (ack, done) = oneshot::channel();
        self.enqueue(Queued::Write { write, event: event.clone(), ack })?;
        pending.overlay.insert(key.to_string(), (next, value));
        pending.next = next + 1;
        drop(pending);
        done.await.map_err(|_| StorageError::Closed)??;
        Ok(Applied { revision: next, value: Some(event.value.clone()), kind: Some(kind) })
    }

    fn enqueue(&self, item: Queued) -> Result<(), StorageError> {
        let Durable::Log { queue: Some(queue), .. } = &self.durable else {
            return Err(StorageError::Closed);
        };
        queue.send(item).map_err(|_| StorageError::Closed)
    }

    /// Watches keys under `prefix`. With `after`, the events after that revision come first
    /// (410 Expired if they are no longer kept); without, only new events.
    pub fn watch(&self, prefix: &str, after: Option<Revision>) -> Result<Watch, Expired> {
        let s = self.read();
        let rx = self.shared.events.subscribe();
        let after = after.unwrap_or(s.revision);
        if after < s.oldest_watchable {
            return Err(Expired { requested: after, oldest: s.oldest_watchable });
        }
        let initial = s
            .history
            .iter()
            .filter(|e| e.revision > after && e.key.starts_with(prefix))
            .cloned()
            .collect();
        Ok(Watch {
            initial,
            rx,
            prefix: prefix.to_string(),
            after: after.max(s.revision),
            generation: self.shared.generation(),
            shared: self.shared.clone(),
        })
    }

    /// Forgets durable history older than what watches can still ask for (SQLite), or
    /// compacts etcd to the revision the last round saw, one apiserver at a time (see
    /// [`super::etcd::compact`]).
    pub async fn compact(&self) -> Result<(), StorageError> {
        match &self.durable {
            Durable::Log { backend, .. } => {
                let below = self.read().oldest_watchable;
                let backend = backend.clone();
                tokio::task::spawn_blocking(move || backend.compact(below))
                    .await
                    .map_err(|e| StorageError::Task(e.to_string()))?
            }
            Durable::Etcd(f) => f.compact(&self.shared).await,
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        match &mut self.durable {
            Durable::Log { queue, committer, .. } => {
                *queue = None;
                if let Some(committer) = committer.take() {
                    let _ = committer.join();
                }
            }
            Durable::Etcd(f) => f.stop(),
        }
    }
}

#[cfg(test)]
mod tests;
