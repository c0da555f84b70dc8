//! The plumbing every binary's `main.rs` shares, so each main only parses flags and runs:
//!
//! - [`LogArgs`]: upstream's `-v` flag, flattened into each binary's arguments;
//! - [`init_tracing`]: logs to stderr at upstream's `-v` levels, `RUST_LOG` overriding;
//! - [`stop_on_signal`]: a [`CancellationToken`] cancelled by the first SIGTERM or SIGINT.

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
}
