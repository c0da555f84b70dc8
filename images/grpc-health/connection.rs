//! One HTTP/2 connection, server side (RFC 9113), with no IO: bytes in, complete requests out;
//! replies in, bytes out. The server's IO loop owns one per TCP connection.
//!
//! It keeps what a correct peer needs and no more: the preface and SETTINGS exchange, PING
//! answers, flow control both ways (received DATA is counted against the windows and the
//! connection's window replenished; reply DATA waits for the client's windows), HEADERS and
//! CONTINUATION decoded through one HPACK decoder, RST_STREAM, GOAWAY both ways, and limits on
//! frame size, header block and list size, body size and concurrent streams. A protocol error
//! ends the connection with GOAWAY; input that is not HTTP/2 at all ends it silently.

use std::collections::BTreeMap;

use super::frame::{self, ErrorCode, Header};
use super::grpc::{self, Code, Reply};
use super::hpack;

/// `SETTINGS_MAX_CONCURRENT_STREAMS` the server announces and enforces.
pub const MAX_STREAMS: usize = 100;
/// Largest header block (HEADERS plus CONTINUATION frames) buffered before decoding.
const MAX_HEADER_BLOCK: usize = 64 * 1024;
/// `SETTINGS_MAX_HEADER_LIST_SIZE` the server announces; larger requests are refused.
const MAX_HEADER_LIST: usize = 16 * 1024;
/// Largest request body: one length-prefixed message.
const MAX_BODY: usize = 5 + grpc::MAX_MESSAGE;

/// The request fields the server looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    pub grpc_encoding: Option<String>,
}

/// A complete request: its headers and its whole body.
#[derive(Debug)]
pub struct Request {
    pub stream: u32,
    pub head: Head,
    pub body: Vec<u8>,
}

/// A reply as HPACK header blocks and a DATA payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// One HEADERS frame that ends the stream.
    TrailersOnly(Vec<u8>),
    /// Headers, one DATA payload, then trailers that end the stream.
    Message { headers: Vec<u8>, data: Vec<u8>, trailers: Vec<u8> },
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the client's connection preface.
    Preface,
    /// The preface is in; the next frame must be the client's SETTINGS.
    FirstSettings,
    Open,
    /// A header block is arriving: only CONTINUATION frames on its stream may follow.
    Continuation {
        stream: u32,
        end_stream: bool,
        block: Vec<u8>,
    },
    /// The connection failed; nothing more is read.
    Failed(String),
}

#[derive(Debug)]
enum StreamState {
    /// Headers in, body arriving.
    Receiving { head: Head, body: Vec<u8>, recv_window: i64 },
    /// The request was handed out; the reply has not come yet.
    Replying,
    /// Reply headers sent; `data[sent..]` waits for window, then the trailers end the stream.
    Sending { data: Vec<u8>, sent: usize, trailers: Vec<u8> },
}

#[derive(Debug)]
struct Stream {
    send_window: i64,
    state: StreamState,
}

/// One server-side HTTP/2 connection.
#[derive(Debug)]
pub struct Connection {
    phase: Phase,
    input: Vec<u8>,
    output: Vec<u8>,
    decoder: hpack::Decoder,
    streams: BTreeMap<u32, Stream>,
    /// Highest stream the client opened: lower ids not in `streams` are closed, higher idle.
    last_stream: u32,
    recv_window: i64,
    send_window: i64,
    peer_initial_window: i64,
    peer_max_frame: usize,
    peer_going_away: bool,
    going_away: bool,
}

impl Default for Connection {
    fn default() -> Self {
        Connection::new()
    }
}

