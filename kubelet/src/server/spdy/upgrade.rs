//! The HTTP/1.1 upgrade to SPDY: the streaming URL, the response head, a refusal's body.

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncReadExt;

use super::SpdyError;

/// The largest HTTP response head accepted for the upgrade.
const MAX_HEAD: usize = 16 * 1024;

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

#[cfg(test)]
mod tests {
    use super::*;

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
