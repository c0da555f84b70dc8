//! The static pod directory source.
//!
//! Watches the directory with inotify (through `notify`) and re-reads it fully every
//! `fileCheckFrequency`, so a lost event is repaired. Rules beyond upstream's:
//! - only `*.yaml`, `*.yml` and `*.json` are read; dotfiles and anything else are listed as
//!   ignored, with the reason;
//! - a file is parsed once its write is complete (close after write, or renamed into place);
//! - a file that turns bad keeps its last good pod running until a valid version arrives
//!   (upstream stops it), and the rejection is reported;
//! - two files declaring the same pod: the first accepted wins, the other is reported.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::manifest::{self, StaticPod};
use super::{Source, SourceSet};
use crate::events::{ObjectRef, Recorder};

/// Why a file in the manifest directory is not read.
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

/// The state of one file as `/manifests` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ManifestState {
    Accepted,
    Rejected,
    Ignored,
    Duplicate,
    /// Being written; read once the write completes.
    Writing,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestReport {
    pub file: String,
    pub state: ManifestState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A rejected file whose previous good version is still running.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub running_previous_version: bool,
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    mtime_ns: i128,
    size: u64,
    ino: u64,
}

impl Fingerprint {
    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            size: m.size(),
            ino: m.ino(),
        }
    }
}

#[derive(Debug)]
enum Entry {
    Accepted { pod: StaticPod, order: u64, print: Fingerprint },
    Rejected { error: String, kept: Option<(StaticPod, u64)>, print: Option<Fingerprint> },
    Ignored(IgnoreReason),
}

/// The manifest directory's state: what each file holds and what was last sent.
#[derive(Debug)]
pub struct ManifestDir {
    dir: PathBuf,
    node_name: String,
    entries: BTreeMap<PathBuf, Entry>,
    writing: HashSet<PathBuf>,
    next_order: u64,
    recorder: Recorder,
    missing_reported: bool,
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

fn object(path: &Path) -> ObjectRef {
    ObjectRef::file(path)
}

impl ManifestDir {
    pub fn new(dir: PathBuf, node_name: String, recorder: Recorder) -> Self {
        Self {
            dir,
            node_name,
            entries: BTreeMap::new(),
            writing: HashSet::new(),
            next_order: 0,
            recorder,
            missing_reported: false,
        }
    }

    fn set_ignored(&mut self, path: &Path, reason: IgnoreReason) {
        if !matches!(self.entries.get(path), Some(Entry::Ignored(r)) if *r == reason) {
            self.recorder.normal(&object(path), "IgnoredManifest", reason.describe());
            self.entries.insert(path.to_path_buf(), Entry::Ignored(reason));
        }
    }

    /// A write to `path` started: do not read it until it completes.
    pub fn writing(&mut self, path: &Path) {
        if path.parent() == Some(self.dir.as_path()) {
            self.writing.insert(path.to_path_buf());
        }
    }

    /// Reads `path` now (its write is complete, or a rescan found it changed).
    pub fn load(&mut self, path: &Path) {
        self.writing.remove(path);
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
        match manifest::read(path, &self.node_name) {
            Ok(pod) => {
                for field in &pod.unknown_fields {
                    self.recorder.warning(
                        &object(path),
                        "UnknownField",
                        format!("unknown field {field:?} ignored"),
                    );
                }
                let order = match self.entries.get(path) {
                    Some(Entry::Accepted { order, .. }) => *order,
                    _ => {
                        self.next_order += 1;
                        self.next_order
                    }
                };
                self.entries.insert(path.to_path_buf(), Entry::Accepted { pod, order, print });
            }
            Err(e) => self.reject(path, e.to_string(), Some(print)),
        }
    }

    fn reject(&mut self, path: &Path, error: String, print: Option<Fingerprint>) {
        let kept = match self.entries.remove(path) {
            Some(Entry::Accepted { pod, order, .. }) => Some((pod, order)),
            Some(Entry::Rejected { kept, .. }) => kept,
            _ => None,
        };
        let note = if kept.is_some() { " (its previous version keeps running)" } else { "" };
        self.recorder.warning(&object(path), "FailedManifest", format!("{error}{note}"));
        self.entries.insert(path.to_path_buf(), Entry::Rejected { error, kept, print });
    }

