//! SPDY/3.1 framing as far as a client needs it: [`decode`] and [`peek`] read frames, the
//! encoders write `DATA`, `SYN_STREAM` (header blocks as stored deflate blocks), `PING`,
//! `RST_STREAM` and `GOAWAY`. Pure: no I/O.

use bytes::{Buf, Bytes, BytesMut};

/// The largest frame accepted from the runtime (the protocol allows 16 MiB; Go writes 32 KiB).
pub const MAX_FRAME: usize = 1 << 20;

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const FLAG_FIN: u8 = 0x01;

/// One frame from the runtime, as far as a client cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Data {
        stream: u32,
        fin: bool,
        data: Bytes,
    },
    SynReply {
        stream: u32,
        fin: bool,
    },
    Headers {
        stream: u32,
        fin: bool,
    },
    RstStream {
        stream: u32,
        status: u32,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good: u32,
        status: u32,
    },
    /// `SETTINGS`, `WINDOW_UPDATE`, server-initiated streams and unknown types: ignored.
    Other {
        kind: u16,
    },
}

/// A frame that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame of {len} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge { len: usize },
    #[error("a {kind} control frame of {len} bytes is too short")]
    Short { kind: u16, len: usize },
    #[error("SPDY version {0} (want 3)")]
    Version(u16),
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Takes one complete frame off the front of `buf`; `None` when more bytes are needed.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let flags = buf[4];
    let len = usize::try_from(u32_at(buf, 4) & 0x00ff_ffff).unwrap_or(usize::MAX);
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge { len });
    }
    if buf.len() < 8 + len {
        return Ok(None);
    }
    let control = buf[0] & 0x80 != 0;
    let first = u32_at(buf, 0);
    let fin = flags & FLAG_FIN != 0;
    if !control {
        buf.advance(8);
        let data = buf.split_to(len).freeze();
        return Ok(Some(Frame::Data { stream: first & 0x7fff_ffff, fin, data }));
    }
    let version = u16::try_from((first >> 16) & 0x7fff).unwrap_or(0);
    let kind = u16::try_from(first & 0xffff).unwrap_or(0);
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let body = &buf[8..8 + len];
    let need = match kind {
        SYN_REPLY | HEADERS => 4,
        RST_STREAM | GOAWAY => 8,
        PING => 4,
        _ => 0,
    };
    if body.len() < need {
        return Err(FrameError::Short { kind, len });
    }
    let frame = match kind {
        SYN_REPLY => Frame::SynReply { stream: u32_at(body, 0) & 0x7fff_ffff, fin },
        HEADERS => Frame::Headers { stream: u32_at(body, 0) & 0x7fff_ffff, fin },
        RST_STREAM => {
            Frame::RstStream { stream: u32_at(body, 0) & 0x7fff_ffff, status: u32_at(body, 4) }
        }
        PING => Frame::Ping { id: u32_at(body, 0) },
        GOAWAY => {
            Frame::GoAway { last_good: u32_at(body, 0) & 0x7fff_ffff, status: u32_at(body, 4) }
        }
        other => Frame::Other { kind: other },
    };
    buf.advance(8 + len);
    Ok(Some(frame))
}

/// What a relay needs to know of a frame without taking it apart: its length, and which stream
/// it opens, carries data on, half-closes or resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// `SYN_STREAM`: the sender opens `stream` (half-closed at once with `fin`).
    SynStream { stream: u32, fin: bool },
    /// `SYN_REPLY`: the receiver accepts `stream`.
    SynReply { stream: u32, fin: bool },
    /// `DATA` (`empty`: no payload, e.g. a bare `FIN`).
    Data { stream: u32, fin: bool, empty: bool },
    /// `HEADERS` on `stream`.
    Headers { stream: u32, fin: bool },
    /// `RST_STREAM`: `stream` is gone both ways.
    RstStream { stream: u32 },
    /// `PING`, `GOAWAY`, `SETTINGS`, `WINDOW_UPDATE` and unknown control frames.
    Connection,
}

/// The first whole frame in `buf`: its length in bytes (header included) and kind; `None` when
/// more bytes are needed. Nothing is consumed, so the caller forwards the bytes unchanged.
pub fn peek(buf: &[u8]) -> Result<Option<(usize, FrameKind)>, FrameError> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let flags = buf[4];
    let len = usize::try_from(u32_at(buf, 4) & 0x00ff_ffff).unwrap_or(usize::MAX);
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge { len });
    }
    if buf.len() < 8 + len {
        return Ok(None);
    }
    let fin = flags & FLAG_FIN != 0;
    let first = u32_at(buf, 0);
    if buf[0] & 0x80 == 0 {
        let stream = first & 0x7fff_ffff;
        return Ok(Some((8 + len, FrameKind::Data { stream, fin, empty: len == 0 })));
    }
    let version = u16::try_from((first >> 16) & 0x7fff).unwrap_or(0);
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let kind = u16::try_from(first & 0xffff).unwrap_or(0);
    let body = &buf[8..8 + len];
    let opens = matches!(kind, SYN_STREAM | SYN_REPLY | HEADERS | RST_STREAM);
    if opens && body.len() < 4 {
        return Err(FrameError::Short { kind, len });
    }
    let stream = || u32_at(body, 0) & 0x7fff_ffff;
    let frame = match kind {
        SYN_STREAM => FrameKind::SynStream { stream: stream(), fin },
        SYN_REPLY => FrameKind::SynReply { stream: stream(), fin },
        HEADERS => FrameKind::Headers { stream: stream(), fin },
        RST_STREAM => FrameKind::RstStream { stream: stream() },
        _ => FrameKind::Connection,
    };
    Ok(Some((8 + len, frame)))
}

