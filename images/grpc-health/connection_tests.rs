//! Frame-level tests of `connection`: bytes in, frames out, no sockets.

use super::*;
use frame::{
    ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING, RST_STREAM, SETTINGS,
    WINDOW_UPDATE,
};

type Frame = (Header, Vec<u8>);

fn frames(mut out: &[u8]) -> Vec<Frame> {
    let mut all = Vec::new();
    while !out.is_empty() {
        let h = Header::parse(out[..frame::HEADER_LEN].try_into().unwrap());
        all.push((h, out[frame::HEADER_LEN..frame::HEADER_LEN + h.len].to_vec()));
        out = &out[frame::HEADER_LEN + h.len..];
    }
    all
}

fn put(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    frame::put(out, kind, flags, stream, payload);
}

fn request_block(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    hpack::put_indexed(&mut b, 3); // :method POST
    hpack::put_indexed(&mut b, 6); // :scheme http
    hpack::put_literal_indexed_name(&mut b, 4, path.as_bytes());
    hpack::put_literal_indexed_name(&mut b, hpack::CONTENT_TYPE, b"application/grpc");
    b
}

/// A connection past the handshake, with the client's SETTINGS, and its output drained.
fn open(settings: &[(u16, u32)]) -> Connection {
    let mut c = Connection::new();
    let mut input = frame::PREFACE.to_vec();
    frame::put_settings(&mut input, settings);
    assert!(c.receive(&input).is_empty());
    assert!(c.is_established());
    c.take_output();
    c
}

fn send(c: &mut Connection, f: impl FnOnce(&mut Vec<u8>)) -> (Vec<Request>, Vec<Frame>) {
    let mut input = Vec::new();
    f(&mut input);
    let requests = c.receive(&input);
    (requests, frames(&c.take_output()))
}

fn kinds(frames: &[Frame]) -> Vec<(u8, u8, u32)> {
    frames.iter().map(|(h, _)| (h.kind, h.flags, h.stream)).collect()
}

fn goaway_code(frames: &[Frame]) -> Option<u32> {
    let (h, p) = frames.last()?;
    (h.kind == GOAWAY).then(|| u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
}

fn ok_reply() -> Response {
    Reply::ok(vec![8, 1]).into_response()
}

#[test]
fn the_handshake_exchanges_settings_and_pings_are_answered() {
    let mut c = Connection::new();
    let mut input = frame::PREFACE.to_vec();
    frame::put_settings(&mut input, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)]);
    put(&mut input, PING, 0, 0, b"12345678");
    put(&mut input, PING, ACK, 0, b"ignored!");
    // Fed one byte at a time: frames are only handled once whole.
    for b in &input {
        assert!(c.receive(std::slice::from_ref(b)).is_empty());
    }
    let out = frames(&c.take_output());
    assert_eq!(kinds(&out), [(SETTINGS, 0, 0), (SETTINGS, ACK, 0), (PING, ACK, 0)]);
    assert_eq!(out[2].1, b"12345678");
    assert!(c.is_established() && !c.is_finished());
}

#[test]
fn a_request_is_handed_out_once_complete_and_answered_with_headers_data_trailers() {
    let mut c = open(&[]);
    let (requests, out) = send(&mut c, |i| {
        put(i, HEADERS, END_HEADERS, 1, &request_block("/grpc.health.v1.Health/Check"));
        put(i, DATA, 0, 1, &[0, 0, 0, 0, 3, 10]);
    });
    assert!(requests.is_empty() && out.is_empty());
    let (requests, _) = send(&mut c, |i| put(i, DATA, END_STREAM, 1, &[1, b'x']));
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.stream, r.head.path.as_str(), r.head.method.as_str()),
        (1, "/grpc.health.v1.Health/Check", "POST")
    );
    assert_eq!(r.head.content_type.as_deref(), Some("application/grpc"));
    assert_eq!(r.body, [0, 0, 0, 0, 3, 10, 1, b'x']);

    c.reply(1, ok_reply());
    let out = frames(&c.take_output());
    assert_eq!(
        kinds(&out),
        [(HEADERS, END_HEADERS, 1), (DATA, 0, 1), (HEADERS, END_HEADERS | END_STREAM, 1)]
    );
    assert_eq!(out[1].1, [0, 0, 0, 0, 2, 8, 1]);
    assert!(c.is_idle());
    // A second reply to the same stream is ignored.
    c.reply(1, ok_reply());
    assert!(c.take_output().is_empty());
}

#[test]
fn a_header_block_split_over_continuation_frames_is_one_request() {
    let mut c = open(&[]);
    let block = request_block("/a/b");
    let (requests, _) = send(&mut c, |i| {
        put(i, HEADERS, END_STREAM, 3, &block[..2]);
        put(i, CONTINUATION, 0, 3, &block[2..5]);
        put(i, CONTINUATION, END_HEADERS, 3, &block[5..]);
    });
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].head.path, "/a/b");
}

