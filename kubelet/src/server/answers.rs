//! What the kubelet remembers of the apiserver's answers (SubjectAccessReviews for `auth`,
//! TokenReviews for `authn`): each answer is reused until its time is up, and memory stays
//! bounded whoever calls.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::Instant;

/// The most answers kept; past it, expired ones are dropped, then all (bounded memory whatever
/// the callers).
pub const CACHE_LIMIT: usize = 4096;

/// Answers from the apiserver, each reused until its time is up; at most [`CACHE_LIMIT`].
pub struct Answers<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K, V> std::fmt::Debug for Answers<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answers").finish_non_exhaustive()
    }
}

impl<K, V> Default for Answers<K, V> {
    fn default() -> Self {
        Self { entries: Mutex::default() }
    }
}

impl<K: std::hash::Hash + Eq, V: Clone> Answers<K, V> {
    /// The answer for `key` if it is still good at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.entries();
        entries.get(key).filter(|(_, until)| now < *until).map(|(v, _)| v.clone())
    }

    /// Keeps `value` for `key` until `until`, first making room: expired answers go, then all.
    pub fn put(&self, key: K, value: V, now: Instant, until: Instant) {
        let mut entries = self.entries();
        if entries.len() >= CACHE_LIMIT {
            entries.retain(|_, (_, u)| now < *u);
            if entries.len() >= CACHE_LIMIT {
                entries.clear();
            }
        }
        entries.insert(key, (value, until));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries().len()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<K, (V, Instant)>> {
        // A panic while holding the lock leaves only cached answers behind: still usable.
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
