//! The committer: one thread that makes decided writes durable in batches (group commit).
//!
//! [`Store::mutate`](super::Store::mutate) decides under the writer lock and queues the write
//! in revision order; the committer takes everything queued (up to [`MAX_BATCH`]), appends it
//! in one backend transaction (one sync for the batch), applies it to the durable state,
//! broadcasts it and acknowledges each writer. If the append fails, the batch and every write
//! decided on top of it fail, and the writer's view resets to what is durable.

use std::sync::{Arc, mpsc};

use tokio::sync::oneshot;

use super::memory::{Event, Shared};
use super::{Backend, StorageError, Write};

/// The most writes made durable by one append.
pub const MAX_BATCH: usize = 512;

type Ack = oneshot::Sender<Result<(), StorageError>>;

#[derive(Debug)]
pub(super) enum Queued {
    /// A decided write, with the event watchers will see once it is durable.
    Write { write: Write, event: Arc<Event>, ack: Ack },
    /// Acknowledged once everything queued before it is durable.
    Barrier { ack: Ack },
}

/// Runs until every sender of `queue` is gone and the queue is empty.
pub(super) fn run(shared: &Shared, backend: &dyn Backend, queue: &mpsc::Receiver<Queued>) {
    while let Ok(first) = queue.recv() {
        let mut writes = Vec::new();
        let mut events = Vec::new();
        let mut acks = Vec::new();
        for item in std::iter::once(first).chain(queue.try_iter().take(MAX_BATCH - 1)) {
            match item {
                Queued::Write { write, event, ack } => {
                    writes.push(write);
                    events.push(event);
                    acks.push(ack);
                }
                Queued::Barrier { ack } => acks.push(ack),
            }
        }
        let appended = match events.first() {
            Some(first) => backend.append(first.revision, &writes),
            None => Ok(()),
        };
        match appended {
            Ok(()) => {
                let mut state = shared.write();
                for event in events {
                    state.apply(event, &shared.events);
                }
                shared.visible.send_replace(state.revision);
                drop(state);
                for ack in acks {
                    let _ = ack.send(Ok(()));
                }
            }
            Err(e) => fail(shared, queue, acks, &Arc::new(e)),
        }
    }
}

/// Fails a batch and everything decided after it, and resets the writer to the durable state.
fn fail(shared: &Shared, queue: &mpsc::Receiver<Queued>, acks: Vec<Ack>, e: &Arc<StorageError>) {
    tracing::error!(error = %e, "store: a batch of writes failed to commit");
    // Under the writer lock nothing new is decided, and all that was decided is queued.
    let mut pending = shared.writer.blocking_lock();
    let later = queue.try_iter().map(|item| match item {
        Queued::Write { ack, .. } | Queued::Barrier { ack } => ack,
    });
    for ack in acks.into_iter().chain(later) {
        let _ = ack.send(Err(StorageError::Batch(e.clone())));
    }
    pending.overlay.clear();
    pending.next = shared.read().revision + 1;
}
