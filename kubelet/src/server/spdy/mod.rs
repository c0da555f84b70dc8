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
//! `GOAWAY`. Flow control (`WINDOW_UPDATE`) is ignored, as the Go implementation does. Rooms:
//! [`frame`], the pure framing (decode, peek, encoders; unit-tested); [`upgrade`], the HTTP/1.1
//! upgrade's URL and response head; [`streams`], [`RuntimeStreams`]: the I/O of one exec's streams.

mod frame;
mod streams;
mod upgrade;

pub use frame::{
    Frame, FrameError, FrameKind, HeaderEncoder, MAX_FRAME, REFUSED_STREAM, data_frame, decode,
    goaway_frame, peek, ping_frame, rst_stream_frame, syn_stream_frame,
};
pub use streams::{Event, PROTOCOL, RuntimeStreams, SpdyError};
pub use upgrade::{PROTOCOL_HEADER, ResponseHead, read_response_head, refusal_body, split_url};
