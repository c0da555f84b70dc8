//! The kubelet's events in the apiserver, when it is joined to one: each pod event becomes a
//! core/v1 Event from `source.component: kubelet`, `source.host: <node>`, about the pod
//! (`involvedObject`: `v1` `Pod`, namespace, name, UID, the container's `fieldPath`), handed to
//! the shared `record` writer, which correlates, counts and writes it without the caller ever
//! waiting. Events about the node name it as upstream's `nodeRef` does. Manifest files have no
//! API object: their events stay local.
//!
//! A static pod's events name it by its own UID, as upstream's kubelet does: its mirror pod has
//! the same namespace and name, and its `kubernetes.io/config.mirror` annotation is that UID
//! (the static pod's config hash), which is how `kubectl describe pod <name>-<node>` finds a
//! mirror pod's events. So they show on the mirror, including those recorded before the mirror
//! existed, and nothing waits for it. (Naming the mirror's own apiserver UID instead would hide
//! them from `describe`, which selects by the annotation.)

use k8s_openapi::api::core::v1::ObjectReference;
use record::{EventQueue, EventRecorder, Source};

use super::reference::PodRef;

/// The component name on the kubelet's events, as upstream's.
pub const COMPONENT: &str = "kubelet";

/// The recorder of the kubelet of `node` and the queue its writer drains.
pub fn channel(node: &str) -> (EventRecorder, EventQueue) {
    let source = Source { component: COMPONENT.into(), host: Some(node.into()) };
    record::channel(source, record::QUEUE_CAPACITY)
}

/// The pod as an event's `involvedObject`.
pub fn object_reference(pod: &PodRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(pod.namespace.clone()),
        name: Some(pod.name.clone()),
        uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
        field_path: pod.field_path.clone(),
        ..ObjectReference::default()
    }
}

/// The kubelet's node as an event's `involvedObject`, as upstream's `nodeRef`: kind `Node`,
/// the name, and the name again as the UID.
pub fn node_reference(name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".into()),
        name: Some(name.into()),
        uid: Some(name.into()),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests;
