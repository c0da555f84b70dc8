//! The garbage collector's object graph, as upstream's `GraphBuilder`'s `uidToNode`: a node per
//! object seen by the monitors (or named as an owner), edges from owners to dependents by UID.
//! [`Graph::observe`] applies one change and says which objects to look at (upstream's
//! `processGraphChanges`): dependents whose owner went away, owners being deleted in the
//! foreground whose dependents changed, objects to orphan. Pure: no I/O.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The finalizer of a deletion with `propagationPolicy: Foreground`.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of a deletion with `propagationPolicy: Orphan`.
pub const ORPHAN: &str = "orphan";

/// Which object: what a delete, get or patch needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjRef {
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for ObjRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns =
            if self.namespace.is_empty() { String::new() } else { format!("{}/", self.namespace) };
        write!(f, "{} {}{} ({})", self.kind, ns, self.name, self.uid)
    }
}

/// One object as the graph knows it.
#[derive(Debug, Clone)]
pub struct Node {
    pub identity: ObjRef,
    pub owners: Vec<OwnerReference>,
    /// It has a deletionTimestamp.
    pub being_deleted: bool,
    /// Deleted in the foreground: waits for its blocking dependents.
    pub deleting_dependents: bool,
    pub orphaning: bool,
}

/// What an informer saw.
#[derive(Debug, Clone)]
pub enum Event {
    Upsert { identity: ObjRef, meta: Box<ObjectMeta> },
    Delete { identity: ObjRef },
}

/// What to look at after a change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// UIDs for attempt-to-delete.
    pub delete: BTreeSet<String>,
    /// UIDs for attempt-to-orphan.
    pub orphan: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    /// Owner UID → the UIDs of objects referring to it (whether or not the owner is seen).
    edges: HashMap<String, BTreeSet<String>>,
}

fn has_finalizer(meta: &ObjectMeta, f: &str) -> bool {
    meta.finalizers.iter().flatten().any(|x| x == f)
}

impl Graph {
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The objects referring to `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<&Node> {
        self.edges.get(uid).into_iter().flatten().filter_map(|d| self.nodes.get(d)).collect()
    }

    /// The dependents of `uid` whose reference to it blocks its deletion.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<&Node> {
        self.edges
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|d| self.nodes.get(d))
            .filter(|d| {
                d.owners.iter().any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
            })
            .collect()
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.edges.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.edges.remove(owner);
            }
        }
    }

    /// Applies one change.
    pub fn observe(&mut self, event: Event) -> Work {
        let mut work = Work::default();
        match event {
            Event::Upsert { identity, meta } => {
                let uid = identity.uid.clone();
                let owners = meta.owner_references.clone().unwrap_or_default();
                let old_owners = self.nodes.get(&uid).map(|n| n.owners.clone()).unwrap_or_default();
                let node = self.nodes.entry(uid.clone()).or_insert_with(|| Node {
                    identity: identity.clone(),
                    owners: Vec::new(),
                    being_deleted: false,
                    deleting_dependents: false,
                    orphaning: false,
                });
                node.identity = identity;
                node.owners.clone_from(&owners);
                let was_deleting_dependents = node.deleting_dependents;
                node.being_deleted = meta.deletion_timestamp.is_some();
                node.deleting_dependents = node.being_deleted && has_finalizer(&meta, FOREGROUND);
                node.orphaning = node.being_deleted && has_finalizer(&meta, ORPHAN);
                let (deleting_dependents, orphaning) = (node.deleting_dependents, node.orphaning);
                let dependents = self.edges.get(&uid).cloned().unwrap_or_default();
                // Edges: drop the ones gone, add the new ones.
                for r in old_owners.iter().filter(|r| !owners.iter().any(|o| o.uid == r.uid)) {
                    self.unlink(&r.uid, &uid);
                    if self.nodes.get(&r.uid).is_some_and(|o| o.deleting_dependents) {
                        work.delete.insert(r.uid.clone());
                    }
                }
                for r in &owners {
                    self.edges.entry(r.uid.clone()).or_default().insert(uid.clone());
                    match self.nodes.get(&r.uid) {
                        Some(o) => {
                            if o.deleting_dependents {
                                work.delete.insert(uid.clone());
                            }
                        }
                        // An owner not (yet) seen: the attempt checks the apiserver.
                        None => {
                            work.delete.insert(uid.clone());
                        }
                    }
                    // A reference that stopped blocking lets a foreground owner go on.
                    let was_blocking = old_owners
                        .iter()
                        .any(|o| o.uid == r.uid && o.block_owner_deletion == Some(true));
                    if was_blocking && r.block_owner_deletion != Some(true) {
                        work.delete.insert(r.uid.clone());
                    }
                }
                // Owners whose UID changed under the same name are dangling: the attempt sees it.
                if orphaning {
                    work.orphan.insert(uid.clone());
                }
                if deleting_dependents {
                    if !was_deleting_dependents {
                        work.delete.extend(dependents);
                    }
                    work.delete.insert(uid);
                }
            }
            Event::Delete { identity } => {
                let Some(node) = self.nodes.remove(&identity.uid) else { return work };
                work.delete.extend(self.edges.get(&identity.uid).into_iter().flatten().cloned());
                for r in &node.owners {
                    self.unlink(&r.uid, &identity.uid);
                    if self.nodes.get(&r.uid).is_some_and(|o| o.deleting_dependents) {
                        work.delete.insert(r.uid.clone());
                    }
                }
            }
        }
        work
    }
}
