//! `run --attach` (the default with `-i`), as kubectl 1.35's `run` follows the pod it made: it
//! waits (up to `--pod-running-timeout`) for the pod to be running and ready, attaches to it
//! ([`attach::session`]) — or prints its log when it has already ended, or when attaching
//! fails — and then, for `--restart=Never|OnFailure` without `--leave-stdin-open`, waits for
//! the pod to end and exits with its container's code. `--expose`'s Service is made after the
//! pod, before it is waited for. With `--rm` both are deleted last, whatever happened before.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::core::Status;

use super::Args;
use crate::builder::{Info, encode};
use crate::cmd::attach::{self, Session};
use crate::cmd::create::service::SERVICE;
use crate::cmd::create::tree::Node;
use crate::cmd::create::workloads::{POD, PodSpec, pod_object};
use crate::cmd::create::{self, Common};
use crate::cmd::dryrun::DryRun;
use crate::cmd::{delete, logs, podcmd};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::watch::{self, Observation, Step};

pub async fn run(f: &Factory, a: &Args, spec: &PodSpec) -> Result<()> {
    let timeout = podcmd::running_timeout(&a.pod_running_timeout)?;
    let common = Common {
        dry_run: a.dry_run.clone(),
        output: None,
        save_config: a.save_config,
        field_manager: a.field_manager.clone(),
        validate: "strict".into(),
    };
    let object = pod_object(spec);
    let object = if a.save_config { create::with_saved_config(object) } else { object };
    let body = Node::Obj(object).compact().into_bytes();
    let created = create::post(f, &common, POD, body, DryRun::None, None).await?;
    let namespace = match created["metadata"]["namespace"].as_str() {
        Some(n) => n.to_string(),
        None => f.namespace().await?,
    };
    let info = Info {
        resource: f.resource("pods").await?,
        namespace: Some(namespace),
        name: spec.name.clone(),
        object: None,
        origin: None,
    };
    let mut made = vec![info.clone()];
    if a.expose {
        let service = super::service_object(spec);
        match create::emit(f, &common, SERVICE, &spec.name, service, None).await {
            Ok(()) => made.push(Info { resource: f.resource("services").await?, ..info.clone() }),
            // kubectl drops this error when it attaches; a missing Service deserves a word.
            Err(e) => eprintln!("{e}"),
        }
    }
    let followed = follow(f, a, spec, &info, timeout).await;
    if a.rm {
        for object in &made {
            if let Err(e) = delete::remove(f, object, a.quiet).await {
                // kubectl drops its deferred removal's error; what is left behind deserves a word.
                eprintln!("warning: {} was not removed: {}", object.kind_name(), e.go_message());
            }
        }
    }
    followed
}

/// Waits for the pod, attaches (or prints its log), and waits for its end where that decides
/// the exit code.
async fn follow(
    f: &Factory,
    a: &Args,
    spec: &PodSpec,
    info: &Info,
    timeout: Duration,
) -> Result<()> {
    match wait(f, info, timeout, running_and_ready).await? {
        Started::Completed(pod) => print_log(f, info, &pod).await?,
        Started::Ready(pod) => {
            let session = Session { container: None, stdin: a.stdin, tty: a.tty, quiet: a.quiet };
            if let Err(e) = attach::session(f, &pod, &session).await {
                eprintln!(
                    "warning: couldn't attach to pod/{}, falling back to streaming logs: {}",
                    info.name,
                    e.go_message()
                );
                print_log(f, info, &pod).await?;
            }
        }
    }
    let ended: fn(Observation) -> Result<Step<Pod>> = match spec.restart.as_str() {
        _ if spec.leave_stdin_open => return Ok(()),
        "Never" => completed,
        "OnFailure" => succeeded,
        _ => return Ok(()),
    };
    let pod = wait(f, info, timeout, ended).await?;
    exit_of(&pod)
}

/// The pod's phase once it ended, as the exit of `run`.
fn exit_of(pod: &Pod) -> Result<()> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()).unwrap_or_default() {
        "Succeeded" => Ok(()),
        "Failed" => {
            let terminated = status
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.terminated.as_ref());
            match terminated {
                Some(t) if t.exit_code != 0 => Err(CliError::Terminated {
                    message: format!(
                        "pod {namespace}/{name} terminated ({})\n{}",
                        t.reason.as_deref().unwrap_or_default(),
                        t.message.as_deref().unwrap_or_default()
                    ),
                    // The process's exit status keeps the code's low byte, as Go's os.Exit.
                    code: (t.exit_code & 0xff) as u8,
                }),
                _ => Err(CliError::Usage(format!(
                    "pod {namespace}/{name} failed with unknown exit code"
                ))),
            }
        }
        phase => Err(CliError::Usage(format!("pod {namespace}/{name} left in phase {phase}"))),
    }
}

/// The log of the pod's container, to stdout.
async fn print_log(f: &Factory, info: &Info, pod: &Pod) -> Result<()> {
    let container = podcmd::container_or_default(pod, None, true, &mut std::io::sink())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let url = format!("{}/log?container={}", info.url(), encode(&container.name));
    logs::stream(f, &url, None).await
}

/// How the pod was found once it started.
enum Started {
    Ready(Pod),
    /// It had already run to completion (kubectl's `ErrPodCompleted`).
    Completed(Pod),
}

