//! Container log files in the CRI format the kubelet reads:
//! `<RFC 3339 nano timestamp> <stdout|stderr> <F|P> <text>`.

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use crate::program::Stream;

/// Opens (creating, appending) the log file the way containerd does, creating its directory.
pub(crate) fn open(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new().create(true).append(true).open(path)
}

/// Appends full lines (`F` tag) to an open log.
pub(crate) fn write_lines(
    file: &mut std::fs::File,
    lines: &[(Stream, String)],
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    for (stream, text) in lines {
        writeln!(buf, "{} {} F {}", rfc3339_nanos(SystemTime::now()), stream.as_str(), text)?;
    }
    file.write_all(&buf)
}

/// `2006-01-02T15:04:05.999999999Z` in UTC, as containerd writes it.
pub fn rfc3339_nanos(t: SystemTime) -> String {
    humantime::format_rfc3339_nanos(t).to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_rfc3339_with_nanoseconds() {
        let t = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 42);
        assert_eq!(rfc3339_nanos(t), "2023-11-14T22:13:20.000000042Z");
        assert_eq!(rfc3339_nanos(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert!(rfc3339_nanos(leap).starts_with("2000-02-29T00:00:00"));
    }
}
