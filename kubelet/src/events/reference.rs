//! What an event is about, as a typed reference: a pod (or one of its containers, upstream's
//! `fieldPath` `spec.containers{<name>}`), the kubelet's node (image garbage collection), or a
//! file in the static pod directory, which has no API object and so stays local.

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

/// The object an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectRef {
    Pod(PodRef),
    /// The kubelet's own node, by name (upstream's `nodeRef`, whose UID is the name too).
    Node(String),
    /// A manifest file (or the manifest directory itself).
    File(PathBuf),
}

/// A pod, or a container of it, as upstream's `ObjectReference` (`apiVersion: v1`, `kind: Pod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.containers{<name>}`, `spec.initContainers{<name>}` or
    /// `spec.ephemeralContainers{<name>}` for an event about a container.
    pub field_path: Option<String>,
}

impl PodRef {
    /// The pod itself.
    pub fn of(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        Self {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            field_path: None,
        }
    }

    /// A container of the pod, by name, as upstream's `GenerateContainerRef`.
    pub fn container(pod: &Pod, container: &str) -> Self {
        Self { field_path: Some(field_path(pod, container)), ..Self::of(pod) }
    }
}

/// Upstream's `fieldPath`: where the container is in the spec. A name the spec does not hold
/// (a container the runtime has and the spec no longer does) reads as upstream's fallback.
pub fn field_path(pod: &Pod, container: &str) -> String {
    let spec = pod.spec.as_ref();
    let named = |cs: Option<&Vec<k8s_openapi::api::core::v1::Container>>| {
        cs.is_some_and(|cs| cs.iter().any(|c| c.name == container))
    };
    if named(spec.map(|s| &s.containers)) {
        format!("spec.containers{{{container}}}")
    } else if named(spec.and_then(|s| s.init_containers.as_ref())) {
        format!("spec.initContainers{{{container}}}")
    } else if spec
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.name == container))
    {
        format!("spec.ephemeralContainers{{{container}}}")
    } else {
        format!("implicitly required container {container}")
    }
}

impl ObjectRef {
    pub fn pod(pod: &Pod) -> Self {
        Self::Pod(PodRef::of(pod))
    }

    pub fn container(pod: &Pod, container: &str) -> Self {
        Self::Pod(PodRef::container(pod, container))
    }

    pub fn file(path: &Path) -> Self {
        Self::File(path.to_path_buf())
    }

    pub fn field_path(&self) -> Option<&str> {
        match self {
            Self::Pod(p) => p.field_path.as_deref(),
            Self::Node(_) | Self::File(_) => None,
        }
    }
}

/// `pod/<namespace>/<name>`, `node/<name>` or `file/<path>`: the `object` of `/events` entries.
impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pod(p) => write!(f, "pod/{}/{}", p.namespace, p.name),
            Self::Node(name) => write!(f, "node/{name}"),
            Self::File(path) => write!(f, "file/{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-n", "namespace": "prod", "uid": "u1"},
            "spec": {
                "initContainers": [{"name": "setup"}],
                "containers": [{"name": "app"}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn container_references_carry_upstreams_field_paths() {
        let p = pod();
        assert_eq!(
            PodRef::container(&p, "app").field_path.as_deref(),
            Some("spec.containers{app}")
        );
        assert_eq!(
            PodRef::container(&p, "setup").field_path.as_deref(),
            Some("spec.initContainers{setup}")
        );
        assert_eq!(
            PodRef::container(&p, "gone").field_path.as_deref(),
            Some("implicitly required container gone")
        );
        let r = ObjectRef::container(&p, "app");
        assert_eq!(r.to_string(), "pod/prod/web-n");
        assert_eq!(r.field_path(), Some("spec.containers{app}"));
    }

    #[test]
    fn files_read_as_before() {
        assert_eq!(ObjectRef::file(Path::new("/m/a.yaml")).to_string(), "file//m/a.yaml");
    }
}
