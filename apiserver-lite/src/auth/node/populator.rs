//! Keeps the [`Graph`] current from the store, as upstream's `graph_populator.go` does from
//! informers: pods (once bound, until deleted) and persistent volumes, listed at one revision
//! and then followed through the store's own watch stream, in process. A watch that falls
//! behind lists again. Decisions never wait for this task: they read what it has applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    PersistentVolume, Pod, PodResourceClaimStatus, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::value::RawValue;
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

fn decode<'a, T: Deserialize<'a>>(key: &str, value: &'a [u8]) -> Option<T> {
    match serde_json::from_slice(value) {
        Ok(v) => Some(v),
        Err(e) => {
            // Stored objects were decoded on the way in; one that no longer does grants nothing.
            tracing::warn!(key, error = %e, "node graph: a stored object does not decode");
            None
        }
    }
}

/// The parts of a stored pod the graph reads. The rest (labels, managedFields, most of the
/// status) is skipped unbuilt, and the spec is kept as its text until `nodeName` says the pod
/// is bound: an unbound pod, as every pod is when created, adds nothing.
#[derive(Deserialize)]
struct StoredPod<'a> {
    #[serde(default)]
    metadata: StoredMeta,
    #[serde(borrow)]
    spec: Option<&'a RawValue>,
    status: Option<StoredStatus>,
}

#[derive(Default, Deserialize)]
struct StoredMeta {
    name: Option<String>,
    namespace: Option<String>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredStatus {
    resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Binding {
    node_name: Option<String>,
}

/// What a stored pod adds to the graph (see [`graph::pod_edges`]), decoding its spec only once
/// it is bound to a node.
fn stored_pod_edges(key: &str, value: &[u8]) -> Option<graph::PodEdges> {
    let stored: StoredPod<'_> = decode(key, value)?;
    let spec = stored.spec?;
    let binding: Binding = decode(key, spec.get().as_bytes())?;
    binding.node_name.filter(|n| !n.is_empty())?;
    let pod = Pod {
        metadata: ObjectMeta {
            name: stored.metadata.name,
            namespace: stored.metadata.namespace,
            annotations: stored.metadata.annotations,
            ..ObjectMeta::default()
        },
        spec: Some(decode::<PodSpec>(key, spec.get().as_bytes())?),
        status: stored.status.map(|s| PodStatus {
            resource_claim_statuses: s.resource_claim_statuses,
            ..PodStatus::default()
        }),
    };
    graph::pod_edges(&pod)
}

/// Applies one stored value (`None`: deleted) to `graph`.
pub fn apply(graph: &Graph, key: &str, value: Option<&[u8]>) {
    match parse_key(key) {
        Some(Key::Pod { namespace, name }) => {
            let edges = value.and_then(|v| stored_pod_edges(key, v));
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
                let edges = stored_pod_edges(key, &stored.value)?;
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
    use crate::auth::node::graph::{Kind, Vertex};

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

    fn stored(spec: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web", "namespace": "ns", "labels": {"app": "web"},
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": spec,
            "status": {
                "phase": "Pending",
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-x1"}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_stored_pod_adds_what_it_references_once_bound_and_nothing_before() {
        let spec = serde_json::json!({
            "containers": [{"name": "c", "image": "i",
                "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "settings"}},
                        {"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            "serviceAccountName": "robot",
        });
        let graph = Graph::default();
        apply(&graph, "/registry/core/pods/ns/web", Some(&stored(spec.clone())));
        assert_eq!(graph.size().0, 0, "an unbound pod adds nothing");

        let mut bound = spec;
        bound["nodeName"] = "node-a".into();
        let edges = stored_pod_edges("/registry/core/pods/ns/web", &stored(bound)).unwrap();
        assert_eq!(edges.node, "node-a");
        let want = [
            Vertex::new(Kind::ConfigMap, "ns", "settings"),
            Vertex::new(Kind::PersistentVolumeClaim, "ns", "web-data"),
            Vertex::new(Kind::ResourceClaim, "ns", "web-gpu-x1"),
            Vertex::new(Kind::Secret, "ns", "env-secret"),
            Vertex::new(Kind::ServiceAccount, "ns", "robot"),
        ];
        assert_eq!(edges.reaches, want.into_iter().collect());
    }

    #[test]
    fn a_stored_pod_whose_spec_does_not_decode_adds_nothing() {
        let spec = serde_json::json!({"nodeName": "node-a", "containers": "not a list"});
        assert!(stored_pod_edges("/registry/core/pods/ns/web", &stored(spec)).is_none());
        assert!(stored_pod_edges("/registry/core/pods/ns/web", b"{not json").is_none());
    }
}
