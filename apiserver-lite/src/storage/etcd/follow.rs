//! Following etcd: one watch on the prefix, from the revision the store holds, applying each
//! event to the store in revision order (its own writes and other apiservers' alike). A
//! consistent read waits until the store has reached etcd's revision; when that revision is no
//! event under the prefix (a write elsewhere in etcd), a marker written under the prefix brings
//! one that comes after it (etcd 3.4's progress notifications can overtake events). A broken
//! watch is re-opened from where the store is; one whose revision was compacted away reloads
//! the store and ends the watches that were open (their clients list again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{EventType as EtcdEvent, WatchOptions};
use tokio_util::sync::CancellationToken;

use super::compact::Round;
use super::{MAX_MESSAGE, Remote, prefix_end};
use crate::storage::memory::{Event, EventType, Shared};
use crate::storage::{Revision, StorageError};

/// How long a consistent read waits for the store to reach etcd's revision.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a consistent read waits for events before it writes a marker.
pub const MARK_AFTER: Duration = Duration::from_millis(20);
/// The longest pause between attempts to re-open a broken watch.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The store's link to etcd: the remote, the task following it, and its health.
#[derive(Debug)]
pub struct Following {
    pub(super) remote: Remote,
    stop: CancellationToken,
    health: Arc<Health>,
    pub(super) round: tokio::sync::Mutex<Round>,
    /// This apiserver's writers, one per key at a time.
    pub(super) locks: super::write::KeyLocks,
}

/// Whether the watch is up, and why not.
#[derive(Debug, Default)]
struct Health {
    up: AtomicBool,
    reason: Mutex<String>,
}

impl Health {
    fn set_up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    fn set_down(&self, reason: String) {
        if self.up.swap(false, Ordering::SeqCst) {
            tracing::warn!(%reason, "etcd: lost the watch; re-opening it");
        }
        *self.reason.lock().unwrap_or_else(PoisonError::into_inner) = reason;
    }
}

/// Starts following etcd from just after the revision the store was loaded at.
pub(in crate::storage) fn start(remote: Remote, shared: Arc<Shared>) -> Following {
    let stop = CancellationToken::new();
    let health = Arc::new(Health::default());
    tokio::spawn(run(remote.clone(), shared, stop.clone(), health.clone()));
    Following {
        remote,
        stop,
        health,
        round: tokio::sync::Mutex::new(Round::default()),
        locks: super::write::KeyLocks::default(),
    }
}

impl Following {
    pub fn ready(&self) -> Result<(), String> {
        if self.health.up.load(Ordering::SeqCst) {
            return Ok(());
        }
        let reason = self.health.reason.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Err(if reason.is_empty() { "connecting to etcd".to_string() } else { reason })
    }

    /// Waits until the store holds everything etcd held when this was called.
    pub(in crate::storage) async fn sync(&self, shared: &Shared) -> Result<(), StorageError> {
        let want = self.remote.current_revision().await?;
        if shared.wait_for(want, MARK_AFTER).await.is_ok() {
            return Ok(());
        }
        let marked = self.remote.mark().await?;
        shared.wait_for(marked, SYNC_TIMEOUT).await
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }
}

/// Why one watch ended.
enum Ended {
    Stopped,
    Broken(String),
    /// etcd no longer has the revision the store is at.
    Compacted,
}

