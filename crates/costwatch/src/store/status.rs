//! Read-only views of the state for the status page (`GET /` on the
//! operations port). Every query is bounded by a `LIMIT` or a key, so a
//! page costs a few index lookups whatever the state holds. Nothing here
//! writes.

use super::inspect::IncidentRow;
use super::{StoreError, WindowRow};
use crate::notify::Alert;
use crate::silence::Silence;
use chrono::{DateTime, Utc};
use std::future::Future;

/// A job's progress.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// The job (`main` for the daemon and `once`).
    pub job: String,
    /// Every window before it is done.
    pub watermark: DateTime<Utc>,
    /// The watermark its last incident evaluation reached.
    pub evaluated: Option<DateTime<Utc>>,
}

/// A window's row and when it last changed.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowState {
    /// The row: window, status, sessions, findings, attempts, last error.
    pub row: WindowRow,
    /// Wall time of its last change: when it was committed (`done`) or
    /// when its last attempt failed (`failed`).
    pub updated_at: DateTime<Utc>,
}

/// Who holds a named lease, and until when.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRow {
    /// The replica holding it.
    pub holder: String,
    /// When it runs out unless renewed.
    pub expires_at: DateTime<Utc>,
}

/// The status page's queries.
pub trait StatusStore: Send + Sync {
    /// Up to `limit` jobs, by name.
    fn jobs(&self, limit: usize) -> impl Future<Output = Result<Vec<JobRow>, StoreError>> + Send;

    /// The last `limit` window rows of `job`, newest first.
    fn recent_windows(
        &self,
        job: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<WindowState>, StoreError>> + Send;

    /// The newest window of `job` that was committed: the last time the
    /// gateway was read whole.
    fn last_done_window(
        &self,
        job: &str,
    ) -> impl Future<Output = Result<Option<WindowState>, StoreError>> + Send;

    /// The incident with this exact fingerprint.
    fn incident(
        &self,
        fingerprint: &str,
    ) -> impl Future<Output = Result<Option<IncidentRow>, StoreError>> + Send;

    /// Up to `limit` silences active at `now`, those ending first first.
    fn active_silences(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Silence>, StoreError>> + Send;

    /// The newest notification of the incident `fingerprint` (the alert
    /// of its newest outbox row, whatever the channel).
    fn latest_alert(
        &self,
        fingerprint: &str,
    ) -> impl Future<Output = Result<Option<Alert>, StoreError>> + Send;

    /// Who holds the lease `name`, whether or not it ran out.
    fn lease(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<LeaseRow>, StoreError>> + Send;
}
