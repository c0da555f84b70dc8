//! The last good version of each static pod manifest, kept on disk under the kubelet's root
//! dir (`static-pod-checkpoints/`), so that a kubelet restarting while a manifest is invalid
//! goes on running that manifest's last good pod instead of stopping it (upstream forgets it;
//! so did this kubelet, which kept it in memory only).
//!
//! One file per manifest path, named by a digest of the path and holding the node, the path
//! and the pod as read (decoded, defaulted, before its UID is decided); written atomically
//! (a temporary file, synced, renamed over), replaced when a newer good version is accepted and
//! removed with the manifest. A checkpoint that is corrupt, of another version or of another
//! node is reported with its file and removed; it never stops the kubelet.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The directory under the kubelet's root dir.
pub const DIR: &str = "static-pod-checkpoints";
/// The format this kubelet writes and reads.
pub const VERSION: u32 = 1;
/// A checkpoint larger than this is not read (a manifest is at most 1 MiB).
const MAX_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    version: u32,
    node: String,
    manifest: PathBuf,
    pod: Pod,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{file}: {source}")]
    Io { file: PathBuf, source: std::io::Error },
    #[error("{file}: corrupt static pod checkpoint: {message}")]
    Corrupt { file: PathBuf, message: String },
    #[error("{file}: static pod checkpoint of node {found:?}, not of this node {node:?}")]
    OtherNode { file: PathBuf, found: String, node: String },
    #[error("{file}: static pod checkpoint version {found}, this kubelet reads {VERSION}")]
    Version { file: PathBuf, found: u32 },
}

/// The checkpoints of one node's static pod directory.
#[derive(Debug)]
pub struct Checkpoints {
    dir: PathBuf,
    node: String,
    /// What each manifest's checkpoint holds, as a digest, so an unchanged pod is not written
    /// again.
    written: HashMap<PathBuf, [u8; 32]>,
}

fn io(file: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io { file: file.to_path_buf(), source }
}

impl Checkpoints {
    pub fn new(root_dir: &Path, node: &str) -> Self {
        Self { dir: root_dir.join(DIR), node: node.to_string(), written: HashMap::new() }
    }

    /// The checkpoint file of the manifest at `manifest`.
    pub fn file_for(&self, manifest: &Path) -> PathBuf {
        let digest = Sha256::digest(manifest.as_os_str().as_encoded_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    fn read(&self, file: &Path) -> Result<Record, CheckpointError> {
        let meta = std::fs::metadata(file).map_err(io(file))?;
        if meta.len() > MAX_BYTES {
            let message = format!("{} bytes is more than {MAX_BYTES}", meta.len());
            return Err(CheckpointError::Corrupt { file: file.into(), message });
        }
        let bytes = std::fs::read(file).map_err(io(file))?;
        let record: Record = serde_json::from_slice(&bytes)
            .map_err(|e| CheckpointError::Corrupt { file: file.into(), message: e.to_string() })?;
        if record.version != VERSION {
            return Err(CheckpointError::Version { file: file.into(), found: record.version });
        }
        if record.node != self.node {
            let (found, node) = (record.node, self.node.clone());
            return Err(CheckpointError::OtherNode { file: file.into(), found, node });
        }
        if self.file_for(&record.manifest) != file {
            let message = format!("it names {}, not the file it is", record.manifest.display());
            return Err(CheckpointError::Corrupt { file: file.into(), message });
        }
        Ok(record)
    }

    /// Every checkpoint, by manifest path; the bad ones are removed and returned as errors.
    pub fn load_all(&mut self) -> (HashMap<PathBuf, Pod>, Vec<CheckpointError>) {
        let mut pods = HashMap::new();
        let mut errors = Vec::new();
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (pods, errors),
            Err(e) => {
                errors.push(CheckpointError::Io { file: self.dir.clone(), source: e });
                return (pods, errors);
            }
        };
        for entry in listing.flatten() {
            let file = entry.path();
            if file.extension().is_none_or(|e| e != "json") {
                remove_logged(&file); // an interrupted write's temporary file
                continue;
            }
            match self.read(&file) {
                Ok(record) => {
                    self.written.insert(record.manifest.clone(), digest(&record.pod));
                    pods.insert(record.manifest, record.pod);
                }
                Err(e) => {
                    remove_logged(&file);
                    errors.push(e);
                }
            }
        }
        (pods, errors)
    }

    /// Records `pod` as the last good version of `manifest` (nothing is written when the
    /// checkpoint already holds it).
    pub fn save(&mut self, manifest: &Path, pod: &Pod) -> Result<(), CheckpointError> {
        let d = digest(pod);
        if self.written.get(manifest) == Some(&d) {
            return Ok(());
        }
        let record = Record {
            version: VERSION,
            node: self.node.clone(),
            manifest: manifest.to_path_buf(),
            pod: pod.clone(),
        };
        let file = self.file_for(manifest);
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let tmp = file.with_extension("json.tmp");
        let bytes = serde_json::to_vec(&record)
            .map_err(|e| CheckpointError::Corrupt { file: file.clone(), message: e.to_string() })?;
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &file)?;
            std::fs::File::open(&self.dir)?.sync_all()
        };
        write().map_err(io(&file))?;
        self.written.insert(manifest.to_path_buf(), d);
        Ok(())
    }

    /// Removes the checkpoint of `manifest`, if there is one.
    pub fn remove(&mut self, manifest: &Path) -> Result<(), CheckpointError> {
        self.written.remove(manifest);
        let file = self.file_for(manifest);
        match std::fs::remove_file(&file) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(CheckpointError::Io { file, source: e }),
        }
    }

    /// The manifests that have a checkpoint.
    pub fn manifests(&self) -> Vec<PathBuf> {
        self.written.keys().cloned().collect()
    }
}

fn digest(pod: &Pod) -> [u8; 32] {
    Sha256::digest(serde_json::to_vec(pod).unwrap_or_default()).into()
}

fn remove_logged(file: &Path) {
    if let Err(error) = std::fs::remove_file(file) {
        tracing::warn!(file = %file.display(), %error, "removing a static pod checkpoint");
    }
}

#[cfg(test)]
mod tests;
