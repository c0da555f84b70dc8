//! Upstream's `slowStartBatch`: `count` calls in batches of 1, 2, 4, … (each batch run
//! concurrently), stopping after the first batch with a failure, so an owner whose creates all
//! fail (quota, a bad template) sends one request, not hundreds. Returns how many succeeded and
//! the first error.

use std::future::Future;

use futures::future::join_all;

/// Upstream's `SlowStartInitialBatchSize`.
pub const INITIAL_BATCH: usize = 1;

pub async fn slow_start_batch<F, Fut, E>(count: usize, mut call: F) -> (usize, Option<E>)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let (mut remaining, mut successes) = (count, 0);
    let mut batch = remaining.min(INITIAL_BATCH);
    while batch > 0 {
        let results = join_all((0..batch).map(|_| call())).await;
        let mut errors = results.into_iter().filter_map(Result::err);
        let first = errors.next();
        let failed = usize::from(first.is_some()) + errors.count();
        successes += batch - failed;
        if first.is_some() {
            return (successes, first);
        }
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    (successes, None)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn batches_double_and_stop_after_a_failing_batch() {
        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(10, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), ()>(()) }
        })
        .await;
        assert_eq!((ok, err), (10, None));
        assert_eq!(calls.load(Ordering::SeqCst), 10, "1 + 2 + 4 + 3");

        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(100, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move { if n >= 4 { Err("quota") } else { Ok(()) } }
        })
        .await;
        assert_eq!(err, Some("quota"));
        assert_eq!(ok, 4, "batches 1 and 2 succeeded, the batch of 4 had 3 failures");
        assert_eq!(calls.load(Ordering::SeqCst), 7, "no batch after the failing one");
    }
}
