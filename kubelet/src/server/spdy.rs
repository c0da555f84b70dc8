//! The client side of a CRI runtime's streaming server, for the URL CRI `Exec` returns.
//!
//! containerd (1.6, and later) serves exec over SPDY/3.1 with the remote command protocols
//! `v4.channel.k8s.io` … `channel.k8s.io`, and over WebSocket with `v4.channel.k8s.io`,
//! `channel.k8s.io` and their base64 variants; none of its WebSocket protocols can tell it that
//! stdin ended (that is what `v5.channel.k8s.io` added). SPDY can: each of stdin, stdout, stderr,
//! error and resize is its own stream, and a stream is half-closed with a `FIN` flag. So the
//! kubelet speaks SPDY to the runtime, as upstream's API server does to the kubelet.
//!
//! Only what a client needs is implemented: the HTTP/1.1 upgrade, `SYN_STREAM` (header blocks
//! are written as stored deflate blocks, so no compressor is needed, and the peer's compressed
//! headers are never read: only stream ids matter), `DATA` with `FIN`, `PING` replies and
//! `GOAWAY`. Flow control (`WINDOW_UPDATE`) is ignored, as the Go implementation does. The
//! framing is pure ([`decode`] and the encoders) and unit-tested; [`RuntimeStreams`] does the I/O.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::remotecommand::{RuntimeStream, StreamOptions, ToRuntime};

/// The remote command protocol asked of the runtime.
pub const PROTOCOL: &str = "v4.channel.k8s.io";
/// The largest frame accepted from the runtime (the protocol allows 16 MiB; Go writes 32 KiB).
pub const MAX_FRAME: usize = 1 << 20;
/// The largest HTTP response head accepted for the upgrade.
const MAX_HEAD: usize = 16 * 1024;

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

/// Why the runtime's stream could not be opened or broke.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    #[error("streaming URL {url:?}: {reason}")]
    Url { url: String, reason: &'static str },
    #[error("runtime streaming server {url}: {source}")]
    Io { url: String, source: std::io::Error },
    #[error("runtime streaming server {url} refused the upgrade: HTTP {status}: {body}")]
    Refused { url: String, status: u16, body: String },
    #[error("runtime streaming server {url} agreed to protocol {protocol:?}, not {PROTOCOL}")]
    Protocol { url: String, protocol: String },
    #[error("runtime streaming server {url}: {source}")]
    Frame { url: String, source: FrameError },
    #[error("runtime streaming server {url}: no reply for the {stream} stream within {timeout:?}")]
    NoReply { url: String, stream: &'static str, timeout: Duration },
    #[error("runtime streaming server {url} reset the {stream} stream (status {status})")]
    Reset { url: String, stream: &'static str, status: u32 },
    #[error("runtime streaming server {url} closed the connection while streams were opened")]
    Closed { url: String },
}

/// Splits `http://host:port/path` (the only form containerd hands out without TLS streaming).
pub fn split_url(url: &str) -> Result<(&str, &str), SpdyError> {
    let bad = |reason| SpdyError::Url { url: url.to_string(), reason };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        bad("only http:// streaming URLs are supported (the runtime's TLS streaming is not)")
    })?;
    let slash = rest.find('/').ok_or_else(|| bad("no path"))?;
    let (authority, path) = rest.split_at(slash);
    if authority.is_empty() || authority.contains('@') {
        return Err(bad("no host"));
    }
    Ok((authority, path))
}

/// The header naming the stream protocol asked for and agreed on.
pub const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";

/// An HTTP/1.1 response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// Parses a head (status line and header lines; the blank line may be included). A status
    /// line that cannot be read gives status 0.
    pub fn parse(head: &[u8]) -> Self {
        let text = String::from_utf8_lossy(head);
        let mut lines = text.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse::<u16>().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        Self { status, headers }
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Reads a response head (at most 16 KiB) into `buf` and parses it; the bytes after it stay in
/// `buf`. `None` when the peer closed first.
pub async fn read_response_head<R>(
    reader: &mut R,
    buf: &mut BytesMut,
) -> std::io::Result<Option<ResponseHead>>
where
    R: tokio::io::AsyncRead + Unpin,
{
    let end = loop {
        if let Some(i) = memchr::memmem::find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("response head too long"));
        }
        if reader.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    };
    Ok(Some(ResponseHead::parse(&buf.split_to(end))))
}

