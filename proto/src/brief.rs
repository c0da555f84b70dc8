//! Brief lists: the runtime's `ListPodSandbox` and `ListContainers` answers decoded into only
//! what a relist or a stats listing reads. The same wire messages as [`crate::cri`]'s; the
//! fields left out here (a container's labels, annotations and image, a sandbox's annotations and
//! runtime handler) are skipped undecoded, which is most of a list's decoding cost when it is
//! made every second. The strings kept are [`Text`], slices of the answer's buffer: decoding
//! allocates nothing per item but the list itself.
//!
//! [`text`]: the string slices.

mod text;

pub use text::Text;

use prost::DecodeError;
use prost::encoding::{self, DecodeContext, WireType};

// The wire messages' names, for decode errors.
const SANDBOX: &str = "PodSandbox";
const SANDBOX_METADATA: &str = "PodSandboxMetadata";
const CONTAINER: &str = "Container";
const CONTAINER_METADATA: &str = "ContainerMetadata";

/// Names the field a decode error happened in, as prost's derived messages do.
fn at(message: &'static str, field: &'static str) -> impl FnOnce(DecodeError) -> DecodeError {
    move |mut e| {
        e.push(message, field);
        e
    }
}

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
    pub id: Text,
    pub metadata: Option<SandboxMetadata>,
    pub state: i32,
    pub created_at: i64,
    /// The value of its [`POD_UID_LABEL`] label.
    pub pod_uid_label: Option<Text>,
}

impl prost::Message for Sandbox {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        self.id.encode(1, buf);
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
    ) -> Result<(), DecodeError> {
        match tag {
            1 => self.id.merge(wire_type, buf, ctx).map_err(at(SANDBOX, "id")),
            2 => {
                let m = self.metadata.get_or_insert_with(Default::default);
                encoding::message::merge(wire_type, m, buf, ctx).map_err(at(SANDBOX, "metadata"))
            }
            3 => encoding::int32::merge(wire_type, &mut self.state, buf, ctx)
                .map_err(at(SANDBOX, "state")),
            4 => encoding::int64::merge(wire_type, &mut self.created_at, buf, ctx)
                .map_err(at(SANDBOX, "created_at")),
            5 => {
                let mut label = UidLabel::default();
                encoding::message::merge(wire_type, &mut label, buf, ctx)
                    .map_err(at(SANDBOX, "labels"))?;
                if label.key == Some(true) {
                    self.pod_uid_label = Some(label.value.unwrap_or_default());
                }
                Ok(())
            }
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let mut len = self.id.encoded_len(1);
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

/// `PodSandboxMetadata`, its strings as [`Text`].
#[derive(Clone, PartialEq, Default, Debug)]
pub struct SandboxMetadata {
    pub name: Text,
    pub uid: Text,
    pub namespace: Text,
    pub attempt: u32,
}

impl prost::Message for SandboxMetadata {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        self.name.encode(1, buf);
        self.uid.encode(2, buf);
        self.namespace.encode(3, buf);
        if self.attempt != 0 {
            encoding::uint32::encode(4, &self.attempt, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            1 => self.name.merge(wire_type, buf, ctx).map_err(at(SANDBOX_METADATA, "name")),
            2 => self.uid.merge(wire_type, buf, ctx).map_err(at(SANDBOX_METADATA, "uid")),
            3 => {
                self.namespace.merge(wire_type, buf, ctx).map_err(at(SANDBOX_METADATA, "namespace"))
            }
            4 => encoding::uint32::merge(wire_type, &mut self.attempt, buf, ctx)
                .map_err(at(SANDBOX_METADATA, "attempt")),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let attempt =
            if self.attempt == 0 { 0 } else { encoding::uint32::encoded_len(4, &self.attempt) };
        self.name.encoded_len(1) + self.uid.encoded_len(2) + self.namespace.encoded_len(3) + attempt
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

/// One of a sandbox's labels (a map entry on the wire: key 1, value 2), its value decoded only
/// when its key is [`POD_UID_LABEL`].
#[derive(Clone, PartialEq, Default, Debug)]
struct UidLabel {
    /// Whether the key is the pod-UID label's; `None` before the key is read.
    key: Option<bool>,
    value: Option<Text>,
}

impl prost::Message for UidLabel {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        if self.key == Some(true) {
            encoding::string::encode(1, &POD_UID_LABEL.to_string(), buf);
        }
        if let Some(v) = &self.value {
            v.encode(2, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
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
            2 => self.value.get_or_insert_with(Text::default).merge(wire_type, buf, ctx),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let key = if self.key == Some(true) {
            encoding::string::encoded_len(1, &POD_UID_LABEL.to_string())
        } else {
            0
        };
        key + self.value.as_ref().map_or(0, |v| v.encoded_len(2))
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
#[derive(Clone, PartialEq, Default, Debug)]
pub struct Container {
    pub id: Text,
    pub pod_sandbox_id: Text,
    pub metadata: Option<ContainerMetadata>,
    /// A `cri::ContainerState`.
    pub state: i32,
    pub created_at: i64,
}

impl prost::Message for Container {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        self.id.encode(1, buf);
        self.pod_sandbox_id.encode(2, buf);
        if let Some(m) = &self.metadata {
            encoding::message::encode(3, m, buf);
        }
        if self.state != 0 {
            encoding::int32::encode(6, &self.state, buf);
        }
        if self.created_at != 0 {
            encoding::int64::encode(7, &self.created_at, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            1 => self.id.merge(wire_type, buf, ctx).map_err(at(CONTAINER, "id")),
            2 => self
                .pod_sandbox_id
                .merge(wire_type, buf, ctx)
                .map_err(at(CONTAINER, "pod_sandbox_id")),
            3 => {
                let m = self.metadata.get_or_insert_with(Default::default);
                encoding::message::merge(wire_type, m, buf, ctx).map_err(at(CONTAINER, "metadata"))
            }
            6 => encoding::int32::merge(wire_type, &mut self.state, buf, ctx)
                .map_err(at(CONTAINER, "state")),
            7 => encoding::int64::merge(wire_type, &mut self.created_at, buf, ctx)
                .map_err(at(CONTAINER, "created_at")),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let mut len = self.id.encoded_len(1) + self.pod_sandbox_id.encoded_len(2);
        if let Some(m) = &self.metadata {
            len += encoding::message::encoded_len(3, m);
        }
        if self.state != 0 {
            len += encoding::int32::encoded_len(6, &self.state);
        }
        if self.created_at != 0 {
            len += encoding::int64::encoded_len(7, &self.created_at);
        }
        len
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

/// `ContainerMetadata`, its name as [`Text`].
#[derive(Clone, PartialEq, Default, Debug)]
pub struct ContainerMetadata {
    pub name: Text,
    pub attempt: u32,
}

impl prost::Message for ContainerMetadata {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        self.name.encode(1, buf);
        if self.attempt != 0 {
            encoding::uint32::encode(2, &self.attempt, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            1 => self.name.merge(wire_type, buf, ctx).map_err(at(CONTAINER_METADATA, "name")),
            2 => encoding::uint32::merge(wire_type, &mut self.attempt, buf, ctx)
                .map_err(at(CONTAINER_METADATA, "attempt")),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let attempt =
            if self.attempt == 0 { 0 } else { encoding::uint32::encoded_len(2, &self.attempt) };
        self.name.encoded_len(1) + attempt
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests;
