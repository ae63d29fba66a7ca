//! An injectable clock, so penalty expiry is tested without sleeping.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the scheduler gets "now" from.
///
/// Why: penalties expire after a configured time; tests advance a [`ManualClock`] instead
/// of sleeping.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
///
/// Why: the default for production schedulers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to; clones share the same time.
///
/// Why: deterministic tests of penalty expiry here and in the worker.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<Instant>>,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock {
            now: Arc::new(Mutex::new(Instant::now())),
        }
    }
}

impl ManualClock {
    /// A clock stopped at the current instant.
    pub fn new() -> Self {
        ManualClock::default()
    }

    /// Move the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_clones_share_time() {
        let c = ManualClock::new();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        let c2 = c.clone();
        c2.advance(Duration::from_secs(5));
        assert_eq!(c.now(), t0 + Duration::from_secs(5));
        assert!(SystemClock.now() <= Instant::now());
    }
}