/// Whatever of a refusal's body arrives within 200 ms, up to 1 KiB (error bodies are short).
pub async fn refusal_body<R>(reader: &mut R, buf: &mut BytesMut) -> String
where
    R: tokio::io::AsyncRead + Unpin,
{
    let _ = tokio::time::timeout(Duration::from_millis(200), reader.read_buf(buf)).await;
    String::from_utf8_lossy(&buf[..buf.len().min(1024)]).trim().to_string()
}

/// What the runtime sent, for the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Data {
        stream: RuntimeStream,
        data: Bytes,
        fin: bool,
    },
    /// The runtime reset one of the streams.
    Reset {
        stream: RuntimeStream,
    },
    /// A `PING` to answer with [`RuntimeStreams::pong`].
    Ping {
        id: u32,
    },
    GoAway,
}

/// An exec's streams on the runtime's streaming server.
#[derive(Debug)]
pub struct RuntimeStreams {
    url: String,
    reader: OwnedReadHalf,
    buf: BytesMut,
    writer: OwnedWriteHalf,
    ids: Vec<(RuntimeStream, u32)>,
    pending: VecDeque<Frame>,
}

impl RuntimeStreams {
    /// Connects to `url`, upgrades to SPDY/3.1 with [`PROTOCOL`], opens the streams `opts` asks
    /// for and waits (up to `timeout`) until the runtime has accepted each.
    pub async fn open(
        url: &str,
        opts: StreamOptions,
        timeout: Duration,
    ) -> Result<Self, SpdyError> {
        let io = |source| SpdyError::Io { url: url.to_string(), source };
        let (authority, path) = split_url(url)?;
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(authority))
            .await
            .map_err(|_| io(std::io::ErrorKind::TimedOut.into()))?
            .map_err(io)?;
        tcp.set_nodelay(true).map_err(io)?;
        let (reader, writer) = tcp.into_split();
        let mut me = Self {
            url: url.to_string(),
            reader,
            buf: BytesMut::with_capacity(64 * 1024),
            writer,
            ids: Vec::new(),
            pending: VecDeque::new(),
        };
        tokio::time::timeout(timeout, me.setup(authority, path, opts))
            .await
            .map_err(|_| io(std::io::ErrorKind::TimedOut.into()))??;
        Ok(me)
    }

    async fn setup(
        &mut self,
        authority: &str,
        path: &str,
        opts: StreamOptions,
    ) -> Result<(), SpdyError> {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: kubelet\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n{PROTOCOL_HEADER}: {PROTOCOL}\r\n\r\n"
        );
        self.write_all(request.as_bytes()).await?;
        self.read_upgrade_response().await?;
        tracing::debug!(url = %self.url, "runtime streaming server upgraded to SPDY/3.1");
        let mut headers = HeaderEncoder::default();
        let mut frames = Vec::new();
        for (i, stream) in opts.streams().into_iter().enumerate() {
            let id = u32::try_from(2 * i + 1).unwrap_or(1);
            let block = headers.encode(&[("streamtype", stream.stream_type())]);
            frames.extend(syn_stream_frame(id, &block));
            self.ids.push((stream, id));
        }
        self.write_all(&frames).await?;
        let mut waiting: Vec<u32> = self.ids.iter().map(|(_, id)| *id).collect();
        while !waiting.is_empty() {
            let Some(frame) = self.read_frame().await? else {
                return Err(SpdyError::Closed { url: self.url.clone() });
            };
            tracing::trace!(url = %self.url, ?frame, "stream setup");
            match frame {
                Frame::SynReply { stream, .. } => waiting.retain(|id| *id != stream),
                Frame::RstStream { stream, status } => {
                    let name = self.stream_of(stream).map_or("unknown", RuntimeStream::stream_type);
                    return Err(SpdyError::Reset { url: self.url.clone(), stream: name, status });
                }
                Frame::Ping { id } => self.pong(id).await?,
                Frame::Other { .. } => {}
                other => self.pending.push_back(other),
            }
        }
        Ok(())
    }

    async fn read_upgrade_response(&mut self) -> Result<(), SpdyError> {
        let head = read_response_head(&mut self.reader, &mut self.buf)
            .await
            .map_err(|source| SpdyError::Io { url: self.url.clone(), source })?
            .ok_or_else(|| SpdyError::Closed { url: self.url.clone() })?;
        if head.status != 101 {
            let body = refusal_body(&mut self.reader, &mut self.buf).await;
            return Err(SpdyError::Refused { url: self.url.clone(), status: head.status, body });
        }
        let protocol = head.header(PROTOCOL_HEADER).unwrap_or_default().to_string();
        if protocol != PROTOCOL {
            return Err(SpdyError::Protocol { url: self.url.clone(), protocol });
        }
        Ok(())
    }

    fn stream_of(&self, id: u32) -> Option<RuntimeStream> {
        self.ids.iter().find(|(_, i)| *i == id).map(|(s, _)| *s)
    }

    fn id_of(&self, stream: RuntimeStream) -> Option<u32> {
        self.ids.iter().find(|(s, _)| *s == stream).map(|(_, id)| *id)
    }

    /// The next frame; cancel-safe (bytes are kept in `buf` until a whole frame is there).
    async fn read_frame(&mut self) -> Result<Option<Frame>, SpdyError> {
        loop {
            if let Some(f) = decode(&mut self.buf)
                .map_err(|source| SpdyError::Frame { url: self.url.clone(), source })?
            {
                return Ok(Some(f));
            }
            let n = self
                .reader
                .read_buf(&mut self.buf)
                .await
                .map_err(|source| SpdyError::Io { url: self.url.clone(), source })?;
            if n == 0 {
                return Ok(None);
            }
        }
    }

    /// The next event; `None` when the runtime closed the connection (the exec ended).
    /// Cancel-safe.
    pub async fn next(&mut self) -> Result<Option<Event>, SpdyError> {
        loop {
            let frame = match self.pending.pop_front() {
                Some(f) => f,
                None => match self.read_frame().await? {
                    Some(f) => f,
                    None => return Ok(None),
                },
            };
            let event =
                match frame {
                    Frame::Data { stream, fin, data } => {
                        self.stream_of(stream).map(|stream| Event::Data { stream, data, fin })
                    }
                    Frame::Headers { stream, fin: true }
                    | Frame::SynReply { stream, fin: true } => self
                        .stream_of(stream)
                        .map(|stream| Event::Data { stream, data: Bytes::new(), fin: true }),
                    Frame::RstStream { stream, .. } => {
                        self.stream_of(stream).map(|stream| Event::Reset { stream })
                    }
                    Frame::Ping { id } => Some(Event::Ping { id }),
                    Frame::GoAway { .. } => Some(Event::GoAway),
                    _ => None,
                };
            if let Some(e) = event {
                return Ok(Some(e));
            }
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> Result<(), SpdyError> {
        self.writer
            .write_all(bytes)
            .await
            .map_err(|source| SpdyError::Io { url: self.url.clone(), source })
    }

    /// Answers a `PING`.
    pub async fn pong(&mut self, id: u32) -> Result<(), SpdyError> {
        self.write_all(&ping_frame(id)).await
    }

    /// Writes data to, or half-closes, one of the exec's streams (ignored if it has none).
    pub async fn send(&mut self, what: ToRuntime) -> Result<(), SpdyError> {
        match what {
            ToRuntime::Data(stream, data) => {
                let Some(id) = self.id_of(stream) else { return Ok(()) };
                for piece in data.chunks(MAX_FRAME) {
                    self.write_all(&data_frame(id, false, piece)).await?;
                }
                Ok(())
            }
            ToRuntime::Close(stream) => {
                let Some(id) = self.id_of(stream) else { return Ok(()) };
                self.write_all(&data_frame(id, true, &[])).await
            }
        }
    }

    /// Says goodbye and closes our side; the runtime ends the exec's streams.
    pub async fn close(mut self) {
        let _ = self.write_all(&goaway_frame()).await;
        let _ = self.writer.shutdown().await;
    }
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

    #[test]
    fn response_heads_give_status_and_headers_in_any_case() {
        let head = ResponseHead::parse(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nx-stream-protocol-version: portforward.k8s.io\r\n\r\n",
        );
        assert_eq!(head.status, 101);
        assert_eq!(head.header("X-Stream-Protocol-Version"), Some("portforward.k8s.io"));
        assert_eq!(head.header("upgrade"), None);
        assert_eq!(ResponseHead::parse(b"garbage").status, 0);
    }

    #[test]
    fn only_plain_http_streaming_urls_are_used() {
        assert_eq!(
            split_url("http://127.0.0.1:4321/exec/AbC").unwrap(),
            ("127.0.0.1:4321", "/exec/AbC")
        );
        for bad in ["https://127.0.0.1:1/exec/x", "http://127.0.0.1:1", "http:///exec/x", "exec/x"]
        {
            let err = split_url(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
