//! Expectations, as upstream's `UIDTrackingControllerExpectations`: after a controller asks for
//! N creates or deletes it does not act on that owner again until its informer has seen them
//! (or 5 minutes pass, in case a watch event was lost). So a slow watch never makes it create or
//! delete twice for the same shortfall. Deletions are tracked by pod key, so a pod seen first as
//! terminating and then as deleted counts once.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::key::Key;

/// Upstream's `ExpectationsTimeout`.
pub const TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Entry {
    add: i64,
    del: i64,
    deletes: HashSet<String>,
    at: Instant,
}

#[derive(Debug, Default)]
pub struct Expectations {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl Expectations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the owner may be acted on: nothing expected, all seen, or expired.
    pub fn satisfied(&self, key: &Key) -> bool {
        match self.lock().get(key) {
            None => true,
            Some(e) => (e.add <= 0 && e.del <= 0) || e.at.elapsed() > TIMEOUT,
        }
    }

    /// Expects `n` creations (forgetting earlier expectations).
    pub fn expect_creations(&self, key: &Key, n: usize) {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.lock().insert(
            key.clone(),
            Entry { add: n, del: 0, deletes: HashSet::new(), at: Instant::now() },
        );
    }

    /// Expects these pods (`namespace/name`) to be deleted.
    pub fn expect_deletions(&self, key: &Key, pods: Vec<String>) {
        let deletes: HashSet<String> = pods.into_iter().collect();
        let del = i64::try_from(deletes.len()).unwrap_or(i64::MAX);
        self.lock().insert(key.clone(), Entry { add: 0, del, deletes, at: Instant::now() });
    }

    /// Expects `n` creations and these deletions at once (upstream's `SetExpectations`, as the
    /// DaemonSet controller uses it).
    pub fn expect(&self, key: &Key, n: usize, pods: Vec<String>) {
        let deletes: HashSet<String> = pods.into_iter().collect();
        let add = i64::try_from(n).unwrap_or(i64::MAX);
        let del = i64::try_from(deletes.len()).unwrap_or(i64::MAX);
        self.lock().insert(key.clone(), Entry { add, del, deletes, at: Instant::now() });
    }

    /// A creation was seen (or will never be: a create that failed or was skipped).
    pub fn creation_observed(&self, key: &Key) {
        if let Some(e) = self.lock().get_mut(key) {
            e.add -= 1;
        }
    }

    /// A deletion of `pod` was seen (or failed); counted once per pod.
    pub fn deletion_observed(&self, key: &Key, pod: &str) {
        if let Some(e) = self.lock().get_mut(key)
            && e.deletes.remove(pod)
        {
            e.del -= 1;
        }
    }

    /// Forgets the owner (it was deleted).
    pub fn delete(&self, key: &Key) {
        self.lock().remove(key);
    }

    /// Creations and deletions still expected.
    pub fn pending(&self, key: &Key) -> (i64, i64) {
        self.lock().get(key).map_or((0, 0), |e| (e.add, e.del))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_owner_waits_until_every_expected_create_is_seen_or_five_minutes_pass() {
        let e = Expectations::default();
        let k = Key::new("ns", "rs");
        assert!(e.satisfied(&k), "nothing expected");
        e.expect_creations(&k, 2);
        assert!(!e.satisfied(&k));
        e.creation_observed(&k);
        assert!(!e.satisfied(&k));
        e.creation_observed(&k);
        assert!(e.satisfied(&k));
        e.expect_creations(&k, 1);
        tokio::time::advance(TIMEOUT + Duration::from_secs(1)).await;
        assert!(e.satisfied(&k), "expired");
    }

    #[tokio::test(start_paused = true)]
    async fn each_expected_deletion_counts_once() {
        let e = Expectations::default();
        let k = Key::new("ns", "rs");
        e.expect_deletions(&k, vec!["ns/a".into(), "ns/b".into()]);
        e.deletion_observed(&k, "ns/a");
        e.deletion_observed(&k, "ns/a");
        e.deletion_observed(&k, "ns/other");
        assert_eq!(e.pending(&k), (0, 1));
        assert!(!e.satisfied(&k));
        e.deletion_observed(&k, "ns/b");
        assert!(e.satisfied(&k));
        e.delete(&k);
        assert_eq!(e.pending(&k), (0, 0));
    }
}
