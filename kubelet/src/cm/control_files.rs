//! Reading cgroup control files for the stats scrapes, cheaply. A scrape at 110 pods reads
//! some 900 of them (`memory.stat`, `memory.usage_in_bytes`, `cpuacct.usage`, `pids.current`
//! of every pod and container cgroup), and opening each by its absolute path was 40 % of a
//! scrape's CPU: every one of the eight or nine components of
//! `/sys/fs/cgroup/memory/kubepods/besteffort/pod<uid>/<id>` looked up and revalidated in
//! kernfs (`perf` in BENCHMARKS.md). So each file is opened relative to a handle on the
//! directory two levels above its cgroup (a QoS level, `kubepods` or the root: a handful,
//! opened once and kept), and read without asking its size first (control files report none).
//!
//! A kept directory that was removed and made again (its handle then finds nothing) is
//! noticed by the absolute path still reading, and opened afresh.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

/// At most this many directory handles are kept (the cgroups read have a handful of
/// grandparents; a caller reading elsewhere only goes without).
const MAX_HANDLES: usize = 64;
/// A control file longer than this is cut (v1's `memory.stat` is about 1 KiB).
const MAX_FILE: u64 = 1 << 20;

/// Directory handles under one cgroup mount, for reading control files below them.
#[derive(Debug, Default)]
pub struct ControlFiles {
    handles: Mutex<HashMap<PathBuf, Arc<OwnedFd>>>,
}

impl ControlFiles {
    /// The text of `file` in the cgroup directory `dir`; `None` when it cannot be read (the
    /// cgroup is gone).
    pub fn read(&self, dir: &Path, file: &str) -> Option<String> {
        let Some((base, rel)) = split(dir) else { return read_all(File::open(dir.join(file))) };
        let handle = self.handle(base);
        let relative = handle.as_ref().map(|fd| {
            let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
            openat(fd.as_ref(), &rel.join(file), flags, Mode::empty())
        });
        match relative {
            Some(Ok(fd)) => read_all(Ok(File::from(fd))),
            // The cgroup is gone, or the kept directory is: the absolute path tells which.
            Some(Err(Errno::ENOENT)) => {
                let text = read_all(File::open(dir.join(file)))?;
                self.forget(base);
                Some(text)
            }
            _ => read_all(File::open(dir.join(file))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<OwnedFd>>> {
        self.handles.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept handle on `base`, opened on first use.
    fn handle(&self, base: &Path) -> Option<Arc<OwnedFd>> {
        if let Some(fd) = self.lock().get(base) {
            return Some(fd.clone());
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = Arc::new(nix::fcntl::open(base, flags, Mode::empty()).ok()?);
        let mut handles = self.lock();
        if handles.len() < MAX_HANDLES {
            handles.insert(base.to_path_buf(), fd.clone());
        }
        Some(fd)
    }

    fn forget(&self, base: &Path) {
        self.lock().remove(base);
    }

    /// How many directory handles are kept.
    pub fn kept(&self) -> usize {
        self.lock().len()
    }
}

/// `dir` as its grandparent and the two components below it.
fn split(dir: &Path) -> Option<(&Path, &Path)> {
    let base = dir.parent()?.parent()?;
    Some((base, dir.strip_prefix(base).ok()?))
}

/// The whole file as text, read into one buffer with no `stat` for a size the kernel does not
/// know.
fn read_all(file: std::io::Result<File>) -> Option<String> {
    let mut buf = Vec::with_capacity(4096);
    file.ok()?.take(MAX_FILE).read_to_end(&mut buf).ok()?;
    String::from_utf8(buf).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_through_a_kept_handle_on_their_grandparent() {
        let root = tempfile::tempdir().unwrap();
        let qos = root.path().join("memory/kubepods/besteffort");
        for (pod, text) in [("poda", "1\n"), ("podb", "2\n")] {
            std::fs::create_dir_all(qos.join(pod).join("c1")).unwrap();
            std::fs::write(qos.join(pod).join("c1/memory.stat"), text).unwrap();
        }
        let files = ControlFiles::default();
        assert_eq!(files.read(&qos.join("poda/c1"), "memory.stat").as_deref(), Some("1\n"));
        assert_eq!(files.read(&qos.join("podb/c1"), "memory.stat").as_deref(), Some("2\n"));
        assert_eq!(files.kept(), 1, "both containers' grandparent is the QoS level");
        assert_eq!(files.read(&qos.join("podb/gone"), "memory.stat"), None);
        assert_eq!(files.kept(), 1, "a cgroup that is gone leaves the handle");
    }

    #[test]
    fn a_kept_directory_made_again_is_opened_afresh() {
        let root = tempfile::tempdir().unwrap();
        let qos = root.path().join("kubepods/burstable");
        std::fs::create_dir_all(qos.join("poda/c1")).unwrap();
        std::fs::write(qos.join("poda/c1/cpu.stat"), "usage_usec 1\n").unwrap();
        let files = ControlFiles::default();
        assert!(files.read(&qos.join("poda/c1"), "cpu.stat").is_some());
        std::fs::remove_dir_all(&qos).unwrap();
        std::fs::create_dir_all(qos.join("poda/c1")).unwrap();
        std::fs::write(qos.join("poda/c1/cpu.stat"), "usage_usec 2\n").unwrap();
        assert_eq!(files.read(&qos.join("poda/c1"), "cpu.stat").as_deref(), Some("usage_usec 2\n"));
        assert_eq!(files.kept(), 0, "the stale handle is dropped");
        assert_eq!(files.read(&qos.join("poda/c1"), "cpu.stat").as_deref(), Some("usage_usec 2\n"));
        assert_eq!(files.kept(), 1, "and the new directory kept");
    }

    #[test]
    fn a_control_file_is_read_whole_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(10_000);
        std::fs::write(dir.path().join("f"), &long).unwrap();
        assert_eq!(read_all(File::open(dir.path().join("f"))), Some(long));
        assert_eq!(read_all(File::open(dir.path().join("missing"))), None);
    }
}
