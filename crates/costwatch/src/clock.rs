//! All time comes from a [`Clock`], so tests decide what "now" is.

use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};

/// Where the current time comes from.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;
}

/// The operating system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the one place that reads the wall clock"
    )]
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until a test moves it.
#[derive(Debug, Clone)]
pub struct FakeClock(Arc<Mutex<DateTime<Utc>>>);

impl FakeClock {
    /// A clock showing `at`.
    pub fn new(at: DateTime<Utc>) -> Self {
        FakeClock(Arc::new(Mutex::new(at)))
    }

    /// Sets the time shown.
    pub fn set(&self, at: DateTime<Utc>) {
        if let Ok(mut t) = self.0.lock() {
            *t = at;
        }
    }

    /// Moves the time shown forward.
    pub fn advance(&self, by: chrono::Duration) {
        if let Ok(mut t) = self.0.lock() {
            *t += by;
        }
    }
}

impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
            .lock()
            .map(|t| *t)
            .unwrap_or_else(|p| *p.into_inner())
    }
}

/// Waits between attempts. Injected so tests can record backoff delays
/// instead of sleeping through them.
pub trait Sleeper: Send + Sync {
    /// Waits for `d`.
    fn sleep(
        &self,
        d: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

/// Sleeps on the tokio timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(
        &self,
        d: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// Returns at once and remembers every requested delay.
#[derive(Debug, Clone, Default)]
pub struct RecordingSleeper(Arc<Mutex<Vec<std::time::Duration>>>);

impl RecordingSleeper {
    /// The delays asked for so far, in order.
    pub fn delays(&self) -> Vec<std::time::Duration> {
        self.0.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

impl Sleeper for RecordingSleeper {
    fn sleep(
        &self,
        d: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        if let Ok(mut v) = self.0.lock() {
            v.push(d);
        }
        Box::pin(std::future::ready(()))
    }
}
