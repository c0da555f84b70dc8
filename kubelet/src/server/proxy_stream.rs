//! The splice between a client's upgraded connection and the runtime's streaming server, as
//! upstream's `proxyStream` (the kubelet hands port-forward connections to the runtime whole),
//! with what upstream leaves to the runtime done here too: the kubelet's own stop, its
//! `streamingConnectionIdleTimeout`, and a bound on the streams one connection holds open.
//!
//! Bytes pass unchanged. For SPDY ([`Framing::Spdy`]) they are cut at frame boundaries and each
//! frame's kind read ([`spdy::peek`](super::spdy::peek)), so that only data counts as activity
//! (kubectl pings every 10 s over the WebSocket tunnel and every 5 s over SPDY: pings alone never
//! keep a forward open past the idle timeout), and so that the [`StreamTable`] can refuse a
//! stream past [`MAX_STREAMS`] with `RST_STREAM` (`REFUSED_STREAM`) instead of handing it on.
//! WebSocket channel connections ([`Framing::Opaque`]) are spliced as bytes, every byte counting.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::spdy::{self, FrameKind};

/// The most SPDY streams one port-forward connection may hold open: a data and an error stream
/// for each of 128 forwarded connections at once.
pub const MAX_STREAMS: usize = 256;
/// How much is read at once (a SPDY data frame from Go carries at most 32 KiB).
const READ_SIZE: usize = 32 * 1024;
/// How long a closing side may take to flush.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// How the bytes between client and runtime are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// SPDY/3.1 frames (`portforward.k8s.io`).
    Spdy,
    /// Anything else (WebSocket channels): plain bytes.
    Opaque,
}

/// What to do with a frame from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Forward,
    /// A frame for a stream that is closed or was refused: the runtime never hears of it.
    Drop,
    /// A new stream past the limit: answer it with `RST_STREAM` and drop it.
    Refuse(u32),
}

/// Which sides of an open stream have finished sending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Halves {
    client_done: bool,
    runtime_done: bool,
}

/// The streams the client opened that are still open, advanced by each frame either way. Pure.
#[derive(Debug)]
pub struct StreamTable {
    open: HashMap<u32, Halves>,
    max: usize,
}

impl StreamTable {
    pub fn new(max: usize) -> Self {
        Self { open: HashMap::new(), max }
    }

    /// How many streams are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn finish(&mut self, stream: u32, client: bool) {
        if let Some(h) = self.open.get_mut(&stream) {
            if client {
                h.client_done = true;
            } else {
                h.runtime_done = true;
            }
            if h.client_done && h.runtime_done {
                self.open.remove(&stream);
            }
        }
    }

    /// A frame from the client.
    pub fn from_client(&mut self, frame: FrameKind) -> Verdict {
        match frame {
            FrameKind::SynStream { stream, fin } => {
                if self.open.contains_key(&stream) {
                    // A reused id is the runtime's protocol error to answer.
                    return Verdict::Forward;
                }
                if self.open.len() >= self.max {
                    return Verdict::Refuse(stream);
                }
                self.open.insert(stream, Halves { client_done: fin, runtime_done: false });
                Verdict::Forward
            }
            FrameKind::Data { stream, fin, .. } | FrameKind::Headers { stream, fin } => {
                if !self.open.contains_key(&stream) {
                    return Verdict::Drop;
                }
                if fin {
                    self.finish(stream, true);
                }
                Verdict::Forward
            }
            FrameKind::RstStream { stream } => {
                if self.open.remove(&stream).is_some() {
                    Verdict::Forward
                } else {
                    Verdict::Drop
                }
            }
            // Replies are the runtime's to send; pings, settings, window updates, goaway.
            FrameKind::SynReply { .. } | FrameKind::Connection => Verdict::Forward,
        }
    }

    /// A frame from the runtime (always forwarded).
    pub fn from_runtime(&mut self, frame: FrameKind) {
        match frame {
            FrameKind::SynReply { stream, fin: true }
            | FrameKind::Data { stream, fin: true, .. }
            | FrameKind::Headers { stream, fin: true } => self.finish(stream, false),
            FrameKind::RstStream { stream } => {
                self.open.remove(&stream);
            }
            _ => {}
        }
    }
}

/// Why a splice ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    ClientClosed,
    RuntimeClosed,
    /// No data either way for the idle timeout.
    Idle,
    /// The kubelet is stopping.
    Stopped,
    /// A side broke, or sent what is not SPDY.
    Failed(String),
}

/// What ends a splice besides its sides.
#[derive(Debug, Clone)]
pub struct Limits {
    pub idle: Option<Duration>,
    pub max_streams: usize,
    pub stop: CancellationToken,
}

