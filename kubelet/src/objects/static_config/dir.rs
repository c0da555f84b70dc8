//! The static config directory's state: each file's objects (by the rules of
//! [`crate::config::dir`]: the last good version of a file kept when it turns bad), and from
//! them the objects served. Two files defining the same object: neither file is used (all of
//! both files' objects are withheld, not only the contested one), both are reported as
//! duplicates naming each other, and a pod that references one of their objects is told why
//! it is not there; so an operator's stray copy (`cp db.yaml db-new.yaml`) can never decide
//! silently, by file order, which version pods get.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::file::{self, FileObjects, Owners};
use crate::config::dir::{DirFiles, Entry, ManifestReport, ManifestState, Reasons};
use crate::config::dir_watch::Change;
use crate::events::{ObjectRef, Recorder};
use crate::objects::{Object, ObjectKey};

pub(super) const REASONS: Reasons = Reasons {
    what: "static config path",
    ignored: "IgnoredStaticConfig",
    failed: "FailedStaticConfig",
    removed: "RemovedStaticConfig",
    removed_message: "static config file removed",
    unreadable: "StaticConfigDirUnreadable",
    kept_note: " (its previous objects are still served)",
    // Most nodes have no node-local objects: the default directory need not exist.
    missing_is_normal: true,
};

/// What the directory serves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Published {
    pub objects: BTreeMap<ObjectKey, Object>,
    /// Objects files declare that are not served, and why.
    pub unavailable: BTreeMap<ObjectKey, String>,
}

/// The static config directory's files and what they hold.
#[derive(Debug)]
pub struct StaticConfigDir {
    files: DirFiles<FileObjects>,
    owners: Owners,
    /// What refused files were seen to declare.
    declared: BTreeMap<PathBuf, Vec<ObjectKey>>,
    /// The objects last served (for `immutable` ones).
    served: BTreeMap<ObjectKey, Object>,
}

impl StaticConfigDir {
    pub fn new(dir: PathBuf, recorder: Recorder, owners: Owners) -> Self {
        Self {
            files: DirFiles::new(dir, recorder, REASONS),
            owners,
            declared: BTreeMap::new(),
            served: BTreeMap::new(),
        }
    }

    /// Applies what the watch saw (a [`Change::Rescan`] reads everything).
    pub fn apply(&mut self, batch: Vec<Change>) {
        let (owners, served, declared) = (self.owners, &self.served, &mut self.declared);
        let recorder = self.files.recorder().clone();
        let previous = |key: &ObjectKey| served.get(key).cloned();
        let mut read =
            |path: &Path, meta: &std::fs::Metadata| match file::read(path, meta, owners, &previous)
            {
                Ok(objects) => {
                    declared.remove(path);
                    for field in &objects.unknown_fields {
                        let message = format!("unknown field {field:?} ignored");
                        recorder.warning(&ObjectRef::file(path), "UnknownField", message);
                    }
                    Ok(objects)
                }
                Err(refused) => {
                    declared.insert(path.to_path_buf(), refused.declared);
                    Err(refused.error.to_string())
                }
            };
        self.files.apply(batch, &mut read);
    }

    /// The objects to serve and the per-file report.
    pub fn desired(&mut self) -> (Published, Vec<ManifestReport>) {
        let mut reports: BTreeMap<PathBuf, ManifestReport> = BTreeMap::new();
        for report in self.files.problem_reports() {
            reports.insert(PathBuf::from(&report.file), report);
        }
        // Each file's objects in use: its current version, or the last good one.
        let mut in_use: Vec<(&Path, &FileObjects, bool)> = Vec::new();
        for (path, entry) in self.files.entries() {
            match entry {
                Entry::Accepted { value, .. } => in_use.push((path, value, false)),
                Entry::Rejected { kept: Some((value, _)), .. } => in_use.push((path, value, true)),
                Entry::Rejected { .. } | Entry::Ignored(_) => {}
            }
        }
        let mut definers: BTreeMap<&ObjectKey, BTreeSet<&Path>> = BTreeMap::new();
        for (path, objects, _) in &in_use {
            for (key, _) in &objects.objects {
                definers.entry(key).or_default().insert(path);
            }
        }
        let mut published = Published::default();
        for (path, objects, kept) in &in_use {
            let names: Vec<String> = objects.objects.iter().map(|(k, _)| k.to_string()).collect();
            let contested: Vec<(&ObjectKey, Vec<&Path>)> = objects
                .objects
                .iter()
                .filter_map(|(k, _)| {
                    let others: Vec<&Path> =
                        definers[k].iter().copied().filter(|p| p != path).collect();
                    (!others.is_empty()).then_some((k, others))
                })
                .collect();
            if contested.is_empty() {
                published.objects.extend(objects.objects.iter().cloned());
                let report = reports
                    .entry(path.to_path_buf())
                    .or_insert_with(|| ManifestReport::new(path, ManifestState::Accepted));
                report.objects = names;
                if *kept {
                    report.running_previous_version = true;
                }
                continue;
            }
            let what: Vec<String> = contested
                .iter()
                .map(|(k, others)| {
                    let others: Vec<String> =
                        others.iter().map(|p| p.display().to_string()).collect();
                    format!("{k} is also defined by {}", others.join(", "))
                })
                .collect();
            let reason = format!(
                "{}: no object of this file is served until only one file defines each",
                what.join("; ")
            );
            for (key, _) in &objects.objects {
                let why = format!("{} is not used: {}", path.display(), what.join("; "));
                published.unavailable.entry(key.clone()).or_insert(why);
            }
            reports.insert(
                path.to_path_buf(),
                ManifestReport {
                    objects: names,
                    reason: Some(reason),
                    ..ManifestReport::new(path, ManifestState::Duplicate)
                },
            );
        }
        for (path, entry) in self.files.entries() {
            if let Entry::Rejected { error, kept: None, .. } = entry {
                for key in self.declared.get(path).into_iter().flatten() {
                    if !published.objects.contains_key(key) {
                        let why = format!("refused: {error}");
                        published.unavailable.entry(key.clone()).or_insert(why);
                    }
                    if let Some(r) = reports.get_mut(path) {
                        r.objects.push(key.to_string());
                    }
                }
            }
        }
        self.served = published.objects.clone();
        let mut reports: Vec<ManifestReport> = reports.into_values().collect();
        self.files.annotate(&mut reports);
        (published, reports)
    }
}
