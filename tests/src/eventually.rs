//! Bounded polling: wait for a condition with a deadline instead of sleeping a guessed time.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `probe` every `every` until it returns `Some`, or fails after `within` with `what`.
/// A probe that hangs (a request the server never answers) is cut off at the deadline too.
pub async fn eventually<T, F, Fut>(
    what: &str,
    within: Duration,
    every: Duration,
    mut probe: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(every);
        if let Ok(Some(v)) = tokio::time::timeout(left, probe()).await {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {within:?} waiting for {what}");
        }
        tokio::time::sleep(every).await;
    }
}
