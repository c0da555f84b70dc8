//! Watching a directory for the files it holds: inotify (through `notify`) reduced to what a
//! source acts on, plus a full rescan every period, so a lost or overflowed event is repaired.
//! The watch is (re)established whenever the directory exists: one created after the kubelet
//! started, or deleted and created again, is picked up by the next rescan tick.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the source learns from inotify, reduced to what it acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Created or written to: do not read it until the write completes.
    Writing(PathBuf),
    /// Closed after writing, or renamed into place: read it.
    Complete(PathBuf),
    /// Deleted or renamed away.
    Gone(PathBuf),
    /// Read the whole directory again.
    Rescan,
}

fn changes(event: notify::Event) -> Vec<Change> {
    if event.need_rescan() {
        return vec![Change::Rescan];
    }
    let mut paths = event.paths.into_iter();
    match event.kind {
        EventKind::Create(_) | EventKind::Modify(ModifyKind::Data(_)) => {
            paths.map(Change::Writing).collect()
        }
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
            paths.map(Change::Complete).collect()
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
            paths.map(Change::Complete).collect()
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) | EventKind::Remove(_) => {
            paths.map(Change::Gone).collect()
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => match (paths.next(), paths.next())
        {
            (Some(from), Some(to)) => vec![Change::Gone(from), Change::Complete(to)],
            _ => vec![Change::Rescan],
        },
        EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_)) => Vec::new(),
        _ => vec![Change::Rescan],
    }
}

/// The watch of one directory; its source owns it and asks it for the next batch.
#[derive(Debug)]
pub struct DirWatch {
    dir: PathBuf,
    /// What the directory is, for the log: `static pod path`.
    what: &'static str,
    tx: mpsc::Sender<notify::Event>,
    rx: mpsc::Receiver<notify::Event>,
    overflow: Arc<AtomicBool>,
    watcher: Option<notify::RecommendedWatcher>,
    ticker: tokio::time::Interval,
}

impl DirWatch {
    /// Must be called within a tokio runtime (the rescan ticker). The first batch is a rescan.
    pub fn new(dir: PathBuf, period: Duration, what: &'static str) -> Self {
        let (tx, rx) = mpsc::channel(1024);
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { dir, what, tx, rx, overflow: Arc::default(), watcher: None, ticker }
    }

    /// The next batch of changes (every event queued so far), or `None` once `stop` fires.
    pub async fn next(&mut self, stop: &CancellationToken) -> Option<Vec<Change>> {
        let mut batch = Vec::new();
        tokio::select! {
            () = stop.cancelled() => return None,
            _ = self.ticker.tick() => batch.push(Change::Rescan),
            Some(event) = self.rx.recv() => {
                batch.extend(changes(event));
                while let Ok(more) = self.rx.try_recv() {
                    batch.extend(changes(more));
                }
            }
        }
        if self.overflow.swap(false, Ordering::Relaxed) {
            batch.push(Change::Rescan);
        }
        if self.watcher.is_none() {
            self.watcher = self.watch();
            if self.watcher.is_some() {
                batch.push(Change::Rescan); // anything written before the watch began
            }
        }
        for change in &mut batch {
            if matches!(change, Change::Gone(p) if *p == self.dir) {
                self.watcher = None; // the directory itself went away
                *change = Change::Rescan;
            }
        }
        Some(batch)
    }

    fn watch(&self) -> Option<notify::RecommendedWatcher> {
        let (tx, overflow, what) = (self.tx.clone(), self.overflow.clone(), self.what);
        let handler = move |res: notify::Result<notify::Event>| match res {
            Ok(event) => {
                if tx.try_send(event).is_err() {
                    overflow.store(true, Ordering::Relaxed);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching the {what}");
                overflow.store(true, Ordering::Relaxed);
            }
        };
        let mut watcher = match notify::recommended_watcher(handler) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot create a file watcher; relying on periodic rescans");
                return None;
            }
        };
        match watcher.watch(&self.dir, RecursiveMode::NonRecursive) {
            Ok(()) => Some(watcher),
            Err(e) => {
                tracing::debug!(dir = %self.dir.display(), error = %e, "cannot watch the {} yet", self.what);
                None
            }
        }
    }
}