/// The state both directions share.
struct Shared {
    table: Mutex<StreamTable>,
    last_data: Mutex<Instant>,
}

impl Shared {
    fn touch(&self) {
        if let Ok(mut t) = self.last_data.lock() {
            *t = Instant::now();
        }
    }

    fn table<T>(&self, f: impl FnOnce(&mut StreamTable) -> T) -> Option<T> {
        self.table.lock().ok().map(|mut t| f(&mut t))
    }
}

/// Splices `client` and `runtime` until either closes, nothing but pings passes for
/// `limits.idle`, or `limits.stop`; `early` is what the runtime sent right after its upgrade
/// answer. Both sides are shut down at the end (SPDY peers get a `GOAWAY` first when the kubelet
/// ends it).
pub async fn splice<C, R>(
    client: C,
    runtime: R,
    early: BytesMut,
    framing: Framing,
    limits: Limits,
) -> Ended
where
    C: AsyncRead + AsyncWrite + Unpin,
    R: AsyncRead + AsyncWrite + Unpin,
{
    let shared = Shared {
        table: Mutex::new(StreamTable::new(limits.max_streams)),
        last_data: Mutex::new(Instant::now()),
    };
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut runtime_read, mut runtime_write) = tokio::io::split(runtime);
    let (refusals, mut refused) = mpsc::channel::<u32>(64);
    let ended = {
        let up = upstream(&mut client_read, &mut runtime_write, framing, &shared, refusals);
        let down =
            downstream(&mut runtime_read, &mut client_write, early, framing, &shared, &mut refused);
        let idle = idle(limits.idle, &shared);
        tokio::select! {
            e = up => e,
            e = down => e,
            e = idle => e,
            () = limits.stop.cancelled() => Ended::Stopped,
        }
    };
    if framing == Framing::Spdy && matches!(ended, Ended::Idle | Ended::Stopped) {
        let goaway = spdy::goaway_frame();
        let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, async {
            let _ = client_write.write_all(&goaway).await;
            let _ = runtime_write.write_all(&goaway).await;
        })
        .await;
    }
    let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, async {
        let _ = client_write.shutdown().await;
        let _ = runtime_write.shutdown().await;
    })
    .await;
    ended
}

/// Waits until nothing has passed for `idle` (forever without one).
async fn idle(idle: Option<Duration>, shared: &Shared) -> Ended {
    let Some(idle) = idle else { return std::future::pending().await };
    loop {
        let last = shared.last_data.lock().map(|t| *t).unwrap_or_else(|_| Instant::now());
        let deadline = last + idle;
        if Instant::now() >= deadline {
            return Ended::Idle;
        }
        tokio::time::sleep_until(deadline).await;
    }
}

/// Client → runtime.
async fn upstream<R, W>(
    from: &mut R,
    to: &mut W,
    framing: Framing,
    shared: &Shared,
    refusals: mpsc::Sender<u32>,
) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    loop {
        // Room for a good read even after frames were split off the front.
        buf.reserve(READ_SIZE);
        match from.read_buf(&mut buf).await {
            Ok(0) => return Ended::ClientClosed,
            Ok(_) => {}
            Err(e) => return Ended::Failed(format!("client: {e}")),
        }
        if framing == Framing::Opaque {
            shared.touch();
            if let Err(e) = to.write_all(&buf).await {
                return Ended::Failed(format!("runtime: {e}"));
            }
            buf.clear();
            continue;
        }
        loop {
            let (len, kind) = match spdy::peek(&buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return Ended::Failed(format!("client: {e}")),
            };
            let frame = buf.split_to(len);
            if matches!(kind, FrameKind::Data { empty: false, .. }) {
                shared.touch();
            }
            match shared.table(|t| t.from_client(kind)).unwrap_or(Verdict::Drop) {
                Verdict::Forward => {
                    if let Err(e) = to.write_all(&frame).await {
                        return Ended::Failed(format!("runtime: {e}"));
                    }
                }
                Verdict::Drop => {}
                Verdict::Refuse(stream) => {
                    tracing::info!(stream, "port-forward: stream refused: too many streams open");
                    if refusals.send(stream).await.is_err() {
                        return Ended::ClientClosed;
                    }
                }
            }
        }
    }
}

