//! Reading cgroup control files for the stats scrapes, cheaply. A scrape at 110 pods reads
//! some 800 of them (`memory.stat`, `memory.usage_in_bytes`, `cpuacct.usage` of every pod and
//! container cgroup, `pids.current` of every pod), and opening each by its absolute path was
//! 40 % of a scrape's CPU: every one of the eight or nine components of
//! `/sys/fs/cgroup/memory/kubepods/besteffort/pod<uid>/<id>` looked up and revalidated in
//! kernfs (`perf` in BENCHMARKS.md). So:
//!
//! - A file is opened relative to a handle on the directory two levels above its cgroup (a QoS
//!   level, `kubepods` or the root: a handful, opened once and kept), and read without asking
//!   its size first (control files report none). A kept directory that was removed and made
//!   again (its handle then finds nothing) is noticed by the absolute path still reading, and
//!   opened afresh.
//! - On a cgroup filesystem, a file once read is kept open and read again from its start: the
//!   kernel writes a control file's text afresh at every read from offset 0 (as `top` re-reads
//!   `/proc/stat`), so the next reading costs one `pread` instead of a path walk, an open and a
//!   close. A kept file whose cgroup was removed answers `ENODEV`, and is opened afresh by path;
//!   one no reading asked for since the last [`ControlFiles::sweep`] is closed then, and those
//!   under a cgroup the kubelet removes are closed first ([`ControlFiles::close_under`]). At most
//!   a quarter of the soft `RLIMIT_NOFILE` (and [`MAX_KEPT`]) are kept; past that, files are
//!   opened for each read as before.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

/// At most this many directory handles are kept (the cgroups read have a handful of
/// grandparents; a caller reading elsewhere only goes without).
const MAX_HANDLES: usize = 64;
/// A control file longer than this is cut (v1's `memory.stat` is about 1 KiB).
const MAX_FILE: usize = 1 << 20;
/// At most this many control files are kept open (seven a pod at 110 pods is 770).
pub const MAX_KEPT: usize = 4096;

/// Which files are kept open between reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Those on a cgroup filesystem, whose text the kernel writes at each read.
    ControlFiles,
    /// Any (tests, whose temp files are rewritten in place).
    #[cfg(test)]
    Any,
}

/// A kept directory handle, and whether it is on a cgroup filesystem.
#[derive(Debug, Clone)]
struct Base {
    fd: Arc<OwnedFd>,
    cgroupfs: bool,
}

/// A control file kept open, and whether a read asked for it since the last sweep.
#[derive(Debug)]
struct KeptFile {
    file: Arc<File>,
    read: bool,
}

/// Directory handles and open control files under one cgroup mount.
#[derive(Debug)]
pub struct ControlFiles {
    handles: Mutex<HashMap<PathBuf, Base>>,
    files: Mutex<HashMap<PathBuf, KeptFile>>,
    keep: Keep,
    limit: usize,
}

impl Default for ControlFiles {
    fn default() -> Self {
        Self::new(Keep::ControlFiles)
    }
}

impl ControlFiles {
    fn new(keep: Keep) -> Self {
        let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(1024, |(soft, _)| soft);
        let limit = usize::try_from(soft / 4).unwrap_or(MAX_KEPT).min(MAX_KEPT);
        Self { handles: Mutex::default(), files: Mutex::default(), keep, limit }
    }

    /// The text of `file` in the cgroup directory `dir`; `None` when it cannot be read (the
    /// cgroup is gone).
    pub fn read(&self, dir: &Path, file: &str) -> Option<String> {
        let path = dir.join(file);
        if let Some(kept) = self.kept_file(&path) {
            match read_from_start(&kept) {
                Ok(text) => return Some(text),
                // The cgroup is gone (`ENODEV`), or made again: by path below.
                Err(_) => self.forget_file(&path),
            }
        }
        let (opened, keep) = self.open(dir, file, &path)?;
        let text = read_from_start(&opened).ok()?;
        if keep {
            self.keep_file(path, opened);
        }
        Some(text)
    }