impl Connection {
    /// A connection whose SETTINGS are already in the output.
    pub fn new() -> Connection {
        let mut output = Vec::new();
        frame::put_settings(
            &mut output,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS as u32),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST as u32),
            ],
        );
        Connection {
            phase: Phase::Preface,
            input: Vec::new(),
            output,
            decoder: hpack::Decoder::default(),
            streams: BTreeMap::new(),
            last_stream: 0,
            recv_window: frame::DEFAULT_WINDOW,
            send_window: frame::DEFAULT_WINDOW,
            peer_initial_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            peer_going_away: false,
            going_away: false,
        }
    }

    /// Bytes to write to the client.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// The preface and the client's SETTINGS have arrived.
    pub fn is_established(&self) -> bool {
        !matches!(self.phase, Phase::Preface | Phase::FirstSettings | Phase::Failed(_))
    }

    /// Why the connection failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        match &self.phase {
            Phase::Failed(reason) => Some(reason),
            _ => None,
        }
    }

    /// Nothing more will happen: failed, or GOAWAY sent or received and every stream done.
    /// The caller writes the remaining output and closes.
    pub fn is_finished(&self) -> bool {
        self.failure().is_some() || ((self.going_away || self.peer_going_away) && self.is_idle())
    }

    /// The stream's request was handed out and still wants its reply (the client has not
    /// reset it).
    pub fn awaits_reply(&self, stream: u32) -> bool {
        self.streams.get(&stream).is_some_and(|s| matches!(s.state, StreamState::Replying))
    }

    /// No stream is open.
    pub fn is_idle(&self) -> bool {
        self.streams.is_empty()
    }

    /// Starts a graceful close: GOAWAY with the last stream, then finish what was asked.
    pub fn go_away(&mut self) {
        if !self.going_away && self.failure().is_none() {
            self.going_away = true;
            frame::put_goaway(&mut self.output, self.last_stream, ErrorCode::NoError, "");
        }
    }

    /// Feeds bytes read from the client; returns the requests they completed.
    pub fn receive(&mut self, bytes: &[u8]) -> Vec<Request> {
        let mut requests = Vec::new();
        if self.failure().is_some() {
            return requests;
        }
        let mut input = std::mem::take(&mut self.input);
        input.extend_from_slice(bytes);
        let mut pos = 0;
        loop {
            if matches!(self.phase, Phase::Failed(_)) {
                break;
            }
            let rest = &input[pos..];
            if matches!(self.phase, Phase::Preface) {
                let n = rest.len().min(frame::PREFACE.len());
                if rest[..n] != frame::PREFACE[..n] {
                    // Not HTTP/2 at all: no GOAWAY, the peer would not understand it.
                    self.phase = Phase::Failed("not an HTTP/2 connection preface".into());
                    break;
                }
                if n < frame::PREFACE.len() {
                    break;
                }
                pos += n;
                self.phase = Phase::FirstSettings;
                continue;
            }
            let Some(head_bytes) = rest.get(..frame::HEADER_LEN) else { break };
            let header = Header::parse(head_bytes.try_into().unwrap_or(&[0; frame::HEADER_LEN]));
            if header.len > frame::DEFAULT_MAX_FRAME {
                self.fail(ErrorCode::FrameSize, format!("{}-byte frame", header.len));
                break;
            }
            let Some(payload) = rest.get(frame::HEADER_LEN..frame::HEADER_LEN + header.len) else {
                break;
            };
            pos += frame::HEADER_LEN + header.len;
            self.frame(header, payload, &mut requests);
        }
        input.drain(..pos);
        if self.failure().is_none() {
            self.input = input;
        }
        requests
    }

    /// Answers a request. Ignored when the stream is gone (the client reset it).
    pub fn reply(&mut self, stream: u32, response: Response) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        if !matches!(s.state, StreamState::Replying) {
            return;
        }
        match response {
            Response::TrailersOnly(block) => {
                put_headers(&mut self.output, self.peer_max_frame, stream, &block, true);
                self.streams.remove(&stream);
            }
            Response::Message { headers, data, trailers } => {
                put_headers(&mut self.output, self.peer_max_frame, stream, &headers, false);
                s.state = StreamState::Sending { data, sent: 0, trailers };
                self.flush(stream);
            }
        }
    }

    fn fail(&mut self, code: ErrorCode, reason: String) {
        frame::put_goaway(&mut self.output, self.last_stream, code, &reason);
        self.streams.clear();
        self.phase = Phase::Failed(format!("{code:?}: {reason}"));
    }

    fn reset(&mut self, stream: u32, code: ErrorCode) {
        frame::put_rst_stream(&mut self.output, stream, code);
        self.streams.remove(&stream);
    }

    /// Answers at once with a trailers-only error; resets the stream if the client is still
    /// sending, so it stops.
    fn refuse(&mut self, stream: u32, client_done: bool, reply: Reply) {
        if let Response::TrailersOnly(block) = reply.into_response() {
            put_headers(&mut self.output, self.peer_max_frame, stream, &block, true);
        }
        if client_done {
            self.streams.remove(&stream);
        } else {
            self.reset(stream, ErrorCode::NoError);
        }
    }

    fn frame(&mut self, h: Header, payload: &[u8], requests: &mut Vec<Request>) {
        if let Phase::Continuation { stream, .. } = self.phase
            && (h.kind != frame::CONTINUATION || h.stream != stream)
        {
            return self
                .fail(ErrorCode::Protocol, format!("frame type {} inside a header block", h.kind));
        }
        if matches!(self.phase, Phase::FirstSettings)
            && (h.kind != frame::SETTINGS || h.has(frame::ACK))
        {
            return self.fail(ErrorCode::Protocol, "the first frame is not SETTINGS".into());
        }
        match h.kind {
            frame::DATA => self.on_data(h, payload, requests),
            frame::HEADERS => self.on_headers(h, payload, requests),
            frame::CONTINUATION => self.on_continuation(h, payload, requests),
            frame::PRIORITY => {
                if h.stream == 0 {
                    self.fail(ErrorCode::Protocol, "PRIORITY on stream 0".into());
                } else if h.len != 5 {
                    self.fail(ErrorCode::FrameSize, "PRIORITY is not 5 bytes".into());
                }
            }
            frame::RST_STREAM => self.on_rst_stream(h, payload),
            frame::SETTINGS => self.on_settings(h, payload),
            frame::PUSH_PROMISE => {
                self.fail(ErrorCode::Protocol, "PUSH_PROMISE from a client".into())
            }
            frame::PING => {
                if h.stream != 0 {
                    self.fail(ErrorCode::Protocol, "PING on a stream".into());
                } else if h.len != 8 {
                    self.fail(ErrorCode::FrameSize, "PING is not 8 bytes".into());
                } else if !h.has(frame::ACK) {
                    frame::put(&mut self.output, frame::PING, frame::ACK, 0, payload);
                }
            }
            frame::GOAWAY => {
                if h.stream != 0 {
                    self.fail(ErrorCode::Protocol, "GOAWAY on a stream".into());
                } else if h.len < 8 {
                    self.fail(ErrorCode::FrameSize, "GOAWAY shorter than 8 bytes".into());
                } else {
                    self.peer_going_away = true;
                }
            }
            frame::WINDOW_UPDATE => self.on_window_update(h, payload),
            // Unknown frame types are ignored (section 4.1).
            _ => {}
        }
    }

    fn on_settings(&mut self, h: Header, payload: &[u8]) {
        if h.stream != 0 {
            return self.fail(ErrorCode::Protocol, "SETTINGS on a stream".into());
        }
        if h.has(frame::ACK) {
            if h.len != 0 {
                self.fail(ErrorCode::FrameSize, "SETTINGS ACK with a payload".into());
            }
            return;
        }
        if !h.len.is_multiple_of(6) {
            return self.fail(ErrorCode::FrameSize, "SETTINGS length not a multiple of 6".into());
        }
        for setting in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([setting[0], setting[1]]);
            let value = u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
            match id {
                frame::SETTINGS_ENABLE_PUSH if value > 1 => {
                    return self.fail(ErrorCode::Protocol, format!("ENABLE_PUSH {value}"));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    let value = i64::from(value);
                    if value > frame::MAX_WINDOW {
                        return self
                            .fail(ErrorCode::FlowControl, format!("INITIAL_WINDOW_SIZE {value}"));
                    }
                    let delta = value - self.peer_initial_window;
                    self.peer_initial_window = value;
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                    }
                    if self.streams.values().any(|s| s.send_window > frame::MAX_WINDOW) {
                        return self
                            .fail(ErrorCode::FlowControl, "a stream window overflowed".into());
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&value) {
                        return self.fail(ErrorCode::Protocol, format!("MAX_FRAME_SIZE {value}"));
                    }
                    self.peer_max_frame = value as usize;
                }
                // HEADER_TABLE_SIZE only bounds our encoder's table, which is never used.
                _ => {}
            }
        }
        frame::put(&mut self.output, frame::SETTINGS, frame::ACK, 0, &[]);
        if matches!(self.phase, Phase::FirstSettings) {
            self.phase = Phase::Open;
        }
        self.flush_all();
    }

    fn on_window_update(&mut self, h: Header, payload: &[u8]) {
        if h.len != 4 {
            return self.fail(ErrorCode::FrameSize, "WINDOW_UPDATE is not 4 bytes".into());
        }
        let increment = i64::from(frame::u32_at(payload, 0));
        if h.stream == 0 {
            if increment == 0 {
                return self.fail(ErrorCode::Protocol, "WINDOW_UPDATE of 0".into());
            }
            self.send_window += increment;
            if self.send_window > frame::MAX_WINDOW {
                return self.fail(ErrorCode::FlowControl, "connection window overflowed".into());
            }
            return self.flush_all();
        }
        if h.stream > self.last_stream {
            return self
                .fail(ErrorCode::Protocol, format!("WINDOW_UPDATE on idle stream {}", h.stream));
        }
        let Some(s) = self.streams.get_mut(&h.stream) else { return };
        if increment == 0 {
            return self.reset(h.stream, ErrorCode::Protocol);
        }
        s.send_window += increment;
        if s.send_window > frame::MAX_WINDOW {
            return self.reset(h.stream, ErrorCode::FlowControl);
        }
        self.flush(h.stream);
    }

    fn on_rst_stream(&mut self, h: Header, _payload: &[u8]) {
        if h.stream == 0 {
            return self.fail(ErrorCode::Protocol, "RST_STREAM on stream 0".into());
        }
        if h.len != 4 {
            return self.fail(ErrorCode::FrameSize, "RST_STREAM is not 4 bytes".into());
        }
        if h.stream > self.last_stream {
            return self
                .fail(ErrorCode::Protocol, format!("RST_STREAM on idle stream {}", h.stream));
        }
        self.streams.remove(&h.stream);
    }

    fn on_data(&mut self, h: Header, payload: &[u8], requests: &mut Vec<Request>) {
        if h.stream == 0 {
            return self.fail(ErrorCode::Protocol, "DATA on stream 0".into());
        }
        // The whole frame, padding included, counts against the windows (section 6.9.1).
        let len = h.len as i64;
        self.recv_window -= len;
        if self.recv_window < 0 {
            return self.fail(ErrorCode::FlowControl, "DATA beyond the connection window".into());
        }
        if self.recv_window < frame::DEFAULT_WINDOW / 2 {
            let increment = frame::DEFAULT_WINDOW - self.recv_window;
            frame::put_window_update(&mut self.output, 0, increment as u32);
            self.recv_window = frame::DEFAULT_WINDOW;
        }
        let Some(data) = frame::unpad(&h, payload) else {
            return self.fail(ErrorCode::Protocol, "DATA padding longer than the frame".into());
        };
        if h.stream > self.last_stream {
            return self.fail(ErrorCode::Protocol, format!("DATA on idle stream {}", h.stream));
        }
        let end_stream = h.has(frame::END_STREAM);
        let Some(s) = self.streams.get_mut(&h.stream) else { return };
        let StreamState::Receiving { body, recv_window, .. } = &mut s.state else {
            return self.reset(h.stream, ErrorCode::StreamClosed);
        };
        *recv_window -= len;
        if *recv_window < 0 {
            return self.reset(h.stream, ErrorCode::FlowControl);
        }
        if body.len() + data.len() > MAX_BODY {
            let detail = format!("request message larger than {} bytes", grpc::MAX_MESSAGE);
            return self.refuse(
                h.stream,
                end_stream,
                Reply::error(Code::ResourceExhausted, detail),
            );
        }
        body.extend_from_slice(data);
        if end_stream {
            self.complete(h.stream, requests);
        }
    }

    fn on_headers(&mut self, h: Header, payload: &[u8], requests: &mut Vec<Request>) {
        if h.stream == 0 || h.stream.is_multiple_of(2) {
            return self.fail(ErrorCode::Protocol, format!("HEADERS on stream {}", h.stream));
        }
        let Some(mut fragment) = frame::unpad(&h, payload) else {
            return self.fail(ErrorCode::Protocol, "HEADERS padding longer than the frame".into());
        };
        if h.has(frame::PRIORITY_FLAG) {
            let Some(rest) = fragment.get(5..) else {
                return self
                    .fail(ErrorCode::FrameSize, "HEADERS too short for its priority".into());
            };
            fragment = rest;
        }
        let end_stream = h.has(frame::END_STREAM);
        if h.has(frame::END_HEADERS) {
            self.on_header_block(h.stream, end_stream, fragment, requests);
        } else {
            self.phase =
                Phase::Continuation { stream: h.stream, end_stream, block: fragment.to_vec() };
        }
    }

    fn on_continuation(&mut self, h: Header, payload: &[u8], requests: &mut Vec<Request>) {
        let Phase::Continuation { block, .. } = &mut self.phase else {
            return self.fail(ErrorCode::Protocol, "CONTINUATION without HEADERS".into());
        };
        if block.len() + payload.len() > MAX_HEADER_BLOCK {
            return self.fail(ErrorCode::EnhanceYourCalm, "header block over 64 KiB".into());
        }
        block.extend_from_slice(payload);
        if h.has(frame::END_HEADERS) {
            let Phase::Continuation { stream, end_stream, block } =
                std::mem::replace(&mut self.phase, Phase::Open)
            else {
                return;
            };
            self.on_header_block(stream, end_stream, &block, requests);
        }
    }

    fn on_header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        requests: &mut Vec<Request>,
    ) {
        let mut fields = Fields::default();
        // Every block is decoded, even one for a stream about to be refused: the decoder's
        // table must follow the client's.
        if let Err(e) = self.decoder.decode(block, |n, v| fields.add(n, v)) {
            return self.fail(ErrorCode::Compression, e.to_string());
        }
        if stream <= self.last_stream {
            return match self.streams.get(&stream).map(|s| &s.state) {
                // Trailers end the request.
                Some(StreamState::Receiving { .. }) if end_stream => {
                    self.complete(stream, requests)
                }
                Some(StreamState::Receiving { .. }) => self.reset(stream, ErrorCode::Protocol),
                Some(_) => self.reset(stream, ErrorCode::StreamClosed),
                None => {}
            };
        }
        self.last_stream = stream;
        if self.going_away {
            // Above the last stream our GOAWAY named: ignored, the client retries elsewhere.
            return;
        }
        if self.streams.len() >= MAX_STREAMS {
            return frame::put_rst_stream(&mut self.output, stream, ErrorCode::RefusedStream);
        }
        if fields.size > MAX_HEADER_LIST {
            let detail = format!("request headers larger than {MAX_HEADER_LIST} bytes");
            return self.refuse(stream, end_stream, Reply::error(Code::ResourceExhausted, detail));
        }
        let Some(head) = fields.head() else {
            return frame::put_rst_stream(&mut self.output, stream, ErrorCode::Protocol);
        };
        let state =
            StreamState::Receiving { head, body: Vec::new(), recv_window: frame::DEFAULT_WINDOW };
        self.streams.insert(stream, Stream { send_window: self.peer_initial_window, state });
        if end_stream {
            self.complete(stream, requests);
        }
    }

    fn complete(&mut self, stream: u32, requests: &mut Vec<Request>) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        if let StreamState::Receiving { head, body, .. } =
            std::mem::replace(&mut s.state, StreamState::Replying)
        {
            requests.push(Request { stream, head, body });
        }
    }

    fn flush_all(&mut self) {
        let sending: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| matches!(s.state, StreamState::Sending { .. }))
            .map(|(&id, _)| id)
            .collect();
        for id in sending {
            self.flush(id);
        }
    }

    /// Sends as much of a reply's DATA as the windows allow, then its trailers.
    fn flush(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        let StreamState::Sending { data, sent, trailers } = &mut s.state else { return };
        while *sent < data.len() {
            let window = self.send_window.min(s.send_window).max(0) as usize;
            let n = (data.len() - *sent).min(window).min(self.peer_max_frame);
            if n == 0 {
                return;
            }
            frame::put(&mut self.output, frame::DATA, 0, id, &data[*sent..*sent + n]);
            *sent += n;
            self.send_window -= n as i64;
            s.send_window -= n as i64;
        }
        put_headers(&mut self.output, self.peer_max_frame, id, trailers, true);
        self.streams.remove(&id);
    }
}

