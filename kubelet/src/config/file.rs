//! The static pod directory source.
//!
//! The directory's files are read by the rules of [`super::dir`] (which the node-local object
//! source shares): only `*.yaml`, `*.yml` and `*.json`, complete writes only, unchanged files
//! not read again, and beyond upstream:
//! - a file that turns bad keeps its last good pod running until a valid version arrives
//!   (upstream stops it), and the rejection is reported;
//! - two files declaring the same pod: the first accepted wins, the other is reported.
//!
//! [`FileSource`] runs it under a [`DirWatch`](super::dir_watch::DirWatch): inotify, and a full
//! rescan every `fileCheckFrequency`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::checkpoint::{CheckpointError, Checkpoints};
use super::dir::{DirFiles, Entry, Reasons};
pub use super::dir::{IgnoreReason, ManifestReport, ManifestState, classify};
use super::dir_watch::DirWatch;
use super::identity::Identities;
use super::manifest::{self, StaticPod};
use super::{Source, SourceSet};
use crate::events::{ObjectRef, Recorder};
use crate::runtime::adoption::RunningPod;

const REASONS: Reasons = Reasons {
    what: "static pod path",
    ignored: "IgnoredManifest",
    failed: "FailedManifest",
    removed: "RemovedManifest",
    removed_message: "manifest removed",
    unreadable: "ManifestDirUnreadable",
    kept_note: " (its previous version keeps running)",
    missing_is_normal: false,
};

/// The manifest directory's state: what each file holds, and the UIDs its pods run under.
#[derive(Debug)]
pub struct ManifestDir {
    files: DirFiles<StaticPod>,
    node_name: String,
    identities: Identities,
    checkpoints: Option<Checkpoints>,
}

impl ManifestDir {
    pub fn new(dir: PathBuf, node_name: String, recorder: Recorder) -> Self {
        Self::adopting(dir, node_name, recorder, Vec::new())
    }

    /// As [`Self::new`], adopting the file-sourced pods the runtime already runs that match
    /// their manifests ([`Identities`]).
    pub fn adopting(
        dir: PathBuf,
        node_name: String,
        recorder: Recorder,
        running: Vec<RunningPod>,
    ) -> Self {
        Self {
            files: DirFiles::new(dir, recorder, REASONS),
            node_name,
            identities: Identities::new(running),
            checkpoints: None,
        }
    }

    /// Keeps each manifest's last good version in `checkpoints` ([`Self::checkpoint`]), and
    /// starts from those it holds: a manifest that is invalid when first read goes on running
    /// its checkpointed pod. Checkpoints of manifests no longer there are removed, bad ones
    /// reported.
    pub fn with_checkpoints(mut self, mut checkpoints: Checkpoints) -> Self {
        let (pods, errors) = checkpoints.load_all();
        for error in errors {
            self.checkpoint_failed(error);
        }
        for (manifest, pod) in pods {
            if manifest.parent() == Some(self.files.dir()) && manifest.is_file() {
                let file = manifest.clone();
                self.files.seed(&manifest, StaticPod { pod, file, unknown_fields: Vec::new() });
            } else if let Err(error) = checkpoints.remove(&manifest) {
                self.checkpoint_failed(error);
            }
        }
        self.checkpoints = Some(checkpoints);
        self
    }

    fn checkpoint_failed(&self, error: CheckpointError) {
        tracing::warn!(%error, "static pod checkpoint");
        let file = match &error {
            CheckpointError::Io { file, .. }
            | CheckpointError::Corrupt { file, .. }
            | CheckpointError::OtherNode { file, .. }
            | CheckpointError::Version { file, .. } => file.clone(),
        };
        self.files.recorder().warning(
            &ObjectRef::file(&file),
            "FailedCheckpoint",
            error.to_string(),
        );
    }