fn control(kind: u16, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    let len = u32::try_from(body.len()).unwrap_or(0) & 0x00ff_ffff;
    out.extend_from_slice(&((u32::from(flags) << 24) | len).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// A `DATA` frame (`data` at most [`MAX_FRAME`] bytes; callers split larger writes).
pub fn data_frame(stream: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + data.len());
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    let len = u32::try_from(data.len()).unwrap_or(0) & 0x00ff_ffff;
    let flags = if fin { u32::from(FLAG_FIN) } else { 0 };
    out.extend_from_slice(&((flags << 24) | len).to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// A `PING` frame (also the reply to one: the same id).
pub fn ping_frame(id: u32) -> Vec<u8> {
    control(PING, 0, &id.to_be_bytes())
}

/// `RST_STREAM` status: the stream was refused before any processing (SPDY/3 `REFUSED_STREAM`).
pub const REFUSED_STREAM: u32 = 3;

/// A `RST_STREAM` frame for `stream` with `status`.
pub fn rst_stream_frame(stream: u32, status: u32) -> Vec<u8> {
    let mut body = Vec::with_capacity(8);
    body.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    body.extend_from_slice(&status.to_be_bytes());
    control(RST_STREAM, 0, &body)
}

/// A `GOAWAY` frame: we accepted no streams of the server's.
pub fn goaway_frame() -> Vec<u8> {
    control(GOAWAY, 0, &[0; 8])
}

/// Writes SPDY header blocks. SPDY compresses them with one zlib stream per direction; a zlib
/// stream of stored (uncompressed) deflate blocks is a valid one, so the first block carries the
/// zlib header and every block is a stored block plus a sync flush, which the peer's inflater
/// reads exactly.
#[derive(Debug, Default)]
pub struct HeaderEncoder {
    started: bool,
}

impl HeaderEncoder {
    /// The compressed block for `headers` (names must be lowercase, as SPDY requires).
    pub fn encode(&mut self, headers: &[(&str, &str)]) -> Vec<u8> {
        let mut raw = Vec::new();
        let n = |len: usize| u32::try_from(len).unwrap_or(0).to_be_bytes();
        raw.extend_from_slice(&n(headers.len()));
        for (name, value) in headers {
            raw.extend_from_slice(&n(name.len()));
            raw.extend_from_slice(name.as_bytes());
            raw.extend_from_slice(&n(value.len()));
            raw.extend_from_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(raw.len() + 16);
        if !self.started {
            self.started = true;
            // CMF: deflate, 32 KiB window; FLG: no preset dictionary, check bits ((CMF*256+FLG) % 31 == 0).
            out.extend_from_slice(&[0x78, 0x01]);
        }
        for piece in raw.chunks(usize::from(u16::MAX)) {
            let len = u16::try_from(piece.len()).unwrap_or(u16::MAX);
            out.push(0x00); // BFINAL=0, BTYPE=00 (stored)
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(piece);
        }
        // A sync flush (an empty stored block), as every SPDY compressor ends a header block:
        // Go's inflater hands out a stored block's bytes only once it has read the next block's
        // header, and this frame must hold that header.
        out.extend_from_slice(&[0x00, 0x00, 0x00, 0xff, 0xff]);
        out
    }
}

/// A `SYN_STREAM` frame opening client stream `stream` with `header_block`.
pub fn syn_stream_frame(stream: u32, header_block: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(10 + header_block.len());
    body.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    body.extend_from_slice(&0u32.to_be_bytes()); // associated-to stream
    body.extend_from_slice(&[0, 0]); // priority, slot
    body.extend_from_slice(header_block);
    control(SYN_STREAM, 0, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_frames_round_trip_and_wait_for_all_their_bytes() {
        let frame = data_frame(3, true, b"hello");
        assert_eq!(&frame[..8], &[0, 0, 0, 3, 1, 0, 0, 5]);
        let mut buf = BytesMut::from(&frame[..10]);
        assert_eq!(decode(&mut buf), Ok(None));
        buf.extend_from_slice(&frame[10..]);
        buf.extend_from_slice(&data_frame(5, false, b"")[..]);
        assert_eq!(
            decode(&mut buf),
            Ok(Some(Frame::Data { stream: 3, fin: true, data: Bytes::from_static(b"hello") }))
        );
        assert_eq!(
            decode(&mut buf),
            Ok(Some(Frame::Data { stream: 5, fin: false, data: Bytes::new() }))
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn control_frames_decode_to_what_a_client_needs() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&control(SYN_REPLY, FLAG_FIN, &[0, 0, 0, 7, 0x78, 0x9c]));
        buf.extend_from_slice(&ping_frame(2));
        buf.extend_from_slice(&control(RST_STREAM, 0, &[0, 0, 0, 1, 0, 0, 0, 5]));
        buf.extend_from_slice(&goaway_frame());
        buf.extend_from_slice(&control(9, 0, &[0, 0, 0, 1, 0, 0, 1, 0]));
        let mut frames = Vec::new();
        while let Some(f) = decode(&mut buf).unwrap() {
            frames.push(f);
        }
        assert_eq!(
            frames,
            [
                Frame::SynReply { stream: 7, fin: true },
                Frame::Ping { id: 2 },
                Frame::RstStream { stream: 1, status: 5 },
                Frame::GoAway { last_good: 0, status: 0 },
                Frame::Other { kind: 9 },
            ]
        );
    }

    #[test]
    fn oversized_short_and_foreign_frames_are_refused() {
        let mut buf = BytesMut::from(&[0, 0, 0, 1, 0, 0x20, 0, 0][..]);
        assert_eq!(decode(&mut buf), Err(FrameError::TooLarge { len: 0x20_0000 }));
        let mut buf = BytesMut::from(&control(RST_STREAM, 0, &[0, 0, 0, 1])[..]);
        assert_eq!(decode(&mut buf), Err(FrameError::Short { kind: RST_STREAM, len: 4 }));
        let mut buf = BytesMut::from(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1][..]);
        assert_eq!(decode(&mut buf), Err(FrameError::Version(2)));
    }

    /// Inflates a stored-block zlib stream the way the peer's inflater sees it.
    fn inflate_stored(mut b: &[u8], first: bool) -> Vec<u8> {
        if first {
            assert_eq!((u16::from(b[0]) * 256 + u16::from(b[1])) % 31, 0, "zlib check bits");
            assert_eq!(b[1] & 0x20, 0, "no preset dictionary");
            b = &b[2..];
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            assert_eq!(b[0], 0, "stored, not final");
            let len = usize::from(u16::from_le_bytes([b[1], b[2]]));
            assert_eq!(u16::from_le_bytes([b[3], b[4]]), !(len as u16));
            out.extend_from_slice(&b[5..5 + len]);
            b = &b[5 + len..];
        }
        out
    }

    #[test]
    fn header_blocks_are_zlib_streams_of_stored_blocks() {
        let mut enc = HeaderEncoder::default();
        let first = enc.encode(&[("streamtype", "error")]);
        let raw = inflate_stored(&first, true);
        assert_eq!(raw, b"\0\0\0\x01\0\0\0\x0astreamtype\0\0\0\x05error");
        let second = enc.encode(&[("streamtype", "stdout")]);
        assert_eq!(&inflate_stored(&second, false)[22..], b"stdout");
        let frame = syn_stream_frame(3, &second);
        assert_eq!(&frame[..4], &[0x80, 3, 0, 1]);
        assert_eq!(usize::from(frame[7]), 10 + second.len());
        assert_eq!(&frame[8..12], &[0, 0, 0, 3]);
    }

    #[test]
    fn peek_tells_each_frames_length_and_stream_without_consuming() {
        let syn = syn_stream_frame(5, &HeaderEncoder::default().encode(&[("port", "80")]));
        let mut fin_syn = syn.clone();
        fin_syn[4] = FLAG_FIN;
        let frames = [
            (syn.clone(), FrameKind::SynStream { stream: 5, fin: false }),
            (fin_syn, FrameKind::SynStream { stream: 5, fin: true }),
            (control(SYN_REPLY, 0, &[0, 0, 0, 5]), FrameKind::SynReply { stream: 5, fin: false }),
            (data_frame(5, true, b""), FrameKind::Data { stream: 5, fin: true, empty: true }),
            (data_frame(5, false, b"x"), FrameKind::Data { stream: 5, fin: false, empty: false }),
            (rst_stream_frame(5, REFUSED_STREAM), FrameKind::RstStream { stream: 5 }),
            (ping_frame(1), FrameKind::Connection),
            (goaway_frame(), FrameKind::Connection),
        ];
        for (bytes, kind) in frames {
            assert_eq!(peek(&bytes[..bytes.len() - 1]), Ok(None), "{kind:?} needs all its bytes");
            let mut more = bytes.clone();
            more.extend_from_slice(b"next");
            assert_eq!(peek(&more), Ok(Some((bytes.len(), kind))));
        }
        let rst = rst_stream_frame(7, REFUSED_STREAM);
        assert_eq!(&rst[8..], &[0, 0, 0, 7, 0, 0, 0, 3]);
        assert_eq!(
            peek(&control(RST_STREAM, 0, &[0, 0])),
            Err(FrameError::Short { kind: RST_STREAM, len: 2 })
        );
    }
}
