//! Container log rotation, as upstream's container log manager (`pkg/kubelet/logs`): every
//! `containerLogMonitorInterval` the running containers' CRI log files are measured, and one
//! at or above `containerLogMaxSize` is rotated — renamed, the runtime told to reopen it
//! (CRI `ReopenContainerLog`), older rotations gzipped and the oldest removed so that at most
//! `containerLogMaxFiles` files remain ([`rotate`]). Up to `containerLogMaxWorkers` containers
//! are handled at once.
//!
//! A log that went missing (a rotation interrupted between the rename and the reopen) is
//! reopened. A container's rotated files go with it ([`rotate::remove_all`]).

pub mod rotate;

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use proto::{CallError, CriClient, cri};
use tokio_util::sync::CancellationToken;

/// How many containers' log paths are asked of the runtime at once, the first round after a
/// start (later rounds ask only for new containers).
const STATUS_CALLS: usize = 8;

/// `containerLog*` of the kubelet config: when and how logs are rotated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRotatePolicy {
    /// Rotate a log once it reaches this many bytes (`containerLogMaxSize`, 10Mi); `None`
    /// when the size written is negative, which turns rotation off as upstream.
    pub max_size: Option<u64>,
    /// The most files one container's log may take, the current one included
    /// (`containerLogMaxFiles`, 5; at least 2).
    pub max_files: u32,
    /// How many containers are rotated at once (`containerLogMaxWorkers`, 1).
    pub max_workers: u32,
    /// How often the logs are measured (`containerLogMonitorInterval`, 10s; at least 3s).
    pub monitor_interval: Duration,
}

impl Default for LogRotatePolicy {
    fn default() -> Self {
        Self {
            max_size: Some(10 * 1024 * 1024),
            max_files: 5,
            max_workers: 1,
            monitor_interval: Duration::from_secs(10),
        }
    }
}

/// Why a `containerLogMaxSize` is refused.
#[derive(Debug, thiserror::Error)]
#[error("failed to parse container log max size {value:?}: {reason}")]
pub struct MaxSizeError {
    pub value: String,
    pub reason: String,
}

impl LogRotatePolicy {
    /// A `containerLogMaxSize` as bytes; `None` for a negative size (rotation off).
    pub fn parse_max_size(value: &str) -> Result<Option<u64>, MaxSizeError> {
        let q = api::quantity::Quantity::parse(value)
            .map_err(|e| MaxSizeError { value: value.into(), reason: e.to_string() })?;
        if q.is_negative() {
            return Ok(None);
        }
        // Upstream's `AsInt64`: a whole number of bytes.
        if q.nanos() % 1_000_000_000 != 0 {
            return Err(MaxSizeError {
                value: value.into(),
                reason: "invalid max log size".into(),
            });
        }
        u64::try_from(q.value()).map(Some).map_err(|_| MaxSizeError {
            value: value.into(),
            reason: "invalid max log size".into(),
        })
    }

    /// Upstream's checks: the field and what is wrong with it, in its words.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.max_files <= 1 {
            return Err((
                "containerLogMaxFiles",
                format!("invalid MaxFiles {}, must be > 1", self.max_files),
            ));
        }
        if self.max_workers < 1 {
            return Err((
                "containerLogMaxWorkers",
                "containerLogMaxWorkers must be greater than or equal to 1".into(),
            ));
        }
        if self.monitor_interval < Duration::from_secs(3) {
            return Err((
                "containerLogMonitorInterval",
                "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s".into(),
            ));
        }
        Ok(())
    }
}

/// Rotates the logs of the runtime's running containers on a period.
///
/// A container's log path is fixed when it is created, so the runtime is asked for it
/// (`ContainerStatus`) once per container, not every round as upstream's manager does: a
/// round is one `ListContainers` and one `stat` per running container (at 110 pods, 110
/// status calls every 10 s were most of the kubelet's idle CPU).
#[derive(Debug)]
pub struct ContainerLogManager {
    cri: CriClient,
    policy: LogRotatePolicy,
    /// Each running container's log path as the runtime reported it (`None`: it has no log);
    /// forgotten once the container no longer runs.
    paths: Mutex<HashMap<String, Option<PathBuf>>>,
}

/// What one container's turn did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Below the size, or no log file.
    Kept,
    /// Renamed to this file, and reopened by the runtime.
    Rotated(PathBuf),
    /// Something failed; logged, tried again next round.
    Failed,
}

/// One running container's log as a round found it.
#[derive(Debug)]
enum Measured {
    /// Its size (a missing file is a rotation whose reopen did not happen).
    Log { path: PathBuf, size: io::Result<u64> },
    /// The runtime reports no log for it.
    NoLog,
    /// The runtime could not say where its log is; asked again next round.
    Unknown,
}

impl ContainerLogManager {
    pub fn new(cri: CriClient, policy: LogRotatePolicy) -> Self {
        Self { cri, policy, paths: Mutex::default() }
    }

