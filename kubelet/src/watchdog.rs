//! systemd integration, as upstream's `pkg/kubelet/watchdog`: under a `Type=notify` unit the
//! kubelet says `READY=1` and a `STATUS=` line once it runs, and `STOPPING=1` when it stops; with
//! `WatchdogSec=` it sends `WATCHDOG=1` every half of `WATCHDOG_USEC`, but only while its health
//! checks pass — the sync loop has iterated within `max(2 × syncFrequency, 5 min)`, as upstream's
//! `SyncLoopHealthCheck` — so a stuck loop stops the pings and systemd restarts the kubelet.
//!
//! The notification socket is the boundary: [`Notifier`] (`sd_notify` in production, a
//! recorder in tests).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Upstream's floor: a watchdog timeout at or below this is refused at start.
pub const MINIMAL_NOTIFY_INTERVAL: Duration = Duration::from_secs(1);

/// What the kubelet tells systemd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    Ready { status: String },
    Watchdog,
    Stopping { status: String },
}

/// Where notifications go: systemd's socket, or a test's recorder.
pub trait Notifier: Send + Sync + std::fmt::Debug {
    fn notify(&self, n: &Notification) -> std::io::Result<()>;
}

/// `sd_notify(3)` on `$NOTIFY_SOCKET`; nothing when the variable is unset.
#[derive(Debug, Default)]
pub struct SdNotify;

impl Notifier for SdNotify {
    fn notify(&self, n: &Notification) -> std::io::Result<()> {
        use sd_notify::NotifyState;
        match n {
            Notification::Ready { status } => {
                sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(status)])
            }
            Notification::Watchdog => sd_notify::notify(&[NotifyState::Watchdog]),
            Notification::Stopping { status } => {
                sd_notify::notify(&[NotifyState::Stopping, NotifyState::Status(status)])
            }
        }
    }
}

/// The watchdog timeout systemd set for us (`WATCHDOG_USEC`, for our PID), refused when it is
/// too short to ping at half of it.
pub fn timeout_from_env() -> Result<Option<Duration>, WatchdogError> {
    match sd_notify::watchdog_enabled() {
        Some(t) if t <= MINIMAL_NOTIFY_INTERVAL => Err(WatchdogError::TooShort(t)),
        other => Ok(other),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchdogError {
    #[error("the systemd watchdog timeout (WATCHDOG_USEC) is {0:?}: it must be above 1s")]
    TooShort(Duration),
}

/// When the sync loop last went round, for the watchdog and `/healthz`.
#[derive(Debug)]
pub struct SyncLoopHealth {
    last: Mutex<Instant>,
    /// How long the loop may go without an iteration before it counts as stuck.
    threshold: Duration,
}

impl SyncLoopHealth {
    /// Upstream's threshold: twice the resync period, at least five minutes.
    pub fn new(sync_frequency: Duration) -> Self {
        let threshold = (sync_frequency * 2).max(Duration::from_secs(5 * 60));
        Self { last: Mutex::new(Instant::now()), threshold }
    }

    /// The loop went round.
    pub fn iterated(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// `Err` with upstream's words when the loop has not gone round within the threshold.
    pub fn check(&self) -> Result<(), String> {
        let last = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = last.elapsed();
        if idle > self.threshold {
            return Err(format!(
                "sync Loop took longer than expected: no iteration for {}s (limit {}s)",
                idle.as_secs(),
                self.threshold.as_secs()
            ));
        }
        Ok(())
    }
}

/// Pings systemd's watchdog every `interval` while `health` passes.
#[derive(Debug)]
pub struct Watchdog {
    pub interval: Duration,
    pub health: Arc<SyncLoopHealth>,
    pub notifier: Arc<dyn Notifier>,
}

impl Watchdog {
    /// The pinger for a `timeout` systemd set (`WATCHDOG_USEC`): half of it, as upstream.
    pub fn new(
        timeout: Duration,
        health: Arc<SyncLoopHealth>,
        notifier: Arc<dyn Notifier>,
    ) -> Self {
        Self { interval: timeout / 2, health, notifier }
    }

    pub async fn run(self, stop: CancellationToken) {
        tracing::info!(interval = ?self.interval, "pinging the systemd watchdog");
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            match self.health.check() {
                Ok(()) => {
                    if let Err(e) = self.notifier.notify(&Notification::Watchdog) {
                        tracing::warn!(error = %e, "notifying the systemd watchdog");
                    }
                }
                Err(reason) => tracing::error!(
                    %reason,
                    "not notifying the systemd watchdog this time: the kubelet is not healthy"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests;
