//! HTTP/2 framing (RFC 9113 sections 4 and 6): frame headers, types, flags, error codes, and
//! writers for the frames the server sends.

/// What a client sends first.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;
/// `SETTINGS_MAX_FRAME_SIZE`'s initial value: the largest frame either side may send until
/// told otherwise. The server never raises its own.
pub const DEFAULT_MAX_FRAME: usize = 16_384;
/// Initial flow-control window of the connection and of every stream.
pub const DEFAULT_WINDOW: i64 = 65_535;
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// HTTP/2 error codes (section 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    NoError = 0x0,
    Protocol = 0x1,
    FlowControl = 0x3,
    StreamClosed = 0x5,
    FrameSize = 0x6,
    RefusedStream = 0x7,
    Compression = 0x9,
    EnhanceYourCalm = 0xb,
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Header {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Header {
        Header {
            len: usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            // The reserved high bit is ignored on receipt.
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) & 0x7fff_ffff
}

/// The payload without its padding (`PADDED` flag); `None` when the pad length does not fit.
pub fn unpad<'a>(header: &Header, payload: &'a [u8]) -> Option<&'a [u8]> {
    if !header.has(PADDED) {
        return Some(payload);
    }
    let (&pad, rest) = payload.split_first()?;
    rest.len().checked_sub(usize::from(pad)).map(|end| &rest[..end])
}

/// Appends one frame. `payload` must fit the peer's maximum frame size.
pub fn put(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len();
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

pub fn put_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    let mut payload = Vec::with_capacity(settings.len() * 6);
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    put(out, SETTINGS, 0, 0, &payload);
}

pub fn put_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    put(out, RST_STREAM, 0, stream, &(code as u32).to_be_bytes());
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put(out, WINDOW_UPDATE, 0, stream, &increment.to_be_bytes());
}

pub fn put_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode, debug: &str) {
    let mut payload = Vec::with_capacity(8 + debug.len());
    payload.extend_from_slice(&last_stream.to_be_bytes());
    payload.extend_from_slice(&(code as u32).to_be_bytes());
    payload.extend_from_slice(debug.as_bytes());
    payload.truncate(DEFAULT_MAX_FRAME);
    put(out, GOAWAY, 0, 0, &payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_ignore_the_reserved_bit() {
        let mut out = Vec::new();
        put(&mut out, HEADERS, END_HEADERS | END_STREAM, 0x8000_0003, b"abc");
        let h = Header::parse(out[..HEADER_LEN].try_into().unwrap());
        assert_eq!(h, Header { len: 3, kind: HEADERS, flags: 0x5, stream: 3 });
        assert_eq!(&out[HEADER_LEN..], b"abc");
    }

    #[test]
    fn padding_is_removed_or_refused() {
        let h = Header { len: 0, kind: DATA, flags: PADDED, stream: 1 };
        assert_eq!(unpad(&h, &[2, b'x', 0, 0]), Some(&b"x"[..]));
        assert_eq!(unpad(&h, &[3, b'x', 0]), None);
        assert_eq!(unpad(&h, &[]), None);
        assert_eq!(unpad(&Header { flags: 0, ..h }, b"xy"), Some(&b"xy"[..]));
    }
}
