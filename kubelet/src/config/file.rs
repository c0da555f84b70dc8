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
    /// rejected file keeps its checkpoint, a file gone or ignored loses it.
    pub fn checkpoint(&mut self) {
        let Some(checkpoints) = self.checkpoints.as_mut() else { return };
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
        for error in errors {
            self.checkpoint_failed(error);
        }
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
        while let Some(batch) = watch.next(&stop).await {
            state.apply(batch);
            state.checkpoint();
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
mod tests {
    use super::*;
    use crate::config::checkpoint;

    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n";

    fn pod(name: &str) -> String {
        POD.replace("NAME", name)
    }

    fn names(dir: &mut ManifestDir) -> Vec<String> {
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
        assert_eq!(names(&mut m), ["a-node"]);
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
    fn files_and_directories_others_could_change_are_warned_about_and_still_read() {
        use std::os::unix::fs::PermissionsExt;
        let set = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let me = nix::unistd::Uid::current().as_raw();
        let owner = |uid: u32| (uid != 0).then(|| format!("owned by uid {uid}, not root"));
        assert_eq!(super::super::dir::insecurity(0o100600, 0), None);
        assert_eq!(
            super::super::dir::insecurity(0o100666, 0).as_deref(),
            Some("group- and world-writable (mode 0666)")
        );
        assert_eq!(
            super::super::dir::insecurity(0o40775, 1000).as_deref(),
            Some("group-writable (mode 0775), owned by uid 1000, not root")
        );

        let tmp = tempfile::tempdir().unwrap();
        let (d, f) = (tmp.path(), tmp.path().join("web.yaml"));
        set(d, 0o700);
        std::fs::write(&f, pod("web")).unwrap();
        set(&f, 0o600);
        let recorder = Recorder::default();
        let mut m = ManifestDir::new(d.to_path_buf(), "n".into(), recorder.clone());
        m.rescan();
        assert_eq!(state_of(&m.desired().1, "web.yaml").warning, owner(me), "as it should be");

        set(&f, 0o666);
        set(d, 0o777);
        m.rescan();
        let (pods, reports) = m.desired();
        assert_eq!(pods.len(), 1, "still read");
        let warning = state_of(&reports, "web.yaml").warning.clone().unwrap();
        assert!(
            warning.starts_with("group- and world-writable (mode 0666)")
                && warning.contains("its directory is group- and world-writable (mode 0777)"),
            "{warning}"
        );
        let insecure: Vec<_> = recorder
            .list()
            .into_iter()
            .filter(|e| e.reason == super::super::dir::INSECURE)
            .collect();
        assert_eq!(insecure.len(), 2, "one for the file, one for the directory: {insecure:?}");
        m.rescan();
        let again = recorder.list().iter().filter(|e| e.reason == "InsecurePermissions").count();
        assert_eq!(again, 2, "warned once, not at every rescan");
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
        let image = pods[0].spec.as_ref().unwrap().containers[0].image.as_deref();
        assert_eq!(image, Some("busybox:1.36"), "the valid replacement takes over");
        assert_eq!(pods[0].metadata.uid, first_uid, "an image edit keeps the pod's identity");
    }

    #[test]
    fn an_edit_keeps_the_uid_unless_it_changes_what_an_api_pod_could_not() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("web.yaml");
        let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
        let read = |m: &mut ManifestDir, text: &str| {
            std::fs::write(&f, text).unwrap();
            m.load(&f);
            m.desired().0.remove(0)
        };
        let first = read(&mut m, &pod("web"));
        let uid = first.metadata.uid.clone().unwrap();
        let a = |p: &Pod, k: &str| p.metadata.annotations.as_ref().unwrap()[k].clone();
        assert_eq!(a(&first, api::keys::CONFIG_HASH), uid);
        let labelled =
            read(&mut m, &pod("web").replace("name: web", "name: web\n  labels: {a: b}"));
        assert_eq!(labelled.metadata.labels.as_ref().unwrap()["a"], "b");
        assert_eq!(labelled.metadata.uid.as_deref(), Some(uid.as_str()), "a label keeps it");
        assert_eq!(a(&labelled, api::keys::CONFIG_HASH), uid);
        assert_eq!(a(&labelled, api::keys::STATIC_IDENTITY), a(&first, api::keys::STATIC_IDENTITY));
        assert_ne!(
            a(&labelled, api::keys::STATIC_CONTENT),
            a(&first, api::keys::STATIC_CONTENT),
            "the content hash follows every edit, so the mirror does"
        );
        let renamed_port =
            read(&mut m, &pod("web").replace("image:", "ports: [{containerPort: 80}]\n    image:"));
        assert_ne!(renamed_port.metadata.uid.as_deref(), Some(uid.as_str()), "a port does not");
        let back = read(&mut m, &pod("web"));
        assert_eq!(back.metadata.uid.as_deref(), Some(uid.as_str()), "the content's UID again");
    }

    #[test]
    fn a_restart_while_a_manifest_is_invalid_keeps_its_checkpointed_pod() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, root) = (tmp.path().join("manifests"), tmp.path().join("root"));
        std::fs::create_dir_all(&dir).unwrap();
        let (web, gone) = (dir.join("web.yaml"), dir.join("gone.yaml"));
        std::fs::write(&web, pod("web")).unwrap();
        std::fs::write(&gone, pod("gone")).unwrap();
        let start = || {
            ManifestDir::new(dir.clone(), "n".into(), Recorder::default())
                .with_checkpoints(Checkpoints::new(&root, "n"))
        };
        let mut first = start();
        first.rescan();
        first.checkpoint();
        let pods = first.desired().0;
        let web_pod = pods.iter().find(|p| p.metadata.name.as_deref() == Some("web-n"));
        let uid = web_pod.unwrap().metadata.uid.clone();

        // Down: web.yaml turns invalid, gone.yaml is removed.
        std::fs::write(&web, "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n").unwrap();
        std::fs::remove_file(&gone).unwrap();
        let mut second = start();
        second.rescan();
        second.checkpoint();
        let (pods, reports) = second.desired();
        assert_eq!(pods.len(), 1, "{pods:?}");
        assert_eq!(pods[0].metadata.uid, uid, "the last good pod goes on");
        let r = state_of(&reports, "web.yaml");
        assert!(r.state == ManifestState::Rejected && r.running_previous_version, "{r:?}");
        let left = std::fs::read_dir(root.join(checkpoint::DIR)).unwrap().count();
        assert_eq!(left, 1, "the removed manifest's checkpoint went");

        // Fixed: the new version takes over and replaces the checkpoint.
        std::fs::write(&web, pod("web").replace("1.35", "1.36")).unwrap();
        second.load(&web);
        second.checkpoint();
        let (pods, _) = second.desired();
        let image = pods[0].spec.as_ref().unwrap().containers[0].image.clone();
        assert_eq!(image.as_deref(), Some("busybox:1.36"));
        let (saved, _) = Checkpoints::new(&root, "n").load_all();
        let image = saved[&web].spec.as_ref().unwrap().containers[0].image.clone();
        assert_eq!(image.as_deref(), Some("busybox:1.36"));
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
        assert_eq!(names(&mut m), ["half-n"]);
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
