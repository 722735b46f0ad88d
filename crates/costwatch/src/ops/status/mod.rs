//! The status page, `GET /` on the operations port: first the impact per
//! day by kind over the last 30 days of data (an inline SVG chart drawn
//! by `impact_svg.rs`), the groups with the most impact and the incidents
//! last active, open or resolved (`overview.rs`); then open incidents,
//! recent findings, active silences, each job's last windows and watermark, the
//! gateway's health and the day's investigation budget, on one
//! server-rendered HTML page (`html.rs`) or as JSON (`/?format=json`).
//!
//! `data.rs` reads what the page shows from the state database with
//! bounded, read-only queries (`store::StatusStore`, `store::Inspect`);
//! `escape.rs` makes every value safe for HTML. A page takes at most one
//! connection of the pool at a time (one page is read at once; others
//! wait their turn), and gives up after [`READ_TIMEOUT`], so looking at
//! it never starves the detection tick.

pub mod data;
pub mod escape;
pub mod html;
pub mod impact_svg;
mod overview;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_overview;

pub use data::{Parts, ReplicaView, Status};

use crate::clock::Clock;
use crate::store::StatusStore;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long reading one page may take, waiting for another page included.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Produces this replica's own view, afresh for every page.
pub type ReplicaFn = Arc<dyn Fn() -> ReplicaView + Send + Sync>;

/// Why a page could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The state database did not answer in time.
    #[error("the state database did not answer within {}s", READ_TIMEOUT.as_secs())]
    Timeout,
    /// The state database could not be read.
    #[error("the state database could not be read: {0}")]
    Store(crate::store::StoreError),
    /// The chart could not be drawn.
    #[error("the chart could not be drawn: {0}")]
    Chart(String),
}

/// What the endpoint reads a page from. Cheap to clone; a reload swaps
/// the parts (a new state database, job or budget) under every clone.
#[derive(Clone)]
pub struct StatusPage {
    parts: Arc<RwLock<Arc<Parts>>>,
    clock: Arc<dyn Clock>,
    replica: ReplicaFn,
    one_at_a_time: Arc<Semaphore>,
}

impl StatusPage {
    /// A page over `parts`, timed by `clock`, with `replica` for what only
    /// this process knows.
    pub fn new(parts: Parts, clock: Arc<dyn Clock>, replica: ReplicaFn) -> StatusPage {
        StatusPage {
            parts: Arc::new(RwLock::new(Arc::new(parts))),
            clock,
            replica,
            one_at_a_time: Arc::new(Semaphore::new(1)),
        }
    }

    /// Reads from `parts` from now on (after a reload).
    pub fn replace(&self, parts: Parts) {
        let mut current = self.parts.write().unwrap_or_else(PoisonError::into_inner);
        *current = Arc::new(parts);
    }

    /// The chart of the newest notification of the incident `fingerprint`,
    /// drawn now as a PNG; `None` when there is no such notification or it
    /// has no chart. Waits its turn with the pages, under the same timeout.
    pub async fn chart(&self, fingerprint: &str) -> Result<Option<Vec<u8>>, StatusError> {
        let alert = self
            .in_turn(|parts| async move { parts.store.latest_alert(fingerprint).await })
            .await?
            .map_err(StatusError::Store)?;
        let Some(spec) = alert.and_then(|a| a.chart) else {
            return Ok(None);
        };
        // Drawing takes milliseconds of CPU: off the runtime's workers.
        tokio::task::spawn_blocking(move || crate::notify::chart::render_png(&spec))
            .await
            .map_err(|e| StatusError::Chart(e.to_string()))?
            .map(Some)
            .map_err(|e| StatusError::Chart(e.to_string()))
    }

    /// Reads the page now. A section whose query fails carries its error;
    /// only a state database that does not answer in time fails the whole.
    pub async fn read(&self) -> Result<Status, StatusError> {
        self.in_turn(|parts| {
            // Taken once the page's turn has come.
            let (now, replica) = (self.clock.now(), (self.replica)());
            async move { data::read(&parts, now, replica).await }
        })
        .await
    }

    /// Calls `read` with the current parts once no other read of this page
    /// runs, and awaits it, giving up after [`READ_TIMEOUT`] (the wait
    /// included).
    async fn in_turn<T, F, Fut>(&self, read: F) -> Result<T, StatusError>
    where
        F: FnOnce(Arc<Parts>) -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let parts = self
            .parts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let turn = async {
            // The semaphore is never closed; a closed one would only mean
            // no waiting.
            let _turn = self.one_at_a_time.acquire().await.ok();
            read(parts).await
        };
        tokio::time::timeout(READ_TIMEOUT, turn)
            .await
            .map_err(|_| StatusError::Timeout)
    }
}
