//! Container log usage, as upstream's host stats provider measures it: the bytes and inodes of
//! the container's log directory, `<podLogsDir>/<namespace>_<name>_<uid>/<container>`, counted
//! as `du` does (allocated blocks; links not followed).
//!
//! A summary measures every running container's directory, so [`PodLogs`] opens the pod log
//! directory once and each container's directory relative to it, and a directory's entries are
//! measured relative to its own handle: no lookup walks the whole path, where the walk by
//! absolute paths made two such lookups per container (at 110 pods, a seventh of a summary's
//! CPU; BENCHMARKS.md).

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::dir::Dir;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

use super::summary::PodReference;
use crate::runtime::sandbox::pod_log_dir_name;

/// How deep a log directory is walked (it holds files only; rotated ones beside them).
const MAX_DEPTH: usize = 4;

/// A directory opened to be read, never followed through a link.
const DIR_FLAGS: OFlag =
    OFlag::O_RDONLY.union(OFlag::O_DIRECTORY).union(OFlag::O_NOFOLLOW).union(OFlag::O_CLOEXEC);

/// The pod log directory, opened for one summary's measurements.
#[derive(Debug)]
pub struct PodLogs {
    /// `None` when it is not there (no container then has logs to count).
    dir: Option<OwnedFd>,
}

impl PodLogs {
    pub fn open(pod_logs_dir: &Path) -> Self {
        Self { dir: openat(AT_FDCWD, pod_logs_dir, DIR_FLAGS, Mode::empty()).ok() }
    }

    /// The bytes allocated and inodes used by `container`'s log directory, itself included;
    /// `None` when it is not there.
    pub fn container_usage(&self, pod: &PodReference, container: &str) -> Option<(u64, u64)> {
        let pod_dir = pod_log_dir_name(&pod.namespace, &pod.name, &pod.uid);
        usage_at(self.dir.as_ref()?, &Path::new(&pod_dir).join(container), MAX_DEPTH)
    }
}

/// Bytes allocated and inodes used under `dir`, itself included, walked at most `max_depth`
/// directories down (a pod's volumes); `None` when it is not there.
pub fn usage_within(dir: &Path, max_depth: usize) -> Option<(u64, u64)> {
    usage_at(AT_FDCWD, dir, max_depth)
}

fn usage_at(parent: impl AsFd, rel: &Path, max_depth: usize) -> Option<(u64, u64)> {
    let fd = openat(parent, rel, DIR_FLAGS, Mode::empty()).ok()?;
    let mut total = (allocated(&fstat(&fd).ok()?), 1);
    walk(fd, 0, max_depth, &mut total);
    Some(total)
}

/// Adds the entries of the directory `fd` (and of those below it, to `max_depth`) to `total`.
fn walk(fd: OwnedFd, depth: usize, max_depth: usize, total: &mut (u64, u64)) {
    // The listing reads through a second handle, so `fd` stays free to measure entries by.
    let Some(entries) = fd.try_clone().ok().and_then(|dup| Dir::from_fd(dup).ok()) else {
        return;
    };
    for entry in entries.into_iter().flatten() {
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let Ok(st) = fstatat(&fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) else { continue };
        total.0 += allocated(&st);
        total.1 += 1;
        let is_dir = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
        if is_dir
            && depth < max_depth
            && let Ok(sub) = openat(&fd, name, DIR_FLAGS, Mode::empty())
        {
            walk(sub, depth + 1, max_depth, total);
        }
    }
}

/// The bytes a file's blocks take (`st_blocks` counts 512-byte units).
fn allocated(st: &FileStat) -> u64 {
    u64::try_from(st.st_blocks).unwrap_or(0) * 512
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_directory_counts_its_files_blocks_and_inodes() {
        let root = tempfile::tempdir().unwrap();
        let pod =
            PodReference { name: "web".into(), namespace: "default".into(), uid: "u1".into() };
        assert_eq!(PodLogs::open(&root.path().join("none")).container_usage(&pod, "nginx"), None);
        let logs = PodLogs::open(root.path());
        assert_eq!(logs.container_usage(&pod, "nginx"), None, "no directory, no figures");
        let dir = root.path().join("default_web_u1/nginx");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0.log"), vec![b'x'; 10_000]).unwrap();
        std::fs::write(dir.join("1.log"), b"y").unwrap();
        let (bytes, inodes) = logs.container_usage(&pod, "nginx").unwrap();
        assert_eq!(inodes, 3, "the directory and two files");
        assert!(bytes >= 10_000, "{bytes}");
        std::fs::write(root.path().join("default_web_u1/file"), b"").unwrap();
        assert_eq!(logs.container_usage(&pod, "file"), None, "a file is no log directory");
    }

    #[test]
    fn a_tree_is_walked_to_its_depth_and_links_are_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path().join("vol");
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        std::fs::write(top.join("a/b/f"), vec![b'x'; 8192]).unwrap();
        std::fs::write(top.join("f1"), b"y").unwrap();
        let outside = root.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("big"), vec![b'z'; 100_000]).unwrap();
        std::os::unix::fs::symlink(&outside, top.join("link")).unwrap();
        let inodes = |depth| usage_within(&top, depth).unwrap().1;
        assert_eq!(inodes(0), 4, "the directory, a, f1 and the link itself");
        assert_eq!(inodes(1), 5, "and b");
        assert_eq!(inodes(2), 6, "and f");
        assert!(usage_within(&top, 2).unwrap().0 < 100_000, "the linked file is not counted");
        assert_eq!(usage_within(&top.join("link"), 2), None, "a link is no directory to walk");
        assert_eq!(usage_within(&top.join("f1"), 2), None, "nor is a file");
    }
}
