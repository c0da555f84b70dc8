//! `kubectl-lite`: runs the command line and exits with its code.

fn main() -> std::process::ExitCode {
    cli::run(std::env::args_os())
}