#[test]
fn reply_data_waits_for_the_clients_window() {
    let mut c = open(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    let (requests, _) =
        send(&mut c, |i| put(i, HEADERS, END_HEADERS | END_STREAM, 1, &request_block("/x")));
    assert_eq!(requests.len(), 1);
    c.reply(1, ok_reply());
    assert_eq!(kinds(&frames(&c.take_output())), [(HEADERS, END_HEADERS, 1)]);
    let (_, out) = send(&mut c, |i| put(i, WINDOW_UPDATE, 0, 1, &3u32.to_be_bytes()));
    assert_eq!(kinds(&out), [(DATA, 0, 1)]);
    assert_eq!(out[0].1, [0, 0, 0]);
    // Raising the initial window through SETTINGS releases the rest.
    let (_, out) = send(&mut c, |i| {
        frame::put_settings(i, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 100)]);
    });
    assert_eq!(
        kinds(&out),
        [(SETTINGS, ACK, 0), (DATA, 0, 1), (HEADERS, END_HEADERS | END_STREAM, 1)]
    );
    assert_eq!(out[1].1, [0, 2, 8, 1]);
}

#[test]
fn a_stream_the_client_reset_is_never_answered() {
    let mut c = open(&[]);
    send(&mut c, |i| put(i, HEADERS, END_HEADERS | END_STREAM, 1, &request_block("/x")));
    let (_, out) = send(&mut c, |i| put(i, RST_STREAM, 0, 1, &8u32.to_be_bytes()));
    assert!(out.is_empty());
    c.reply(1, ok_reply());
    assert!(c.take_output().is_empty());
    assert!(c.is_idle() && !c.is_finished());
}

#[test]
fn streams_beyond_the_limit_are_refused() {
    let mut c = open(&[]);
    let (_, out) = send(&mut c, |i| {
        for n in 0..=MAX_STREAMS as u32 {
            put(i, HEADERS, END_HEADERS, 2 * n + 1, &request_block("/x"));
        }
    });
    assert_eq!(kinds(&out), [(RST_STREAM, 0, 2 * MAX_STREAMS as u32 + 1)]);
    assert_eq!(out[0].1, (ErrorCode::RefusedStream as u32).to_be_bytes());
}

#[test]
fn a_body_over_the_limit_is_refused_with_resource_exhausted() {
    let mut c = open(&[]);
    let (requests, out) = send(&mut c, |i| {
        put(i, HEADERS, END_HEADERS, 1, &request_block("/x"));
        for _ in 0..3 {
            put(i, DATA, 0, 1, &[0; 8000]);
        }
    });
    assert!(requests.is_empty());
    assert_eq!(kinds(&out), [(HEADERS, END_HEADERS | END_STREAM, 1), (RST_STREAM, 0, 1)],);
    let mut fields = Vec::new();
    hpack::Decoder::default()
        .decode(&out[0].1, |n, v| fields.push((n.to_vec(), v.to_vec())))
        .unwrap();
    assert!(fields.contains(&(b"grpc-status".to_vec(), b"8".to_vec())));
    assert!(!c.is_finished());
}

#[test]
fn a_request_without_path_is_reset() {
    let mut c = open(&[]);
    let mut block = Vec::new();
    hpack::put_indexed(&mut block, 3);
    let (requests, out) = send(&mut c, |i| put(i, HEADERS, END_HEADERS | END_STREAM, 1, &block));
    assert!(requests.is_empty());
    assert_eq!(kinds(&out), [(RST_STREAM, 0, 1)]);
}

#[test]
fn garbage_instead_of_the_preface_ends_the_connection_at_once() {
    let mut c = Connection::new();
    c.take_output();
    assert!(c.receive(b"GET / HTTP/1.1\r\n").is_empty());
    assert!(c.is_finished());
    assert!(c.take_output().is_empty());
    assert!(c.failure().unwrap().contains("preface"));
    // A correct prefix is waited for.
    let mut c = Connection::new();
    c.receive(&frame::PREFACE[..10]);
    assert!(!c.is_finished());
}

