//! Watches: the current objects or the events after a revision, through the list's selectors
//! (an object that starts matching is ADDED, one that stops is DELETED).

use std::collections::VecDeque;

use serde_json::Value;

use super::{Registry, parse};
use crate::errors::ApiError;
use crate::list::ListOptions;
use crate::resources::ResourceType;
use crate::storage::{self, EventType, Revision};

/// An event of a watch, after selectors.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchItem {
    Event { kind: &'static str, object: Value },
    Bookmark { revision: Revision, initial_events_end: bool },
    Error(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// `resourceVersion` unset or "0": the current objects as ADDED events first.
    Now,
    /// Events after this revision.
    After(Revision),
    /// `sendInitialEvents=true`: current objects, a bookmark marking their end, then changes.
    InitialEvents,
}

#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub start: WatchStart,
    pub list: ListOptions,
    pub bookmarks: bool,
}

/// A watch in progress.
#[derive(Debug)]
pub struct WatchStream {
    queued: VecDeque<WatchItem>,
    watch: Option<storage::Watch>,
    list: ListOptions,
}

impl Registry {
    /// Starts a watch.
    pub fn watch(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        opts: WatchOptions,
    ) -> Result<WatchStream, ApiError> {
        let prefix = r.prefix(ns);
        let mut queued = VecDeque::new();
        let after = match opts.start {
            WatchStart::After(rev) => rev,
            WatchStart::Now | WatchStart::InitialEvents => {
                let (entries, revision) = self.store.list(&prefix);
                for (_, stored) in entries {
                    let obj = parse(&stored.value)?;
                    if opts.list.matches(&obj) {
                        queued.push_back(WatchItem::Event { kind: "ADDED", object: obj });
                    }
                }
                if opts.start == WatchStart::InitialEvents {
                    queued.push_back(WatchItem::Bookmark { revision, initial_events_end: true });
                }
                revision
            }
        };
        let watch = match self.store.watch(&prefix, Some(after)) {
            Ok(w) => w,
            Err(expired) => {
                let status = ApiError::gone(expired.to_string()).status();
                return Ok(WatchStream {
                    queued: VecDeque::from([WatchItem::Error(status)]),
                    watch: None,
                    list: opts.list,
                });
            }
        };
        let mut stream = WatchStream { queued, watch: None, list: opts.list };
        for e in &watch.initial {
            if let Some(item) = stream.translate(e)? {
                stream.queued.push_back(item);
            }
        }
        stream.watch = Some(watch);
        Ok(stream)
    }
}

impl WatchStream {
    /// An event as this watcher sees it through its selectors: an object that starts matching is
    /// ADDED, one that stops matching is DELETED.
    fn translate(&self, e: &storage::Event) -> Result<Option<WatchItem>, ApiError> {
        // A watch of one object by name (kubectl's `get -w NAME`, a kubelet's own Node) skips
        // every other key's event without decoding it: it neither matched nor matches.
        let name = e.key.rsplit('/').next().unwrap_or_default();
        if self.list.fields.excludes_name(name) {
            return Ok(None);
        }
        let obj = parse(&e.value)?;
        let now = self.list.matches(&obj);
        let before = match &e.prev {
            Some(p) if self.list.filtering() => self.list.matches(&parse(&p.value)?),
            Some(_) => true,
            None => false,
        };
        let kind = match (e.kind, before, now) {
            (EventType::Deleted, _, true) => "DELETED",
            (EventType::Deleted, _, false) => return Ok(None),
            (_, false, true) => "ADDED",
            (_, true, true) => "MODIFIED",
            (_, true, false) => "DELETED",
            (_, false, false) => return Ok(None),
        };
        Ok(Some(WatchItem::Event { kind, object: obj }))
    }

    /// The next item; `None` when the watch ended (after an error, or the store closed, or the
    /// watcher fell too far behind and was dropped).
    pub async fn next(&mut self) -> Option<WatchItem> {
        loop {
            if let Some(item) = self.queued.pop_front() {
                return Some(item);
            }
            let watch = self.watch.as_mut()?;
            match watch.next().await {
                Ok(e) => match self.translate(&e) {
                    Ok(Some(item)) => return Some(item),
                    Ok(None) => {}
                    Err(err) => return Some(WatchItem::Error(err.status())),
                },
                Err(end) => {
                    tracing::debug!(?end, "watch ended");
                    self.watch = None;
                    return None;
                }
            }
        }
    }
}
