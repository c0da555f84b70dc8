//! [`Store`]: the current objects and recent history in memory, over a durable [`Backend`].
//! Every write goes through [`Store::mutate`] (upstream's `GuaranteedUpdate`): one writer at a
//! time, the change durable in the backend before it is applied, broadcast and acknowledged.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use tokio::sync::broadcast;

use super::{Backend, Revision, StorageError, Write};

/// Events kept for watches that resume from a past revision; older ones get 410 Expired.
pub const HISTORY: usize = 10_000;
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
    /// The value before, for modifications and deletions.
    pub prev: Option<Bytes>,
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

#[derive(Debug)]
struct State {
    objects: BTreeMap<String, Stored>,
    revision: Revision,
    history: VecDeque<Arc<Event>>,
    /// The lowest revision a watch may resume after.
    oldest_watchable: Revision,
}

/// A watch on keys under a prefix: the history it missed, then live events.
#[derive(Debug)]
pub struct Watch {
    pub initial: Vec<Arc<Event>>,
    rx: broadcast::Receiver<Arc<Event>>,
    prefix: String,
    after: Revision,
}

/// Why a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// The watcher fell more than [`WATCH_BUFFER`] events behind.
    Lagged,
    /// The store is shutting down.
    Closed,
}

impl Watch {
    /// The next live event under the prefix.
    pub async fn next(&mut self) -> Result<Arc<Event>, WatchEnd> {
        loop {
            match self.rx.recv().await {
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

#[derive(Debug)]
pub struct Store {
    backend: Arc<dyn Backend>,
    state: RwLock<State>,
    writer: tokio::sync::Mutex<()>,
    events: broadcast::Sender<Arc<Event>>,
}

impl Store {
    /// Loads the backend's current state.
    pub fn open(backend: Arc<dyn Backend>) -> Result<Self, StorageError> {
        let (records, revision) = backend.load()?;
        let objects = records
            .into_iter()
            .map(|r| (r.key, Stored { value: r.value, revision: r.revision }))
            .collect();
        let (events, _) = broadcast::channel(WATCH_BUFFER);
        Ok(Self {
            backend,
            state: RwLock::new(State {
                objects,
                revision,
                history: VecDeque::new(),
                oldest_watchable: revision,
            }),
            writer: tokio::sync::Mutex::new(()),
            events,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
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

    /// Applies `decide` to the key's current value under the write lock. `decide` receives the
    /// revision the write will get (so the value can carry it as its resourceVersion).
    pub async fn mutate<E, F>(&self, key: &str, decide: F) -> Result<Applied, E>
    where
        E: From<StorageError>,
        F: FnOnce(Option<&Stored>, Revision) -> Result<Mutation, E>,
    {
        let _writer = self.writer.lock().await;
        let (current, next) = {
            let s = self.read();
            (s.objects.get(key).cloned(), s.revision + 1)
        };
        let (write, kind) = match decide(current.as_ref(), next)? {
            Mutation::Unchanged => {
                return Ok(Applied {
                    revision: current.as_ref().map_or(0, |c| c.revision),
                    value: current.map(|c| c.value),
                    kind: None,
                });
            }
            Mutation::Put(value) => {
                let kind = if current.is_some() { EventType::Modified } else { EventType::Added };
                (Write::Put { key: key.to_string(), value }, kind)
            }
            Mutation::Delete => match &current {
                Some(_) => (Write::Delete { key: key.to_string() }, EventType::Deleted),
                None => return Ok(Applied { revision: 0, value: None, kind: None }),
            },
        };
        let backend = self.backend.clone();
        let to_append = [write.clone()];
        tokio::task::spawn_blocking(move || backend.append(next, &to_append))
            .await
            .map_err(|e| StorageError::Task(e.to_string()))??;
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
            prev: current.map(|c| c.value),
        });
        {
            let mut s = self.state.write().unwrap_or_else(PoisonError::into_inner);
            match &write {
                Write::Put { value, .. } => {
                    s.objects
                        .insert(key.to_string(), Stored { value: value.clone(), revision: next });
                }
                Write::Delete { .. } => {
                    s.objects.remove(key);
                }
            }
            s.revision = next;
            s.history.push_back(event.clone());
            while s.history.len() > HISTORY {
                if let Some(old) = s.history.pop_front() {
                    s.oldest_watchable = old.revision;
                }
            }
            // Sent under the state lock: a watch that subscribes under the read lock either sees
            // this event in the history it copies or receives it live, never neither or both.
            let _ = self.events.send(event.clone());
        }
        Ok(Applied { revision: next, value: Some(event.value.clone()), kind: Some(kind) })
    }

    /// Watches keys under `prefix`. With `after`, the events after that revision come first
    /// (410 Expired if they are no longer kept); without, only new events.
    pub fn watch(&self, prefix: &str, after: Option<Revision>) -> Result<Watch, Expired> {
        let s = self.read();
        let rx = self.events.subscribe();
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
        Ok(Watch { initial, rx, prefix: prefix.to_string(), after: after.max(s.revision) })
    }

    /// Forgets backend history older than what watches can still ask for.
    pub async fn compact(&self) -> Result<(), StorageError> {
        let below = self.read().oldest_watchable;
        let backend = self.backend.clone();
        tokio::task::spawn_blocking(move || backend.compact(below))
            .await
            .map_err(|e| StorageError::Task(e.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    use super::super::sqlite::SqliteBackend;
    use super::*;

    fn store(dir: &std::path::Path) -> Store {
        Store::open(Arc::new(SqliteBackend::open(&dir.join("s.db")).unwrap())).unwrap()
    }

    async fn put(s: &Store, key: &str, v: &str) -> Applied {
        let v = Bytes::from(v.to_string());
        s.mutate::<StorageError, _>(key, |_, _| Ok(Mutation::Put(v))).await.unwrap()
    }

    #[tokio::test]
    async fn writes_get_increasing_revisions_that_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        assert_eq!(put(&s, "/pods/a", "1").await.revision, 1);
        assert_eq!(put(&s, "/pods/b", "1").await.revision, 2);
        assert_eq!(put(&s, "/pods/a", "2").await.revision, 3);
        s.mutate::<StorageError, _>("/pods/b", |_, _| Ok(Mutation::Delete)).await.unwrap();
        drop(s);
        let s = store(dir.path());
        assert_eq!(s.revision(), 4);
        let (items, rev) = s.list("/pods/");
        assert_eq!(rev, 4);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].1, Stored { value: Bytes::from("2"), revision: 3 });
        assert_eq!(put(&s, "/pods/c", "1").await.revision, 5, "revisions continue upward");
    }

    #[tokio::test]
    async fn decide_sees_the_current_value_and_the_coming_revision() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        put(&s, "/k", "v1").await;
        let r = s
            .mutate::<StorageError, _>("/k", |cur, next| {
                assert_eq!(cur.unwrap().value, "v1");
                Ok(Mutation::Put(Bytes::from(format!("rv={next}"))))
            })
            .await
            .unwrap();
        assert_eq!(s.get("/k").unwrap().value, format!("rv={}", r.revision));
        let unchanged =
            s.mutate::<StorageError, _>("/k", |_, _| Ok(Mutation::Unchanged)).await.unwrap();
        assert_eq!(unchanged.revision, r.revision, "no write, no new revision");
        assert_eq!(s.revision(), r.revision);
    }

    #[tokio::test]
    async fn watches_resume_from_a_revision_and_filter_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        put(&s, "/pods/a", "1").await;
        put(&s, "/nodes/n", "1").await;
        put(&s, "/pods/b", "1").await;
        let mut w = s.watch("/pods/", Some(1)).unwrap();
        assert_eq!(w.initial.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["/pods/b"]);
        put(&s, "/nodes/m", "1").await;
        put(&s, "/pods/a", "2").await;
        let e = w.next().await.unwrap();
        assert_eq!(
            (e.key.as_str(), e.kind, e.prev.as_deref()),
            ("/pods/a", EventType::Modified, Some(&b"1"[..]))
        );
        s.mutate::<StorageError, _>("/pods/a", |_, _| Ok(Mutation::Delete)).await.unwrap();
        let e = w.next().await.unwrap();
        assert_eq!((e.kind, e.value.as_ref()), (EventType::Deleted, &b"2"[..]));
    }

    #[tokio::test]
    async fn a_watch_older_than_the_history_is_expired() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        put(&s, "/a", "1").await;
        drop(s);
        let s = store(dir.path()); // history starts empty after a restart
        assert_eq!(s.watch("/", Some(0)).unwrap_err(), Expired { requested: 0, oldest: 1 });
        assert!(s.watch("/", Some(1)).is_ok());
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_closed_without_slowing_writers() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let mut slow = s.watch("/", None).unwrap();
        for i in 0..WATCH_BUFFER + 10 {
            put(&s, &format!("/k{i}"), "v").await;
        }
        assert_eq!(slow.next().await.unwrap_err(), WatchEnd::Lagged);
    }
}