    /// Opens `file` of `dir` (at `path`), and tells whether it may be kept open.
    fn open(&self, dir: &Path, file: &str, path: &Path) -> Option<(File, bool)> {
        let by_path = || File::open(path).ok().map(|f| (f, false));
        let Some((base_dir, rel)) = split(dir) else { return by_path() };
        let Some(base) = self.handle(base_dir) else { return by_path() };
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        match openat(base.fd.as_ref(), &rel.join(file), flags, Mode::empty()) {
            Ok(fd) => Some((File::from(fd), self.keeps(&base))),
            // The cgroup is gone, or the kept directory is: the absolute path tells which.
            Err(Errno::ENOENT) => {
                let opened = by_path()?;
                self.forget(base_dir);
                Some(opened)
            }
            Err(_) => by_path(),
        }
    }

    fn keeps(&self, base: &Base) -> bool {
        match self.keep {
            Keep::ControlFiles => base.cgroupfs,
            #[cfg(test)]
            Keep::Any => true,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Base>> {
        self.handles.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_files(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, KeptFile>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept handle on `base`, opened on first use.
    fn handle(&self, base: &Path) -> Option<Base> {
        if let Some(kept) = self.lock().get(base) {
            return Some(kept.clone());
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(base, flags, Mode::empty()).ok()?;
        let cgroupfs = nix::sys::statfs::fstatfs(&fd).is_ok_and(|fs| {
            let kind = fs.filesystem_type();
            kind == nix::sys::statfs::CGROUP_SUPER_MAGIC
                || kind == nix::sys::statfs::CGROUP2_SUPER_MAGIC
        });
        let kept = Base { fd: Arc::new(fd), cgroupfs };
        let mut handles = self.lock();
        if handles.len() < MAX_HANDLES {
            handles.insert(base.to_path_buf(), kept.clone());
        }
        Some(kept)
    }

    fn forget(&self, base: &Path) {
        self.lock().remove(base);
    }

    /// The kept file at `path`, marked as read.
    fn kept_file(&self, path: &Path) -> Option<Arc<File>> {
        let mut kept = self.lock_files();
        let entry = kept.get_mut(path)?;
        entry.read = true;
        Some(entry.file.clone())
    }

    fn keep_file(&self, path: PathBuf, file: File) {
        let mut kept = self.lock_files();
        if kept.len() < self.limit {
            kept.insert(path, KeptFile { file: Arc::new(file), read: true });
        }
    }

    fn forget_file(&self, path: &Path) {
        self.lock_files().remove(path);
    }

    /// Closes the kept files no read asked for since the last sweep (those of containers and
    /// pods that are gone); the stats call it after each reading of every pod.
    pub fn sweep(&self) {
        self.lock_files().retain(|_, kept| std::mem::take(&mut kept.read));
    }

    /// Closes the kept files in `dir` and below it (a cgroup about to be removed).
    pub fn close_under(&self, dir: &Path) {
        self.lock_files().retain(|path, _| !path.starts_with(dir));
    }

    /// How many directory handles are kept.
    pub fn handles_kept(&self) -> usize {
        self.lock().len()
    }

    /// How many control files are kept open.
    pub fn files_kept(&self) -> usize {
        self.lock_files().len()
    }
}

/// `dir` as its grandparent and the two components below it.
fn split(dir: &Path) -> Option<(&Path, &Path)> {
    let base = dir.parent()?.parent()?;
    Some((base, dir.strip_prefix(base).ok()?))
}

/// The whole file as text, read from offset 0 into one buffer (no `stat` for a size the kernel
/// does not know; a kept file's next read starts at 0 again).
fn read_from_start(file: &File) -> std::io::Result<String> {
    let mut buf = vec![0; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            if len >= MAX_FILE {
                break;
            }
            buf.resize((len * 2).min(MAX_FILE), 0);
        }
        let n = file.read_at(&mut buf[len..], len as u64)?;
        if n == 0 {
            break;
        }
        len += n;
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
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
        assert_eq!(files.handles_kept(), 1, "both containers' grandparent is the QoS level");
        assert_eq!(files.files_kept(), 0, "files off a cgroup filesystem are not kept open");
        assert_eq!(files.read(&qos.join("podb/gone"), "memory.stat"), None);
        assert_eq!(files.handles_kept(), 1, "a cgroup that is gone leaves the handle");
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
        assert_eq!(files.handles_kept(), 0, "the stale handle is dropped");
        assert_eq!(files.read(&qos.join("poda/c1"), "cpu.stat").as_deref(), Some("usage_usec 2\n"));
        assert_eq!(files.handles_kept(), 1, "and the new directory kept");
    }

    #[test]
    fn a_kept_file_is_read_again_from_its_start_until_a_sweep_finds_it_unread() {
        let root = tempfile::tempdir().unwrap();
        let qos = root.path().join("memory/kubepods/besteffort");
        for pod in ["poda", "podb"] {
            std::fs::create_dir_all(qos.join(pod)).unwrap();
            std::fs::write(qos.join(pod).join("memory.stat"), "total_rss 1\n").unwrap();
        }
        let files = ControlFiles::new(Keep::Any);
        assert_eq!(files.read(&qos.join("poda"), "memory.stat").as_deref(), Some("total_rss 1\n"));
        assert!(files.read(&qos.join("podb"), "memory.stat").is_some());
        assert_eq!(files.files_kept(), 2);
        // Written afresh in place, as the kernel writes a control file at each read.
        std::fs::write(qos.join("poda/memory.stat"), "total_rss 22\n").unwrap();
        assert_eq!(files.read(&qos.join("poda"), "memory.stat").as_deref(), Some("total_rss 22\n"));

        files.sweep();
        assert_eq!(files.files_kept(), 2, "both were read since the last sweep");
        assert!(files.read(&qos.join("poda"), "memory.stat").is_some());
        files.sweep();
        assert_eq!(files.files_kept(), 1, "podb was not read since: closed");

        files.close_under(&qos.join("poda"));
        assert_eq!(files.files_kept(), 0, "a cgroup about to be removed has its files closed");
        assert_eq!(files.read(&qos.join("poda"), "memory.stat").as_deref(), Some("total_rss 22\n"));
        assert_eq!(files.files_kept(), 1, "and is kept again once read");
    }

    #[test]
    fn at_most_the_limit_of_files_is_kept_open() {
        let root = tempfile::tempdir().unwrap();
        let qos = root.path().join("memory/kubepods/besteffort");
        let mut files = ControlFiles::new(Keep::Any);
        files.limit = 2;
        for pod in ["a", "b", "c"] {
            std::fs::create_dir_all(qos.join(pod)).unwrap();
            std::fs::write(qos.join(pod).join("pids.current"), pod).unwrap();
            assert_eq!(files.read(&qos.join(pod), "pids.current").as_deref(), Some(pod));
        }
        assert_eq!(files.files_kept(), 2);
        assert_eq!(files.read(&qos.join("c"), "pids.current").as_deref(), Some("c"), "read anyway");
    }

    #[test]
    fn a_control_file_is_read_whole_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(10_000);
        std::fs::write(dir.path().join("f"), &long).unwrap();
        let f = File::open(dir.path().join("f")).unwrap();
        assert_eq!(read_from_start(&f).unwrap(), long);
        assert_eq!(read_from_start(&f).unwrap(), long, "and again from its start");
        let huge = "y".repeat(MAX_FILE + 10);
        std::fs::write(dir.path().join("g"), &huge).unwrap();
        let g = File::open(dir.path().join("g")).unwrap();
        assert_eq!(read_from_start(&g).unwrap().len(), MAX_FILE);
    }
}
