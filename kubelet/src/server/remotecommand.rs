//! The remote command protocol kubectl and client libraries speak for exec over WebSocket
//! (upstream's `remotecommand` and `wsstream`): binary messages whose first byte is the channel,
//! 0 stdin, 1 stdout, 2 stderr, 3 error (a `Status` JSON that ends the command: `Success`, or
//! `Failure` with reason `NonZeroExitCode` and the exit code as a cause), 4 resize (a JSON
//! `{"Width":…,"Height":…}`); `v5.channel.k8s.io` adds 255, a close signal whose payload names the
//! channel the client is done writing (stdin's end of file).
//!
//! [`Relay`] is the pure translation between the client's messages and the runtime's streams
//! (the SPDY streams of [`spdy`](super::spdy)); the I/O loop in [`exec`](super::exec) only moves
//! what it returns.

/// A client → kubelet channel byte.
pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// `v5.channel.k8s.io` only: "I will write no more on the channel in the payload".
pub const CLOSE: u8 = 255;

/// The largest error-channel status kept (a `Status` is a few hundred bytes).
pub const MAX_STATUS: usize = 64 * 1024;

/// The WebSocket subprotocols served, in order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    V5,
    V4,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::V5, Protocol::V4];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::V5 => "v5.channel.k8s.io",
            Protocol::V4 => "v4.channel.k8s.io",
        }
    }

    /// Our preferred protocol among those the client offers (`Sec-WebSocket-Protocol` values,
    /// each possibly a comma-separated list).
    pub fn negotiate<'a>(offered: impl IntoIterator<Item = &'a str>) -> Option<Protocol> {
        let offered: Vec<&str> =
            offered.into_iter().flat_map(|h| h.split(',')).map(str::trim).collect();
        Protocol::ALL.into_iter().find(|p| offered.contains(&p.name()))
    }
}

/// The runtime's streams for one exec (the `streamType` of each SPDY stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuntimeStream {
    Error,
    Stdin,
    Stdout,
    Stderr,
    Resize,
}

impl RuntimeStream {
    /// The `streamType` header value.
    pub fn stream_type(self) -> &'static str {
        match self {
            RuntimeStream::Error => "error",
            RuntimeStream::Stdin => "stdin",
            RuntimeStream::Stdout => "stdout",
            RuntimeStream::Stderr => "stderr",
            RuntimeStream::Resize => "resize",
        }
    }
}

/// Which streams an exec has (upstream's `Options`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl StreamOptions {
    /// The streams to open, in upstream's order: error first, resize only with a TTY.
    pub fn streams(self) -> Vec<RuntimeStream> {
        let mut s = vec![RuntimeStream::Error];
        if self.stdin {
            s.push(RuntimeStream::Stdin);
        }
        if self.stdout {
            s.push(RuntimeStream::Stdout);
        }
        if self.stderr {
            s.push(RuntimeStream::Stderr);
        }
        if self.tty {
            s.push(RuntimeStream::Resize);
        }
        s
    }
}

/// What the runtime must be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToRuntime {
    Data(RuntimeStream, Vec<u8>),
    /// Half-close: the client will write no more on this stream.
    Close(RuntimeStream),
}

/// One message for the client: the channel byte, then the data.
pub fn frame(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 1);
    out.push(channel);
    out.extend_from_slice(data);
    out
}

/// The translation state of one exec.
#[derive(Debug)]
pub struct Relay {
    protocol: Protocol,
    opts: StreamOptions,
    stdin_closed: bool,
    status: Vec<u8>,
    status_sent: bool,
}

impl Relay {
    pub fn new(protocol: Protocol, opts: StreamOptions) -> Self {
        Self { protocol, opts, stdin_closed: false, status: Vec::new(), status_sent: false }
    }

