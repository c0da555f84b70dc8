//! Container log usage, as upstream's host stats provider measures it: the bytes and inodes of
//! the container's log directory, `<podLogsDir>/<namespace>_<name>_<uid>/<container>`, counted
//! as `du` does (allocated blocks; links not followed).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::summary::PodReference;

/// How deep a log directory is walked (it holds files only; rotated ones beside them).
const MAX_DEPTH: usize = 4;

pub fn container_dir(pod_logs_dir: &Path, pod: &PodReference, container: &str) -> PathBuf {
    pod_logs_dir.join(format!("{}_{}_{}", pod.namespace, pod.name, pod.uid)).join(container)
}

/// Bytes allocated and inodes used under `dir`, itself included; `None` when it is not there.
pub fn usage(dir: &Path) -> Option<(u64, u64)> {
    usage_within(dir, MAX_DEPTH)
}

/// [`usage`] of a tree walked at most `max_depth` directories down (a pod's volumes).
pub fn usage_within(dir: &Path, max_depth: usize) -> Option<(u64, u64)> {
    let meta = std::fs::symlink_metadata(dir).ok().filter(std::fs::Metadata::is_dir)?;
    let mut total = (meta.blocks() * 512, 1);
    walk(dir, 0, max_depth, &mut total);
    Some(total)
}

fn walk(dir: &Path, depth: usize, max_depth: usize, total: &mut (u64, u64)) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else { continue };
        total.0 += meta.blocks() * 512;
        total.1 += 1;
        if meta.is_dir() && depth < max_depth {
            walk(&e.path(), depth + 1, max_depth, total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_directory_counts_its_files_blocks_and_inodes() {
        let root = tempfile::tempdir().unwrap();
        let pod =
            PodReference { name: "web".into(), namespace: "default".into(), uid: "u1".into() };
        let dir = container_dir(root.path(), &pod, "nginx");
        assert_eq!(dir, root.path().join("default_web_u1/nginx"));
        assert_eq!(usage(&dir), None, "no directory, no figures");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0.log"), vec![b'x'; 10_000]).unwrap();
        std::fs::write(dir.join("1.log"), b"y").unwrap();
        let (bytes, inodes) = usage(&dir).unwrap();
        assert_eq!(inodes, 3, "the directory and two files");
        assert!(bytes >= 10_000, "{bytes}");
        std::fs::write(root.path().join("file"), b"").unwrap();
        assert_eq!(usage(&root.path().join("file")), None, "a file is no log directory");
    }
}
