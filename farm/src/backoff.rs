//! Waiting between tries of something that is down (a broker, a store, a database): waits
//! that double from a first delay up to a cap, optionally jittered, reset after a success.
//!
//! Why one helper: the broker connection's reconnects, the dispatcher's event and dead-letter
//! consumers, job-outcome records and webhooks, the engine's store, publish and progress
//! retries, and the worker's broker reconnect and store wait all pace themselves this way;
//! written once, the doubling, the cap and the shutdown check cannot drift apart.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Doubling waits between tries, from `first` up to `cap`.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    next: Duration,
    jitter: bool,
}

impl Backoff {
    /// Waits of `first`, then twice that, and so on up to `cap`.
    pub fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            first,
            cap,
            next: first,
            jitter: false,
        }
    }

    /// The same waits, each moved by up to half of itself either way
    /// ([`crate::queue::jittered`]). Why: a fleet reconnecting after a broker restart must
    /// not retry in lockstep.
    pub fn jittered(mut self) -> Backoff {
        self.jitter = true;
        self
    }

    /// The wait the next try would get, before jitter (for logs and deadlines).
    pub fn current(&self) -> Duration {
        self.next
    }

    /// Takes the next wait (jittered if asked) and doubles the one after it, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.cap);
        if self.jitter {
            crate::queue::jittered(delay)
        } else {
            delay
        }
    }

    /// Starts again from the first wait: the thing is back.
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// Sleeps the next wait; `false` when `stop` was cancelled first (the caller returns).
    pub async fn wait(&mut self, stop: &CancellationToken) -> bool {
        let delay = self.next_delay();
        tokio::select! {
            _ = stop.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_reset() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(3));
        let waits: Vec<_> = (0..5).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 3000, 3000]);
        b.reset();
        assert_eq!(b.current(), Duration::from_millis(500));
    }

    #[test]
    fn jitter_stays_within_half_either_way() {
        let mut b = Backoff::new(Duration::from_secs(2), Duration::from_secs(2)).jittered();
        for _ in 0..50 {
            let d = b.next_delay();
            assert!(
                d >= Duration::from_secs(1) && d < Duration::from_secs(3),
                "{d:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_stop_ends_the_wait() {
        let stop = CancellationToken::new();
        let mut b = Backoff::new(Duration::from_secs(60), Duration::from_secs(60));
        assert!(b.wait(&stop).await, "a paused clock runs the sleep out");
        stop.cancel();
        assert!(!b.wait(&stop).await);
    }
}
