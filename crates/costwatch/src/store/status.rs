//! Read-only views of the state for the status page (`GET /` on the
//! operations port). Every query is bounded by a `LIMIT` or a key, so a
//! page costs a few index lookups whatever the state holds. Nothing here
//! writes.

use super::inspect::IncidentRow;
use super::{StoreError, WindowRow};
use crate::domain::Kind;
use crate::notify::Alert;
use crate::silence::Silence;
use chrono::{DateTime, NaiveDate, Utc};
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

/// The findings of one kind first seen on one UTC day.
#[derive(Debug, Clone, PartialEq)]
pub struct DayImpact {
    /// The UTC day of the window the findings were first seen in.
    pub day: NaiveDate,
    /// Their kind.
    pub kind: Kind,
    /// How many there are (one per session).
    pub sessions: u64,
    /// Their impact, in dollars.
    pub impact_usd: f64,
}

/// The findings of one kind in one peer group over a span.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupImpact {
    /// The peer group.
    pub group: String,
    /// The kind.
    pub kind: Kind,
    /// How many findings (one per session).
    pub sessions: u64,
    /// Their impact, in dollars.
    pub impact_usd: f64,
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

    /// The impact of the findings first seen in windows starting in
    /// `[from, to)`, summed per UTC day and kind, by day then kind. At most
    /// one row per day and kind: the range (on the `findings_window`
    /// index) bounds it.
    fn daily_impact(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<DayImpact>, StoreError>> + Send;

    /// The `limit` peer groups and kinds with the most impact among the
    /// findings first seen in windows starting in `[from, to)`, most first.
    fn top_groups(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<GroupImpact>, StoreError>> + Send;
}
