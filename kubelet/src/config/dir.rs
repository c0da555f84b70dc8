//! The files of a watched directory, as the static pod source (`staticPodPath`) and the
//! node-local object source (`staticConfigPath`) read them. One set of rules for both:
//! - only `*.yaml`, `*.yml` and `*.json` are read; dotfiles and anything else are listed as
//!   ignored, with the reason;
//! - a file is read once its write is complete (close after write, or renamed into place);
//!   one being written is listed as such and left alone, also by a rescan;
//! - an unchanged file (same mtime, size, inode, mode and owner) is not read again;
//! - a file that turns bad keeps its last good content until a valid version arrives, and the
//!   rejection is reported once (log and event), not at every rescan.
//!
//! - a directory or file that other users could change (group- or world-writable, or not owned
//!   by root, CIS Kubernetes Benchmark 4.1.x: whoever can write it decides what runs as root)
//!   is warned about when read (log and event) and in `/manifests`, and still read.
//!
//! What a file holds is the caller's: [`DirFiles::load`] takes the function that reads one.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::events::{ObjectRef, Recorder};

/// The event reason for a directory or file others could change (ours).
pub const INSECURE: &str = "InsecurePermissions";

/// Why a file in a watched directory is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum IgnoreReason {
    /// Name starts with `.` (editors' temporary files), as upstream.
    Hidden,
    /// Not `.yaml`, `.yml` or `.json` (e.g. `.bak` copies).
    NotAManifest,
    Directory,
    NotARegularFile,
}

impl IgnoreReason {
    pub fn describe(self) -> &'static str {
        match self {
            IgnoreReason::Hidden => "hidden file (name starts with '.')",
            IgnoreReason::NotAManifest => {
                "not a manifest: only *.yaml, *.yml and *.json files are read"
            }
            IgnoreReason::Directory => "a directory (subdirectories are not read)",
            IgnoreReason::NotARegularFile => "not a regular file",
        }
    }
}

/// Why a name is not read, if it is not.
pub fn classify(name: &str) -> Option<IgnoreReason> {
    if name.starts_with('.') {
        return Some(IgnoreReason::Hidden);
    }
    let is_manifest =
        [".yaml", ".yml", ".json"].iter().any(|ext| name.len() > ext.len() && name.ends_with(ext));
    (!is_manifest).then_some(IgnoreReason::NotAManifest)
}

/// The state of one file as `/manifests` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ManifestState {
    Accepted,
    Rejected,
    Ignored,
    /// Declares what another file declares (a pod: the first file wins; an object: neither).
    Duplicate,
    /// Being written; read once the write completes.
    Writing,
}

