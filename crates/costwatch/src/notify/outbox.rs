//! What the outbox delivers through: a channel behind a pointer, and the
//! backoff between attempts. The delivery pass itself, over the state
//! database, is `alerting::deliver`.

use super::{Alert, Notifier, NotifyError};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A channel behind a pointer, so channels of different types share a list.
pub trait Channel: Send + Sync {
    /// The channel's name.
    fn name(&self) -> &str;
    /// Sends one alert.
    fn send_boxed<'a>(
        &'a self,
        alert: &'a Alert,
    ) -> Pin<Box<dyn Future<Output = Result<(), NotifyError>> + Send + 'a>>;
    /// How often a firing alert is posted again ([`Notifier::repost_interval`]).
    fn repost_interval(&self) -> Option<Duration>;
}

impl<T: Notifier> Channel for T {
    fn name(&self) -> &str {
        Notifier::name(self)
    }

    fn send_boxed<'a>(
        &'a self,
        alert: &'a Alert,
    ) -> Pin<Box<dyn Future<Output = Result<(), NotifyError>> + Send + 'a>> {
        Box::pin(self.send(alert))
    }

    fn repost_interval(&self) -> Option<Duration> {
        Notifier::repost_interval(self)
    }
}

/// Retry policy of deliveries.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// First delay; doubles per attempt.
    pub base: Duration,
    /// Longest delay.
    pub max: Duration,
}

impl RetryPolicy {
    /// The delay after `attempts` failed attempts.
    pub fn delay(&self, attempts: u32) -> Duration {
        self.base
            .saturating_mul(2u32.saturating_pow(attempts.min(20)))
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let r = RetryPolicy {
            base: Duration::from_secs(30),
            max: Duration::from_secs(600),
        };
        assert_eq!(r.delay(0), Duration::from_secs(30));
        assert_eq!(r.delay(1), Duration::from_secs(60));
        assert_eq!(r.delay(4), Duration::from_secs(480));
        assert_eq!(r.delay(5), Duration::from_secs(600));
        assert_eq!(r.delay(400), Duration::from_secs(600));
    }
}
