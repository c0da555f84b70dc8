//! The plumbing every binary's `main.rs` shares, so each main only parses flags and runs:
//!
//! - [`LogArgs`]: upstream's `-v` flag, flattened into each binary's arguments;
//! - [`init_tracing`]: logs to stderr at upstream's `-v` levels, `RUST_LOG` overriding;
//! - [`stop_on_signal`]: a [`CancellationToken`] cancelled by the first SIGTERM or SIGINT;
//! - [`write_atomically`]: files other processes read (certificates, kubeconfigs) appear whole;
//! - [`tls`]: TLS client pieces (`AnyServerCert`, where upstream verifies no server).

pub mod tls;

use std::path::Path;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// The logging flags every binary takes: `#[command(flatten)] log: daemon::LogArgs`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LogArgs {
    /// Log verbosity, as upstream's `-v` (0–1 info, 2–4 debug, 5+ trace); RUST_LOG overrides.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,
}

impl LogArgs {
    /// [`init_tracing`] at this verbosity.
    pub fn init(self) {
        init_tracing(self.verbosity);
    }
}

/// The log level for upstream's `-v` verbosity: 0–1 info, 2–4 debug, 5 and above trace.
pub fn level(verbosity: u8) -> &'static str {
    match verbosity {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    }
}

/// Logs to stderr (coloured only on a terminal) at [`level`]`(verbosity)`, unless `RUST_LOG`
/// sets the filter. Call once, first thing in `main`.
pub fn init_tracing(verbosity: u8) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level(verbosity)));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// A token the first SIGTERM or SIGINT cancels, logging which one arrived and `what` stopping
/// means (e.g. "pods keep running"). The handlers are installed before this returns, so a signal
/// sent afterwards is never lost; must be called inside a tokio runtime.
pub fn stop_on_signal(what: &'static str) -> std::io::Result<CancellationToken> {
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: stopping ({what})"),
            _ = int.recv() => tracing::info!("SIGINT: stopping ({what})"),
        }
        on_signal.cancel();
    });
    Ok(stop)
}

/// Writes `content` to `path` with permission `mode` so that a reader sees either the old file
/// or the whole new one, never a part: the bytes go to a hidden sibling, are synced, and are
/// renamed over `path`. A crash part-way leaves `path` as it was (and at worst the sibling).
pub fn write_atomically(path: &Path, content: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    // `mode` is masked by the umask at creation, and an old sibling keeps its mode: set it.
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    f.write_all(content)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v_is_read_as_upstreams_flag_spells_it() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            log: LogArgs,
        }
        for (argv, want) in [(&["x"][..], 0), (&["x", "-v", "3"], 3), (&["x", "--v=5"], 5)] {
            assert_eq!(Cmd::try_parse_from(argv).map(|c| c.log.verbosity).ok(), Some(want));
        }
        assert!(Cmd::try_parse_from(["x", "-v", "lots"]).is_err());
    }

    #[test]
    fn verbosity_maps_to_upstreams_levels() {
        let levels: Vec<_> = [0, 1, 2, 4, 5, 9].into_iter().map(level).collect();
        assert_eq!(levels, ["info", "info", "debug", "debug", "trace", "trace"]);
    }

    #[tokio::test]
    async fn sigterm_cancels_the_stop_token() {
        let stop = stop_on_signal("test").expect("installing the handlers");
        assert!(!stop.is_cancelled());
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).expect("raising SIGTERM");
        tokio::time::timeout(std::time::Duration::from_secs(10), stop.cancelled())
            .await
            .expect("SIGTERM cancels the token");
    }

    #[test]
    fn an_atomic_write_replaces_the_whole_file_with_the_mode_asked_and_leaves_no_sibling() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        std::fs::write(&path, "a much longer old content than the new one").unwrap();
        write_atomically(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let names: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["admin.kubeconfig"]);
    }

    #[test]
    fn an_atomic_write_into_a_missing_directory_fails_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("ca.crt");
        assert!(write_atomically(&path, b"x", 0o644).is_err());
        assert!(!path.exists());
    }
}