    /// The file is gone (deleted or renamed away): its pod goes too.
    pub fn forget(&mut self, path: &Path) {
        self.writing.remove(path);
        if self.entries.remove(path).is_some() {
            self.recorder.normal(&object(path), "RemovedManifest", "manifest removed");
        }
    }

    /// Reads the whole directory: new and changed files are loaded (except those being
    /// written), vanished ones forgotten.
    pub fn rescan(&mut self) {
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(l) => {
                self.missing_reported = false;
                l
            }
            Err(e) => {
                if !self.missing_reported {
                    self.recorder.warning(
                        &object(&self.dir),
                        "ManifestDirUnreadable",
                        format!("cannot read the static pod path: {e}"),
                    );
                    self.missing_reported = true;
                }
                self.entries.clear();
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
                self.load(&p);
            }
        }
    }

    /// The pods to run (first accepted wins a name) and the per-file report.
    pub fn desired(&self) -> (Vec<Pod>, Vec<ManifestReport>) {
        let mut candidates: Vec<(u64, &Path, &StaticPod, bool)> = Vec::new();
        let mut reports: HashMap<&Path, ManifestReport> = HashMap::new();
        for (path, entry) in &self.entries {
            let file = path.display().to_string();
            match entry {
                Entry::Accepted { pod, order, .. } => candidates.push((*order, path, pod, false)),
                Entry::Rejected { error, kept, .. } => {
                    if let Some((pod, order)) = kept {
                        candidates.push((*order, path, pod, true));
                    }
                    reports.insert(
                        path,
                        ManifestReport {
                            file,
                            state: ManifestState::Rejected,
                            pod: kept.as_ref().and_then(|(p, _)| p.pod.metadata.name.clone()),
                            reason: Some(error.clone()),
                            running_previous_version: kept.is_some(),
                        },
                    );
                }
                Entry::Ignored(reason) => {
                    reports.insert(
                        path,
                        ManifestReport {
                            file,
                            state: ManifestState::Ignored,
                            pod: None,
                            reason: Some(reason.describe().into()),
                            running_previous_version: false,
                        },
                    );
                }
            }
        }
        candidates.sort_by_key(|(order, ..)| *order);
        let mut owners: HashMap<(String, String), &Path> = HashMap::new();
        let mut pods = Vec::new();
        for (_, path, sp, kept) in candidates {
            let m = &sp.pod.metadata;
            let key = (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default());
            if let Some(owner) = owners.get(&key) {
                reports.insert(
                    path,
                    ManifestReport {
                        file: path.display().to_string(),
                        state: ManifestState::Duplicate,
                        pod: Some(key.1.clone()),
                        reason: Some(format!(
                            "pod {}/{} is already declared by {}",
                            key.0,
                            key.1,
                            owner.display()
                        )),
                        running_previous_version: false,
                    },
                );
                continue;
            }
            owners.insert(key, path);
            pods.push(sp.pod.clone());
            if !kept {
                reports.insert(
                    path,
                    ManifestReport {
                        file: path.display().to_string(),
                        state: ManifestState::Accepted,
                        pod: sp.pod.metadata.name.clone(),
                        reason: None,
                        running_previous_version: false,
                    },
                );
            }
        }
        for path in &self.writing {
            reports.entry(path).or_insert_with(|| ManifestReport {
                file: path.display().to_string(),
                state: ManifestState::Writing,
                pod: None,
                reason: None,
                running_previous_version: false,
            });
        }
        let mut reports: Vec<ManifestReport> = reports.into_values().collect();
        reports.sort_by(|a, b| a.file.cmp(&b.file));
        (pods, reports)
    }
}

/// Runs the file source: initial read, then inotify events and periodic rescans, sending the
/// whole pod set whenever it changes, until `stop`.
#[derive(Debug)]
pub struct FileSource {
    pub dir: PathBuf,
    pub node_name: String,
    pub period: Duration,
    pub recorder: Recorder,
}

