//! Watch responses: one JSON event per line, each flushed at once, until `timeoutSeconds` (or the
//! server's own long timeout), with bookmarks when the client allows them and Table events when
//! it asks for tables.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::body::Body;
use crate::registry::{WatchItem, WatchStream};
use crate::resources::ResourceType;
use crate::table::{self, IncludeObject};

/// How the events are written.
#[derive(Debug, Clone, Copy)]
pub struct WatchFormat {
    pub table: Option<IncludeObject>,
    pub bookmarks: bool,
    pub timeout: Duration,
}

/// Bookmarks are sent this often when allowed.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// The server's timeout when the client sets none (upstream picks 30–60 minutes).
pub fn default_timeout() -> Duration {
    Duration::from_secs(1800 + u64::from(rand::random::<u16>() % 1800))
}

fn bookmark(r: &ResourceType, revision: i64, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": revision.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"type": "BOOKMARK", "object": {"kind": r.kind, "apiVersion": r.group_version(), "metadata": meta}})
}

/// Streams `stream` as the response body; the producing task ends with the client, the
/// timeout, or the watch.
pub fn respond(
    r: &'static ResourceType,
    mut stream: WatchStream,
    fmt: WatchFormat,
    current_revision: impl Fn() -> i64 + Send + 'static,
) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(fmt.timeout);
        tokio::pin!(deadline);
        let mut bookmarks = tokio::time::interval(BOOKMARK_EVERY);
        bookmarks.tick().await;
        let mut first_table = true;
        loop {
            let line = tokio::select! {
                () = &mut deadline => break,
                () = tx.closed() => break,
                _ = bookmarks.tick(), if fmt.bookmarks => bookmark(r, current_revision(), false),
                item = stream.next() => match item {
                    None => break,
                    Some(WatchItem::Bookmark { revision, initial_events_end }) => {
                        if !fmt.bookmarks && !initial_events_end {
                            continue;
                        }
                        bookmark(r, revision, initial_events_end)
                    }
                    Some(WatchItem::Error(status)) => json!({"type": "ERROR", "object": status}),
                    Some(WatchItem::Event { kind, object }) => match fmt.table {
                        Some(include) => {
                            let rv = object["metadata"]["resourceVersion"].clone();
                            let t = table::table(r, std::slice::from_ref(&object), include, json!({"resourceVersion": rv}), first_table);
                            first_table = false;
                            json!({"type": kind, "object": t})
                        }
                        None => json!({"type": kind, "object": object}),
                    },
                },
            };
            let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
            bytes.push(b'\n');
            if tx.send(Bytes::from(bytes)).await.is_err() {
                break;
            }
            if line["type"] == "ERROR" {
                break;
            }
        }
    });
    let body = StreamBody::new(
        ReceiverStream::new(rx).map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b))),
    )
    .boxed();
    let mut resp = Response::new(body);
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
