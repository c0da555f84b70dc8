//! Upstream's pod-failure back-off (`backoffRecord`): after a Job's pods fail, replacements wait
//! 10 s, doubled for each further failure since the last success, at most
//! [`MAX_POD_FAILURE_BACKOFF`], counted from the last failure.

use std::time::Duration;

/// Upstream's `DefaultJobPodFailureBackOff`.
pub const POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// Upstream's `MaxJobPodFailureBackOff` in `pkg/controller/job` (10 min; the user docs speak of
/// six minutes, which is where the doubling passes 5 min 20 s).
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);

/// One Job's failures since its last success, and when the last one happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    pub failures_after_last_success: u32,
    pub last_failure: Option<jiff::Timestamp>,
}

impl Record {
    /// The record after some pods finished: a success resets the count (failures that finished
    /// after the latest success still count), failures add to it.
    pub fn step(self, succeeded_at: &[jiff::Timestamp], failed_at: &[jiff::Timestamp]) -> Record {
        let last_success = succeeded_at.iter().max().copied();
        let (mut n, mut last) = match last_success {
            Some(_) => (0, None),
            None => (self.failures_after_last_success, self.last_failure),
        };
        for t in failed_at {
            if last_success.is_none_or(|s| *t > s) {
                n += 1;
                last = Some(last.map_or(*t, |l: jiff::Timestamp| l.max(*t)));
            }
        }
        Record { failures_after_last_success: n, last_failure: last }
    }

    /// How long replacements must still wait at `now` (zero: create now).
    pub fn remaining(&self, now: jiff::Timestamp) -> Duration {
        let Some(last) = self.last_failure else { return Duration::ZERO };
        if self.failures_after_last_success == 0 {
            return Duration::ZERO;
        }
        let exp = self.failures_after_last_success.saturating_sub(1).min(16);
        let backoff = POD_FAILURE_BACKOFF.saturating_mul(1 << exp).min(MAX_POD_FAILURE_BACKOFF);
        let since = Duration::try_from(now.duration_since(last)).unwrap_or(Duration::ZERO);
        backoff.saturating_sub(since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap_or_default()
    }

    #[test]
    fn back_off_doubles_from_ten_seconds_and_is_capped() {
        let mut r = Record::default();
        assert_eq!(r.remaining(at(0)), Duration::ZERO);
        r = r.step(&[], &[at(100)]);
        assert_eq!(r.remaining(at(100)), Duration::from_secs(10));
        assert_eq!(r.remaining(at(104)), Duration::from_secs(6));
        r = r.step(&[], &[at(120)]);
        assert_eq!(r.remaining(at(120)), Duration::from_secs(20));
        for i in 0..10 {
            r = r.step(&[], &[at(200 + i)]);
        }
        assert_eq!(r.remaining(at(209)), MAX_POD_FAILURE_BACKOFF);
    }

    #[test]
    fn a_success_resets_the_count_but_later_failures_count() {
        let r = Record::default().step(&[], &[at(1), at(2), at(3)]);
        assert_eq!(r.failures_after_last_success, 3);
        let r = r.step(&[at(10)], &[at(5), at(11)]);
        assert_eq!(r, Record { failures_after_last_success: 1, last_failure: Some(at(11)) });
    }
}
