//! The receiver's rate limit: a token bucket of requests per second, so a
//! flood of exports is told to come back later (429) instead of queueing
//! in memory or starving the detection tick of the database.

use std::sync::Mutex;
use tokio::time::Instant;

/// A token bucket: `rate` tokens a second, at most `rate` held (one
/// second's burst).
#[derive(Debug)]
pub(super) struct Throttle {
    rate: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Throttle {
    /// `per_second` requests a second (at least one).
    pub(super) fn new(per_second: u32) -> Throttle {
        let rate = f64::from(per_second.max(1));
        Throttle {
            rate,
            state: Mutex::new(Bucket {
                tokens: rate,
                at: Instant::now(),
            }),
        }
    }

    /// Takes a token at `now`; `false` when none is left.
    pub(super) fn try_take(&self, now: Instant) -> bool {
        let Ok(mut b) = self.state.lock() else {
            // A panic while holding the lock cannot leave the bucket in a
            // state worth refusing traffic over.
            return true;
        };
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.rate).min(self.rate);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_of_one_second_then_the_rate() {
        let t = Throttle::new(3);
        let start = Instant::now();
        assert!(t.try_take(start));
        assert!(t.try_take(start));
        assert!(t.try_take(start));
        assert!(!t.try_take(start), "the burst is one second's worth");
        // A third of a second gives one token back.
        let later = start + Duration::from_millis(340);
        assert!(t.try_take(later));
        assert!(!t.try_take(later));
        // Idle time never saves up more than a second's burst.
        let much_later = later + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(t.try_take(much_later));
        }
        assert!(!t.try_take(much_later));
    }
}