    /// A binary message from the client. Messages for channels this exec does not have (stdin
    /// without `input=1`, resize without a TTY, anything unknown) are dropped, as upstream does.
    pub fn from_client(&mut self, msg: &[u8]) -> Option<ToRuntime> {
        let (&channel, data) = msg.split_first()?;
        match channel {
            STDIN if self.opts.stdin && !self.stdin_closed && !data.is_empty() => {
                Some(ToRuntime::Data(RuntimeStream::Stdin, data.to_vec()))
            }
            RESIZE if self.opts.tty => Some(ToRuntime::Data(RuntimeStream::Resize, data.to_vec())),
            CLOSE if self.protocol == Protocol::V5 => match data.first() {
                Some(&STDIN) if self.opts.stdin && !self.stdin_closed => {
                    self.stdin_closed = true;
                    Some(ToRuntime::Close(RuntimeStream::Stdin))
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// Data from the runtime on `stream` (`fin`: the runtime closed it). Returns the messages
    /// for the client. The error stream's status is gathered and sent whole when it closes.
    pub fn from_runtime(&mut self, stream: RuntimeStream, data: &[u8], fin: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        match stream {
            RuntimeStream::Stdout if !data.is_empty() => out.push(frame(STDOUT, data)),
            RuntimeStream::Stderr if !data.is_empty() => out.push(frame(STDERR, data)),
            RuntimeStream::Error => {
                let room = MAX_STATUS.saturating_sub(self.status.len());
                self.status.extend_from_slice(&data[..data.len().min(room)]);
                if fin {
                    out.extend(self.finish());
                }
            }
            _ => {}
        }
        out
    }

    /// The status message, once, if the runtime sent one (at the end of the exec).
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        if self.status_sent || self.status.is_empty() {
            return None;
        }
        self.status_sent = true;
        Some(frame(ERROR, &self.status))
    }
}

/// A `Status` for a failure of the kubelet itself (the runtime's stream broke), sent on the
/// error channel so the client reports it rather than a silent success.
pub fn internal_error_status(message: &str) -> Vec<u8> {
    let status = serde_json::json!({
        "metadata": {}, "status": "Failure", "message": message,
        "reason": "InternalError", "code": 500,
    });
    frame(ERROR, &serde_json::to_vec(&status).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: StreamOptions =
        StreamOptions { stdin: true, stdout: true, stderr: true, tty: false };

    #[test]
    fn negotiates_v5_before_v4_and_nothing_else() {
        assert_eq!(Protocol::negotiate(["v5.channel.k8s.io"]), Some(Protocol::V5));
        assert_eq!(
            Protocol::negotiate(["v4.channel.k8s.io, v5.channel.k8s.io"]),
            Some(Protocol::V5)
        );
        assert_eq!(
            Protocol::negotiate(["base64.channel.k8s.io", "v4.channel.k8s.io"]),
            Some(Protocol::V4)
        );
        assert_eq!(Protocol::negotiate(["channel.k8s.io"]), None);
        assert_eq!(Protocol::negotiate([]), None);
    }

    #[test]
    fn streams_are_opened_in_upstreams_order() {
        use RuntimeStream::*;
        assert_eq!(ALL.streams(), [Error, Stdin, Stdout, Stderr]);
        let tty = StreamOptions { stdin: true, stdout: true, stderr: false, tty: true };
        assert_eq!(tty.streams(), [Error, Stdin, Stdout, Resize]);
    }

    #[test]
    fn client_messages_become_runtime_writes() {
        let mut r = Relay::new(Protocol::V5, ALL);
        assert_eq!(
            r.from_client(b"\x00hi\n"),
            Some(ToRuntime::Data(RuntimeStream::Stdin, b"hi\n".to_vec()))
        );
        assert_eq!(r.from_client(b"\x00"), None, "empty stdin writes are dropped");
        assert_eq!(r.from_client(b""), None);
        assert_eq!(r.from_client(b"\x04{\"Width\":80}"), None, "no TTY: resize dropped");
        assert_eq!(r.from_client(b"\x01out"), None, "clients do not write stdout");
        assert_eq!(r.from_client(b"\xff\x01"), None, "closing a channel we do not read");
        assert_eq!(r.from_client(b"\xff\x00"), Some(ToRuntime::Close(RuntimeStream::Stdin)));
        assert_eq!(r.from_client(b"\xff\x00"), None, "closed once");
        assert_eq!(r.from_client(b"\x00late"), None, "nothing after the close");
    }

    #[test]
    fn v4_has_no_close_and_stdin_needs_input() {
        let mut r = Relay::new(Protocol::V4, ALL);
        assert_eq!(r.from_client(b"\xff\x00"), None);
        let mut r = Relay::new(Protocol::V5, StreamOptions { stdin: false, ..ALL });
        assert_eq!(r.from_client(b"\x00x"), None);
        assert_eq!(r.from_client(b"\xff\x00"), None);
        let tty = StreamOptions { stdin: true, stdout: true, stderr: false, tty: true };
        let mut r = Relay::new(Protocol::V5, tty);
        assert_eq!(
            r.from_client(b"\x04{\"Width\":80,\"Height\":24}"),
            Some(ToRuntime::Data(RuntimeStream::Resize, b"{\"Width\":80,\"Height\":24}".to_vec()))
        );
    }

    #[test]
    fn runtime_output_goes_to_its_channel_and_the_status_is_sent_whole() {
        let mut r = Relay::new(Protocol::V5, ALL);
        assert_eq!(r.from_runtime(RuntimeStream::Stdout, b"out", false), [b"\x01out".to_vec()]);
        assert_eq!(r.from_runtime(RuntimeStream::Stderr, b"err", false), [b"\x02err".to_vec()]);
        assert!(r.from_runtime(RuntimeStream::Stdout, b"", true).is_empty());
        assert!(r.from_runtime(RuntimeStream::Error, b"{\"status\":", false).is_empty());
        assert_eq!(
            r.from_runtime(RuntimeStream::Error, b"\"Success\"}", true),
            [b"\x03{\"status\":\"Success\"}".to_vec()]
        );
        assert_eq!(r.finish(), None, "sent once");
    }

    #[test]
    fn a_status_without_its_close_is_sent_at_the_end_and_is_bounded() {
        let mut r = Relay::new(Protocol::V4, ALL);
        assert_eq!(r.finish(), None, "no status, nothing to send");
        r.from_runtime(RuntimeStream::Error, &vec![b'x'; MAX_STATUS + 10], false);
        assert_eq!(r.finish().map(|f| f.len()), Some(MAX_STATUS + 1));
        let status = internal_error_status("the runtime's stream broke");
        assert_eq!(status[0], ERROR);
        let v: serde_json::Value = serde_json::from_slice(&status[1..]).unwrap();
        assert_eq!((v["status"].as_str(), v["code"].as_i64()), (Some("Failure"), Some(500)));
    }
}