/// What the source learns from inotify, reduced to what it acts on.
enum Change {
    Writing(PathBuf),
    Complete(PathBuf),
    Gone(PathBuf),
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

impl FileSource {
    pub async fn run(
        self,
        out: mpsc::Sender<SourceSet>,
        report: watch::Sender<Vec<ManifestReport>>,
        stop: CancellationToken,
    ) {
        let (tx, mut rx) = mpsc::channel::<notify::Event>(1024);
        let overflow = Arc::new(AtomicBool::new(false));
        let mut state =
            ManifestDir::new(self.dir.clone(), self.node_name.clone(), self.recorder.clone());
        let mut watcher: Option<notify::RecommendedWatcher> = None;
        // What was last sent, as (UID, content digest) pairs, not a second copy of every pod.
        let mut last_sent: Option<Vec<(String, [u8; 32])>> = None;
        let mut ticker = tokio::time::interval(self.period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut batch = Vec::new();
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => batch.push(Change::Rescan),
                Some(event) = rx.recv() => {
                    batch.extend(changes(event));
                    while let Ok(more) = rx.try_recv() {
                        batch.extend(changes(more));
                    }
                }
            }
            if overflow.swap(false, Ordering::Relaxed) {
                batch.push(Change::Rescan);
            }
            if watcher.is_none() {
                watcher = self.watch(&tx, &overflow);
                if watcher.is_some() {
                    batch.push(Change::Rescan); // anything written before the watch began
                }
            }
            for change in batch {
                match change {
                    Change::Writing(p) => state.writing(&p),
                    Change::Complete(p) => state.load(&p),
                    Change::Gone(p) if p == self.dir => {
                        watcher = None; // the directory itself went away
                        state.rescan();
                    }
                    Change::Gone(p) => state.forget(&p),
                    Change::Rescan => state.rescan(),
                }
            }
            let (pods, reports) = state.desired();
            report.send_if_modified(|r| {
                let changed = *r != reports;
                *r = reports;
                changed
            });
            let fingerprint: Vec<(String, [u8; 32])> = pods
                .iter()
                .map(|p| {
                    (
                        p.metadata.uid.clone().unwrap_or_default(),
                        Sha256::digest(serde_json::to_vec(p).unwrap_or_default()).into(),
                    )
                })
                .collect();
            if last_sent.as_ref() != Some(&fingerprint) {
                last_sent = Some(fingerprint);
                if out.send(SourceSet { source: Source::File, pods }).await.is_err() {
                    return;
                }
            }
        }
    }

