//! `attach`: joins a container's own process through the apiserver's `pods/attach` (kube-rs's
//! WebSocket client), as kubectl does: its output (and with `-i` our stdin) until it ends or we
//! are stopped; the pod's default container when `-c` is not given; a TTY exactly when the
//! container has one.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::AttachParams;

use super::{exec, podcmd, remotecommand};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// POD, TYPE/NAME, or TYPE NAME.
    #[arg(value_name = "POD")]
    pub args: Vec<String>,
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

/// The object the arguments name, as `TYPE/NAME` or `POD`.
pub fn target(args: &[String]) -> Result<String> {
    match args {
        [] => Err(CliError::Usage("at least 1 argument is required for attach".into())),
        [one] => Ok(one.clone()),
        [t, name] => Ok(format!("{t}/{name}")),
        many => Err(CliError::Usage(format!(
            "expected POD, TYPE/NAME, or TYPE NAME, (at most 2 arguments) saw {}: [{}]",
            many.len(),
            many.join(" ")
        ))),
    }
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let target = target(&a.args)?;
    let timeout = podcmd::running_timeout(&a.pod_running_timeout)?;
    let pod = podcmd::attachable(f, &target, timeout).await?;
    if let Some(phase) = podcmd::completed_phase(&pod) {
        return Err(CliError::Usage(format!(
            "cannot attach a container in a completed pod; current phase is {phase}"
        )));
    }
    session(
        f,
        &pod,
        &Session { container: a.container, stdin: a.stdin, tty: a.tty, quiet: a.quiet },
    )
    .await
}

/// What an attach session asks for.
#[derive(Debug, Clone)]
pub struct Session {
    pub container: Option<String>,
    pub stdin: bool,
    pub tty: bool,
    pub quiet: bool,
}

/// Attaches to a container of `pod` (kubectl's `AttachOptions.Run` once the pod is known; `run
/// --attach` comes here too): the container named or the pod's default, a TTY exactly when
/// the container has one, the session's notices on stderr, and after a raw-terminal session
/// of a pod that restarts, how to resume it.
pub async fn session(f: &Factory, pod: &Pod, s: &Session) -> Result<()> {
    let container =
        podcmd::container_or_default(pod, s.container.as_deref(), s.quiet, &mut std::io::stderr())
            .map_err(|e| CliError::Usage(format!("cannot attach to the container: {e}")))?;
    let has_tty = container.tty.unwrap_or(false);
    let mut tty = s.tty;
    if tty && !has_tty {
        tty = false;
        if !s.quiet {
            eprintln!(
                "error: Unable to use a TTY - container {} did not allocate one",
                container.name
            );
        }
    } else if !tty && has_tty {
        // The container has a TTY: its stream has no separate stderr to read.
        tty = true;
    }
    let raw_mode = exec::setup_tty(s.stdin, tty, s.quiet)?;
    let raw = raw_mode.is_some();
    if !s.quiet {
        eprintln!(
            "All commands and output from this session will be recorded in container logs, including credentials and sensitive information passed through the command prompt."
        );
        eprintln!("If you don't see a command prompt, try pressing enter.");
    }
    let namespace = match &pod.metadata.namespace {
        Some(n) => n.clone(),
        None => f.namespace().await?,
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(f.client().await?.clone(), &namespace);
    let params = AttachParams::default()
        .container(&container.name)
        .stdin(s.stdin)
        .stdout(true)
        .stderr(!raw)
        .tty(raw);
    let server = f.server().await?;
    let process = pods.attach(&name, &params).await.map_err(|e| CliError::from_kube(&server, e))?;
    let stdin = s.stdin.then(remotecommand::stdin_source);
    let mut out = remotecommand::stdout_sink;
    let mut err = remotecommand::stderr_sink;
    let out: remotecommand::Sink<'_> = &mut out;
    let err: remotecommand::Sink<'_> = &mut err;
    remotecommand::stream(process, stdin, Some(out), (!raw).then_some(err)).await?;
    drop(raw_mode);
    let restarts = pod.spec.as_ref().and_then(|p| p.restart_policy.as_deref()) == Some("Always");
    if !s.quiet && s.stdin && raw && restarts {
        println!(
            "Session ended, resume using 'kubectl attach {name} -c {} -i -t' command when the pod is running",
            container.name
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_or_two_arguments_name_the_object() {
        assert_eq!(target(&args(&["echo"])).unwrap(), "echo");
        assert_eq!(target(&args(&["deploy", "web"])).unwrap(), "deploy/web");
    }

    #[test]
    fn none_or_three_arguments_are_refused_in_kubectls_words() {
        assert_eq!(
            target(&[]).unwrap_err().to_string(),
            "error: at least 1 argument is required for attach"
        );
        assert_eq!(
            target(&args(&["a", "b", "c"])).unwrap_err().to_string(),
            "error: expected POD, TYPE/NAME, or TYPE NAME, (at most 2 arguments) saw 3: [a b c]"
        );
    }
}
