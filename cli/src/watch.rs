//! Following one named object (client-go's `UntilWithSync` with a `metadata.name` field
//! selector, as `rollout status` and `wait` use it): the object as listed, then every change
//! the watch reports, handed to a step function until it says done. A watch the server ends
//! (or answers with an `ERROR` event, such as an expired resource version) is re-listed and
//! re-opened, so a long wait survives the server's watch timeout.
//!
//! [`Events`] cuts a watch response body into lines and [`decode`]s each into a
//! [`WatchEvent`]; `get --watch` reads its watches through them too.

use futures::StreamExt;
use serde_json::Value;

use crate::builder::{Info, encode};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

/// What is known of the object at one moment.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// The list's answer: the object, or `None` when it does not exist.
    Listed(Option<Value>),
    /// The watch reported the object added or changed.
    Changed(Value),
    /// The watch reported the object deleted.
    Deleted(Value),
}

/// A step function's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<T> {
    Done(T),
    Continue,
}

/// A watch event's type, as the server names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    /// The name on the wire (`ADDED`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }
}

/// One decoded watch event line: its type and its object.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub kind: EventType,
    pub object: Value,
}

/// A watch event line (`{"type": …, "object": …}`); `None` when it is no event.
pub fn decode(line: &[u8]) -> Option<WatchEvent> {
    let mut v = serde_json::from_slice::<Value>(line).ok()?;
    let kind = match v["type"].as_str()? {
        "ADDED" => EventType::Added,
        "MODIFIED" => EventType::Modified,
        "DELETED" => EventType::Deleted,
        "BOOKMARK" => EventType::Bookmark,
        "ERROR" => EventType::Error,
        _ => return None,
    };
    Some(WatchEvent { kind, object: v["object"].take() })
}

/// A watch response body cut into event lines as its chunks arrive.
pub struct Events<S> {
    body: S,
    buf: Vec<u8>,
}

impl<S> std::fmt::Debug for Events<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").field("buffered", &self.buf.len()).finish_non_exhaustive()
    }
}

impl<S> Events<S>
where
    S: futures::Stream<Item = std::result::Result<bytes::Bytes, kube::Error>> + Unpin,
{
    pub fn new(body: S) -> Self {
        Events { body, buf: Vec::new() }
    }

    /// The next event line's decoding (`Some(None)`: a line that is no event); `None` when
    /// the stream ended or broke.
    pub async fn next(&mut self) -> Option<Option<WatchEvent>> {
        loop {
            if let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(decode(&line));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }
}

/// A watch event line, as `until` follows it.
#[derive(Debug, PartialEq)]
enum Event {
    Observed(Observation),
    /// A bookmark: a newer resource version, no change to the object.
    Bookmark,
    /// `ERROR` (the object is a `Status`), or a line that is no event: list again.
    Restart,
}

fn event(e: Option<WatchEvent>) -> Event {
    match e {
        Some(WatchEvent { kind: EventType::Added | EventType::Modified, object }) => {
            Event::Observed(Observation::Changed(object))
        }
        Some(WatchEvent { kind: EventType::Deleted, object }) => {
            Event::Observed(Observation::Deleted(object))
        }
        Some(WatchEvent { kind: EventType::Bookmark, .. }) => Event::Bookmark,
        _ => Event::Restart,
    }
}

/// Follows `info` until `step` returns `Done` (or an error). No timeout here: the caller
/// bounds the whole wait.
pub async fn until<T>(
    f: &Factory,
    info: &Info,
    mut step: impl FnMut(Observation) -> Result<Step<T>>,
) -> Result<T> {
    let collection = info.resource.url(info.namespace.as_deref(), None);
    let selector = encode(&format!("metadata.name={}", info.name));
    loop {
        let list = f.get_json(&format!("{collection}?fieldSelector={selector}")).await?;
        let object = list["items"].as_array().and_then(|items| items.first()).cloned();
        if let Step::Done(t) = step(Observation::Listed(object))? {
            return Ok(t);
        }
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_default();
        let url = format!(
            "{collection}?fieldSelector={selector}&watch=true&resourceVersion={}&allowWatchBookmarks=true",
            encode(rv)
        );
        let mut events = Events::new(f.stream(&url).await?);
        while let Some(e) = events.next().await {
            match event(e) {
                Event::Bookmark => {}
                Event::Observed(o) => {
                    if let Step::Done(t) = step(o)? {
                        return Ok(t);
                    }
                }
                Event::Restart => break,
            }
        }
    }
}

/// Runs `fut` for at most `timeout` (`None`: without limit); `Err(TimedOut)` when it ran out.
pub async fn bounded<T>(
    timeout: Option<std::time::Duration>,
    fut: impl Future<Output = Result<T>>,
) -> std::result::Result<Result<T>, TimedOut> {
    match timeout {
        None => Ok(fut.await),
        Some(t) => tokio::time::timeout(t, fut).await.map_err(|_| TimedOut),
    }
}

/// A wait that ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

/// client-go's wording of a wait that ran out of time.
pub const TIMED_OUT: &str = "timed out waiting for the condition";

impl From<TimedOut> for CliError {
    fn from(_: TimedOut) -> Self {
        CliError::Usage(TIMED_OUT.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn watch_lines_become_observations_and_errors_restart_the_watch() {
        let added = br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#;
        let event = |line: &[u8]| event(decode(line));
        assert_eq!(
            event(added),
            Event::Observed(Observation::Changed(json!({"metadata": {"name": "a"}})))
        );
        let deleted = br#"{"type":"DELETED","object":{"metadata":{"name":"a"}}}"#;
        assert_eq!(
            event(deleted),
            Event::Observed(Observation::Deleted(json!({"metadata": {"name": "a"}})))
        );
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
        assert_eq!(event(gone), Event::Restart);
        assert_eq!(event(b"not json"), Event::Restart);
        let bookmark = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
        assert_eq!(event(bookmark), Event::Bookmark);
    }
}