/// Appends a header block as HEADERS and, when it does not fit one frame, CONTINUATION frames.
fn put_headers(out: &mut Vec<u8>, max_frame: usize, stream: u32, block: &[u8], end_stream: bool) {
    let mut chunks = block.chunks(max_frame.max(1)).peekable();
    let mut kind = frame::HEADERS;
    let mut flags = if end_stream { frame::END_STREAM } else { 0 };
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        let last = chunks.peek().is_none();
        if last {
            flags |= frame::END_HEADERS;
        }
        frame::put(out, kind, flags, stream, chunk);
        if last {
            return;
        }
        kind = frame::CONTINUATION;
        flags = 0;
    }
}

/// The request fields kept while a block is decoded, and the header list size (RFC 9113
/// section 6.5.2: names and values plus 32 per field).
#[derive(Debug, Default)]
struct Fields {
    method: Option<String>,
    path: Option<String>,
    content_type: Option<String>,
    grpc_encoding: Option<String>,
    size: usize,
}

impl Fields {
    fn add(&mut self, name: &[u8], value: &[u8]) {
        self.size = self.size.saturating_add(name.len() + value.len() + 32);
        if self.size > MAX_HEADER_LIST {
            return;
        }
        let text = || Some(String::from_utf8_lossy(value).into_owned());
        match name {
            b":method" => self.method = text(),
            b":path" => self.path = text(),
            b"content-type" => self.content_type = text(),
            b"grpc-encoding" => self.grpc_encoding = text(),
            _ => {}
        }
    }

    /// The head, when the pseudo-headers a request needs are there.
    fn head(self) -> Option<Head> {
        Some(Head {
            method: self.method?,
            path: self.path?,
            content_type: self.content_type,
            grpc_encoding: self.grpc_encoding,
        })
    }
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
