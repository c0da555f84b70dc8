//! `--audit-log-path` and its rotation (`--audit-log-maxsize` megabytes, `--audit-log-maxbackup`
//! files, `--audit-log-maxage` days), as upstream's lumberjack writer: appended to; before a
//! line would take the file past the size it is renamed `<stem>-<UTC time>.<ext>` beside
//! itself and a new file started; old files beyond the count or the age are removed. `-` is
//! standard output, never rotated. Lines are written whole, in the order events happen.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Upstream's default when `--audit-log-maxsize` is 0.
pub const DEFAULT_MAX_MB: u64 = 100;
const BACKUP_TIME: &str = "%Y-%m-%dT%H-%M-%S";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    pub max_bytes: u64,
    /// 0: keep every backup.
    pub max_backups: usize,
    /// 0: no age limit.
    pub max_age_days: u64,
}

impl Rotation {
    pub fn new(max_mb: u64, max_backups: usize, max_age_days: u64) -> Self {
        let mb = if max_mb == 0 { DEFAULT_MAX_MB } else { max_mb };
        Self { max_bytes: mb.saturating_mul(1024 * 1024), max_backups, max_age_days }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("audit log {path}: {source}")]
pub struct LogError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

#[derive(Debug)]
enum Sink {
    Stdout,
    File { path: PathBuf, file: File, size: u64, rotation: Rotation },
}

/// The audit log.
#[derive(Debug)]
pub struct Log {
    sink: Sink,
}

impl Log {
    pub fn open(path: &Path, rotation: Rotation) -> Result<Log, LogError> {
        if path == Path::new("-") {
            return Ok(Log { sink: Sink::Stdout });
        }
        let err = |source| LogError { path: path.into(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let file = open(path).map_err(err)?;
        let size = file.metadata().map_err(err)?.len();
        Ok(Log { sink: Sink::File { path: path.into(), file, size, rotation } })
    }

    /// Writes one line (with its newline), rotating first when it would not fit.
    pub fn write_line(&mut self, line: &[u8]) -> Result<(), LogError> {
        match &mut self.sink {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(line).map_err(|source| LogError { path: "-".into(), source })
            }
            Sink::File { path, file, size, rotation } => {
                let err = |source| LogError { path: path.clone(), source };
                if *size > 0 && *size + line.len() as u64 > rotation.max_bytes {
                    let backup = backup_name(path, jiff::Timestamp::now());
                    std::fs::rename(&*path, &backup).map_err(err)?;
                    *file = open(path).map_err(err)?;
                    *size = 0;
                    prune(path, rotation, SystemTime::now());
                }
                file.write_all(line).map_err(err)?;
                *size += line.len() as u64;
                Ok(())
            }
        }
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

fn split(path: &Path) -> (String, String) {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem.to_string(), format!(".{ext}")),
        _ => (name, String::new()),
    }
}

/// `audit.log` → `audit-2026-11-26T04-05-06.789.log`, in UTC (lumberjack's format).
fn backup_name(path: &Path, now: jiff::Timestamp) -> PathBuf {
    let (stem, ext) = split(path);
    let millis = now.subsec_millisecond();
    let stamp = now.strftime(BACKUP_TIME);
    path.with_file_name(format!("{stem}-{stamp}.{millis:03}{ext}"))
}

/// The backups of `path`: their paths and the times in their names, newest first.
fn backups(path: &Path) -> Vec<(PathBuf, jiff::Timestamp)> {
    let (stem, ext) = split(path);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<_> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stamp = name.strip_prefix(&format!("{stem}-"))?.strip_suffix(&ext)?;
            let (secs, millis) = stamp.rsplit_once('.')?;
            let at = jiff::fmt::strtime::parse(BACKUP_TIME, secs).ok()?.to_datetime().ok()?;
            let at = at.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
            let at =
                at.checked_add(jiff::SignedDuration::from_millis(millis.parse().ok()?)).ok()?;
            Some((e.path(), at))
        })
        .collect();
    out.sort_by_key(|b| std::cmp::Reverse(b.1));
    out
}

/// Removes backups beyond the count or the age.
fn prune(path: &Path, rotation: &Rotation, now: SystemTime) {
    let age = Duration::from_secs(rotation.max_age_days.saturating_mul(86_400));
    for (i, (backup, at)) in backups(path).into_iter().enumerate() {
        let too_many = rotation.max_backups > 0 && i >= rotation.max_backups;
        let too_old = rotation.max_age_days > 0
            && now.duration_since(SystemTime::from(at)).is_ok_and(|d| d > age);
        if (too_many || too_old)
            && let Err(e) = std::fs::remove_file(&backup)
        {
            tracing::warn!(path = %backup.display(), error = %e, "removing an old audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_would_pass_the_size_rotates_the_file_and_old_backups_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let rotation = Rotation { max_bytes: 100, max_backups: 2, max_age_days: 0 };
        let mut log = Log::open(&path, rotation).unwrap();
        let line = [b'x'; 39].iter().copied().chain([b'\n']).collect::<Vec<_>>();
        for _ in 0..10 {
            log.write_line(&line).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        // 2 lines per file: 4 rotations happened; 2 backups are kept.
        assert_eq!(std::fs::read(&path).unwrap().len(), 80);
        let kept = backups(&path);
        assert_eq!(kept.len(), 2, "{kept:?}");
        for (b, _) in &kept {
            assert_eq!(std::fs::read(b).unwrap().len(), 80);
            let name = b.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with("audit-") && name.ends_with(".log"), "{name}");
        }
    }

    #[test]
    fn backups_older_than_the_age_are_removed_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let now = jiff::Timestamp::now();
        let old = backup_name(&path, now - jiff::SignedDuration::from_hours(72));
        let fresh = backup_name(&path, now - jiff::SignedDuration::from_hours(1));
        let other = dir.path().join("audit-notatime.log");
        for p in [&old, &fresh, &other] {
            std::fs::write(p, "x").unwrap();
        }
        prune(
            &path,
            &Rotation { max_bytes: 1, max_backups: 0, max_age_days: 2 },
            SystemTime::now(),
        );
        assert!(!old.exists() && fresh.exists() && other.exists());
    }

    #[test]
    fn an_existing_log_is_appended_to_and_its_size_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("audit");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "0123456789\n").unwrap();
        let mut log =
            Log::open(&path, Rotation { max_bytes: 15, max_backups: 0, max_age_days: 0 }).unwrap();
        log.write_line(b"abc\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0123456789\nabc\n");
        log.write_line(b"d\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "d\n");
        assert_eq!(backups(&path).len(), 1);
    }
}