#[test]
fn protocol_errors_end_the_connection_with_goaway() {
    type Input = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Input, ErrorCode)> = vec![
        ("DATA on stream 0", Box::new(|i| put(i, DATA, 0, 0, b"x")), ErrorCode::Protocol),
        ("DATA on an idle stream", Box::new(|i| put(i, DATA, 0, 5, b"x")), ErrorCode::Protocol),
        (
            "HEADERS on an even stream",
            Box::new(|i| put(i, HEADERS, END_HEADERS, 2, &request_block("/x"))),
            ErrorCode::Protocol,
        ),
        ("oversized frame", Box::new(|i| put(i, DATA, 0, 1, &[0; 16_385])), ErrorCode::FrameSize),
        (
            "CONTINUATION alone",
            Box::new(|i| put(i, CONTINUATION, END_HEADERS, 1, b"")),
            ErrorCode::Protocol,
        ),
        (
            "frame inside a header block",
            Box::new(|i| {
                put(i, HEADERS, 0, 1, &[0x82]);
                put(i, PING, 0, 0, &[0; 8]);
            }),
            ErrorCode::Protocol,
        ),
        (
            "bad HPACK",
            Box::new(|i| put(i, HEADERS, END_HEADERS, 1, &[0x80])),
            ErrorCode::Compression,
        ),
        ("short PING", Box::new(|i| put(i, PING, 0, 0, &[0; 4])), ErrorCode::FrameSize),
        (
            "window overflow",
            Box::new(|i| put(i, WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes())),
            ErrorCode::FlowControl,
        ),
        (
            "zero window update",
            Box::new(|i| put(i, WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes())),
            ErrorCode::Protocol,
        ),
        (
            "bad SETTINGS length",
            Box::new(|i| put(i, SETTINGS, 0, 0, &[0; 5])),
            ErrorCode::FrameSize,
        ),
        (
            "small MAX_FRAME_SIZE",
            Box::new(|i| frame::put_settings(i, &[(frame::SETTINGS_MAX_FRAME_SIZE, 100)])),
            ErrorCode::Protocol,
        ),
        (
            "push promise",
            Box::new(|i| put(i, frame::PUSH_PROMISE, 0, 1, &[0; 4])),
            ErrorCode::Protocol,
        ),
        (
            "header block too big",
            Box::new(|i| {
                put(i, HEADERS, 0, 1, &[]);
                for _ in 0..5 {
                    put(i, CONTINUATION, 0, 1, &[0; 16_000]);
                }
            }),
            ErrorCode::EnhanceYourCalm,
        ),
    ];
    for (name, input, code) in cases {
        let mut c = open(&[]);
        let (_, out) = send(&mut c, |i| input(i));
        assert_eq!(goaway_code(&out), Some(code as u32), "{name}: {:?}", kinds(&out));
        assert!(c.is_finished(), "{name}");
        // Nothing more is read.
        assert!(c.receive(&[0; 100]).is_empty());
        assert!(c.take_output().is_empty());
    }
    // Before the client's SETTINGS, any other frame is an error.
    let mut c = Connection::new();
    let mut input = frame::PREFACE.to_vec();
    put(&mut input, PING, 0, 0, &[0; 8]);
    c.receive(&input);
    assert_eq!(goaway_code(&frames(&c.take_output())), Some(ErrorCode::Protocol as u32));
}

#[test]
fn goaway_from_either_side_finishes_once_pending_replies_are_sent() {
    let mut c = open(&[]);
    send(&mut c, |i| put(i, HEADERS, END_HEADERS | END_STREAM, 1, &request_block("/x")));
    send(&mut c, |i| put(i, GOAWAY, 0, 0, &[0; 8]));
    assert!(!c.is_finished());
    c.reply(1, ok_reply());
    assert!(c.is_finished());

    let mut c = open(&[]);
    send(&mut c, |i| put(i, HEADERS, END_HEADERS | END_STREAM, 1, &request_block("/x")));
    c.go_away();
    let (requests, out) =
        send(&mut c, |i| put(i, HEADERS, END_HEADERS | END_STREAM, 3, &request_block("/x")));
    assert!(requests.is_empty(), "a stream above our GOAWAY is ignored");
    assert_eq!(kinds(&out), [(GOAWAY, 0, 0)]);
    assert_eq!(&out[0].1[..4], 1u32.to_be_bytes());
    c.reply(1, ok_reply());
    assert!(c.is_finished());
}

#[test]
fn the_connection_window_is_replenished() {
    let mut c = open(&[]);
    let (_, out) = send(&mut c, |i| {
        for n in 0..5 {
            put(i, HEADERS, END_HEADERS, 2 * n + 1, &request_block("/x"));
            put(i, DATA, 0, 2 * n + 1, &[0; 10_000]);
        }
    });
    assert!(out.iter().any(|(h, _)| h.kind == WINDOW_UPDATE && h.stream == 0), "{:?}", kinds(&out));
    assert!(!c.is_finished());
}

#[test]
fn random_frames_never_panic_and_output_stays_bounded() {
    let mut x: u64 = 0x853c_49e6_748f_ea9b;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..300 {
        let mut c = open(&[]);
        for _ in 0..40 {
            let kind = (next() % 11) as u8;
            let flags = next() as u8;
            let stream = (next() % 8) as u32;
            let len = (next() % 48) as usize;
            let mut payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if kind == HEADERS && next() % 2 == 0 {
                payload = request_block("/p");
            }
            let mut input = Vec::new();
            put(&mut input, kind, flags, stream, &payload);
            for r in c.receive(&input) {
                c.reply(r.stream, ok_reply());
            }
            assert!(c.take_output().len() < 4096);
            if c.is_finished() {
                break;
            }
        }
    }
}
