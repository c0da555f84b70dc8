//! The wall clock, behind a trait (a real boundary: the Job controller's back-off and deadlines,
//! the CronJob controller's schedules, the TTL-after-finished controller): [`SystemClock`] in the
//! manager, [`FakeClock`] in tests, which a test moves forward instead of sleeping.

use std::sync::Mutex;

/// What time it is.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> jiff::Timestamp;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }
}

/// A clock that moves only when told.
#[derive(Debug)]
pub struct FakeClock {
    now: Mutex<jiff::Timestamp>,
}

impl FakeClock {
    pub fn new(at: jiff::Timestamp) -> Self {
        Self { now: Mutex::new(at) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, jiff::Timestamp> {
        self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Moves the clock forward by `d` (a negative `d` is ignored: time never runs back).
    pub fn advance(&self, d: std::time::Duration) {
        let mut now = self.lock();
        if let Ok(t) = jiff::SignedDuration::try_from(d).and_then(|d| now.checked_add(d)) {
            *now = t;
        }
    }

    pub fn set(&self, at: jiff::Timestamp) {
        *self.lock() = at;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> jiff::Timestamp {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fake_clock_moves_only_when_told() {
        let c = FakeClock::new(jiff::Timestamp::UNIX_EPOCH);
        assert_eq!(c.now(), jiff::Timestamp::UNIX_EPOCH);
        c.advance(std::time::Duration::from_secs(90));
        assert_eq!(c.now().as_second(), 90);
    }
}
