//! One container log's files on disk, as upstream's `rotateLog` leaves them: the current file
//! `<log>` the runtime writes, the newest rotated one `<log>.<stamp>` left uncompressed (a
//! reader such as `kubectl logs -f` or fluentd may still be finishing it), and older ones
//! `<log>.<stamp>.gz`. At most `max_files` in all.
//!
//! The steps run in upstream's order and are each safe to repeat after a crash:
//! [`prepare`] removes what an interrupted rotation left ([`is_in_use`]), then the oldest
//! rotated files beyond `max_files - 2`, then compresses the rest; [`rotate_latest`] renames
//! the current file, after which the caller asks the runtime to reopen it (and calls
//! [`undo_rotation`] if it cannot).

use std::io;
use std::path::{Path, PathBuf};

/// `<log>.<stamp>.gz`: a compressed rotated log.
pub const COMPRESS_SUFFIX: &str = ".gz";
/// `<file>.tmp`: a compression in progress.
pub const TMP_SUFFIX: &str = ".tmp";

/// Why a log could not be rotated: the step and the file.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    #[error("listing the rotated files of {log}: {source}")]
    List { log: PathBuf, source: io::Error },
    #[error("removing {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },
    #[error("compressing {path}: {source}")]
    Compress { path: PathBuf, source: io::Error },
    #[error("renaming {from} to {to}: {source}")]
    Rename { from: PathBuf, to: PathBuf, source: io::Error },
}

/// The time a rotated file is named for, as upstream's `20060102-150405` in local time.
pub fn stamp(now: &jiff::Zoned) -> String {
    now.strftime("%Y%m%d-%H%M%S").to_string()
}

/// Every file beside `log` whose name is `<log's name>.<anything>`, as upstream's glob
/// `<log>.*` (the current file itself is not among them).
pub fn rotated_files(log: &Path) -> Result<Vec<PathBuf>, RotateError> {
    let list = |source| RotateError::List { log: log.into(), source };
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}.");
    let mut files = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(list(e)),
    };
    for entry in entries {
        let entry = entry.map_err(list)?;
        if entry.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)) {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Whether a rotated file is still wanted: not a leftover `.tmp`, and not an uncompressed file
/// whose `.gz` exists (its compression finished, its removal did not).
pub fn is_in_use(file: &Path, all: &[PathBuf]) -> bool {
    let name = file.as_os_str().to_string_lossy();
    if name.ends_with(TMP_SUFFIX) {
        return false;
    }
    if name.ends_with(COMPRESS_SUFFIX) {
        return true;
    }
    let compressed = format!("{name}{COMPRESS_SUFFIX}");
    !all.iter().any(|other| other.as_os_str().to_string_lossy() == compressed)
}

/// Makes room for one more rotated file: leftovers removed, the oldest rotated files beyond
/// `max_files - 2` removed (one place is the current file, one the file about to be rotated),
/// the rest compressed. Returns the rotated files kept, oldest first.
pub fn prepare(log: &Path, max_files: usize) -> Result<Vec<PathBuf>, RotateError> {
    let all = rotated_files(log)?;
    let mut kept = Vec::with_capacity(all.len());
    for file in &all {
        if is_in_use(file, &all) {
            kept.push(file.clone());
        } else {
            remove(file)?;
        }
    }
    // Stamps sort as times, so names sort oldest first.
    kept.sort();
    let excess = kept.len().saturating_sub(max_files.saturating_sub(2));
    for file in kept.drain(..excess) {
        remove(&file)?;
    }
    for file in &mut kept {
        if !file.as_os_str().to_string_lossy().ends_with(COMPRESS_SUFFIX) {
            *file = compress(file)?;
        }
    }
    Ok(kept)
}

fn remove(path: &Path) -> Result<(), RotateError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(RotateError::Remove { path: path.into(), source: e })
        }
        _ => Ok(()),
    }
}

/// Gzips `file` to `file.gz` through `file.gz.tmp`, then removes `file`.
pub fn compress(file: &Path) -> Result<PathBuf, RotateError> {
    let err = |source| RotateError::Compress { path: file.into(), source };
    let compressed = PathBuf::from(format!("{}{COMPRESS_SUFFIX}", file.display()));
    let tmp = PathBuf::from(format!("{}{TMP_SUFFIX}", compressed.display()));
    let written = (|| {
        let mut input = std::fs::File::open(file)?;
        let mode = std::os::unix::fs::PermissionsExt::mode(&input.metadata()?.permissions());
        let output = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().write(true).create(true).truncate(true),
            mode,
        )
        .open(&tmp)?;
        let mut gz = flate2::write::GzEncoder::new(output, flate2::Compression::default());
        io::copy(&mut input, &mut gz)?;
        gz.finish()?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    std::fs::rename(&tmp, &compressed).map_err(|source| RotateError::Rename {
        from: tmp.clone(),
        to: compressed.clone(),
        source,
    })?;
    remove(file)?;
    Ok(compressed)
}

/// Renames the current log to `<log>.<stamp>`; the runtime must then reopen `log`.
pub fn rotate_latest(log: &Path, stamp: &str) -> Result<PathBuf, RotateError> {
    let rotated = PathBuf::from(format!("{}.{stamp}", log.display()));
    std::fs::rename(log, &rotated).map_err(|source| RotateError::Rename {
        from: log.into(),
        to: rotated.clone(),
        source,
    })?;
    Ok(rotated)
}

/// Puts a rotated file back when the runtime could not reopen the log, so the next round
/// tries again rather than the container writing into a file nobody reads.
pub fn undo_rotation(log: &Path, rotated: &Path) -> Result<(), RotateError> {
    std::fs::rename(rotated, log).map_err(|source| RotateError::Rename {
        from: rotated.into(),
        to: log.into(),
        source,
    })
}

/// Removes a container's log and every rotated file of it (upstream's `Clean`, when the
/// container is removed).
pub fn remove_all(log: &Path) -> Result<(), RotateError> {
    for file in rotated_files(log)? {
        remove(&file)?;
    }
    remove(log)
}