    /// Brings the checkpoints in step with the files: an accepted version is written, a
    /// rejected file keeps its checkpoint, a file gone or ignored loses it. False when one
    /// could not be (it was reported).
    pub fn checkpoint(&mut self) -> bool {
        let Some(checkpoints) = self.checkpoints.as_mut() else { return true };
        let mut errors = Vec::new();
        for (path, entry) in self.files.entries() {
            let result = match entry {
                Entry::Accepted { value, .. } => checkpoints.save(path, &value.pod),
                Entry::Rejected { kept: Some(_), .. } => Ok(()),
                Entry::Rejected { kept: None, .. } | Entry::Ignored(_) => checkpoints.remove(path),
            };
            errors.extend(result.err());
        }
        for manifest in checkpoints.manifests() {
            if !self.files.entries().contains_key(&manifest) {
                errors.extend(checkpoints.remove(&manifest).err());
            }
        }
        let saved = errors.is_empty();
        for error in errors {
            self.checkpoint_failed(error);
        }
        saved
    }

    /// Reads one manifest; unknown fields are warned about.
    fn reader(
        node_name: &str,
        recorder: Recorder,
    ) -> impl FnMut(&Path, &std::fs::Metadata) -> Result<StaticPod, String> {
        move |path, _meta| {
            let pod = manifest::read(path, node_name).map_err(|e| e.to_string())?;
            for field in &pod.unknown_fields {
                recorder.warning(
                    &ObjectRef::file(path),
                    "UnknownField",
                    format!("unknown field {field:?} ignored"),
                );
            }
            Ok(pod)
        }
    }

    /// A write to `path` started: do not read it until it completes.
    pub fn writing(&mut self, path: &Path) {
        self.files.writing(path);
    }

    /// Reads `path` now (its write is complete, or a rescan found it changed).
    pub fn load(&mut self, path: &Path) {
        let mut read = Self::reader(&self.node_name, self.files.recorder().clone());
        self.files.load(path, &mut read);
    }

    /// The file is gone (deleted or renamed away): its pod goes too.
    pub fn forget(&mut self, path: &Path) {
        self.files.forget(path);
    }

    /// Moves whenever the files' entries change (see [`DirFiles::changes`]).
    pub fn changes(&self) -> u64 {
        self.files.changes()
    }

    /// Reads the whole directory.
    pub fn rescan(&mut self) {
        let mut read = Self::reader(&self.node_name, self.files.recorder().clone());
        self.files.rescan(&mut read);
    }

    fn apply(&mut self, batch: Vec<super::dir_watch::Change>) {
        let mut read = Self::reader(&self.node_name, self.files.recorder().clone());
        self.files.apply(batch, &mut read);
    }

    /// The pods to run (first accepted wins a name), under the UIDs [`Identities`] gives
    /// them, and the per-file report.
    pub fn desired(&mut self) -> (Vec<Pod>, Vec<ManifestReport>) {
        let entries = self.files.entries();
        self.identities.retain(|p| entries.contains_key(p));
        let mut candidates: Vec<(u64, &Path, &StaticPod, bool)> = Vec::new();
        let mut reports: HashMap<PathBuf, ManifestReport> = HashMap::new();
        for report in self.files.problem_reports() {
            reports.insert(PathBuf::from(&report.file), report);
        }
        for (path, entry) in self.files.entries() {
            match entry {
                Entry::Accepted { value, order, .. } => {
                    candidates.push((*order, path, value, false))
                }
                Entry::Rejected { kept: Some((pod, order)), .. } => {
                    candidates.push((*order, path, pod, true));
                    if let Some(r) = reports.get_mut(path) {
                        r.pod = pod.pod.metadata.name.clone();
                    }
                }
                Entry::Rejected { .. } | Entry::Ignored(_) => {}
            }
        }
        candidates.sort_by_key(|(order, ..)| *order);
        let mut owners: HashMap<(String, String), &Path> = HashMap::new();
        let mut pods = Vec::new();
        for (_, path, sp, kept) in candidates {
            let m = &sp.pod.metadata;
            let key = (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default());
            if let Some(owner) = owners.get(&key) {
                let reason =
                    format!("pod {}/{} is already declared by {}", key.0, key.1, owner.display());
                reports.insert(
                    path.to_path_buf(),
                    ManifestReport {
                        pod: Some(key.1.clone()),
                        reason: Some(reason),
                        ..ManifestReport::new(path, ManifestState::Duplicate)
                    },
                );
                continue;
            }
            owners.insert(key.clone(), path);
            let mut pod = sp.pod.clone();
            self.identities.resolve(path, &mut pod);
            pods.push(pod);
            if !kept {
                reports.insert(
                    path.to_path_buf(),
                    ManifestReport {
                        pod: sp.pod.metadata.name.clone(),
                        ..ManifestReport::new(path, ManifestState::Accepted)
                    },
                );
            }
        }
        for (key, note) in order_notes(&pods) {
            if let Some(r) = owners.get(&key).and_then(|path| reports.get_mut(*path)) {
                r.reason = Some(note);
            }
        }
        let mut reports: Vec<ManifestReport> = reports.into_values().collect();
        reports.sort_by(|a, b| a.file.cmp(&b.file));
        self.files.annotate(&mut reports);
        (pods, reports)
    }
}

