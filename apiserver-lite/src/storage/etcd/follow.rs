//! Following etcd: one watch on the prefix, from the revision the store holds, applying each
//! event to the store in revision order (its own writes and other apiservers' alike), and
//! answering progress requests so a consistent read knows when it has caught up. A broken
//! watch is re-opened from where the store is; one whose revision was compacted away reloads
//! the store and ends the watches that were open (their clients list again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{EventType as EtcdEvent, WatchOptions};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::compact::Round;
use super::{MAX_MESSAGE, Remote, prefix_end};
use crate::storage::memory::{Event, EventType, Shared};
use crate::storage::{Revision, StorageError, Stored};

/// How long a consistent read waits for the store to reach etcd's revision.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a consistent read waits for events before it asks etcd for progress.
pub const PROGRESS_AFTER: Duration = Duration::from_millis(20);
/// The longest pause between attempts to re-open a broken watch.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The store's link to etcd: the remote, the task following it, and its health.
#[derive(Debug)]
pub struct Following {
    pub(super) remote: Remote,
    stop: CancellationToken,
    health: Arc<Health>,
    /// Asks the follower for a progress notification (etcd's current revision, once every
    /// event up to it has been delivered).
    progress: Arc<Notify>,
    pub(super) round: tokio::sync::Mutex<Round>,
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

/// Starts following etcd from just after `revision` (what the store was loaded at).
pub(in crate::storage) fn start(
    remote: Remote,
    shared: Arc<Shared>,
    revision: Revision,
) -> Following {
    let stop = CancellationToken::new();
    let health = Arc::new(Health::default());
    let progress = Arc::new(Notify::new());
    let _ = revision;
    tokio::spawn(run(remote.clone(), shared, stop.clone(), health.clone(), progress.clone()));
    Following { remote, stop, health, progress, round: tokio::sync::Mutex::new(Round::default()) }
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
        wait_for(shared, want, SYNC_TIMEOUT, Some(&self.progress)).await
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }
}

/// Waits until the store's visible revision reaches `want`. With `progress`, asks for a
/// progress notification when the events alone have not brought it there after
/// [`PROGRESS_AFTER`] (etcd's latest revision may be a write outside the prefix, which no event
/// brings; asked at once, a notification can overtake events still in flight in etcd 3.4).
pub(super) async fn wait_for(
    shared: &Shared,
    want: Revision,
    within: Duration,
    progress: Option<&Notify>,
) -> Result<(), StorageError> {
    let mut visible = shared.visible.subscribe();
    if *visible.borrow_and_update() >= want {
        return Ok(());
    }
    if let Some(p) = progress {
        match tokio::time::timeout(PROGRESS_AFTER, visible.wait_for(|at| *at >= want)).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(_)) => return Err(StorageError::Closed),
            Err(_) => p.notify_one(),
        }
    }
    match tokio::time::timeout(within, visible.wait_for(|at| *at >= want)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) => Err(StorageError::Closed),
        Err(_) => Err(StorageError::Lagging { wanted: want, at: *shared.visible.borrow() }),
    }
}

/// Why one watch ended.
enum Ended {
    Stopped,
    Broken(String),
    /// etcd no longer has the revision the store is at.
    Compacted,
}

async fn run(
    remote: Remote,
    shared: Arc<Shared>,
    stop: CancellationToken,
    health: Arc<Health>,
    progress: Arc<Notify>,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let ended = follow(&remote, &shared, &stop, &health, &progress).await;
        match ended {
            Ended::Stopped => return,
            Ended::Broken(reason) => {
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
    progress: &Notify,
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
            () = progress.notified() => {
                if let Err(e) = stream.request_progress().await {
                    return Ended::Broken(format!("asking for progress: {e}"));
                }
                continue;
            }
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
            // A progress notification: every event up to `revision` has been delivered.
            advance(shared, revision);
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
        let before = state.revision;
        state.apply(Arc::new(event), &shared.events);
        // A progress notification may have gone ahead; the revision never goes back.
        state.revision = state.revision.max(before);
    }
    state.revision = state.revision.max(last);
    let at = state.revision;
    drop(state);
    shared.visible.send_replace(at);
}

/// A progress notification: nothing more under the prefix up to `revision`.
fn advance(shared: &Shared, revision: Revision) {
    let mut state = shared.write();
    if revision <= state.revision {
        return;
    }
    state.revision = revision;
    drop(state);
    shared.visible.send_replace(revision);
}

/// Replaces the store's state with a fresh load: the history is gone, and so are the watches
/// that were following it.
fn reload(shared: &Shared, records: Vec<crate::storage::Record>, revision: Revision) {
    let mut state = shared.write();
    state.objects = records
        .into_iter()
        .map(|r| (r.key, Stored { value: r.value, revision: r.revision }))
        .collect();
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
