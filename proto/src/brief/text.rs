//! [`Text`]: a string field sliced out of the answer it was decoded from.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use prost::bytes::{Buf, BufMut, Bytes};
use prost::encoding::{self, DecodeContext, WireType};

/// A string field sliced out of the answer it was decoded from: it shares the answer's buffer
/// instead of copying it, so a relist allocates nothing per id or name. Checked UTF-8 as it is
/// decoded, as prost checks a `String`.
///
/// It keeps the whole answer's buffer alive while it lives: what outlives a listing is copied
/// out (`String::from`).
#[derive(Clone, Default)]
pub struct Text(Bytes);

impl Text {
    pub fn as_str(&self) -> &str {
        // Every way to make a Text checks it is UTF-8 (`merge`, the `From`s).
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// Decodes a string field into `self`: prost's `string::merge`, without the copy where the
    /// buffer is `Bytes` (tonic's is).
    pub(crate) fn merge(
        &mut self,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        let mut bytes = Bytes::new();
        encoding::bytes::merge(wire_type, &mut bytes, buf, ctx.clone())?;
        if std::str::from_utf8(&bytes).is_ok() {
            self.0 = bytes;
            return Ok(());
        }
        // Not UTF-8: decoded again as prost's string, for prost's own error.
        let mut framed = Vec::with_capacity(bytes.len() + 10);
        encoding::encode_varint(bytes.len() as u64, &mut framed);
        framed.extend_from_slice(&bytes);
        let mut s = String::new();
        encoding::string::merge(WireType::LengthDelimited, &mut s, &mut framed.as_slice(), ctx)?;
        *self = Self::from(s);
        Ok(())
    }

    /// Encodes a string field `tag` (empty: left out, as proto3 does).
    pub(crate) fn encode(&self, tag: u32, buf: &mut impl BufMut) {
        if !self.0.is_empty() {
            encoding::bytes::encode(tag, &self.0, buf);
        }
    }

    pub(crate) fn encoded_len(&self, tag: u32) -> usize {
        if self.0.is_empty() { 0 } else { encoding::bytes::encoded_len(tag, &self.0) }
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// As its `str` orders (`str` orders by bytes).
impl Ord for Text {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// By its bytes, with no UTF-8 check on the way (the PLEG's maps hash every id every second).
impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Self(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Self(Bytes::from(s))
    }
}

impl From<&Text> for String {
    fn from(t: &Text) -> Self {
        t.as_str().to_string()
    }
}

impl From<Text> for String {
    fn from(t: Text) -> Self {
        t.as_str().to_string()
    }
}