/// What is wrong with the start order the pods declare ([`crate::ordering`]): a cycle (its
/// pods start without waiting) or a name no pod of the directory has (the pod waits for it).
fn order_notes(pods: &[Pod]) -> Vec<(crate::ordering::PodName, String)> {
    use crate::ordering::{self, Known, PodName};
    let name = |p: &Pod| -> PodName {
        let m = &p.metadata;
        (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default())
    };
    let known: HashMap<PodName, Known> =
        pods.iter().map(|p| (name(p), Known { ready: false, after: ordering::after(p) })).collect();
    let mut notes = Vec::new();
    for (me, k) in &known {
        let note = if let Some(cycle) = ordering::cycle(me, &known) {
            let cycle: Vec<String> = cycle.iter().map(|(ns, n)| format!("{ns}/{n}")).collect();
            format!(
                "{}: a cycle ({}): started without waiting",
                api::keys::STATIC_AFTER,
                cycle.join(" → ")
            )
        } else {
            let unknown: Vec<String> = k
                .after
                .iter()
                .filter(|p| !known.contains_key(*p))
                .map(|(ns, n)| format!("{ns}/{n}"))
                .collect();
            if unknown.is_empty() {
                continue;
            }
            format!(
                "{}: no static pod here is {}: the pod waits for it",
                api::keys::STATIC_AFTER,
                unknown.join(", ")
            )
        };
        tracing::warn!(pod = %format!("{}/{}", me.0, me.1), "{note}");
        notes.push((me.clone(), note));
    }
    notes
}

/// Runs the file source: initial read, then inotify events and periodic rescans, sending the
/// whole pod set whenever it changes, until `stop`.
#[derive(Debug)]
pub struct FileSource {
    pub dir: PathBuf,
    pub node_name: String,
    pub period: Duration,
    pub recorder: Recorder,
    /// The file-sourced pods the runtime ran at start, which may be adopted.
    pub running: Vec<RunningPod>,
    /// Where each manifest's last good version is kept across restarts.
    pub checkpoints: Checkpoints,
}

impl FileSource {
    pub async fn run(
        self,
        out: mpsc::Sender<SourceSet>,
        report: watch::Sender<Vec<ManifestReport>>,
        stop: CancellationToken,
    ) {
        let mut watch = DirWatch::new(self.dir.clone(), self.period, REASONS.what);
        let mut state =
            ManifestDir::adopting(self.dir, self.node_name, self.recorder, self.running)
                .with_checkpoints(self.checkpoints);
        // What was last sent, as (UID, content digest) pairs, not a second copy of every pod.
        let mut last_sent: Option<Vec<(String, [u8; 32])>> = None;
        // The files' change count when the pods were last worked out and checkpointed: a
        // rescan that found nothing new asks for no checkpoint, identities or digests.
        let mut worked_out: Option<u64> = None;
        while let Some(batch) = watch.next(&stop).await {
            state.apply(batch);
            if worked_out == Some(state.changes()) {
                continue;
            }
            // A checkpoint that failed is tried again at the next rescan.
            worked_out = state.checkpoint().then(|| state.changes());
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
}

#[cfg(test)]
mod tests;
