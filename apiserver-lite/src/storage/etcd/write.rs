//! `Store::mutate` over etcd, as upstream's `GuaranteedUpdate`: decide on the cached value,
//! commit with a transaction that holds only if the key is still at the revision decided on,
//! and on conflict decide again on the value etcd returned. A decision made on the cache that
//! fails or changes nothing is checked against etcd before it is believed (the cache may lag
//! another apiserver's write). A committed write is acknowledged once the store has seen it
//! come back through the watch, so this server's readers see their own writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::Committed;
use super::follow::Following;
use crate::storage::memory::{Applied, EventType, Mutation, Shared};
use crate::storage::{Revision, StorageError, Stored};

/// How long a committed write waits for its echo before it is acknowledged anyway (it is
/// durable; only this server's view lags).
const ECHO_TIMEOUT: Duration = Duration::from_secs(10);
/// Conflicts one write may meet before it gives up (each one is another writer's success).
const MAX_ATTEMPTS: usize = 64;

/// Writers of one key in this apiserver, one at a time: they would only conflict with each other
/// in etcd (and decide again, and again); conflicts are left to other apiservers' writers.
#[derive(Debug, Default)]
pub struct KeyLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

/// One key's lock, held; the entry goes when its last holder or waiter does.
struct Held<'a> {
    locks: &'a KeyLocks,
    key: &'a str,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl KeyLocks {
    async fn hold<'a>(&'a self, key: &'a str) -> Held<'a> {
        let lock = {
            let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            map.entry(key.to_string()).or_default().clone()
        };
        let guard = lock.lock_owned().await;
        Held { locks: self, key, guard: Some(guard) }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.locks.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.get(self.key).is_some_and(|l| Arc::strong_count(l) == 1) {
            map.remove(self.key);
        }
    }
}

impl Following {
    pub(in crate::storage) async fn mutate<E, F>(
        &self,
        shared: &Shared,
        key: &str,
        decide: F,
    ) -> Result<Applied, E>
    where
        E: From<StorageError>,
        F: FnMut(Option<&Stored>, Revision) -> Result<Mutation, E>,
    {
        let _held = self.locks.hold(key).await;
        self.mutate_held(shared, key, decide).await
    }

    async fn mutate_held<E, F>(
        &self,
        shared: &Shared,
        key: &str,
        mut decide: F,
    ) -> Result<Applied, E>
    where
        E: From<StorageError>,
        F: FnMut(Option<&Stored>, Revision) -> Result<Mutation, E>,
    {
        let mut current = shared.read().objects.get(key).cloned();
        let mut fresh = false;
        for _ in 0..MAX_ATTEMPTS {
            let predicted = shared.read().revision + 1;
            let mutation = match decide(current.as_ref(), predicted) {
                Ok(m) => m,
                Err(_) if !fresh => {
                    current = self.remote.get(key).await?;
                    fresh = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (expected, value, kind) = match mutation {
                Mutation::Put(v) => {
                    let kind =
                        if current.is_some() { EventType::Modified } else { EventType::Added };
                    (current.as_ref().map(|c| c.revision), Some(v), kind)
                }
                Mutation::Delete if current.is_some() => {
                    (current.as_ref().map(|c| c.revision), None, EventType::Deleted)
                }
                Mutation::Unchanged | Mutation::Delete => {
                    if !fresh {
                        let now = self.remote.get(key).await?;
                        fresh = true;
                        if now != current {
                            current = now;
                            continue;
                        }
                    }
                    return Ok(Applied {
                        revision: current.as_ref().map_or(0, |c| c.revision),
                        value: current.map(|c| c.value),
                        kind: None,
                    });
                }
            };
            match self.remote.commit(key, expected, value.clone()).await? {
                Committed::At(revision) => {
                    if let Err(e) = shared.wait_for(revision, ECHO_TIMEOUT).await {
                        tracing::warn!(key, error = %e, "etcd: acknowledging a write the store has not seen yet");
                    }
                    let value = match value {
                        // Decided at the revision it got: it already carries it.
                        Some(v) if revision == predicted => Some(v),
                        Some(v) => Some(self.remote.versioned(&v, revision)),
                        None => current.map(|c| c.value),
                    };
                    return Ok(Applied { revision, value, kind: Some(kind) });
                }
                Committed::Conflict(now) => {
                    current = now;
                    fresh = true;
                }
            }
        }
        Err(StorageError::Etcd {
            servers: self.remote.servers().to_string(),
            reason: format!("{key}: gave up after {MAX_ATTEMPTS} conflicting writes"),
            timed_out: false,
        }
        .into())
    }
}
