//! Keeps the [`Graph`] current from the store, as upstream's `graph_populator.go` does from
//! informers: pods (once bound, until deleted) and persistent volumes, listed at one revision
//! and then followed through the store's own watch stream, in process. A watch that falls
//! behind lists again. Decisions never wait for this task: they read what it has applied.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::graph::{self, Graph};
use crate::storage::memory::WatchEnd;
use crate::storage::{EventType, Revision, Store};

/// Where pods are stored (`ResourceType::prefix` of core `pods`).
pub const PODS: &str = "/registry/core/pods/";
/// Where persistent volumes are stored, by the same scheme (cluster-scoped: no namespace).
pub const PVS: &str = "/registry/core/persistentvolumes/";
/// The one prefix the watch follows; events under it for other kinds are skipped.
const CORE: &str = "/registry/core/";

/// What a storage key holds, for the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key<'a> {
    Pod { namespace: &'a str, name: &'a str },
    Pv { name: &'a str },
}

/// The pod or volume a key names; `None` for every other key.
pub fn parse_key(key: &str) -> Option<Key<'_>> {
    if let Some(rest) = key.strip_prefix(PODS) {
        let (namespace, name) = rest.split_once('/')?;
        return Some(Key::Pod { namespace, name });
    }
    let name = key.strip_prefix(PVS)?;
    (!name.is_empty() && !name.contains('/')).then_some(Key::Pv { name })
}

fn decode<T: DeserializeOwned>(key: &str, value: &[u8]) -> Option<T> {
    match serde_json::from_slice(value) {
        Ok(v) => Some(v),
        Err(e) => {
            // Stored objects were decoded on the way in; one that no longer does grants nothing.
            tracing::warn!(key, error = %e, "node graph: a stored object does not decode");
            None
        }
    }
}

/// Applies one stored value (`None`: deleted) to `graph`.
pub fn apply(graph: &Graph, key: &str, value: Option<&[u8]>) {
    match parse_key(key) {
        Some(Key::Pod { namespace, name }) => {
            let edges =
                value.and_then(|v| decode::<Pod>(key, v)).and_then(|p| graph::pod_edges(&p));
            graph.set_pod(namespace, name, edges);
        }
        Some(Key::Pv { name }) => {
            let refs = value
                .and_then(|v| decode::<PersistentVolume>(key, v))
                .and_then(|pv| graph::pv_edges(&pv));
            graph.set_pv(name, refs);
        }
        None => {}
    }
}

/// Rebuilds `graph` from the store as of its current revision; returns that revision.
pub fn load(graph: &Graph, store: &Store) -> Revision {
    loop {
        let revision = store.revision();
        let (Ok(pods), Ok(pvs)) =
            (store.list_at(PODS, None, revision), store.list_at(PVS, None, revision))
        else {
            // Only a revision older than the kept history fails, and this one is current.
            continue;
        };
        let pods = pods
            .iter()
            .filter_map(|(key, stored)| {
                let Some(Key::Pod { namespace, name }) = parse_key(key) else { return None };
                let edges = graph::pod_edges(&decode::<Pod>(key, &stored.value)?)?;
                Some(((namespace.to_string(), name.to_string()), edges))
            })
            .collect();
        let pvs = pvs
            .iter()
            .filter_map(|(key, stored)| {
                let Some(Key::Pv { name }) = parse_key(key) else { return None };
                let refs = graph::pv_edges(&decode::<PersistentVolume>(key, &stored.value)?)?;
                Some((name.to_string(), refs))
            })
            .collect();
        graph.replace(pods, pvs);
        return revision;
    }
}

/// Follows the store from `from` (what [`load`] returned before the server started serving),
/// listing again whenever the watch falls behind, until `stop`.
pub async fn run(graph: Arc<Graph>, store: Arc<Store>, from: Revision, stop: CancellationToken) {
    let mut revision = from;
    loop {
        let mut watch = match store.watch(CORE, Some(revision)) {
            Ok(w) => w,
            Err(e) => {
                tracing::info!(error = %e, "node graph: the watch expired; listing again");
                revision = load(&graph, &store);
                continue;
            }
        };
        for e in watch.initial.drain(..) {
            apply(&graph, &e.key, value_of(&e));
        }
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = watch.next() => e,
            };
            match event {
                Ok(e) => apply(&graph, &e.key, value_of(&e)),
                Err(end @ (WatchEnd::Lagged | WatchEnd::Reloaded)) => {
                    tracing::info!(?end, "node graph: the watch ended; listing again");
                    revision = load(&graph, &store);
                    break;
                }
                Err(WatchEnd::Closed) => return,
            }
        }
    }
}

fn value_of(e: &crate::storage::Event) -> Option<&[u8]> {
    match e.kind {
        EventType::Deleted => None,
        _ => Some(&e.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_pods_and_volumes_and_nothing_else() {
        assert_eq!(
            parse_key("/registry/core/pods/default/web"),
            Some(Key::Pod { namespace: "default", name: "web" })
        );
        assert_eq!(
            parse_key("/registry/core/persistentvolumes/pv-1"),
            Some(Key::Pv { name: "pv-1" })
        );
        for other in [
            "/registry/core/secrets/default/s",
            "/registry/core/pods/no-name",
            "/registry/core/persistentvolumes/",
            "/registry/apps/deployments/default/web",
        ] {
            assert_eq!(parse_key(other), None, "{other}");
        }
    }
}
