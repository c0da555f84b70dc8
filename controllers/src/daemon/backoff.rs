//! Upstream's `failedPodsBackoff` (client-go's `flowcontrol.Backoff`, 1 s doubling to 15 min)
//! per DaemonSet, template generation and node: a pod that keeps failing on a node (a kubelet
//! rejecting it) is deleted and replaced at most once per backoff period instead of in a hot
//! loop. An entry untouched for twice the maximum starts over.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub const INITIAL: Duration = Duration::from_secs(1);
pub const MAX: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Default)]
pub struct Backoff {
    entries: Mutex<HashMap<String, (Duration, Instant)>>,
}

impl Backoff {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Duration, Instant)>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How much of the current period is left, if `key` is backing off.
    pub fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let (period, at) = *self.lock().get(key)?;
        let elapsed = now.saturating_duration_since(at);
        (elapsed < period).then(|| period - elapsed)
    }

    /// Starts the next (doubled) period for `key`.
    pub fn next(&self, key: &str, now: Instant) {
        let mut entries = self.lock();
        let period = match entries.get(key) {
            Some((p, at)) if now.saturating_duration_since(*at) <= 2 * MAX => (*p * 2).min(MAX),
            _ => INITIAL,
        };
        entries.insert(key.to_string(), (period, now));
    }

    /// Forgets entries idle for longer than twice the maximum (upstream's `GC`).
    pub fn gc(&self, now: Instant) {
        self.lock().retain(|_, (_, at)| now.saturating_duration_since(*at) <= 2 * MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn periods_double_up_to_the_maximum() {
        let b = Backoff::default();
        let t = Instant::now();
        assert_eq!(b.remaining("k", t), None);
        b.next("k", t);
        assert_eq!(b.remaining("k", t), Some(INITIAL));
        assert_eq!(b.remaining("k", t + INITIAL), None);
        b.next("k", t + INITIAL);
        assert_eq!(b.remaining("k", t + INITIAL), Some(2 * INITIAL));
        for _ in 0..20 {
            b.next("k", t + INITIAL);
        }
        assert_eq!(b.remaining("k", t + INITIAL), Some(MAX));
    }
}
