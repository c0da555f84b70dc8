//! Brief lists: the runtime's `ListPodSandbox` and `ListContainers` answers decoded into only
//! what a relist or a stats listing reads. The same wire messages as [`crate::cri`]'s; the
//! fields left out here (a container's labels, annotations and image, a sandbox's annotations and
//! runtime handler) are skipped undecoded, which is most of a list's decoding cost when it is
//! made every second.

use std::collections::HashMap;

use crate::cri;

/// `ListPodSandboxResponse`, briefly.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxList {
    #[prost(message, repeated, tag = "1")]
    pub items: Vec<Sandbox>,
}

/// A `PodSandbox`: its id, metadata, state, creation time and labels.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sandbox {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<cri::PodSandboxMetadata>,
    #[prost(enumeration = "cri::PodSandboxState", tag = "3")]
    pub state: i32,
    #[prost(int64, tag = "4")]
    pub created_at: i64,
    #[prost(map = "string, string", tag = "5")]
    pub labels: HashMap<String, String>,
}

/// `ListContainersResponse`, briefly.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerList {
    #[prost(message, repeated, tag = "1")]
    pub containers: Vec<Container>,
}

/// A `Container`: its id, sandbox, metadata, state and creation time (no labels: its pod is
/// its sandbox's).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    #[prost(message, optional, tag = "3")]
    pub metadata: Option<cri::ContainerMetadata>,
    #[prost(enumeration = "cri::ContainerState", tag = "6")]
    pub state: i32,
    #[prost(int64, tag = "7")]
    pub created_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_full_list_decodes_briefly_with_the_fields_it_keeps() {
        let sandbox = cri::PodSandbox {
            id: "s1".into(),
            metadata: Some(cri::PodSandboxMetadata {
                name: "web".into(),
                uid: "u1".into(),
                namespace: "default".into(),
                attempt: 2,
            }),
            state: cri::PodSandboxState::SandboxReady as i32,
            created_at: 7,
            labels: HashMap::from([("io.kubernetes.pod.uid".into(), "u1".into())]),
            annotations: HashMap::from([("a".into(), "b".into())]),
            runtime_handler: "runc".into(),
        };
        let bytes = cri::ListPodSandboxResponse { items: vec![sandbox] }.encode_to_vec();
        let brief = SandboxList::decode(bytes.as_slice()).unwrap();
        let s = &brief.items[0];
        let ready = cri::PodSandboxState::SandboxReady as i32;
        assert_eq!((s.id.as_str(), s.state, s.created_at), ("s1", ready, 7));
        assert_eq!(s.metadata.as_ref().map(|m| (m.uid.as_str(), m.attempt)), Some(("u1", 2)));
        assert_eq!(s.labels.get("io.kubernetes.pod.uid").map(String::as_str), Some("u1"));

        let container = cri::Container {
            id: "c1".into(),
            pod_sandbox_id: "s1".into(),
            metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 3 }),
            image: Some(cri::ImageSpec { image: "busybox".into(), ..Default::default() }),
            image_ref: "sha256:1".into(),
            state: cri::ContainerState::ContainerExited as i32,
            created_at: 9,
            labels: HashMap::from([("k".into(), "v".into())]),
            annotations: HashMap::from([("a".into(), "b".into())]),
            image_id: "sha256:1".into(),
        };
        let bytes = cri::ListContainersResponse { containers: vec![container] }.encode_to_vec();
        let brief = ContainerList::decode(bytes.as_slice()).unwrap();
        let c = &brief.containers[0];
        assert_eq!(
            (c.id.as_str(), c.pod_sandbox_id.as_str(), c.state, c.created_at),
            ("c1", "s1", 2, 9)
        );
        assert_eq!(c.metadata.as_ref().map(|m| (m.name.as_str(), m.attempt)), Some(("app", 3)));
    }
}
