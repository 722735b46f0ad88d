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
        self.0.lock().map(|t| *t).unwrap_or_else(|p| *p.into_inner())
    }
}
