//! Upstream's `AtomicWriter`: projects a set of files into a volume directory so that a reader
//! sees the old set or the new one, never a mix. The files live in a hidden timestamped
//! directory (`..2024_05_01_10_00_00.123456789`); `..data` is a symlink to it, swapped by one
//! `rename`; each user-visible top-level name is a symlink through `..data`
//! (`key → ..data/key`). The previous timestamped directory is removed after the swap. Names
//! starting with `..` are reserved.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The symlink to the current timestamped directory.
pub const DATA_DIR: &str = "..data";
/// The symlink made beside `..data` and renamed over it.
const NEW_DATA_DIR: &str = "..data_tmp";
const MAX_FILE_NAME: usize = 255;
const MAX_PATH: usize = 4096;

/// One file's content and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// Files by their path relative to the volume.
pub type Payload = BTreeMap<String, FileProjection>;

/// Why a path cannot be projected (upstream's `validatePath`, plus collisions and NULs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("invalid path: must not be empty")]
    Empty,
    #[error("invalid path: must be relative path: {0}")]
    Absolute(String),
    #[error("invalid path: must be less than or equal to {MAX_PATH} characters: {0}")]
    TooLong(String),
    #[error("invalid path: must not contain '..': {0}")]
    DotDot(String),
    #[error(
        "invalid path: filenames must be less than or equal to {MAX_FILE_NAME} characters: {0}"
    )]
    NameTooLong(String),
    #[error("invalid path: must not start with '..': {0}")]
    Reserved(String),
    #[error("invalid path: must not contain a NUL byte: {0:?}")]
    Nul(String),
    #[error("invalid file name: must be one path segment, as written: {0:?}")]
    NotAFileName(String),
    #[error("invalid path: {0:?} is written twice")]
    Duplicate(String),
    #[error("invalid path: {file:?} is a file and also a directory of {other:?}")]
    FileIsDirectory { file: String, other: String },
}

/// Why a write failed; the previous content stays in place.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The files on disk already were the payload.
    Unchanged,
    /// A new timestamped directory was swapped in.
    Updated,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> WriteError + 'a {
    move |source| WriteError::Io { what, path: path.to_path_buf(), source }
}

/// Upstream's `validatePath`, then the path cleaned (`a//./b` → `a/b`).
pub fn clean_path(path: &str) -> Result<String, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.starts_with('/') {
        return Err(PathError::Absolute(path.to_string()));
    }
    if path.len() > MAX_PATH {
        return Err(PathError::TooLong(path.to_string()));
    }
    if path.contains('\0') {
        return Err(PathError::Nul(path.to_string()));
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    for s in &segments {
        if *s == ".." {
            return Err(PathError::DotDot(path.to_string()));
        }
        if s.len() > MAX_FILE_NAME {
            return Err(PathError::NameTooLong(path.to_string()));
        }
    }
    match segments.first() {
        None => Err(PathError::Empty),
        Some(first) if first.starts_with("..") => Err(PathError::Reserved(path.to_string())),
        Some(_) => Ok(segments.join("/")),
    }
}

/// Every path cleaned and checked; two entries on one path, or a file that another path needs
/// as a directory, are errors.
pub fn validate(payload: &Payload) -> Result<Payload, PathError> {
    let mut clean = Payload::new();
    for (path, file) in payload {
        let p = clean_path(path)?;
        if clean.insert(p.clone(), file.clone()).is_some() {
            return Err(PathError::Duplicate(p));
        }
    }
    for path in clean.keys() {
        for (i, _) in path.match_indices('/') {
            let dir = &path[..i];
            if clean.contains_key(dir) {
                return Err(PathError::FileIsDirectory { file: dir.into(), other: path.clone() });
            }
        }
    }
    Ok(clean)
}

/// Every path of the payload and each directory above it.
fn with_parents(payload: &Payload) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for path in payload.keys() {
        all.insert(path.clone());
        for (i, _) in path.match_indices('/') {
            all.insert(path[..i].to_string());
        }
    }
    all
}

fn top_level(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
}

/// Every path under `dir`, relative to it.
fn walk(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        if entry.file_type()?.is_dir() {
            walk(&entry.path(), &rel, out)?;
        }
        out.insert(rel);
    }
    Ok(())
}

/// Whether `file` in the old timestamped directory differs from the projection (its mode as
/// `group` ownership leaves it).
fn differs(old: &Path, file: &FileProjection, group: Option<u32>) -> Result<bool, WriteError> {
    let meta = match std::fs::symlink_metadata(old) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(io("reading", old)(e)),
    };
    let mode = match group {
        Some(_) => super::ownership::file_mode(file.mode, true),
        None => file.mode,
    };
    if !meta.is_file() || meta.permissions().mode() & 0o7777 != mode {
        return Ok(true);
    }
    Ok(std::fs::read(old).map_err(io("reading", old))? != file.data)
}

