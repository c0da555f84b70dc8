//! The garbage collector, as upstream's `pkg/controller/garbagecollector`: deletes objects whose
//! owners are gone and carries out foreground and orphan deletions.
//!
//! - [`monitors`]: discovery finds every kind the apiserver serves (list, watch, delete; events
//!   excepted, as upstream), one metadata watch each, re-discovered periodically.
//! - [`graph`]: the owner → dependents graph those watches build (pure), and what to look at
//!   after each change.
//! - [`client`]: get, delete and patch on any kind.
//! - Here, the two work queues' syncs: [`GarbageCollector::attempt_to_delete`] (upstream's
//!   `attemptToDeleteItem`: an object whose owners are all gone or dangling is deleted, with
//!   the policy its own finalizers ask for; one whose remaining owners are being deleted in the
//!   foreground is deleted in the foreground if it has dependents itself; dangling references
//!   next to a live owner are removed; an owner deleted in the foreground loses its
//!   `foregroundDeletion` finalizer once no dependent blocks it) and
//!   [`GarbageCollector::attempt_to_orphan`] (the owner's references are removed from its
//!   dependents, then its `orphan` finalizer).
//!
//! An owner reference to a kind that is not served fails the attempt, which the queue retries
//! with its per-item exponential back-off (never hot). A cycle of foreground owners does not
//! wait forever: an object whose own dependents wait for it stops blocking its owner.

pub mod client;
pub mod graph;
pub mod monitors;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::json;

use crate::client::Propagation;
use crate::key::Key;
use crate::workqueue::WorkQueue;
use client::{GcClient, GcError};
use graph::{Event, FOREGROUND, Graph, ORPHAN, ObjRef};

/// The attempt-to-delete queue's name (upstream's).
pub const DELETE_QUEUE: &str = "garbage_collector_attempt_to_delete";
/// The attempt-to-orphan queue's name (upstream's).
pub const ORPHAN_QUEUE: &str = "garbage_collector_attempt_to_orphan";

pub struct GarbageCollector<C> {
    pub client: Arc<C>,
    pub graph: Mutex<Graph>,
    /// Keys are `Key::cluster(uid)`.
    pub delete_queue: Arc<WorkQueue<Key>>,
    pub orphan_queue: Arc<WorkQueue<Key>>,
    /// Owner UIDs confirmed absent (upstream's `absentOwnerCache`), bounded.
    absent: Mutex<HashSet<String>>,
}

impl<C> std::fmt::Debug for GarbageCollector<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GarbageCollector").finish_non_exhaustive()
    }
}

/// How many absent owners are remembered (upstream's cache holds 500).
const ABSENT_CACHE: usize = 500;