/// Follows the pod until `step` is done, for at most `timeout`.
async fn wait<T>(
    f: &Factory,
    info: &Info,
    timeout: Duration,
    step: fn(Observation) -> Result<Step<T>>,
) -> Result<T> {
    watch::bounded(Some(timeout), watch::until(f, info, step)).await?
}

/// The pod an observation shows; a deletion is the error kubectl's conditions give.
fn observed(o: Observation) -> Result<Option<Pod>> {
    let v = match o {
        Observation::Listed(None) => return Ok(None),
        Observation::Listed(Some(v)) | Observation::Changed(v) => v,
        Observation::Deleted(_) => return Err(gone()),
    };
    serde_json::from_value(v).map(Some).map_err(|e| CliError::Unreachable { reason: e.to_string() })
}

/// client-go's conditions answer a deletion with a `NotFound` naming no pod.
fn gone() -> CliError {
    CliError::Server(Box::new(Status {
        code: 404,
        reason: "NotFound".into(),
        message: "pods \"\" not found".into(),
        ..Status::default()
    }))
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

/// kubectl's `podRunningAndReady`.
fn running_and_ready(o: Observation) -> Result<Step<Started>> {
    let Some(pod) = observed(o)? else { return Ok(Step::Continue) };
    match phase(&pod) {
        "Succeeded" | "Failed" => Ok(Step::Done(Started::Completed(pod))),
        "Running" => {
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            Ok(if ready { Step::Done(Started::Ready(pod)) } else { Step::Continue })
        }
        _ => Ok(Step::Continue),
    }
}

/// kubectl's `podCompleted` (`--restart=Never`).
fn completed(o: Observation) -> Result<Step<Pod>> {
    let Some(pod) = observed(o)? else { return Ok(Step::Continue) };
    let done = matches!(phase(&pod), "Succeeded" | "Failed");
    Ok(if done { Step::Done(pod) } else { Step::Continue })
}

/// kubectl's `podSucceeded` (`--restart=OnFailure`).
fn succeeded(o: Observation) -> Result<Step<Pod>> {
    let Some(pod) = observed(o)? else { return Ok(Step::Continue) };
    Ok(if phase(&pod) == "Succeeded" { Step::Done(pod) } else { Step::Continue })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(phase: &str, ready: bool, exit: Option<(i32, &str, &str)>) -> serde_json::Value {
        let mut status = json!({
            "phase": phase,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        });
        if let Some((code, reason, message)) = exit {
            status["containerStatuses"] = json!([{"name": "p", "image": "i", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "reason": reason, "message": message}}}]);
        }
        json!({"metadata": {"name": "p", "namespace": "ns"}, "status": status})
    }

    fn started(o: Observation) -> &'static str {
        match running_and_ready(o) {
            Ok(Step::Done(Started::Ready(_))) => "ready",
            Ok(Step::Done(Started::Completed(_))) => "completed",
            Ok(Step::Continue) => "wait",
            Err(_) => "error",
        }
    }

    #[test]
    fn a_pod_is_attached_to_once_running_and_ready_and_logged_once_ended() {
        assert_eq!(started(Observation::Listed(None)), "wait");
        assert_eq!(started(Observation::Changed(pod("Pending", false, None))), "wait");
        assert_eq!(started(Observation::Changed(pod("Running", false, None))), "wait");
        assert_eq!(started(Observation::Changed(pod("Running", true, None))), "ready");
        assert_eq!(started(Observation::Listed(Some(pod("Failed", false, None)))), "completed");
        assert_eq!(started(Observation::Deleted(pod("Running", true, None))), "error");
    }

    #[test]
    fn never_waits_for_either_end_and_on_failure_for_success_only() {
        let failed = || Observation::Changed(pod("Failed", false, None));
        assert!(matches!(completed(failed()), Ok(Step::Done(_))));
        assert!(matches!(succeeded(failed()), Ok(Step::Continue)));
        let ok = || Observation::Changed(pod("Succeeded", false, None));
        assert!(matches!(succeeded(ok()), Ok(Step::Done(_))));
        assert!(completed(Observation::Deleted(pod("Running", true, None))).is_err());
    }

    fn exit(v: serde_json::Value) -> std::result::Result<(), (String, Option<u8>)> {
        let pod: Pod = serde_json::from_value(v).unwrap();
        exit_of(&pod).map_err(|e| match e {
            CliError::Terminated { message, code } => (message, Some(code)),
            other => (other.to_string(), None),
        })
    }

    #[test]
    fn the_container_exit_code_is_the_commands_worded_as_kubectl() {
        assert_eq!(exit(pod("Succeeded", false, None)), Ok(()));
        assert_eq!(
            exit(pod("Failed", false, Some((3, "Error", "")))),
            Err(("pod ns/p terminated (Error)\n".into(), Some(3)))
        );
        assert_eq!(
            exit(pod("Failed", false, Some((258, "Error", "oom?")))),
            Err(("pod ns/p terminated (Error)\noom?".into(), Some(2)))
        );
        assert_eq!(
            exit(pod("Failed", false, Some((0, "Completed", "")))),
            Err(("error: pod ns/p failed with unknown exit code".into(), None))
        );
        assert_eq!(
            exit(pod("Failed", false, None)),
            Err(("error: pod ns/p failed with unknown exit code".into(), None))
        );
        assert_eq!(
            exit(pod("Running", true, None)),
            Err(("error: pod ns/p left in phase Running".into(), None))
        );
    }
}
