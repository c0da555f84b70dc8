//! A remote command's streams (client-go's `remotecommand`, over kube-rs's WebSocket
//! `v5.channel.k8s.io` client): what a source gives goes to the process's stdin, its stdout and
//! stderr go to sinks as they arrive, and the status it ends with becomes ours — a non-zero exit
//! code is [`CliError::Exit`], any other failure its message, as kubectl's error decoder words it.

use std::io::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::AttachedProcess;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::errors::{CliError, Result};

/// Chunks for the remote stdin; the channel's end is the stdin's end.
pub type Source = mpsc::Receiver<Vec<u8>>;

/// Where a stream's bytes go.
pub type Sink<'a> = &'a mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send);

/// How many chunks may wait for the remote stdin.
const DEPTH: usize = 16;
const CHUNK: usize = 32 * 1024;

/// Our own stdin as a [`Source`], read on a thread of its own (a blocking read cannot be
/// cancelled; the thread ends with the process).
pub fn stdin_source() -> Source {
    let (tx, rx) = mpsc::channel(DEPTH);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; CHUNK];
        loop {
            match std::io::Read::read(&mut stdin, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

/// A [`Sink`] writing to our stdout, flushed per chunk.
pub fn stdout_sink(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// A [`Sink`] writing to our stderr.
pub fn stderr_sink(bytes: &[u8]) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    err.write_all(bytes)?;
    err.flush()
}

/// Runs the attached process's streams to their end and reads its status.
pub async fn stream(
    mut process: AttachedProcess,
    stdin: Option<Source>,
    stdout: Option<Sink<'_>>,
    stderr: Option<Sink<'_>>,
) -> Result<()> {
    let status = process.take_status();
    let out = process.stdout();
    let err = process.stderr();
    let writer = stdin.and_then(|src| process.stdin().map(|w| (src, w)));
    let feed = async move {
        if let Some((mut src, mut w)) = writer {
            while let Some(chunk) = src.recv().await {
                if w.write_all(&chunk).await.is_err() {
                    break;
                }
            }
            // The end of our stdin is the end of the remote one.
            let _ = w.shutdown().await;
        }
        std::future::pending::<()>().await;
    };
    let outputs = async {
        let (o, e) = futures::join!(copy(out, stdout), copy(err, stderr));
        o.and(e)
    };
    let copied = tokio::select! {
        r = outputs => r,
        () = feed => Ok(()),
    };
    let status = match status {
        Some(s) => s.await,
        None => None,
    };
    let ended = process.join().await;
    decode(status)?;
    copied.map_err(|e| CliError::Usage(e.to_string()))?;
    ended.map_err(|e| CliError::Usage(e.to_string()))
}

/// Copies a stream of the process to its sink (or drains it without one).
async fn copy(
    from: Option<impl AsyncRead + Unpin>,
    mut to: Option<Sink<'_>>,
) -> std::io::Result<()> {
    let Some(mut from) = from else { return Ok(()) };
    let mut buf = vec![0u8; CHUNK];
    let mut broken = false;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        if let Some(sink) = to.as_mut()
            && !broken
        {
            // A closed local end (`| head`) stops the copying, not the draining.
            broken = sink(&buf[..n]).is_err();
        }
    }
}

/// The error a remote command's final status means (client-go's v4 error decoder): none for
/// success or no status, the exit code for `NonZeroExitCode`, else the status's message.
pub fn decode(status: Option<Status>) -> Result<()> {
    let Some(s) = status else { return Ok(()) };
    if s.status.as_deref() == Some("Success") {
        return Ok(());
    }
    if s.reason.as_deref() == Some("NonZeroExitCode") {
        let Some(details) = &s.details else {
            return Err(CliError::Usage("error stream protocol error: details must be set".into()));
        };
        let Some(c) =
            details.causes.iter().flatten().find(|c| c.reason.as_deref() == Some("ExitCode"))
        else {
            return Err(CliError::Usage(
                "error stream protocol error: no ExitCode cause given".into(),
            ));
        };
        let msg = c.message.clone().unwrap_or_default();
        return msg.parse::<u8>().map(CliError::Exit).map_or_else(
            |_| {
                Err(CliError::Usage(format!(
                    "error stream protocol error: invalid exit code value \"{msg}\""
                )))
            },
            Err,
        );
    }
    if s.status.as_deref() == Some("Failure") {
        return Err(CliError::Usage(s.message.unwrap_or_default()));
    }
    Err(CliError::Usage("error stream protocol error: unknown error".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(v: serde_json::Value) -> Option<Status> {
        serde_json::from_value(v).ok()
    }

    #[test]
    fn a_non_zero_exit_code_is_the_commands_exit() {
        let s = status(serde_json::json!({"status": "Failure", "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code: exit status 3",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}));
        let e = decode(s).unwrap_err();
        assert!(matches!(e, CliError::Exit(3)));
        assert_eq!(e.to_string(), "command terminated with exit code 3");
    }

    #[test]
    fn success_or_no_status_is_no_error() {
        assert!(decode(status(serde_json::json!({"status": "Success"}))).is_ok());
        assert!(decode(None).is_ok());
    }

    #[test]
    fn another_failure_is_its_message() {
        let s = status(serde_json::json!({"status": "Failure", "reason": "InternalError",
            "message": "exec: \"nope\": executable file not found in $PATH"}));
        assert_eq!(
            decode(s).unwrap_err().to_string(),
            "error: exec: \"nope\": executable file not found in $PATH"
        );
    }

    #[test]
    fn a_bad_exit_code_is_a_protocol_error() {
        let s = status(serde_json::json!({"status": "Failure", "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "300"}]}}));
        assert_eq!(
            decode(s).unwrap_err().to_string(),
            "error: error stream protocol error: invalid exit code value \"300\""
        );
    }
}