fn has(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// What an owner reference turned out to be.
enum OwnerState {
    Solid,
    Dangling,
    /// Being deleted in the foreground: waiting for its dependents.
    Waiting,
}

impl<C: GcClient> GarbageCollector<C> {
    pub fn new(
        client: Arc<C>,
        delete_queue: Arc<WorkQueue<Key>>,
        orphan_queue: Arc<WorkQueue<Key>>,
    ) -> Self {
        Self {
            client,
            graph: Mutex::default(),
            delete_queue,
            orphan_queue,
            absent: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Feeds one watch event into the graph and queues what it calls for.
    pub fn observe(&self, event: Event) {
        let work = self.lock().observe(event);
        for uid in work.delete {
            self.delete_queue.add(Key::cluster(&uid));
        }
        for uid in work.orphan {
            self.orphan_queue.add(Key::cluster(&uid));
        }
    }

    /// The owner an owner reference names, in the dependent's namespace when namespaced.
    fn owner_ref(&self, of: &ObjRef, r: &OwnerReference) -> Result<ObjRef, GcError> {
        let Some(namespaced) = self.client.namespaced(&r.api_version, &r.kind) else {
            return Err(GcError::UnknownKind {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                of: of.to_string(),
            });
        };
        Ok(ObjRef {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: if namespaced { of.namespace.clone() } else { String::new() },
            name: r.name.clone(),
            uid: r.uid.clone(),
        })
    }

    async fn classify(&self, of: &ObjRef, r: &OwnerReference) -> Result<OwnerState, GcError> {
        if self.absent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&r.uid) {
            return Ok(OwnerState::Dangling);
        }
        let owner = self.owner_ref(of, r)?;
        let state = match self.client.get(&owner).await? {
            None => OwnerState::Dangling,
            Some(m) if m.uid.as_deref() != Some(r.uid.as_str()) => OwnerState::Dangling,
            Some(m) if m.deletion_timestamp.is_some() && has(&m, FOREGROUND) => OwnerState::Waiting,
            Some(_) => OwnerState::Solid,
        };
        if matches!(state, OwnerState::Dangling) {
            let mut absent = self.absent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if absent.len() >= ABSENT_CACHE {
                absent.clear();
            }
            absent.insert(r.uid.clone());
        }
        Ok(state)
    }

    /// Upstream's `attemptToDeleteItem`.
    pub async fn attempt_to_delete(&self, uid: &str) -> Result<(), GcError> {
        let Some(node) = self.lock().get(uid).cloned() else { return Ok(()) };
        if node.being_deleted && !node.deleting_dependents {
            return Ok(());
        }
        let item = &node.identity;
        let Some(latest) = self.client.get(item).await? else { return Ok(()) };
        if latest.uid.as_deref() != Some(uid) {
            return Ok(());
        }
        if latest.deletion_timestamp.is_some() && has(&latest, FOREGROUND) {
            return self.process_deleting_dependents(item, &latest).await;
        }
        let owners = latest.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return Ok(());
        }
        let (mut solid, mut dangling, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
        for r in &owners {
            match self.classify(item, r).await? {
                OwnerState::Solid => solid.push(r.uid.clone()),
                OwnerState::Dangling => dangling.push(r.uid.clone()),
                OwnerState::Waiting => waiting.push(r.uid.clone()),
            }
        }
        tracing::debug!(object = %item, ?solid, ?dangling, ?waiting, "classified owner references");
        if !solid.is_empty() {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            // Keep the live owners; drop dangling references; stop blocking owners that wait.
            let refs = unblocked(&owners, &waiting, &dangling);
            tracing::info!(object = %item, ?dangling, ?waiting, "removing dangling owner references and unblocking waiting owners");
            return self.set_owner_references(item, &latest, refs).await;
        }
        let has_dependents = !self.lock().dependents(uid).is_empty();
        if !waiting.is_empty() && has_dependents {
            let cycle = self.lock().dependents(uid).iter().any(|d| d.deleting_dependents);
            if cycle {
                tracing::info!(object = %item, "its dependents wait for it while it waits for its owner: unblocking the owner");
                self.set_owner_references(item, &latest, unblocked(&owners, &waiting, &[])).await?;
            }
            tracing::info!(object = %item, "deleting in the foreground: its owner waits for its dependents");
            return self.client.delete(item, Propagation::Foreground).await;
        }
        let policy = if has(&latest, ORPHAN) {
            Propagation::Orphan
        } else if has(&latest, FOREGROUND) {
            Propagation::Foreground
        } else {
            Propagation::Background
        };
        tracing::info!(object = %item, ?policy, "deleting: no owner left");
        self.client.delete(item, policy).await
    }

    /// An owner deleted in the foreground: its blocking dependents are deleted first, then its
    /// finalizer goes.
    async fn process_deleting_dependents(
        &self,
        item: &ObjRef,
        latest: &ObjectMeta,
    ) -> Result<(), GcError> {
        let blocking: Vec<graph::Node> =
            self.lock().blocking_dependents(&item.uid).into_iter().cloned().collect();
        if blocking.is_empty() {
            tracing::info!(object = %item, "no dependent blocks it any more: removing the foregroundDeletion finalizer");
            return self.remove_finalizer(item, latest, FOREGROUND).await;
        }
        for d in blocking {
            if !d.being_deleted || d.deleting_dependents {
                self.delete_queue.add(Key::cluster(&d.identity.uid));
            }
        }
        Ok(())
    }

    /// Upstream's `attemptToOrphanWorker`: references to the owner go, then its finalizer.
    pub async fn attempt_to_orphan(&self, uid: &str) -> Result<(), GcError> {
        let Some(node) = self.lock().get(uid).cloned() else { return Ok(()) };
        let dependents: Vec<ObjRef> =
            self.lock().dependents(uid).into_iter().map(|d| d.identity.clone()).collect();
        for d in &dependents {
            let Some(latest) = self.client.get(d).await? else { continue };
            let owners = latest.owner_references.clone().unwrap_or_default();
            if !owners.iter().any(|r| r.uid == uid) {
                continue;
            }
            let rest: Vec<OwnerReference> = owners.into_iter().filter(|r| r.uid != uid).collect();
            tracing::info!(object = %d, owner = %node.identity, "orphaning");
            self.set_owner_references(d, &latest, rest).await?;
        }
        let Some(latest) = self.client.get(&node.identity).await? else { return Ok(()) };
        if latest.uid.as_deref() != Some(uid) || !has(&latest, ORPHAN) {
            return Ok(());
        }
        self.remove_finalizer(&node.identity, &latest, ORPHAN).await
    }

    async fn set_owner_references(
        &self,
        r: &ObjRef,
        latest: &ObjectMeta,
        refs: Vec<OwnerReference>,
    ) -> Result<(), GcError> {
        let refs = if refs.is_empty() { json!(null) } else { json!(refs) };
        self.client
            .patch_meta(
                r,
                json!({"ownerReferences": refs, "resourceVersion": latest.resource_version}),
            )
            .await
    }

    async fn remove_finalizer(
        &self,
        r: &ObjRef,
        latest: &ObjectMeta,
        finalizer: &str,
    ) -> Result<(), GcError> {
        let rest: Vec<&String> =
            latest.finalizers.iter().flatten().filter(|f| *f != finalizer).collect();
        let rest = if rest.is_empty() { json!(null) } else { json!(rest) };
        self.client
            .patch_meta(r, json!({"finalizers": rest, "resourceVersion": latest.resource_version}))
            .await
    }
}

/// `owners` without the `dangling` ones, with `blockOwnerDeletion: false` on the `waiting` ones.
fn unblocked(
    owners: &[OwnerReference],
    waiting: &[String],
    dangling: &[String],
) -> Vec<OwnerReference> {
    owners
        .iter()
        .filter(|r| !dangling.contains(&r.uid))
        .map(|r| {
            let mut r = r.clone();
            if waiting.contains(&r.uid) {
                r.block_owner_deletion = Some(false);
            }
            r
        })
        .collect()
}

/// The attempt-to-delete worker's sync.
#[derive(Debug)]
pub struct AttemptToDelete<C>(pub Arc<GarbageCollector<C>>);
/// The attempt-to-orphan worker's sync.
#[derive(Debug)]
pub struct AttemptToOrphan<C>(pub Arc<GarbageCollector<C>>);

impl<C: GcClient> crate::worker::Reconcile for AttemptToDelete<C> {
    type Error = GcError;
    async fn sync(&self, key: &Key) -> Result<(), GcError> {
        self.0.attempt_to_delete(&key.name).await
    }
}

impl<C: GcClient> crate::worker::Reconcile for AttemptToOrphan<C> {
    type Error = GcError;
    async fn sync(&self, key: &Key) -> Result<(), GcError> {
        self.0.attempt_to_orphan(&key.name).await
    }
}

#[cfg(test)]
mod tests;