/// One file of a watched directory, as `/manifests` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestReport {
    pub file: String,
    pub state: ManifestState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The ConfigMaps and Secrets a static-config file holds (`configMap <ns>/<name>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A rejected file whose previous good version is still in use (its pod running, its
    /// objects served).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub running_previous_version: bool,
    /// Who else could change the file or its directory, when anyone could.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl ManifestReport {
    pub fn new(path: &Path, state: ManifestState) -> Self {
        Self {
            file: path.display().to_string(),
            state,
            pod: None,
            objects: Vec::new(),
            reason: None,
            running_previous_version: false,
            warning: None,
        }
    }
}

/// What identifies a file's content without reading it, and who may read it (a chmod of a
/// refused Secret file is seen by the next rescan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    mtime_ns: i128,
    size: u64,
    ino: u64,
    mode: u32,
    uid: u32,
}

/// Who besides root could change a file or directory with this mode and owner, if anyone.
pub fn insecurity(mode: u32, uid: u32) -> Option<String> {
    let mut why = Vec::new();
    if mode & 0o022 != 0 {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "group- and world-writable",
            (true, false) => "group-writable",
            _ => "world-writable",
        };
        why.push(format!("{who} (mode {:04o})", mode & 0o7777));
    }
    if uid != 0 {
        why.push(format!("owned by uid {uid}, not root"));
    }
    (!why.is_empty()).then(|| why.join(", "))
}

impl Fingerprint {
    fn insecurity(&self) -> Option<String> {
        insecurity(self.mode, self.uid)
    }

    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            size: m.size(),
            ino: m.ino(),
            mode: m.mode(),
            uid: m.uid(),
        }
    }
}

/// One file's state. `order` says which file was accepted first.
#[derive(Debug)]
pub enum Entry<T> {
    Accepted { value: T, order: u64, print: Fingerprint },
    Rejected { error: String, kept: Option<(T, u64)>, print: Option<Fingerprint> },
    Ignored(IgnoreReason),
}

/// The event reasons and words a directory's source records.
#[derive(Debug, Clone, Copy)]
pub struct Reasons {
    /// What the directory is, for messages: `static pod path`.
    pub what: &'static str,
    pub ignored: &'static str,
    pub failed: &'static str,
    pub removed: &'static str,
    pub removed_message: &'static str,
    pub unreadable: &'static str,
    /// Appended to a rejection when the file's last good version stays in use.
    pub kept_note: &'static str,
    /// A directory that does not exist is an opt-out, not a problem: noted (Normal), not warned.
    pub missing_is_normal: bool,
}

/// Reads one file (its metadata already taken, symlinks followed) into what it holds, or says
/// why not (naming the file).
pub type Read<'a, T> = dyn FnMut(&Path, &std::fs::Metadata) -> Result<T, String> + 'a;

/// A directory's files: what each holds, and which are being written.
#[derive(Debug)]
pub struct DirFiles<T> {
    dir: PathBuf,
    entries: BTreeMap<PathBuf, Entry<T>>,
    writing: HashSet<PathBuf>,
    next_order: u64,
    recorder: Recorder,
    reasons: Reasons,
    missing_reported: bool,
    /// Who else could change the directory (checked at each rescan, warned about on change).
    dir_insecurity: Option<String>,
    /// Moves whenever an entry or the set being written changes ([`Self::changes`]).
    changes: u64,
}

impl<T> DirFiles<T> {
    pub fn new(dir: PathBuf, recorder: Recorder, reasons: Reasons) -> Self {
        Self {
            dir,
            entries: BTreeMap::new(),
            writing: HashSet::new(),
            next_order: 0,
            recorder,
            reasons,
            missing_reported: false,
            dir_insecurity: None,
            changes: 0,
        }
    }

    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The directory read.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn entries(&self) -> &BTreeMap<PathBuf, Entry<T>> {
        &self.entries
    }

    /// A count that moves whenever what the files hold, or which are being written, changes:
    /// equal counts mean the same entries (a rescan that found nothing new leaves it).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    fn set_ignored(&mut self, path: &Path, reason: IgnoreReason) {
        if !matches!(self.entries.get(path), Some(Entry::Ignored(r)) if *r == reason) {
            let ignored = self.reasons.ignored;
            self.recorder.normal(&ObjectRef::file(path), ignored, reason.describe());
            self.entries.insert(path.to_path_buf(), Entry::Ignored(reason));
            self.changes += 1;
        }
    }

    /// Makes `value` the last good version of `path` before the file is first read (a
    /// checkpoint from before a restart): a good read replaces it, a bad one keeps it.
    pub fn seed(&mut self, path: &Path, value: T) {
        self.next_order += 1;
        self.changes += 1;
        let kept = Some((value, self.next_order));
        self.entries.insert(
            path.to_path_buf(),
            Entry::Rejected { error: String::new(), kept, print: None },
        );
    }

    /// A write to `path` started: do not read it until it completes.
    pub fn writing(&mut self, path: &Path) {
        if path.parent() == Some(self.dir.as_path()) && self.writing.insert(path.to_path_buf()) {
            self.changes += 1;
        }
    }

    /// Reads `path` now (its write is complete, or a rescan found it changed).
    pub fn load(&mut self, path: &Path, read: &mut Read<'_, T>) {
        if self.writing.remove(path) {
            self.changes += 1;
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return };
        if path.parent() != Some(self.dir.as_path()) {
            return;
        }
        let meta = match std::fs::symlink_metadata(path)
            .and_then(|m| if m.file_type().is_symlink() { std::fs::metadata(path) } else { Ok(m) })
        {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return self.forget(path),
            Err(e) => return self.reject(path, format!("{}: {e}", path.display()), None),
        };
        if let Some(reason) = classify(name) {
            return self.set_ignored(path, reason);
        }
        if meta.is_dir() {
            return self.set_ignored(path, IgnoreReason::Directory);
        }
        if !meta.is_file() {
            return self.set_ignored(path, IgnoreReason::NotARegularFile);
        }
        let print = Fingerprint::of(&meta);
        match self.entries.get(path) {
            Some(Entry::Accepted { print: p, .. }) if *p == print => return,
            Some(Entry::Rejected { print: Some(p), .. }) if *p == print => return,
            _ => {}
        }
        if let Some(why) = print.insecurity() {
            let message = format!("{why}: others can change what this node runs");
            tracing::warn!(file = %path.display(), "{message}");
            self.recorder.warning(&ObjectRef::file(path), INSECURE, message);
        }
        match read(path, &meta) {
            Ok(value) => {
                let order = match self.entries.get(path) {
                    Some(Entry::Accepted { order, .. }) => *order,
                    _ => {
                        self.next_order += 1;
                        self.next_order
                    }
                };
                self.entries.insert(path.to_path_buf(), Entry::Accepted { value, order, print });
                self.changes += 1;
            }
            Err(e) => self.reject(path, e, Some(print)),
        }
    }

    fn reject(&mut self, path: &Path, error: String, print: Option<Fingerprint>) {
        let kept = match self.entries.remove(path) {
            Some(Entry::Accepted { value, order, .. }) => Some((value, order)),
            Some(Entry::Rejected { kept, .. }) => kept,
            _ => None,
        };
        let note = if kept.is_some() { self.reasons.kept_note } else { "" };
        self.recorder.warning(
            &ObjectRef::file(path),
            self.reasons.failed,
            format!("{error}{note}"),
        );
        self.entries.insert(path.to_path_buf(), Entry::Rejected { error, kept, print });
        self.changes += 1;
    }

    /// The file is gone (deleted or renamed away): what it held goes too.
    pub fn forget(&mut self, path: &Path) {
        if self.writing.remove(path) {
            self.changes += 1;
        }
        if self.entries.remove(path).is_some() {
            self.changes += 1;
            let Reasons { removed, removed_message, .. } = self.reasons;
            self.recorder.normal(&ObjectRef::file(path), removed, removed_message);
        }
    }

    /// Reads the whole directory: new and changed files are loaded (except those being
    /// written), vanished ones forgotten.
    pub fn rescan(&mut self, read: &mut Read<'_, T>) {
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(l) => {
                self.missing_reported = false;
                self.check_dir();
                l
            }
            Err(e) => {
                if !self.missing_reported {
                    let message = format!("cannot read the {}: {e}", self.reasons.what);
                    let (unreadable, dir) = (self.reasons.unreadable, ObjectRef::file(&self.dir));
                    if e.kind() == std::io::ErrorKind::NotFound && self.reasons.missing_is_normal {
                        self.recorder.normal(&dir, unreadable, message);
                    } else {
                        self.recorder.warning(&dir, unreadable, message);
                    }
                    self.missing_reported = true;
                }
                if !self.entries.is_empty() {
                    self.entries.clear();
                    self.changes += 1;
                }
                return;
            }
        };
        let present: Vec<PathBuf> = listing.flatten().map(|e| e.path()).collect();
        let gone: Vec<PathBuf> =
            self.entries.keys().filter(|p| !present.contains(p)).cloned().collect();
        for p in gone {
            self.forget(&p);
        }
        let mut sorted = present;
        sorted.sort();
        for p in sorted {
            if !self.writing.contains(&p) {
                self.load(&p, read);
            }
        }
    }

    /// Warns when the directory becomes changeable by others (and once at start).
    fn check_dir(&mut self) {
        let now = std::fs::metadata(&self.dir).ok().and_then(|m| insecurity(m.mode(), m.uid()));
        if now != self.dir_insecurity
            && let Some(why) = &now
        {
            let message =
                format!("the {} {why}: others can change what this node runs", self.reasons.what);
            tracing::warn!(dir = %self.dir.display(), "{message}");
            self.recorder.warning(&ObjectRef::file(&self.dir), INSECURE, message);
        }
        self.dir_insecurity = now;
    }

    /// Sets each report's warning: its file's, and the directory's.
    pub fn annotate(&self, reports: &mut [ManifestReport]) {
        let dir = self.dir_insecurity.as_ref().map(|why| format!("its directory is {why}"));
        for r in reports {
            let path = Path::new(&r.file);
            let file = match self.entries.get(path) {
                Some(
                    Entry::Accepted { print, .. } | Entry::Rejected { print: Some(print), .. },
                ) => print.insecurity(),
                _ => None,
            };
            let all: Vec<String> = file.into_iter().chain(dir.clone()).collect();
            r.warning = (!all.is_empty()).then(|| all.join("; "));
        }
    }

    /// Applies what the watch saw.
    pub fn apply(&mut self, batch: Vec<super::dir_watch::Change>, read: &mut Read<'_, T>) {
        use super::dir_watch::Change;
        for change in batch {
            match change {
                Change::Writing(p) => self.writing(&p),
                Change::Complete(p) => self.load(&p, read),
                Change::Gone(p) => self.forget(&p),
                Change::Rescan => self.rescan(read),
            }
        }
    }

    /// The reports of files that hold nothing usable: rejected (with whether the previous
    /// version is kept), ignored, being written. Accepted files are the caller's to report.
    pub fn problem_reports(&self) -> Vec<ManifestReport> {
        let mut out = Vec::new();
        for (path, entry) in &self.entries {
            match entry {
                Entry::Accepted { .. } => {}
                Entry::Rejected { error, kept, .. } => out.push(ManifestReport {
                    reason: Some(error.clone()),
                    running_previous_version: kept.is_some(),
                    ..ManifestReport::new(path, ManifestState::Rejected)
                }),
                Entry::Ignored(reason) => out.push(ManifestReport {
                    reason: Some(reason.describe().into()),
                    ..ManifestReport::new(path, ManifestState::Ignored)
                }),
            }
        }
        for path in &self.writing {
            if !self.entries.contains_key(path) {
                out.push(ManifestReport::new(path, ManifestState::Writing));
            }
        }
        out
    }
}
