//! `exec`: runs a command in a container through the apiserver's `pods/exec` (kube-rs's
//! WebSocket client), as kubectl does: `POD` or `TYPE/NAME`, then `--` and the command; the pod's
//! default container when `-c` is not given (said on stderr); `-i` sends our stdin; the remote
//! command's exit code becomes ours, with kubectl's `command terminated with exit code N`; `-it`
//! on a terminal puts it in raw mode for the session (no resize messages yet).

use std::io::IsTerminal;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::AttachParams;

use super::{podcmd, remotecommand};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// POD or TYPE/NAME.
    #[arg(value_name = "POD")]
    pub args: Vec<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Container name (default: the pod's default container).
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// Pass stdin to the container.
    #[arg(short = 'i', long = "stdin")]
    pub stdin: bool,
    /// Stdin is a TTY.
    #[arg(short = 't', long)]
    pub tty: bool,
    /// Only print output from the remote session.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// How long to wait until at least one pod is running.
    #[arg(long, default_value = "1m0s")]
    pub pod_running_timeout: String,
}

/// What the command line asks for, checked as kubectl's `Complete` and `Validate` check it.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub resource: String,
    pub command: Vec<String>,
}

impl Request {
    pub fn from_args(a: &Args) -> Result<Request> {
        if a.command.is_empty() && a.args.len() > 1 {
            return Err(CliError::Usage(
                "exec [POD] [COMMAND] is not supported anymore. Use exec [POD] -- [COMMAND] instead\nSee 'kubectl-lite exec -h' for help and examples".into(),
            ));
        }
        let Some(resource) = a.args.first() else {
            return Err(CliError::Usage("pod, type/name or --filename must be specified".into()));
        };
        if a.command.is_empty() {
            return Err(CliError::Usage(
                "you must specify at least one command for the container".into(),
            ));
        }
        Ok(Request { resource: resource.clone(), command: a.command.clone() })
    }
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let req = Request::from_args(&a)?;
    let timeout = podcmd::running_timeout(&a.pod_running_timeout)?;
    let pod = podcmd::attachable(f, &req.resource, timeout).await?;
    if let Some(phase) = podcmd::completed_phase(&pod) {
        return Err(CliError::Usage(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    let container = match a.container.clone() {
        Some(c) => c,
        None => {
            podcmd::container_or_default(&pod, None, a.quiet, &mut std::io::stderr())
                .map_err(CliError::Usage)?
                .name
        }
    };
    let raw = setup_tty(a.stdin, a.tty, a.quiet)?;
    let tty = raw.is_some();
    let stdin = a.stdin.then(remotecommand::stdin_source);
    let mut out = remotecommand::stdout_sink;
    let mut err = remotecommand::stderr_sink;
    let out: remotecommand::Sink<'_> = &mut out;
    let err: remotecommand::Sink<'_> = &mut err;
    exec(f, &pod, &container, &req.command, tty, stdin, Some(out), (!tty).then_some(err)).await
}

/// Whether a TTY is used, as kubectl's `SetupTTY` decides: only with `-i`, and only when our
/// stdin is a terminal (else it says so and goes on without one). A TTY puts our terminal in
/// raw mode until the returned guard is dropped.
pub fn setup_tty(stdin: bool, tty: bool, quiet: bool) -> Result<Option<RawMode>> {
    if !stdin || !tty {
        return Ok(None);
    }
    if !std::io::stdin().is_terminal() {
        if !quiet {
            eprintln!("Unable to use a TTY - input is not a terminal or the right kind of file");
        }
        return Ok(None);
    }
    RawMode::enter().map(Some)
}

/// Our terminal in raw mode (keys go to the remote side as typed); restored when dropped, as
/// kubectl's `TTY.Safe` restores it.
#[derive(Debug)]
pub struct RawMode {
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    fn enter() -> Result<RawMode> {
        use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let fail =
            |e: nix::Error| CliError::Usage(format!("setting the terminal to raw mode: {e}"));
        let saved = tcgetattr(&stdin).map_err(fail)?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).map_err(fail)?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            std::io::stdin(),
            nix::sys::termios::SetArg::TCSANOW,
            &self.saved,
        );
    }
}

/// Runs `command` in the container and streams it to its end.
#[allow(clippy::too_many_arguments)]
pub async fn exec(
    f: &Factory,
    pod: &Pod,
    container: &str,
    command: &[String],
    tty: bool,
    stdin: Option<remotecommand::Source>,
    stdout: Option<remotecommand::Sink<'_>>,
    stderr: Option<remotecommand::Sink<'_>>,
) -> Result<()> {
    let namespace = match &pod.metadata.namespace {
        Some(n) => n.clone(),
        None => f.namespace().await?,
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(f.client().await?.clone(), &namespace);
    let params = AttachParams::default()
        .container(container)
        .stdin(stdin.is_some())
        .stdout(stdout.is_some())
        .stderr(stderr.is_some())
        .tty(tty);
    let server = f.server().await?;
    let process = pods
        .exec(&name, command.to_vec(), &params)
        .await
        .map_err(|e| CliError::from_kube(&server, e))?;
    remotecommand::stream(process, stdin, stdout, stderr).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Request> {
        let cli = Cli::try_parse_from(std::iter::once("exec").chain(argv.iter().copied()))
            .map_err(|e| CliError::Usage(e.to_string()))?;
        Request::from_args(&cli.args)
    }

    #[test]
    fn the_command_follows_the_double_dash_and_keeps_its_flags() {
        let r = parse(&["talker", "-c", "main", "--", "sh", "-c", "echo hi; exit 3"]).unwrap();
        assert_eq!(r.resource, "talker");
        assert_eq!(r.command, ["sh", "-c", "echo hi; exit 3"]);
    }

    #[test]
    fn a_command_without_the_double_dash_is_refused_as_kubectl_refuses_it() {
        let e = parse(&["talker", "date"]).unwrap_err().to_string();
        assert!(e.starts_with("error: exec [POD] [COMMAND] is not supported anymore."), "{e}");
    }

    #[test]
    fn a_missing_pod_or_command_is_named() {
        assert_eq!(
            parse(&["--", "date"]).unwrap_err().to_string(),
            "error: pod, type/name or --filename must be specified"
        );
        assert_eq!(
            parse(&["talker"]).unwrap_err().to_string(),
            "error: you must specify at least one command for the container"
        );
        assert_eq!(
            parse(&["talker", "--"]).unwrap_err().to_string(),
            "error: you must specify at least one command for the container"
        );
    }

    #[test]
    fn no_tty_without_stdin() {
        assert!(setup_tty(false, true, false).unwrap().is_none());
    }
}
