//! gRPC over HTTP/2 (grpc's PROTOCOL-HTTP2 document): what makes a request a unary call, the
//! length-prefixed message, status codes, and replies as header blocks: a response (headers,
//! one message, trailers with `grpc-status: 0`) or a trailers-only error.

use super::connection::{Head, Response};
use super::hpack;

/// Largest request message accepted. Health check requests are a service name.
pub const MAX_MESSAGE: usize = 16 * 1024;

/// gRPC status codes the server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Ok = 0,
    NotFound = 5,
    ResourceExhausted = 8,
    Unimplemented = 12,
    Internal = 13,
}

/// What the server answers one call with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub http_status: u16,
    pub code: Code,
    pub detail: String,
    /// The response message; only with [`Code::Ok`].
    pub message: Option<Vec<u8>>,
}

impl Reply {
    pub fn ok(message: Vec<u8>) -> Reply {
        Reply { http_status: 200, code: Code::Ok, detail: String::new(), message: Some(message) }
    }

    pub fn error(code: Code, detail: impl Into<String>) -> Reply {
        Reply { http_status: 200, code, detail: detail.into(), message: None }
    }

    fn http_error(http_status: u16, detail: impl Into<String>) -> Reply {
        Reply { http_status, ..Reply::error(Code::Internal, detail) }
    }

    /// The header blocks and DATA payload that carry this reply.
    pub fn into_response(self) -> Response {
        let mut head = Vec::with_capacity(64);
        if self.http_status == 200 {
            hpack::put_indexed(&mut head, hpack::STATUS_200);
        } else {
            hpack::put_literal_indexed_name(
                &mut head,
                hpack::STATUS,
                self.http_status.to_string().as_bytes(),
            );
        }
        hpack::put_literal_indexed_name(&mut head, hpack::CONTENT_TYPE, b"application/grpc");
        hpack::put_literal(&mut head, b"grpc-accept-encoding", b"identity");
        let mut trailers = Vec::with_capacity(64);
        let status = (self.code as u8).to_string();
        hpack::put_literal(&mut trailers, b"grpc-status", status.as_bytes());
        if !self.detail.is_empty() {
            hpack::put_literal(
                &mut trailers,
                b"grpc-message",
                percent_encode(&self.detail).as_bytes(),
            );
        }
        match self.message {
            Some(message) => {
                let mut data = Vec::with_capacity(5 + message.len());
                data.push(0);
                data.extend_from_slice(&(message.len() as u32).to_be_bytes());
                data.extend_from_slice(&message);
                Response::Message { headers: head, data, trailers }
            }
            None => {
                head.extend_from_slice(&trailers);
                Response::TrailersOnly(head)
            }
        }
    }
}

/// `grpc-message` is percent-encoded: bytes outside printable ASCII, and `%` itself.
fn percent_encode(detail: &str) -> String {
    let mut out = String::with_capacity(detail.len());
    for &b in detail.as_bytes().iter().take(1024) {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Checks that a request is a gRPC call and returns its one message, or the reply that refuses
/// it.
pub fn unary_message<'a>(head: &Head, body: &'a [u8]) -> Result<&'a [u8], Reply> {
    if head.method != "POST" {
        return Err(Reply::http_error(405, format!("method {} is not POST", head.method)));
    }
    let content_type = head.content_type.as_deref().unwrap_or("");
    let is_grpc = content_type
        .strip_prefix("application/grpc")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('+') || rest.starts_with(';'));
    if !is_grpc {
        return Err(Reply::http_error(415, format!("content-type {content_type:?} is not gRPC")));
    }
    let Some((&compressed, rest)) = body.split_first() else {
        return Err(Reply::error(Code::Internal, "the request has no message"));
    };
    if rest.len() < 4 {
        return Err(Reply::error(Code::Internal, "the request message is cut short"));
    }
    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let message = &rest[4..];
    if message.len() != len {
        let detail =
            format!("the request holds {} bytes after a {len}-byte message", message.len());
        return Err(Reply::error(Code::Internal, detail));
    }
    if compressed != 0 {
        let encoding = head.grpc_encoding.as_deref().unwrap_or("identity");
        let detail = format!("compressed messages ({encoding}) are not supported");
        return Err(Reply::error(Code::Unimplemented, detail));
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: &str, content_type: Option<&str>) -> Head {
        Head {
            method: method.into(),
            path: "/p".into(),
            content_type: content_type.map(Into::into),
            grpc_encoding: None,
        }
    }

    #[test]
    fn one_message_is_returned() {
        let h = head("POST", Some("application/grpc"));
        assert_eq!(unary_message(&h, &[0, 0, 0, 0, 2, 8, 1]), Ok(&[8u8, 1][..]));
        assert_eq!(unary_message(&h, &[0, 0, 0, 0, 0]), Ok(&[][..]));
        let h = head("POST", Some("application/grpc+proto"));
        assert!(unary_message(&h, &[0, 0, 0, 0, 0]).is_ok());
    }

    #[test]
    fn non_grpc_requests_and_bad_bodies_are_refused() {
        let ok = head("POST", Some("application/grpc"));
        let code = |h: &Head, body: &[u8]| {
            unary_message(h, body).map(<[u8]>::len).map_err(|r| (r.http_status, r.code))
        };
        assert_eq!(code(&head("GET", Some("application/grpc")), &[]), Err((405, Code::Internal)));
        assert_eq!(code(&head("POST", Some("application/grpcx")), &[]), Err((415, Code::Internal)));
        assert_eq!(code(&head("POST", None), &[]), Err((415, Code::Internal)));
        assert_eq!(code(&ok, &[]), Err((200, Code::Internal)));
        assert_eq!(code(&ok, &[0, 0, 0]), Err((200, Code::Internal)));
        assert_eq!(code(&ok, &[0, 0, 0, 0, 3, 1]), Err((200, Code::Internal)));
        assert_eq!(code(&ok, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err((200, Code::Internal)));
        assert_eq!(code(&ok, &[1, 0, 0, 0, 0]), Err((200, Code::Unimplemented)));
    }

    fn decode(block: &[u8]) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        hpack::Decoder::default()
            .decode(block, |n, v| {
                fields.push((String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
            })
            .unwrap();
        fields
    }

    #[test]
    fn replies_are_encoded_as_grpc_responses() {
        let Response::Message { headers, data, trailers } = Reply::ok(vec![8, 1]).into_response()
        else {
            panic!("a message reply has a body")
        };
        assert_eq!(
            decode(&headers)[..2],
            [(":status".into(), "200".into()), ("content-type".into(), "application/grpc".into())]
        );
        assert_eq!(data, [0, 0, 0, 0, 2, 8, 1]);
        assert_eq!(decode(&trailers), [("grpc-status".to_string(), "0".to_string())]);

        let Response::TrailersOnly(block) =
            Reply::error(Code::Unimplemented, "no 100% Watch\n").into_response()
        else {
            panic!("an error is trailers-only")
        };
        let fields = decode(&block);
        assert!(fields.contains(&("grpc-status".into(), "12".into())), "{fields:?}");
        assert!(
            fields.contains(&("grpc-message".into(), "no 100%25 Watch%0A".into())),
            "{fields:?}"
        );
    }
}
