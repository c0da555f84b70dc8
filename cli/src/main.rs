//! `kubectl-lite`: runs the command line and exits with its code.

use nix::sys::signal::{SigHandler, Signal, signal};

fn main() -> std::process::ExitCode {
    default_sigpipe();
    cli::run(std::env::args_os())
}

#[allow(unsafe_code)]
fn default_sigpipe() {
    // Dies of SIGPIPE when what reads its output goes away (`kubectl-lite get pods | head`), as
    // kubectl's Go runtime does for its stdout and stderr, instead of Rust's default of ignoring
    // the signal and panicking in `print!`. The sockets it writes are TCP, whose writes carry
    // MSG_NOSIGNAL and still see EPIPE as an error.
    // SAFETY: set before any thread starts; no handler of ours is replaced.
    if let Err(e) = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) } {
        eprintln!("error: restoring SIGPIPE's default action: {e}");
    }
}