async fn run(remote: Remote, shared: Arc<Shared>, stop: CancellationToken, health: Arc<Health>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let ended = follow(&remote, &shared, &stop, &health).await;
        match ended {
            Ended::Stopped => return,
            Ended::Broken(reason) => {
                // A watch that was up broke: re-open it at once, backing off only while it fails.
                if health.up.load(Ordering::SeqCst) {
                    backoff = Duration::from_millis(50);
                }
                health.set_down(reason);
            }
            Ended::Compacted => {
                health.set_down("the store's revision was compacted; reloading".into());
                match remote.load().await {
                    Ok((records, revision)) => {
                        reload(&shared, records, revision);
                        backoff = Duration::from_millis(50);
                        continue;
                    }
                    Err(e) => health.set_down(e.to_string()),
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One watch, from the store's revision, until it breaks or the store stops.
async fn follow(
    remote: &Remote,
    shared: &Shared,
    stop: &CancellationToken,
    health: &Health,
) -> Ended {
    let prefix = remote.layout.etcd_prefix();
    let from = shared.read().revision + 1;
    let options =
        WatchOptions::new().with_range(prefix_end(prefix.as_bytes())).with_start_revision(from);
    let mut watch = remote.client().watch_client().max_decoding_message_size(MAX_MESSAGE);
    let opened = tokio::select! {
        () = stop.cancelled() => return Ended::Stopped,
        opened = tokio::time::timeout(super::REQUEST_TIMEOUT, watch.watch(prefix, Some(options))) => opened,
    };
    let mut stream = match opened {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Ended::Broken(format!("opening the watch: {e}")),
        Err(_) => return Ended::Broken("opening the watch: timed out".into()),
    };
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return Ended::Stopped,
            m = stream.message() => m,
        };
        let response = match message {
            Ok(Some(r)) => r,
            Ok(None) => return Ended::Broken("etcd ended the watch".into()),
            Err(e) => return Ended::Broken(e.to_string()),
        };
        if response.canceled() {
            if response.compact_revision() > 0 {
                return Ended::Compacted;
            }
            return Ended::Broken(format!(
                "etcd cancelled the watch: {}",
                response.cancel_reason()
            ));
        }
        if response.created() {
            health.set_up();
            continue;
        }
        let revision = response.header().map_or(0, etcd_client::ResponseHeader::revision);
        if response.events().is_empty() {
            continue;
        }
        let changes: Vec<Change> =
            response.events().iter().filter_map(|e| change(remote, e)).collect();
        apply(
            shared,
            changes,
            response
                .events()
                .last()
                .and_then(|e| e.kv())
                .map_or(revision, etcd_client::KeyValue::mod_revision),
        );
    }
}

/// One etcd event as the store takes it.
struct Change {
    revision: Revision,
    key: String,
    /// The new value; `None` for a deletion (or a value that no longer decodes).
    value: Option<Bytes>,
}

fn change(remote: &Remote, e: &etcd_client::Event) -> Option<Change> {
    let kv = e.kv()?;
    let revision = kv.mod_revision();
    match e.event_type() {
        EtcdEvent::Put => match remote.decode(kv.key(), kv.value(), revision) {
            Some((key, stored)) => Some(Change { revision, key, value: Some(stored.value) }),
            // A value that does not decode: the object is gone from this server's view.
            None => {
                remote.layout.from_etcd(kv.key()).map(|key| Change { revision, key, value: None })
            }
        },
        EtcdEvent::Delete => {
            remote.layout.from_etcd(kv.key()).map(|key| Change { revision, key, value: None })
        }
    }
}

/// Applies a response's changes under one lock, then tells those waiting for a revision.
fn apply(shared: &Shared, changes: Vec<Change>, last: Revision) {
    let mut state = shared.write();
    for c in changes {
        let prev = state.objects.get(&c.key).cloned();
        let event = match (c.value, prev) {
            (Some(value), prev) => {
                let kind = if prev.is_some() { EventType::Modified } else { EventType::Added };
                Event { revision: c.revision, key: c.key, kind, value, prev }
            }
            (None, Some(prev)) => Event {
                revision: c.revision,
                key: c.key,
                kind: EventType::Deleted,
                value: prev.value.clone(),
                prev: Some(prev),
            },
            (None, None) => continue,
        };
        state.apply(Arc::new(event), &shared.events);
    }
    state.revision = state.revision.max(last);
    let at = state.revision;
    drop(state);
    shared.visible.send_replace(at);
}

/// Replaces the store's state with a fresh load: the history is gone, and so are the watches
/// that were following it.
fn reload(shared: &Shared, records: Vec<crate::storage::Record>, revision: Revision) {
    let mut state = shared.write();
    state.objects = crate::storage::memory::objects(records);
    state.revision = revision;
    state.history.clear();
    state.oldest_watchable = revision;
    shared.generation.fetch_add(1, Ordering::SeqCst);
    drop(state);
    shared.visible.send_replace(revision);
    tracing::warn!(
        revision,
        "etcd: reloaded the store; open watches end and their clients list again"
    );
}
