//! Bounded polling: wait for a condition with a deadline instead of sleeping a guessed time.

use std::fmt::Debug;
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
    poll(within, every, || {
        let answer = probe();
        async move { answer.await.ok_or(()) }
    })
    .await
    .map_err(|_| anyhow::anyhow!("timed out after {within:?} waiting for {what}"))
}

/// [`eventually`] for a probe that says what it saw when it is not there yet (`Err`): a
/// timeout names the last thing seen, so a failure shows the state it stopped in.
pub async fn eventually_showing<T, L, F, Fut>(
    what: &str,
    within: Duration,
    every: Duration,
    probe: F,
) -> anyhow::Result<T>
where
    L: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, L>>,
{
    poll(within, every, probe).await.map_err(|last| match last {
        Some(seen) => {
            anyhow::anyhow!("timed out after {within:?} waiting for {what}; last seen: {seen:?}")
        }
        None => anyhow::anyhow!("timed out after {within:?} waiting for {what} (no answer)"),
    })
}

/// The polling both share: the first `Ok`, or the last `Err` seen (`None` if every probe hung).
async fn poll<T, L, F, Fut>(within: Duration, every: Duration, mut probe: F) -> Result<T, Option<L>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, L>>,
{
    let deadline = Instant::now() + within;
    let mut last = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(every);
        match tokio::time::timeout(left, probe()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(seen)) => last = Some(seen),
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(last);
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timeout_names_the_last_state_seen() {
        let mut n = 0;
        let err = eventually_showing(
            "three",
            Duration::from_millis(30),
            Duration::from_millis(5),
            || {
                n += 1;
                let seen = n;
                async move { if seen > 1000 { Ok(()) } else { Err(seen) } }
            },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("timed out after 30ms waiting for three; last seen: "), "{err}");
        assert!(err.ends_with(&format!("last seen: {n}")), "{err}");
    }

    #[tokio::test]
    async fn the_first_answer_ends_the_wait() {
        let mut n = 0;
        let got = eventually("two", Duration::from_secs(5), Duration::from_millis(1), || {
            n += 1;
            let seen = n;
            async move { (seen == 2).then_some(seen) }
        })
        .await
        .unwrap();
        assert_eq!(got, 2);
    }
}
