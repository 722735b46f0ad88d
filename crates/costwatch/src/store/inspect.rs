//! Read-only views of the state for the operator's commands (`findings`,
//! `incidents`, `incident show`, `alerts`). Nothing here writes.

use super::{Delivery, StoreError};
use crate::detect::{Finding, Kind};
use crate::incidents::Incident;
use crate::investigate::InvestigationReport;
use crate::notify::Alert;
use chrono::{DateTime, Utc};
use std::future::Future;

/// Which findings to list. Times bound the first window a finding was seen
/// in (`[since, until)`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindingQuery {
    /// Only these kinds (all when empty).
    pub kinds: Vec<Kind>,
    /// Only this peer group.
    pub group: Option<String>,
    /// First seen in a window starting at or after this.
    pub since: Option<DateTime<Utc>>,
    /// First seen in a window starting before this.
    pub until: Option<DateTime<Utc>>,
    /// At most this many, newest first (all when `None`).
    pub limit: Option<usize>,
}

/// Which incidents to list. Times select incidents whose current episode
/// overlaps `[since, until)`: it started before `until` and its last
/// finding came at or after `since`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IncidentQuery {
    /// Only these kinds (all when empty).
    pub kinds: Vec<String>,
    /// Only this peer group.
    pub group: Option<String>,
    /// `Some(true)`: only open (firing) incidents; `Some(false)`: only resolved ones.
    pub open: Option<bool>,
    /// Active at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Active before this.
    pub until: Option<DateTime<Utc>>,
    /// At most this many, most recently active first (all when `None`).
    pub limit: Option<usize>,
}

/// An incident with when its row last changed.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentRow {
    /// The incident.
    pub incident: Incident,
    /// Wall time of its last change (for a resolved incident: when it was
    /// resolved).
    pub updated_at: DateTime<Utc>,
}

/// One outbox row: a notification for one channel, and how its delivery
/// stands.
#[derive(Debug, Clone, PartialEq)]
pub struct NotificationRow {
    /// Row id.
    pub id: i64,
    /// The notification's idempotency key.
    pub idempotency_key: String,
    /// The channel.
    pub channel: String,
    /// `pending`, `sent` or `failed`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// When it was queued.
    pub created_at: DateTime<Utc>,
    /// When the next attempt is due (pending rows).
    pub next_attempt_at: DateTime<Utc>,
    /// When it was delivered.
    pub sent_at: Option<DateTime<Utc>>,
    /// When a firing alert was last posted again (Alertmanager).
    pub reposted_at: Option<DateTime<Utc>>,
    /// The last failure.
    pub last_error: Option<String>,
    /// The alert.
    pub alert: Alert,
}

/// A stored investigation.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredInvestigation {
    /// The notification it explains.
    pub idempotency_key: String,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// The run: report, cost, stop reason, transcript.
    pub report: InvestigationReport,
}

/// The read-only queries.
pub trait Inspect: Send + Sync {
    /// Findings matching `q`, newest first.
    fn list_findings(
        &self,
        q: &FindingQuery,
    ) -> impl Future<Output = Result<Vec<Finding>, StoreError>> + Send;

    /// Incidents matching `q`, most recently active first.
    fn list_incidents(
        &self,
        q: &IncidentQuery,
    ) -> impl Future<Output = Result<Vec<IncidentRow>, StoreError>> + Send;

    /// The incidents whose fingerprint is `id` or starts with it (`id` is
    /// hexadecimal; anything else matches nothing).
    fn incidents_by_id(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Vec<IncidentRow>, StoreError>> + Send;

    /// Up to `limit` findings of an incident's rule and group over all its
    /// episodes, newest first, and how many there are in all.
    fn findings_of(
        &self,
        i: &Incident,
        limit: usize,
    ) -> impl Future<Output = Result<(Vec<Finding>, u64), StoreError>> + Send;

    /// From the first window with a finding on `session_id` to the end
    /// of the last one (`None` when nothing was found on it).
    fn session_span(
        &self,
        session_id: &str,
    ) -> impl Future<Output = Result<Option<crate::domain::Window>, StoreError>> + Send;

    /// The outbox rows of an incident and of the catch-up summaries that
    /// listed it, oldest first.
    fn notifications_of(
        &self,
        fingerprint: &str,
    ) -> impl Future<Output = Result<Vec<NotificationRow>, StoreError>> + Send;

    /// The investigations of an incident, oldest first.
    fn investigations_of(
        &self,
        fingerprint: &str,
    ) -> impl Future<Output = Result<Vec<StoredInvestigation>, StoreError>> + Send;

    /// What the next delivery pass at `now` would claim, without claiming:
    /// the same rows as [`super::Store::claim_deliveries`].
    fn deliveries_due(
        &self,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;

    /// The firing alerts due to be posted again to `channel`, without
    /// claiming them: the same rows as [`super::Store::claim_reposts`].
    fn reposts_due(
        &self,
        channel: &str,
        posted_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;
}
