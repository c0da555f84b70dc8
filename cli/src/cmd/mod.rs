//! The command tree (kubectl's cobra tree, as clap subcommands), one room per command, and
//! [`run`]: parse, act, print errors as kubectl does, exit 0 or 1 (or a remote command's code).

pub mod api_resources;
pub mod api_versions;
pub mod apply;
pub mod attach;
pub mod auth;
pub mod cluster_info;
pub mod completion;
pub mod config;
pub mod cordon;
pub mod cp;
pub mod create;
pub mod delete;
pub mod describe;
pub mod drain;
pub mod dryrun;
pub mod edit;
pub mod exec;
pub mod explain;
pub mod get;
pub mod label;
pub mod logs;
pub mod patch;
pub mod podcmd;
pub mod portforward;
pub mod remotecommand;
pub mod rollout;
pub mod run;
pub mod scale;
pub mod taint;
pub mod top;
pub mod version;
pub mod wait;

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
    /// Create a resource from a file or from stdin (or with a generator: deployment, configmap, …).
    Create(create::Args),
    /// Run a particular image on the cluster.
    Run(run::Args),
    /// Apply a configuration to a resource by file name or stdin.
    Apply(apply::Args),
    /// Show details of a specific resource or group of resources.
    Describe(describe::Args),
    /// Delete resources by file names, stdin, resources and names, or by resources and label selector.
    Delete(delete::Args),
    /// Edit a resource on the server.
    Edit(edit::Args),
    /// Print the logs for a container in a pod.
    Logs(logs::Args),
    /// Execute a command in a container.
    Exec(exec::Args),
    /// Attach to a running container.
    Attach(attach::Args),
    /// Forward one or more local ports to a pod.
    PortForward(portforward::Args),
    /// Copy files and directories to and from containers.
    Cp(cp::Args),
    /// Update the labels on a resource.
    Label(label::Args),
    /// Update the annotations on a resource.
    Annotate(label::Args),
    /// Update fields of a resource using strategic merge patch, a JSON merge patch, or a JSON patch.
    Patch(patch::Args),
    /// Set a new size for a deployment, replica set, replication controller, or stateful set.
    Scale(scale::Args),
    /// Manage the rollout of a resource.
    Rollout(rollout::Args),
    /// Experimental: Wait for a specific condition on one or many resources.
    Wait(wait::Args),
    /// Display resource (CPU/memory) usage.
    Top(top::Args),
    /// Mark node as unschedulable.
    Cordon(cordon::Args),
    /// Mark node as schedulable.
    Uncordon(cordon::Args),
    /// Drain node in preparation for maintenance.
    Drain(drain::Args),
    /// Update the taints on one or more nodes.
    Taint(taint::Args),
    /// Inspect authorization.
    Auth(auth::Args),
    /// Modify kubeconfig files.
    Config(config::Args),
    /// Print the client and server version information.
    Version(version::Args),
    /// Get documentation for a resource.
    Explain(explain::Args),
    /// Print the supported API resources on the server.
    ApiResources(api_resources::Args),
    /// Print the supported API versions on the server, in the form of "group/version".
    ApiVersions(api_versions::Args),
    /// Display cluster information.
    ClusterInfo(cluster_info::Args),
    /// Output shell completion code for the specified shell (bash, zsh, fish, or powershell).
    Completion(completion::Args),
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
        Err(CliError::Silent) => ExitCode::from(1),
        Err(e @ CliError::Exit(code)) => {
            eprintln!("{e}");
            ExitCode::from(code)
        }
        Err(CliError::Terminated { message, code }) => {
            // Printed as kubectl's fatal handler prints it: a newline added only if missing.
            if message.ends_with('\n') {
                eprint!("{message}");
            } else {
                eprintln!("{message}");
            }
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

async fn dispatch(f: &Factory, command: Command) -> Result<(), CliError> {
    if f.flags.kubelet.is_some() {
        return match command {
            Command::Get(a) => crate::kubelet::get(f, a).await,
            Command::Logs(a) => logs::run(f, a).await,
            _ => Err(CliError::Usage(format!(
                "{}; this command needs an API server",
                crate::kubelet::SERVED
            ))),
        };
    }
    match command {
        Command::Get(a) => get::run(f, a).await,
        Command::Create(a) => create::run(f, a).await,
        Command::Run(a) => run::run(f, a).await,
        Command::Apply(a) => apply::run(f, a).await,
        Command::Describe(a) => describe::run(f, a).await,
        Command::Delete(a) => delete::run(f, a).await,
        Command::Edit(a) => edit::run(f, a).await,
        Command::Logs(a) => logs::run(f, a).await,
        Command::Exec(a) => exec::run(f, a).await,
        Command::Attach(a) => attach::run(f, a).await,
        Command::PortForward(a) => portforward::run(f, a).await,
        Command::Cp(a) => cp::run(f, a).await,
        Command::Label(a) => label::run(f, label::Meta::Labels, a).await,
        Command::Annotate(a) => label::run(f, label::Meta::Annotations, a).await,
        Command::Patch(a) => patch::run(f, a).await,
        Command::Scale(a) => scale::run(f, a).await,
        Command::Rollout(a) => rollout::run(f, a).await,
        Command::Wait(a) => wait::run(f, a).await,
        Command::Top(a) => top::run(f, a).await,
        Command::Cordon(a) => cordon::run(f, a, true).await,
        Command::Uncordon(a) => cordon::run(f, a, false).await,
        Command::Drain(a) => drain::run(f, a).await,
        Command::Taint(a) => taint::run(f, a).await,
        Command::Auth(a) => auth::run(f, a).await,
        Command::Config(a) => config::run(f, a).await,
        Command::Version(a) => version::run(f, a).await,
        Command::ApiResources(a) => api_resources::run(f, a).await,
        Command::ApiVersions(a) => api_versions::run(f, a).await,
        Command::Explain(a) => explain::run(f, a).await,
        Command::ClusterInfo(a) => cluster_info::run(f, a).await,
        Command::Completion(a) => completion::run(a, <Cli as clap::CommandFactory>::command()),
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