    fn watch(
        &self,
        tx: &mpsc::Sender<notify::Event>,
        overflow: &Arc<AtomicBool>,
    ) -> Option<notify::RecommendedWatcher> {
        let (tx, overflow) = (tx.clone(), overflow.clone());
        let handler = move |res: notify::Result<notify::Event>| match res {
            Ok(event) => {
                if tx.try_send(event).is_err() {
                    overflow.store(true, Ordering::Relaxed);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching the static pod path");
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
                tracing::debug!(dir = %self.dir.display(), error = %e, "cannot watch the static pod path yet");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n";

    fn pod(name: &str) -> String {
        POD.replace("NAME", name)
    }

    fn names(dir: &ManifestDir) -> Vec<String> {
        dir.desired().0.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect()
    }

    fn state_of<'a>(reports: &'a [ManifestReport], file: &str) -> &'a ManifestReport {
        reports
            .iter()
            .find(|r| r.file.ends_with(file))
            .unwrap_or_else(|| panic!("no report for {file}: {reports:?}"))
    }

    #[test]
    fn classifies_names_like_an_operator_expects() {
        assert_eq!(classify("web.yaml"), None);
        assert_eq!(classify("web.yml"), None);
        assert_eq!(classify("web.json"), None);
        assert_eq!(classify(".web.yaml.swp"), Some(IgnoreReason::Hidden));
        assert_eq!(classify(".yaml"), Some(IgnoreReason::Hidden));
        assert_eq!(classify("web.yaml.bak"), Some(IgnoreReason::NotAManifest));
        assert_eq!(classify("web.yaml~"), Some(IgnoreReason::NotAManifest));
        assert_eq!(classify("README"), Some(IgnoreReason::NotAManifest));
    }

    #[test]
    fn rescan_reads_manifests_and_reports_everything_else() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("a.yaml"), pod("a")).unwrap();
        std::fs::write(d.join("a.yaml.bak"), pod("a-old")).unwrap();
        std::fs::write(d.join(".b.yaml"), pod("hidden")).unwrap();
        std::fs::write(
            d.join("bad.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers: []\n",
        )
        .unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        let mut m = ManifestDir::new(d.to_path_buf(), "node".into(), Recorder::default());
        m.rescan();
        assert_eq!(names(&m), ["a-node"]);
        let (_, reports) = m.desired();
        assert_eq!(state_of(&reports, "/a.yaml").state, ManifestState::Accepted);
        assert_eq!(state_of(&reports, "a.yaml.bak").state, ManifestState::Ignored);
        assert_eq!(state_of(&reports, ".b.yaml").state, ManifestState::Ignored);
        assert_eq!(state_of(&reports, "sub").state, ManifestState::Ignored);
        let bad = state_of(&reports, "bad.yaml");
        assert_eq!(bad.state, ManifestState::Rejected);
        assert!(
            bad.reason.as_ref().unwrap().contains("bad.yaml")
                && bad.reason.as_ref().unwrap().contains("spec.containers: Required value")
        );
    }

    #[test]
    fn a_bad_edit_keeps_the_previous_pod_until_a_good_one_arrives() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("web.yaml");
        std::fs::write(&f, pod("web")).unwrap();
        let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
        m.load(&f);
        let first_uid = m.desired().0[0].metadata.uid.clone();
        std::fs::write(&f, "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n").unwrap();
        m.load(&f);
        let (pods, reports) = m.desired();
        assert_eq!(pods[0].metadata.uid, first_uid, "the last good version keeps running");
        let r = state_of(&reports, "web.yaml");
        assert!(r.running_previous_version && r.state == ManifestState::Rejected);
        std::fs::write(&f, pod("web").replace("1.35", "1.36")).unwrap();
        m.load(&f);
        let (pods, _) = m.desired();
        assert_ne!(pods[0].metadata.uid, first_uid, "the valid replacement takes over");
    }

    #[test]
    fn the_first_file_declaring_a_pod_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("b-first.yaml"), tmp.path().join("a-second.yaml"));
        let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
        std::fs::write(&a, pod("web")).unwrap();
        m.load(&a);
        std::fs::write(&b, pod("web").replace("busybox:1.35", "busybox:1.36")).unwrap();
        m.load(&b);
        let (pods, reports) = m.desired();
        assert_eq!(pods.len(), 1);
        assert_eq!(
            pods[0].spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("busybox:1.35")
        );
        let dup = state_of(&reports, "a-second.yaml");
        assert_eq!(dup.state, ManifestState::Duplicate);
        assert!(dup.reason.as_ref().unwrap().contains("b-first.yaml"));
        m.forget(&a);
        assert_eq!(
            m.desired().0[0].spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("busybox:1.36")
        );
    }

    #[test]
    fn files_being_written_are_not_read_by_a_rescan() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("half.yaml");
        std::fs::write(&f, "apiVersion: v1\nkind: Po").unwrap();
        let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
        m.writing(&f);
        m.rescan();
        let (pods, reports) = m.desired();
        assert!(pods.is_empty());
        assert_eq!(state_of(&reports, "half.yaml").state, ManifestState::Writing);
        std::fs::write(&f, pod("half")).unwrap();
        m.load(&f); // close-after-write
        assert_eq!(names(&m), ["half-n"]);
    }

    #[test]
    fn an_unchanged_file_is_not_parsed_again() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("web.yaml");
        std::fs::write(&f, pod("web")).unwrap();
        let recorder = Recorder::default();
        let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), recorder.clone());
        std::fs::write(tmp.path().join("bad.yaml"), "x: [").unwrap();
        m.rescan();
        m.rescan();
        let failures = recorder.list().iter().filter(|e| e.reason == "FailedManifest").count();
        assert_eq!(failures, 1, "a bad file is reported once, not at every rescan");
    }
}
