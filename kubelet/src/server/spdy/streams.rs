//! [`RuntimeStreams`]: one exec's streams on the runtime's streaming server, opened over the
//! upgrade and read as [`Event`]s for the relay.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::super::remotecommand::{RuntimeStream, StreamOptions, ToRuntime};
use super::frame::{
    Frame, FrameError, HeaderEncoder, MAX_FRAME, data_frame, decode, goaway_frame, ping_frame,
    syn_stream_frame,
};
use super::upgrade::{PROTOCOL_HEADER, read_response_head, refusal_body, split_url};

/// The remote command protocol asked of the runtime.
pub const PROTOCOL: &str = "v4.channel.k8s.io";

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