/// Runtime → client, and the refusals of streams the runtime never saw.
async fn downstream<R, W>(
    from: &mut R,
    to: &mut W,
    mut buf: BytesMut,
    framing: Framing,
    shared: &Shared,
    refused: &mut mpsc::Receiver<u32>,
) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        if framing == Framing::Opaque {
            if !buf.is_empty() {
                shared.touch();
                if let Err(e) = to.write_all(&buf).await {
                    return Ended::Failed(format!("client: {e}"));
                }
                buf.clear();
            }
        } else {
            loop {
                let (len, kind) = match spdy::peek(&buf) {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => return Ended::Failed(format!("runtime: {e}")),
                };
                let frame = buf.split_to(len);
                if matches!(kind, FrameKind::Data { empty: false, .. }) {
                    shared.touch();
                }
                shared.table(|t| t.from_runtime(kind));
                if let Err(e) = to.write_all(&frame).await {
                    return Ended::Failed(format!("client: {e}"));
                }
            }
        }
        buf.reserve(READ_SIZE);
        tokio::select! {
            read = from.read_buf(&mut buf) => match read {
                Ok(0) => return Ended::RuntimeClosed,
                Ok(_) => {}
                Err(e) => return Ended::Failed(format!("runtime: {e}")),
            },
            Some(stream) = refused.recv() => {
                let rst = spdy::rst_stream_frame(stream, spdy::REFUSED_STREAM);
                if let Err(e) = to.write_all(&rst).await {
                    return Ended::Failed(format!("client: {e}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::spdy::{FrameKind as K, HeaderEncoder, data_frame, ping_frame};

    #[test]
    fn streams_close_when_both_sides_finish_or_either_resets() {
        let mut t = StreamTable::new(4);
        assert_eq!(t.from_client(K::SynStream { stream: 1, fin: true }), Verdict::Forward);
        assert_eq!(t.from_client(K::SynStream { stream: 3, fin: false }), Verdict::Forward);
        t.from_runtime(K::SynReply { stream: 1, fin: false });
        t.from_runtime(K::SynReply { stream: 3, fin: false });
        assert_eq!(t.len(), 2);
        // The error stream: the client half-closed it at once; the runtime's FIN ends it.
        t.from_runtime(K::Data { stream: 1, fin: true, empty: false });
        assert_eq!(t.len(), 1);
        // The data stream: the client's FIN, then the runtime's.
        let fin = K::Data { stream: 3, fin: true, empty: true };
        assert_eq!(t.from_client(fin), Verdict::Forward);
        t.from_runtime(fin);
        assert!(t.is_empty());
        // kubectl resets its data stream after use: the runtime has forgotten it already.
        assert_eq!(t.from_client(K::RstStream { stream: 3 }), Verdict::Drop);
        assert_eq!(t.from_client(K::SynStream { stream: 5, fin: false }), Verdict::Forward);
        t.from_runtime(K::RstStream { stream: 5 });
        assert!(t.is_empty());
        assert_eq!(t.from_client(K::Connection), Verdict::Forward);
    }

    #[test]
    fn streams_past_the_limit_are_refused_and_their_frames_dropped() {
        let mut t = StreamTable::new(2);
        assert_eq!(t.from_client(K::SynStream { stream: 1, fin: false }), Verdict::Forward);
        assert_eq!(t.from_client(K::SynStream { stream: 3, fin: false }), Verdict::Forward);
        assert_eq!(t.from_client(K::SynStream { stream: 5, fin: false }), Verdict::Refuse(5));
        let data = K::Data { stream: 5, fin: false, empty: false };
        assert_eq!(t.from_client(data), Verdict::Drop);
        assert_eq!(t.len(), 2);
        // Once one closes, a new one fits.
        assert_eq!(t.from_client(K::RstStream { stream: 1 }), Verdict::Forward);
        assert_eq!(t.from_client(K::SynStream { stream: 7, fin: false }), Verdict::Forward);
    }

    fn syn(stream: u32, port: &str) -> Vec<u8> {
        let block = HeaderEncoder::default().encode(&[
            ("streamtype", "data"),
            ("port", port),
            ("requestid", "0"),
        ]);
        spdy::syn_stream_frame(stream, &block)
    }

    fn limits(idle: Option<Duration>, max_streams: usize) -> Limits {
        Limits { idle, max_streams, stop: CancellationToken::new() }
    }

    /// Reads until `want` bytes arrived.
    async fn read_exactly<R: AsyncRead + Unpin>(r: &mut R, want: usize) -> Vec<u8> {
        let mut out = vec![0; want];
        r.read_exact(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn frames_pass_unchanged_and_extra_streams_are_reset_for_the_client_alone() {
        let (client, mut kubectl) = tokio::io::duplex(1 << 16);
        let (runtime, mut containerd) = tokio::io::duplex(1 << 16);
        let early = BytesMut::from(&ping_frame(2)[..]);
        let task = tokio::spawn(splice(client, runtime, early, Framing::Spdy, limits(None, 2)));
        // What the runtime sent with its upgrade answer comes first.
        assert_eq!(read_exactly(&mut kubectl, 12).await, ping_frame(2));
        let (one, two, three) = (syn(1, "80"), syn(3, "80"), syn(5, "80"));
        let mut sent = one.clone();
        sent.extend_from_slice(&two);
        sent.extend_from_slice(&three);
        // Written in two pieces cut mid-frame: frames are reassembled before they are judged.
        kubectl.write_all(&sent[..5]).await.unwrap();
        kubectl.write_all(&sent[5..]).await.unwrap();
        let got = read_exactly(&mut containerd, one.len() + two.len()).await;
        assert_eq!(got, [one, two].concat());
        let rst = spdy::rst_stream_frame(5, spdy::REFUSED_STREAM);
        assert_eq!(read_exactly(&mut kubectl, rst.len()).await, rst);
        // Data for the refused stream never reaches the runtime; the next frame does.
        kubectl.write_all(&data_frame(5, false, b"lost")).await.unwrap();
        kubectl.write_all(&data_frame(1, false, b"GET /")).await.unwrap();
        assert_eq!(read_exactly(&mut containerd, 13).await, data_frame(1, false, b"GET /"));
        containerd.write_all(&data_frame(1, true, b"page")).await.unwrap();
        assert_eq!(read_exactly(&mut kubectl, 12).await, data_frame(1, true, b"page"));
        drop(containerd);
        assert_eq!(task.await.unwrap(), Ended::RuntimeClosed);
    }

    #[tokio::test(start_paused = true)]
    async fn pings_do_not_keep_an_idle_forward_open_but_data_does() {
        let (client, mut kubectl) = tokio::io::duplex(1 << 16);
        let (runtime, mut containerd) = tokio::io::duplex(1 << 16);
        let idle = Duration::from_secs(60);
        let task = tokio::spawn(splice(
            client,
            runtime,
            BytesMut::new(),
            Framing::Spdy,
            limits(Some(idle), MAX_STREAMS),
        ));
        kubectl.write_all(&syn(1, "80")).await.unwrap();
        let n = syn(1, "80").len();
        read_exactly(&mut containerd, n).await;
        tokio::time::sleep(Duration::from_secs(50)).await;
        kubectl.write_all(&data_frame(1, false, b"x")).await.unwrap();
        read_exactly(&mut containerd, 9).await;
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(10)).await;
            if task.is_finished() {
                break;
            }
            let _ = kubectl.write_all(&ping_frame(7)).await;
        }
        // 50 s after the data it was still open; 60 s after it, pings notwithstanding, closed.
        assert_eq!(task.await.unwrap(), Ended::Idle);
        let mut rest = Vec::new();
        containerd.read_to_end(&mut rest).await.unwrap();
        assert!(rest.ends_with(&spdy::goaway_frame()), "the runtime is told goodbye");
    }

    #[tokio::test]
    async fn the_kubelet_stopping_ends_the_splice_and_garbage_fails_it() {
        let (client, _kubectl) = tokio::io::duplex(1024);
        let (runtime, _containerd) = tokio::io::duplex(1024);
        let l = limits(None, MAX_STREAMS);
        let stop = l.stop.clone();
        let task = tokio::spawn(splice(client, runtime, BytesMut::new(), Framing::Spdy, l));
        stop.cancel();
        assert_eq!(task.await.unwrap(), Ended::Stopped);

        let (client, mut kubectl) = tokio::io::duplex(1024);
        let (runtime, _containerd) = tokio::io::duplex(1024);
        let task = tokio::spawn(splice(
            client,
            runtime,
            BytesMut::new(),
            Framing::Spdy,
            limits(None, MAX_STREAMS),
        ));
        kubectl.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let Ended::Failed(why) = task.await.unwrap() else { panic!("not failed") };
        assert!(why.starts_with("client: a frame of"), "{why}");
    }

    #[tokio::test]
    async fn opaque_connections_are_spliced_as_bytes() {
        let (client, mut browser) = tokio::io::duplex(1024);
        let (runtime, mut containerd) = tokio::io::duplex(1024);
        let task = tokio::spawn(splice(
            client,
            runtime,
            BytesMut::from(&b"early"[..]),
            Framing::Opaque,
            limits(None, MAX_STREAMS),
        ));
        assert_eq!(read_exactly(&mut browser, 5).await, b"early");
        browser.write_all(b"\x82\x01x").await.unwrap();
        assert_eq!(read_exactly(&mut containerd, 3).await, b"\x82\x01x");
        drop(browser);
        assert_eq!(task.await.unwrap(), Ended::ClientClosed);
    }
}
