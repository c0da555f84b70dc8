//! Graceful node shutdown, as upstream's `pkg/kubelet/nodeshutdown` on Linux: with
//! `shutdownGracePeriod` set, the kubelet holds a systemd-logind *delay* inhibitor lock; when
//! logind announces a shutdown (`PrepareForShutdown(true)`), the node turns NotReady (`node is
//! shutting down`), new pods are rejected (`NodeShutdown`), and the running pods are stopped in
//! priority groups — regular pods within `shutdownGracePeriod − shutdownGracePeriodCriticalPods`,
//! then critical ones (priority ≥ 2000000000) within `shutdownGracePeriodCriticalPods` — each
//! `Failed`/`Terminated` with upstream's message and a `DisruptionTarget` condition; then the lock
//! is released and the machine goes down. A cancelled shutdown (`PrepareForShutdown(false)`)
//! takes the lock again.
//!
//! - [`groups`]: the pure part: the configured periods, pods grouped by priority, each pod's grace;
//! - [`logind`]: the [`logind::Logind`] boundary and its D-Bus implementation on the system bus
//!   (`zbus`), the inhibit delay logind allows and the `logind.conf.d` override that raises it;
//! - [`manager`]: [`manager::ShutdownManager`], the task that holds the lock and acts.
//!
//! Without logind (no system bus, or no `org.freedesktop.login1` on it) the kubelet says so in
//! one error line at start and runs on: pods are then stopped by whatever stops the machine.

pub mod groups;
pub mod logind;
pub mod manager;

use std::time::Duration;

use tokio::sync::watch;

/// Upstream's reason and message for a pod stopped for the node's shutdown.
pub const REASON: &str = "Terminated";
pub const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// Upstream's rejection of a pod while the node shuts down.
pub const NOT_ADMITTED_REASON: &str = "NodeShutdown";
pub const NOT_ADMITTED_MESSAGE: &str = "Pod was rejected as the node is shutting down.";
/// What the node's Ready condition says meanwhile.
pub const NOT_READY: &str = "node is shutting down";

/// `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownConfig {
    pub grace_period: Duration,
    pub critical_grace_period: Duration,
}

impl ShutdownConfig {
    /// Whether graceful shutdown is on (a grace period is set).
    pub fn enabled(&self) -> bool {
        !self.grace_period.is_zero()
    }

    /// Upstream's checks, in its words: each period zero or at least a second, the critical
    /// one within the whole.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (field, name, d) in [
            ("shutdownGracePeriod", "ShutdownGracePeriod", self.grace_period),
            (
                "shutdownGracePeriodCriticalPods",
                "ShutdownGracePeriodCriticalPods",
                self.critical_grace_period,
            ),
        ] {
            if !d.is_zero() && d < Duration::from_secs(1) {
                return Err((
                    field,
                    format!(
                        "invalid configuration: {name} {d:?} must be either zero or otherwise >= 1 sec"
                    ),
                ));
            }
        }
        if self.critical_grace_period > self.grace_period {
            return Err((
                "shutdownGracePeriodCriticalPods",
                format!(
                    "invalid configuration: ShutdownGracePeriodCriticalPods {:?} must be <= ShutdownGracePeriod {:?}",
                    self.critical_grace_period, self.grace_period
                ),
            ));
        }
        Ok(())
    }
}

/// Whether the node is shutting down: set by the manager, read by admission and the node
/// status (upstream's `ShutdownStatus`).
pub type ShuttingDown = watch::Receiver<bool>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_checked_in_upstreams_words() {
        let s = |g: u64, c: u64| ShutdownConfig {
            grace_period: Duration::from_millis(g),
            critical_grace_period: Duration::from_millis(c),
        };
        assert!(s(0, 0).validate().is_ok() && !s(0, 0).enabled());
        assert!(s(30_000, 10_000).validate().is_ok() && s(30_000, 10_000).enabled());
        let (field, reason) = s(500, 0).validate().unwrap_err();
        assert_eq!(field, "shutdownGracePeriod");
        assert!(reason.contains("must be either zero or otherwise >= 1 sec"), "{reason}");
        let (field, reason) = s(10_000, 20_000).validate().unwrap_err();
        assert_eq!(field, "shutdownGracePeriodCriticalPods");
        assert!(reason.contains("must be <= ShutdownGracePeriod"), "{reason}");
    }
}
