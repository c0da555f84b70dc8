//! Brief lists: the runtime's `ListPodSandbox` and `ListContainers` answers decoded into only
//! what a relist or a stats listing reads. The same wire messages as [`crate::cri`]'s; the
//! fields left out here (a container's labels, annotations and image, a sandbox's annotations and
//! runtime handler) are skipped undecoded, which is most of a list's decoding cost when it is
//! made every second.

use prost::encoding::{self, DecodeContext, WireType};

use crate::cri;

/// `ListPodSandboxResponse`, briefly.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxList {
    #[prost(message, repeated, tag = "1")]
    pub items: Vec<Sandbox>,
}

/// The label the kubelet puts on its sandboxes with their pod's UID (upstream's
/// `io.kubernetes.pod.uid`), the one label a brief sandbox keeps.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";

/// A `PodSandbox`: its id, metadata, state, creation time, and of its labels only the pod's
/// UID ([`POD_UID_LABEL`]): the other labels are skipped undecoded too.
#[derive(Clone, PartialEq, Default, Debug)]
pub struct Sandbox {
    pub id: String,
    pub metadata: Option<cri::PodSandboxMetadata>,
    pub state: i32,
    pub created_at: i64,
    /// The value of its [`POD_UID_LABEL`] label.
    pub pod_uid_label: Option<String>,
}