/// `..YYYY_MM_DD_HH_MM_SS.<random>`, created with mode 0755 whatever the umask.
fn new_timestamp_dir(target: &Path) -> Result<PathBuf, WriteError> {
    let stamp = jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S").to_string();
    loop {
        let suffix: u32 = rand::random();
        let dir = target.join(format!("..{stamp}.{suffix}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                    .map_err(io("setting the mode of", &dir))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("creating", &dir)(e)),
        }
    }
}

fn write_files(dir: &Path, payload: &Payload) -> Result<(), WriteError> {
    for (path, file) in payload {
        let full = dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .map_err(io("creating", parent))?;
        }
        let mut f = std::fs::File::create(&full).map_err(io("creating", &full))?;
        f.write_all(&file.data).map_err(io("writing", &full))?;
        // The mode as given, whatever the umask made of it at creation.
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(file.mode))
            .map_err(io("setting the mode of", &full))?;
    }
    Ok(())
}

/// [`super::ownership::apply`] for a read-only volume, when there is a group.
fn own(path: &Path, group: Option<u32>) -> Result<(), WriteError> {
    let Some(gid) = group else { return Ok(()) };
    super::ownership::apply(path, gid, true)
        .map_err(|(path, e)| io("setting the fsGroup ownership of", &path)(e))
}

fn remove_if_present(path: &Path) -> Result<(), WriteError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", path)(e)),
        _ => Ok(()),
    }
}

/// Links each top-level name of the payload through `..data`, where no link is yet.
fn link_user_visible(target: &Path, payload: &Payload) -> Result<(), WriteError> {
    let tops: BTreeSet<&str> = payload.keys().map(|p| top_level(p)).collect();
    for top in tops {
        let visible = target.join(top);
        if std::fs::symlink_metadata(&visible).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA_DIR).join(top), &visible)
                .map_err(io("linking", &visible))?;
        }
    }
    Ok(())
}

/// Projects `payload` into `target` (an existing directory), atomically for readers. With a
/// `group` (the pod's `fsGroup`), the new files are the group's, readable by it, before they
/// become visible (upstream's `setPerms` before the swap), and so is the volume.
pub fn write(target: &Path, payload: &Payload, group: Option<u32>) -> Result<Written, WriteError> {
    let payload = validate(payload)?;
    let data_link = target.join(DATA_DIR);
    let old = match std::fs::read_link(&data_link) {
        Ok(name) => Some(target.join(name)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("reading the link", &data_link)(e)),
    };
    let mut old_paths = BTreeSet::new();
    if let Some(old) = &old {
        match walk(old, "", &mut old_paths) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("reading", old)(e));
            }
            _ => {}
        }
        let new_paths = with_parents(&payload);
        let removed = old_paths.iter().any(|p| !new_paths.contains(p));
        let mut changed = removed;
        for (path, file) in &payload {
            if changed {
                break;
            }
            changed = differs(&old.join(path), file, group)?;
        }
        if !changed {
            link_user_visible(target, &payload)?;
            own(target, group)?;
            return Ok(Written::Unchanged);
        }
    }

    let ts_dir = new_timestamp_dir(target)?;
    let ts_name = ts_dir.file_name().map(PathBuf::from).unwrap_or_default();
    let swapped =
        write_files(&ts_dir, &payload).and_then(|()| own(&ts_dir, group)).and_then(|()| {
            let tmp_link = target.join(NEW_DATA_DIR);
            remove_if_present(&tmp_link)?;
            std::os::unix::fs::symlink(&ts_name, &tmp_link).map_err(io("linking", &tmp_link))?;
            std::fs::rename(&tmp_link, &data_link).map_err(io("renaming", &tmp_link))
        });
    if let Err(e) = swapped {
        let _ = std::fs::remove_dir_all(&ts_dir);
        return Err(e);
    }
    link_user_visible(target, &payload)?;
    own(target, group)?;
    let tops: BTreeSet<&str> = payload.keys().map(|p| top_level(p)).collect();
    for gone in old_paths.iter().filter(|p| !p.contains('/') && !tops.contains(p.as_str())) {
        remove_if_present(&target.join(gone))?;
    }
    // The previous timestamped directory, and any a crash left behind.
    for entry in std::fs::read_dir(target).map_err(io("reading", target))? {
        let entry = entry.map_err(io("reading", target))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let stale = name.starts_with("..")
            && name != DATA_DIR
            && name != NEW_DATA_DIR
            && Path::new(name.as_ref()) != ts_name
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if stale {
            std::fs::remove_dir_all(entry.path()).map_err(io("removing", &entry.path()))?;
        }
    }
    Ok(Written::Updated)
}

#[cfg(test)]
mod tests;
