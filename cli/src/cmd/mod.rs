//! The command tree (kubectl's cobra tree, as clap subcommands), one room per command, and
//! [`run`]: parse, act, print errors as kubectl does, exit 0 or 1.

pub mod api_resources;
pub mod apply;
pub mod create;
pub mod delete;
pub mod get;
pub mod version;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::errors::CliError;
use crate::factory::Factory;
use crate::flags::ConfigFlags;

#[derive(Debug, Parser)]
#[command(name = "kubectl-lite", about = "kubectl-lite controls the Kubernetes cluster manager.")]
struct Cli {
    #[command(flatten)]
    flags: ConfigFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Display one or many resources.
    Get(get::Args),
    /// Create a resource from a file or from stdin.
    Create(create::Args),
    /// Apply a configuration to a resource by file name or stdin.
    Apply(apply::Args),
    /// Delete resources by file names, stdin, resources and names, or by resources and label selector.
    Delete(delete::Args),
    /// Print the client and server version information.
    Version(version::Args),
    /// Print the supported API resources on the server.
    ApiResources(api_resources::Args),
}

/// Runs a command line; the exit code is kubectl's (0, or 1 for any error).
pub fn run<I, T>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let usage_error = e.use_stderr();
            let _ = e.print();
            return if usage_error { ExitCode::from(1) } else { ExitCode::SUCCESS };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let factory = Factory::new(cli.flags);
    match runtime.block_on(dispatch(&factory, cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

async fn dispatch(f: &Factory, command: Command) -> Result<(), CliError> {
    match command {
        Command::Get(a) => get::run(f, a).await,
        Command::Create(a) => create::run(f, a).await,
        Command::Apply(a) => apply::run(f, a).await,
        Command::Delete(a) => delete::run(f, a).await,
        Command::Version(a) => version::run(f, a).await,
        Command::ApiResources(a) => api_resources::run(f, a).await,
    }
}

/// Errors met while acting on some objects, reported together after the rest was done.
pub fn finish(errors: Vec<CliError>) -> Result<(), CliError> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.into_iter().next().unwrap_or(CliError::Many(Vec::new()))),
        _ => Err(CliError::Many(errors)),
    }
}