impl prost::Message for Sandbox {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        if !self.id.is_empty() {
            encoding::string::encode(1, &self.id, buf);
        }
        if let Some(m) = &self.metadata {
            encoding::message::encode(2, m, buf);
        }
        if self.state != 0 {
            encoding::int32::encode(3, &self.state, buf);
        }
        if self.created_at != 0 {
            encoding::int64::encode(4, &self.created_at, buf);
        }
        if let Some(label) = self.uid_label() {
            encoding::message::encode(5, &label, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            1 => encoding::string::merge(wire_type, &mut self.id, buf, ctx),
            2 => {
                let m = self.metadata.get_or_insert_with(Default::default);
                encoding::message::merge(wire_type, m, buf, ctx)
            }
            3 => encoding::int32::merge(wire_type, &mut self.state, buf, ctx),
            4 => encoding::int64::merge(wire_type, &mut self.created_at, buf, ctx),
            5 => {
                let mut label = UidLabel::default();
                encoding::message::merge(wire_type, &mut label, buf, ctx)?;
                if label.key == Some(true) {
                    self.pod_uid_label = Some(label.value.unwrap_or_default());
                }
                Ok(())
            }
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let mut len = 0;
        if !self.id.is_empty() {
            len += encoding::string::encoded_len(1, &self.id);
        }
        if let Some(m) = &self.metadata {
            len += encoding::message::encoded_len(2, m);
        }
        if self.state != 0 {
            len += encoding::int32::encoded_len(3, &self.state);
        }
        if self.created_at != 0 {
            len += encoding::int64::encoded_len(4, &self.created_at);
        }
        if let Some(label) = self.uid_label() {
            len += encoding::message::encoded_len(5, &label);
        }
        len
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

impl Sandbox {
    fn uid_label(&self) -> Option<UidLabel> {
        let value = self.pod_uid_label.clone()?;
        Some(UidLabel { key: Some(true), value: Some(value) })
    }
}

/// One of a sandbox's labels (a map entry on the wire: key 1, value 2), its value decoded only
/// when its key is [`POD_UID_LABEL`].
#[derive(Clone, PartialEq, Default, Debug)]
struct UidLabel {
    /// Whether the key is the pod-UID label's; `None` before the key is read.
    key: Option<bool>,
    value: Option<String>,
}

impl prost::Message for UidLabel {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        if self.key == Some(true) {
            encoding::string::encode(1, &POD_UID_LABEL.to_string(), buf);
        }
        if let Some(v) = &self.value {
            encoding::string::encode(2, v, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            1 => {
                // The key compared where it lies in the buffer, with no copy; else (a key split
                // across chunks) decoded first.
                let mut peek = buf.chunk();
                let whole = match (wire_type, encoding::decode_varint(&mut peek)) {
                    (WireType::LengthDelimited, Ok(len)) => usize::try_from(len)
                        .ok()
                        .and_then(|len| peek.get(..len))
                        .map(|key| key == POD_UID_LABEL.as_bytes()),
                    _ => None,
                };
                match whole {
                    Some(is_uid) => {
                        self.key = Some(is_uid);
                        encoding::skip_field(wire_type, tag, buf, ctx)
                    }
                    None => {
                        let mut key = Vec::new();
                        encoding::bytes::merge(wire_type, &mut key, buf, ctx)?;
                        self.key = Some(key == POD_UID_LABEL.as_bytes());
                        Ok(())
                    }
                }
            }
            2 if self.key == Some(false) => encoding::skip_field(wire_type, tag, buf, ctx),
            2 => encoding::string::merge(
                wire_type,
                self.value.get_or_insert_with(String::new),
                buf,
                ctx,
            ),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let key = if self.key == Some(true) {
            encoding::string::encoded_len(1, &POD_UID_LABEL.to_string())
        } else {
            0
        };
        key + self.value.as_ref().map_or(0, |v| encoding::string::encoded_len(2, v))
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
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
    use prost::bytes::Buf;
    use std::collections::HashMap;

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
            labels: HashMap::from([
                ("io.kubernetes.pod.name".into(), "web".into()),
                (POD_UID_LABEL.into(), "u1".into()),
                ("io.kubernetes.pod.uidx".into(), "not this".into()),
                ("app".into(), "io.kubernetes.pod.uid".into()),
            ]),
            annotations: HashMap::from([("a".into(), "b".into())]),
            runtime_handler: "runc".into(),
        };
        let bytes = cri::ListPodSandboxResponse { items: vec![sandbox] }.encode_to_vec();
        let brief = SandboxList::decode(bytes.as_slice()).unwrap();
        let s = &brief.items[0];
        let ready = cri::PodSandboxState::SandboxReady as i32;
        assert_eq!((s.id.as_str(), s.state, s.created_at), ("s1", ready, 7));
        assert_eq!(s.metadata.as_ref().map(|m| (m.uid.as_str(), m.attempt)), Some(("u1", 2)));
        assert_eq!(s.pod_uid_label.as_deref(), Some("u1"), "the pod-UID label alone is kept");
        assert_eq!(Sandbox::decode(s.encode_to_vec().as_slice()).unwrap(), *s, "and round-trips");

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

    /// A sandbox with `labels`, encoded as the runtime sends it.
    fn encoded(labels: &[(&str, &str)]) -> Vec<u8> {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        cri::PodSandbox { id: "s1".into(), labels, ..Default::default() }.encode_to_vec()
    }

    #[test]
    fn a_sandbox_without_the_pod_uid_label_has_none() {
        let bytes = encoded(&[("app", "web"), ("io.kubernetes.pod.name", "web")]);
        let s = Sandbox::decode(bytes.as_slice()).unwrap();
        assert_eq!((s.id.as_str(), s.pod_uid_label), ("s1", None));
        let empty = Sandbox::decode(encoded(&[(POD_UID_LABEL, "")]).as_slice()).unwrap();
        assert_eq!(empty.pod_uid_label.as_deref(), Some(""), "an empty value is still the label");
    }

    #[test]
    fn a_label_key_split_across_buffer_chunks_is_still_recognised() {
        let bytes = encoded(&[(POD_UID_LABEL, "u1")]);
        let at = bytes.windows(4).position(|w| w == b"io.k").unwrap() + 6;
        for cut in [at - 7, at - 5, at, at + 10] {
            let (a, b) = bytes.split_at(cut);
            let s = Sandbox::decode(a.chain(b)).unwrap();
            assert_eq!(s.pod_uid_label.as_deref(), Some("u1"), "cut at {cut}");
        }
    }

    #[test]
    fn a_truncated_or_malformed_label_is_a_decode_error_not_a_panic() {
        let bytes = encoded(&[(POD_UID_LABEL, "u1")]);
        for len in 0..bytes.len() {
            let _ = Sandbox::decode(&bytes[..len]);
        }
        // Field 5 (the labels) with a varint where a map entry belongs.
        assert!(Sandbox::decode([0x28u8, 0x01].as_slice()).is_err());
        // A map entry whose key is a varint.
        assert!(Sandbox::decode([0x2au8, 0x02, 0x08, 0x01].as_slice()).is_err());
    }
}
