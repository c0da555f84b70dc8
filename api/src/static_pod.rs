//! Static pods: how the kubelet names them and derives their UID.

use k8s_openapi::api::core::v1::Pod;
use sha2::{Digest, Sha256};

/// `<name>-<nodeName>`, the name a static pod (and its mirror pod) carries.
pub fn static_pod_name(name: &str, node_name: &str) -> String {
    format!("{name}-{}", node_name.to_lowercase())
}

/// A stable UID for a static pod: 32 hex digits of a hash over the pod as decoded and
/// defaulted (before the kubelet renames it), the node name and the manifest's path, so the same
/// manifest on the same node keeps its UID across kubelet restarts and any change gives a new one.
/// Upstream hashes the same inputs with a Go-specific object dump; the value differs, the
/// properties are the same.
pub fn static_pod_uid(pod: &Pod, node_name: &str, source: &str) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(pod).unwrap_or_default());
    h.update(format!("host:{node_name}"));
    h.update(format!("file:{source}"));
    h.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uids_are_stable_and_sensitive_to_every_input() {
        assert_eq!(static_pod_name("nginx-pod", "Node-1"), "nginx-pod-node-1");
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        let uid = static_pod_uid(&pod, "n1", "/etc/kubernetes/manifests/web.yaml");
        assert_eq!(uid.len(), 32);
        assert_eq!(uid, static_pod_uid(&pod, "n1", "/etc/kubernetes/manifests/web.yaml"));
        assert_ne!(uid, static_pod_uid(&pod, "n2", "/etc/kubernetes/manifests/web.yaml"));
        assert_ne!(uid, static_pod_uid(&pod, "n1", "/etc/kubernetes/manifests/web2.yaml"));
        pod.metadata.labels = Some([("a".to_string(), "b".to_string())].into_iter().collect());
        assert_ne!(uid, static_pod_uid(&pod, "n1", "/etc/kubernetes/manifests/web.yaml"));
    }
}
