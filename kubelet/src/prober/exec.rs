//! `exec` probes and hooks: a command run in the container through CRI `ExecSync`; exit code 0
//! is healthy. The runtime enforces the timeout; ours fires just after, in case it does not.

use std::time::Duration;

use proto::{CriClient, cri};

use super::Outcome;
use super::outcome::bounded_text;

/// Runs `cmd` in container `container_id` and judges it by its exit code.
pub async fn probe(
    cri: &CriClient,
    container_id: &str,
    cmd: &[String],
    timeout: Duration,
) -> Outcome {
    let seconds = i64::try_from(timeout.as_secs().max(1)).unwrap_or(i64::MAX);
    let req = cri::ExecSyncRequest {
        container_id: container_id.to_string(),
        cmd: cmd.to_vec(),
        timeout: seconds,
    };
    let timed_out = || Outcome::Failure(format!("command {:?} timed out", cmd.join(" ")));
    let own_deadline = timeout + Duration::from_secs(1);
    match tokio::time::timeout(own_deadline, cri.exec_sync(req)).await {
        Err(_) => timed_out(),
        Ok(Err(e)) if e.code() == tonic::Code::DeadlineExceeded => timed_out(),
        Ok(Err(e)) => Outcome::Unknown(e.to_string()),
        Ok(Ok(r)) => {
            let mut output = r.stdout;
            output.extend_from_slice(&r.stderr);
            let text = bounded_text(&output);
            if r.exit_code == 0 { Outcome::Success(text) } else { Outcome::Failure(text) }
        }
    }
}