    /// Rotates every monitor interval until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        if self.policy.max_size.is_none() {
            tracing::info!("container log rotation is off (containerLogMaxSize is negative)");
            return;
        }
        tracing::info!(workers = self.policy.max_workers, period = ?self.policy.monitor_interval, "rotating container logs");
        let mut tick = tokio::time::interval(self.policy.monitor_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.rotate_logs().await {
                tracing::warn!(error = %e, "listing containers to rotate their logs");
            }
        }
    }

    /// One round: each running container's log measured and rotated if due.
    pub async fn rotate_logs(&self) -> Result<Vec<(String, Outcome)>, CallError> {
        let Some(max_size) = self.policy.max_size else { return Ok(Vec::new()) };
        let containers = self
            .cri
            .list_containers_brief(cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    state: Some(cri::ContainerStateValue {
                        state: cri::ContainerState::ContainerRunning as i32,
                    }),
                    ..Default::default()
                }),
            })
            .await?;
        // A runtime that ignores the filter must not get exited containers' logs rotated:
        // they write nothing more, and an empty current file would be left behind.
        let running: Vec<String> = containers
            .into_iter()
            .filter(|c| c.state == cri::ContainerState::ContainerRunning as i32)
            .map(|c| String::from(c.id))
            .collect();
        let paths = self.log_paths(&running).await;
        let measured = tokio::task::spawn_blocking(move || {
            paths
                .into_iter()
                .map(|(id, path)| {
                    let m = match path {
                        Some(Some(path)) => {
                            let size = std::fs::metadata(&path).map(|m| m.len());
                            Measured::Log { path, size }
                        }
                        Some(None) => Measured::NoLog,
                        None => Measured::Unknown,
                    };
                    (id, m)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "measuring the containers' logs");
            Vec::new()
        });
        let workers = usize::try_from(self.policy.max_workers.max(1)).unwrap_or(1);
        Ok(futures::stream::iter(measured)
            .map(|(id, measured)| async move {
                let outcome = match measured {
                    Measured::Log { path, size } => {
                        self.rotate_container(&id, path, size, max_size).await
                    }
                    Measured::NoLog => Outcome::Kept,
                    Measured::Unknown => Outcome::Failed,
                };
                (id, outcome)
            })
            .buffer_unordered(workers)
            .collect()
            .await)
    }

    /// The log path of each of `running`, asking the runtime for those not known yet (`None`
    /// where it could not answer); containers no longer running are forgotten.
    async fn log_paths(&self, running: &[String]) -> Vec<(String, Option<Option<PathBuf>>)> {
        let unknown: Vec<String> = {
            let live: HashSet<&str> = running.iter().map(String::as_str).collect();
            let mut paths = self.lock_paths();
            paths.retain(|id, _| live.contains(id.as_str()));
            running.iter().filter(|id| !paths.contains_key(*id)).cloned().collect()
        };
        let learned: Vec<(String, Option<PathBuf>)> = futures::stream::iter(unknown)
            .map(|id| async move {
                let status = self
                    .cri
                    .container_status(cri::ContainerStatusRequest {
                        container_id: id.clone(),
                        verbose: false,
                    })
                    .await;
                match status.map(|r| r.status.map(|s| s.log_path)) {
                    Ok(Some(p)) if !p.is_empty() => Some((id, Some(PathBuf::from(p)))),
                    Ok(_) => Some((id, None)),
                    Err(e) => {
                        tracing::debug!(container = id, error = %e, "container status for log rotation");
                        None
                    }
                }
            })
            .buffer_unordered(STATUS_CALLS)
            .filter_map(std::future::ready)
            .collect()
            .await;
        let mut paths = self.lock_paths();
        paths.extend(learned);
        running.iter().map(|id| (id.clone(), paths.get(id).cloned())).collect()
    }

    fn lock_paths(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<PathBuf>>> {
        self.paths.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Rotates one container's log if it reached the size.
    async fn rotate_container(
        &self,
        id: &str,
        path: PathBuf,
        size: io::Result<u64>,
        max_size: u64,
    ) -> Outcome {
        let size = match size {
            Ok(size) => size,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // An earlier rotation renamed the file and the reopen did not happen.
                if let Err(e) = self.reopen(id).await {
                    tracing::warn!(container = id, path = %path.display(), error = %e, "the container's log is missing and the runtime could not reopen it");
                    return Outcome::Failed;
                }
                tokio::fs::metadata(&path).await.map(|m| m.len()).unwrap_or(0)
            }
            Err(e) => {
                tracing::warn!(container = id, path = %path.display(), error = %e, "measuring the container's log");
                return Outcome::Failed;
            }
        };
        if size < max_size {
            return Outcome::Kept;
        }
        let max_files = usize::try_from(self.policy.max_files).unwrap_or(usize::MAX);
        let stamp = rotate::stamp(&jiff::Zoned::now());
        let log = path.clone();
        let renamed = tokio::task::spawn_blocking(move || {
            rotate::prepare(&log, max_files)?;
            rotate::rotate_latest(&log, &stamp)
        })
        .await;
        let rotated = match renamed {
            Ok(Ok(rotated)) => rotated,
            Ok(Err(e)) => {
                tracing::warn!(container = id, error = %e, "rotating the container's log");
                return Outcome::Failed;
            }
            Err(e) => {
                tracing::warn!(container = id, error = %e, "the log rotation task failed");
                return Outcome::Failed;
            }
        };
        if let Err(e) = self.reopen(id).await {
            tracing::warn!(container = id, error = %e, "the runtime could not reopen the rotated log; putting it back");
            if let Err(e) = rotate::undo_rotation(&path, &rotated) {
                tracing::error!(container = id, error = %e, "putting the rotated log back");
            }
            return Outcome::Failed;
        }
        tracing::debug!(container = id, rotated = %rotated.display(), size, "rotated the container's log");
        Outcome::Rotated(rotated)
    }

    async fn reopen(&self, id: &str) -> Result<(), CallError> {
        self.cri
            .reopen_container_log(cri::ReopenContainerLogRequest { container_id: id.to_string() })
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests;
