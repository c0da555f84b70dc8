//! The history a store starts with: the events etcd still keeps before the revision the store
//! was loaded at (up to [`HISTORY`](crate::storage::memory::HISTORY)), read back with their
//! previous values. A client watching from a resourceVersion it got before this apiserver
//! restarted (or from another apiserver) resumes without listing again, as long as etcd has
//! not compacted that far.

use std::sync::Arc;

use etcd_client::{EventType as EtcdEvent, WatchOptions};

use super::{MAX_MESSAGE, REQUEST_TIMEOUT, Remote, prefix_end};
use crate::storage::memory::{Event, EventType, HISTORY};
use crate::storage::{Revision, StorageError, Stored};

/// The kept events after `from` up to `loaded` (both revisions), oldest first, and the revision
/// a watch may resume after (`from`, or later if etcd compacted past it).
///
/// etcd's watch has no end; to know when it has sent everything up to `loaded` (the last event
/// under the prefix may be older, and a progress notification may overtake events in etcd
/// 3.4), a marker is written first: its event comes after every one wanted.
pub async fn read(
    remote: &Remote,
    loaded: Revision,
) -> Result<(Vec<Arc<Event>>, Revision), StorageError> {
    let end = remote.mark().await?;
    let from = (loaded - i64::try_from(HISTORY).unwrap_or(i64::MAX)).max(0);
    match read_after(remote, from, loaded, end).await? {
        Ok(events) => Ok((events, from)),
        // Compacted: start at the oldest revision etcd keeps.
        Err(compacted) if compacted > from => {
            match read_after(remote, compacted - 1, loaded, end).await? {
                Ok(events) => Ok((events, compacted - 1)),
                Err(_) => Ok((Vec::new(), loaded)),
            }
        }
        Err(_) => Ok((Vec::new(), loaded)),
    }
}

/// `Ok(events)` in `(after, until]` (read until the event at `end`, the marker's), or
/// `Err(compact revision)` if etcd no longer has them.
async fn read_after(
    remote: &Remote,
    after: Revision,
    until: Revision,
    end: Revision,
) -> Result<Result<Vec<Arc<Event>>, Revision>, StorageError> {
    if after >= until {
        return Ok(Ok(Vec::new()));
    }
    let prefix = remote.layout.etcd_prefix();
    let options = WatchOptions::new()
        .with_range(prefix_end(prefix.as_bytes()))
        .with_start_revision(after + 1)
        .with_prev_key();
    let mut client = remote.client().watch_client().max_decoding_message_size(MAX_MESSAGE);
    let timed_out = |_| StorageError::Unreachable {
        servers: remote.servers().into(),
        reason: "reading history: timed out".into(),
    };
    let mut stream = tokio::time::timeout(REQUEST_TIMEOUT, client.watch(prefix, Some(options)))
        .await
        .map_err(timed_out)?
        .map_err(|e| remote.error(e))?;
    let mut events = Vec::new();
    loop {
        let message = tokio::time::timeout(REQUEST_TIMEOUT, stream.message())
            .await
            .map_err(timed_out)?
            .map_err(|e| remote.error(e))?;
        let Some(response) = message else { break };
        if response.canceled() {
            return Ok(Err(response.compact_revision()));
        }
        let mut done = false;
        for e in response.events() {
            let Some(kv) = e.kv() else { continue };
            done |= kv.mod_revision() >= end;
            if kv.mod_revision() > until {
                continue;
            }
            if let Some(event) = historical(remote, e) {
                events.push(Arc::new(event));
            }
        }
        if done {
            break;
        }
    }
    Ok(Ok(events))
}

/// A past etcd event as a watcher would have seen it.
fn historical(remote: &Remote, e: &etcd_client::Event) -> Option<Event> {
    let kv = e.kv()?;
    let revision = kv.mod_revision();
    let prev = e
        .prev_kv()
        .and_then(|p| remote.decode(p.key(), p.value(), p.mod_revision()))
        .map(|(_, s)| s);
    match e.event_type() {
        EtcdEvent::Put => {
            let (key, Stored { value, .. }) = remote.decode(kv.key(), kv.value(), revision)?;
            let kind = if prev.is_some() { EventType::Modified } else { EventType::Added };
            Some(Event { revision, key, kind, value, prev })
        }
        EtcdEvent::Delete => {
            let key = remote.layout.from_etcd(kv.key())?;
            let prev = prev?;
            Some(Event {
                revision,
                key,
                kind: EventType::Deleted,
                value: prev.value.clone(),
                prev: Some(prev),
            })
        }
    }
}
