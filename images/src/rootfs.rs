//! Layer contents: deterministic tar streams of directories, files and symlinks.

use std::path::Path;

/// Builds one layer; entries get mtime 0 and uid/gid 0 so digests are stable.
#[allow(missing_debug_implementations)] // tar::Builder is not Debug
pub(crate) struct Layer {
    tar: tar::Builder<Vec<u8>>,
}

impl Layer {
    pub(crate) fn new() -> Self {
        let mut tar = tar::Builder::new(Vec::new());
        tar.mode(tar::HeaderMode::Deterministic);
        Self { tar }
    }

    fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h
    }

    pub(crate) fn dir(&mut self, path: &str, mode: u32) -> std::io::Result<()> {
        let mut h = Self::header(tar::EntryType::Directory, mode, 0);
        self.tar.append_data(&mut h, format!("{path}/"), std::io::empty())
    }

    pub(crate) fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> std::io::Result<()> {
        let mut h = Self::header(tar::EntryType::Regular, mode, data.len() as u64);
        self.tar.append_data(&mut h, path, data)
    }

    pub(crate) fn symlink(&mut self, path: &str, target: &str) -> std::io::Result<()> {
        let mut h = Self::header(tar::EntryType::Symlink, 0o777, 0);
        self.tar.append_link(&mut h, path, Path::new(target))
    }

    pub(crate) fn finish(self) -> std::io::Result<Vec<u8>> {
        self.tar.into_inner()
    }
}
