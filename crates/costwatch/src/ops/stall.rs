//! Whether the running tick is stuck: its windows (reading the gateway,
//! storing what was read) still being processed well after the tick's
//! deadline. The deadline abandons a slow read, so only something it cannot
//! interrupt (a blocked runtime thread, a state database that never
//! answers, a bug) gets there. The daemon marks this phase here; `/healthz`
//! and the systemd watchdog look at it.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How long the phase may run past its deadline before the tick counts as
/// stuck: far more than abandoning a read, or finishing a commit, takes.
pub const STALL_GRACE: Duration = Duration::from_secs(30);

/// The window phase (reading and storing) of the tick in progress, if one
/// is; cheap to clone, clones share it.
#[derive(Debug, Clone, Default)]
pub struct TickWatch(Arc<Mutex<Option<Phase>>>);

#[derive(Debug, Clone, Copy)]
struct Phase {
    deadline: Instant,
    timeout: Duration,
}

/// A tick stuck past its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// How long its window phase has gone on past the deadline.
    pub past_deadline: Duration,
    /// The tick's timeout.
    pub timeout: Duration,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the tick is stuck: still processing windows {}s after its deadline (schedule.tick_timeout {})",
            self.past_deadline.as_secs(),
            humantime::format_duration(self.timeout)
        )
    }
}

impl TickWatch {
    /// A watch with no tick running.
    pub fn new() -> TickWatch {
        TickWatch::default()
    }

    /// Marks the window phase of a tick given `timeout`, ending at
    /// `deadline`, until the returned guard is dropped.
    pub fn reading(&self, deadline: Instant, timeout: Duration) -> Reading {
        self.set(Some(Phase { deadline, timeout }));
        Reading(self.clone())
    }

    /// The stall at `now`: a phase still marked more than [`STALL_GRACE`]
    /// after its deadline.
    pub fn stalled_at(&self, now: Instant) -> Option<Stall> {
        let phase = (*self.0.lock().unwrap_or_else(PoisonError::into_inner))?;
        let past_deadline = now.checked_duration_since(phase.deadline)?;
        (past_deadline > STALL_GRACE).then_some(Stall {
            past_deadline,
            timeout: phase.timeout,
        })
    }

    /// The stall now, if the tick is stuck.
    pub fn stalled(&self) -> Option<Stall> {
        self.stalled_at(Instant::now())
    }

    fn set(&self, phase: Option<Phase>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = phase;
    }
}

/// The window phase of a tick; it ends when this is dropped, also when the
/// tick is abandoned.
#[derive(Debug)]
pub struct Reading(TickWatch);

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_stuck_only_past_its_deadline_and_the_grace() {
        let watch = TickWatch::new();
        let start = Instant::now();
        let timeout = Duration::from_secs(60);
        let deadline = start + timeout;
        assert_eq!(
            watch.stalled_at(deadline + STALL_GRACE * 2),
            None,
            "no tick"
        );
        let reading = watch.reading(deadline, timeout);
        assert_eq!(watch.stalled_at(start), None);
        assert_eq!(
            watch.stalled_at(deadline + STALL_GRACE),
            None,
            "within the grace"
        );
        let late = deadline + STALL_GRACE + Duration::from_secs(1);
        let stall = watch.stalled_at(late);
        assert_eq!(
            stall,
            Some(Stall {
                past_deadline: STALL_GRACE + Duration::from_secs(1),
                timeout
            })
        );
        let shared = watch.clone();
        assert_eq!(shared.stalled_at(late), stall, "clones see the same tick");
        let text = stall.map(|s| s.to_string()).unwrap_or_default();
        assert!(text.contains("31s after its deadline"), "{text}");
        assert!(text.contains("schedule.tick_timeout 1m"), "{text}");
        drop(reading);
        assert_eq!(watch.stalled_at(late), None, "the reading ended");
    }
}
