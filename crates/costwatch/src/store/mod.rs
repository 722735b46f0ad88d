//! State: watermarks, windows, baselines and findings. All SQL lives here.
//!
//! [`SqlStore`] serves SQLite (the embedded default) and PostgreSQL, chosen
//! from the URL scheme; the schema keeps to types both read the same way
//! (BIGINT epoch milliseconds, DOUBLE PRECISION, TEXT). [`MemoryStore`]
//! holds only the window path ([`WindowStore`]) in process memory, for a
//! replay whose state is thrown away.

pub mod calls;
pub mod inspect;
mod memory;
pub mod settings;
pub mod silences;
mod sql;
pub mod status;

pub use calls::{CallCursor, CallStore};
pub use inspect::Inspect;
pub use memory::{MemoryStore, is_throwaway};
pub use settings::StateConfig;
pub use silences::SilenceStore;
pub use sql::{Backend, SqlStore};
pub use status::StatusStore;

use crate::detect::{CachingEvidence, Finding, GroupBaseline, Held};
use crate::incidents::{Incident, TickSpan};
use crate::investigate::InvestigationReport;
use crate::notify::Alert;
use crate::source::Window;
use chrono::{DateTime, Utc};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or answered with an error; worth retrying.
    #[error("state database unavailable: {0}")]
    Unavailable(String),
    /// The URL or the schema is wrong; retrying will not help.
    #[error("state database rejected: {0}")]
    Rejected(String),
    /// Someone else processed this window first; nothing was written.
    #[error("window {0} was already processed")]
    AlreadyProcessed(Window),
    /// A stored value could not be read back.
    #[error("corrupt state: {0}")]
    Corrupt(String),
}

/// An investigation as the state database keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredInvestigation {
    /// The idempotency key of the notification it explains.
    pub key: String,
    /// The incident's fingerprint.
    pub fingerprint: String,
    /// When the run started.
    pub started_at: DateTime<Utc>,
    /// What the alert carries (run id, cost, stop reason, the shortened
    /// transcript).
    pub report: InvestigationReport,
    /// The whole run record as JSON (`investigate::run::Investigation`,
    /// every tool result as the model saw it); `None` for runs stored
    /// before it was kept.
    pub record_json: Option<String>,
    /// The step log, one JSON line per step.
    pub step_log: String,
}

/// Everything one window writes, atomically.
#[derive(Debug)]
pub struct WindowCommit<'a> {
    /// Findings of the window (new ones and sessions seen again).
    pub findings: &'a [Finding],
    /// Updated baselines of the groups seen.
    pub baselines: &'a HashMap<String, GroupBaseline>,
    /// Models seen carrying traffic.
    pub models_seen: &'a BTreeSet<String>,
    /// What the window showed of its models' caches, merged into what is
    /// stored (`detect::caching`).
    pub caching: &'a CachingEvidence,
    /// The findings held after the window (see `detect::held`), when they
    /// changed: they replace the job's; `None` leaves them as they are.
    pub held: Option<&'a [Held]>,
    /// Sessions read.
    pub sessions: u64,
    /// Pages read.
    pub pages: u64,
    /// When the commit happens.
    pub now: DateTime<Utc>,
}

/// A window's row.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowRow {
    /// The window.
    pub window: Window,
    /// `done` or `failed`.
    pub status: String,
    /// Sessions read.
    pub sessions: u64,
    /// New findings.
    pub findings: u64,
    /// Attempts made.
    pub attempts: u64,
    /// Last failure, if any.
    pub last_error: Option<String>,
}

/// What an alert evaluation changes on an incident.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentUpdate {
    /// The incident.
    pub fingerprint: String,
    /// Whether it is still going on.
    pub firing: bool,
    /// Data time of this episode's last notification.
    pub notified: Option<DateTime<Utc>>,
    /// Session count at that notification.
    pub notified_sessions: u64,
    /// Notifications enqueued so far.
    pub sequence: u32,
    /// When resolving: until when (data time) a new finding continues this
    /// episode rather than opening a new one.
    pub reopen_until: Option<DateTime<Utc>>,
}

/// How far an incident evaluation went: the watermark of `job` it saw.
/// Stored with the evaluation's alerts, it bounds the next evaluation's
/// span, so windows committed but not yet evaluated (a crash came between)
/// are evaluated next time as if nothing had happened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluated<'a> {
    /// The job.
    pub job: &'a str,
    /// Its watermark when the incidents were read.
    pub to: DateTime<Utc>,
}

/// An alert waiting for one channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Outbox row id.
    pub id: i64,
    /// Channel name.
    pub channel: String,
    /// The alert.
    pub alert: Alert,
    /// Attempts made so far.
    pub attempts: u32,
    /// When to give up.
    pub deadline: DateTime<Utc>,
    /// Whether this posts again a firing alert that was already delivered
    /// (see [`Store::claim_reposts`]) rather than a first delivery.
    pub repost: bool,
}

/// An outbox row, for inspection.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    /// Row id.
    pub id: i64,
    /// Idempotency key of the alert.
    pub idempotency_key: String,
    /// Channel name.
    pub channel: String,
    /// `pending`, `sent` or `failed`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// Last failure.
    pub last_error: Option<String>,
    /// The alert.
    pub alert: Alert,
}

/// What the window path needs: watermarks, baselines, held findings,
/// the models seen, and the commit that writes a window's results and
/// moves its watermark in one step. [`SqlStore`] keeps it in the state
/// database; [`MemoryStore`], in process memory, for a replay whose state
/// is thrown away at its end.
pub trait WindowStore: Send + Sync {
    /// Where `job` stands: every window before it is done. `None` for a new job.
    fn watermark(
        &self,
        job: &str,
    ) -> impl Future<Output = Result<Option<DateTime<Utc>>, StoreError>> + Send;

    /// Sets the first watermark of a new job; returns the watermark in force
    /// (an existing one wins).
    fn init_watermark(
        &self,
        job: &str,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<DateTime<Utc>, StoreError>> + Send;

    /// Stored baselines of the named groups (missing groups are absent).
    fn load_baselines(
        &self,
        groups: &[String],
    ) -> impl Future<Output = Result<HashMap<String, GroupBaseline>, StoreError>> + Send;

    /// The findings `job` holds until their sessions end, in session
    /// order.
    fn held_findings(
        &self,
        job: &str,
    ) -> impl Future<Output = Result<Vec<Held>, StoreError>> + Send;

    /// Models seen carrying traffic since `since`.
    fn models_in_use(
        &self,
        since: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

    /// What the traffic showed so far of every model's prompt cache
    /// (`detect::caching`).
    fn caching_evidence(&self) -> impl Future<Output = Result<CachingEvidence, StoreError>> + Send;

    /// Every model seen carrying traffic, with the end of the last window
    /// it was seen in.
    fn models_last_seen(
        &self,
    ) -> impl Future<Output = Result<Vec<(String, DateTime<Utc>)>, StoreError>> + Send;

    /// Writes a window's results and moves the watermark from `window.start`
    /// to `window.end`, all in one transaction. Returns the findings that are
    /// new (first seen in this window). Fails with
    /// [`StoreError::AlreadyProcessed`] when the watermark is not at
    /// `window.start`, writing nothing.
    fn commit_window(
        &self,
        job: &str,
        window: Window,
        commit: WindowCommit<'_>,
    ) -> impl Future<Output = Result<Vec<Finding>, StoreError>> + Send;

    /// Records a failed attempt at a window (it stays due).
    fn record_failure(
        &self,
        job: &str,
        window: Window,
        error: &str,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// The state a daemon needs: the window path's and the rest (incidents,
/// the outbox, leases, investigations, budgets).
pub trait Store: WindowStore {
    /// Findings first seen in windows starting in `[from, to)`, oldest first.
    fn findings(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<Finding>, StoreError>> + Send;

    /// The window rows of a job, oldest first.
    fn windows(&self, job: &str)
    -> impl Future<Output = Result<Vec<WindowRow>, StoreError>> + Send;

    /// Moves the watermark forward from `from` to `to` without processing
    /// (windows older than the maximum backfill). Fails with
    /// [`StoreError::AlreadyProcessed`] if the watermark is not at `from`.
    fn skip_to(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Incidents that are going on.
    fn open_incidents(&self) -> impl Future<Output = Result<Vec<Incident>, StoreError>> + Send;

    /// The largest findings of an incident's episode (by impact).
    fn incident_findings(
        &self,
        incident: &Incident,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Finding>, StoreError>> + Send;

    /// Records a failed read of the gateway in the source incident of `job`.
    fn source_failed(
        &self,
        job: &str,
        error: &str,
        at: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The windows of `job` committed since its last incident evaluation
    /// (see [`Evaluated`]): what the next evaluation covers.
    fn evaluation_span(
        &self,
        job: &str,
    ) -> impl Future<Output = Result<TickSpan, StoreError>> + Send;

    /// Stores alerts in the outbox (one row per channel) and the incidents'
    /// new notification state, in one transaction, together with how far
    /// the evaluation that decided them went (`evaluated`). An alert already
    /// in the outbox for a channel (same idempotency key) is not added again.
    fn enqueue(
        &self,
        evaluated: Option<Evaluated<'_>>,
        updates: &[IncidentUpdate],
        alerts: &[Alert],
        channels: &[String],
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Claims up to `limit` deliveries due at `now` for `holder` until
    /// `claim_until` (rows claimed by another replica whose claim has not
    /// expired are skipped), oldest first. A row waits while an earlier row
    /// of the same incident (fingerprint) and channel is pending or claimed,
    /// so a channel gets an incident's notifications in their order.
    fn claim_deliveries(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;

    /// Claims up to `limit` firing alerts delivered to `channel` that are due
    /// to be posted again, for `holder` until `claim_until`: the latest
    /// firing notification sent to the channel in each firing incident's
    /// current episode, last posted before `posted_before`. None is claimed
    /// while a later notification of its incident and channel was sent, is a
    /// resolution, or is claimed; nor while another replica's claim on it
    /// runs.
    fn claim_reposts(
        &self,
        holder: &str,
        channel: &str,
        posted_before: DateTime<Utc>,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;

    /// Records that a claimed re-post was attempted at `at` (whether it got
    /// through or not: the next one is due an interval later) and releases
    /// the claim.
    fn reposted(
        &self,
        id: i64,
        at: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Takes or renews the lease `name` for `holder` until `until`; returns
    /// whether `holder` holds it (false while another holder's lease runs).
    fn try_lease(
        &self,
        name: &str,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Stores an investigation (its report, whole record and step log)
    /// under the key of the notification it explains; a second save of the
    /// same key is ignored.
    fn save_investigation(
        &self,
        inv: &StoredInvestigation,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The stored investigation with this run id (or notification key).
    fn stored_investigation(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<StoredInvestigation>, StoreError>> + Send;

    /// The `limit` latest stored investigations, newest first.
    fn stored_investigations(
        &self,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<StoredInvestigation>, StoreError>> + Send;

    /// The stored investigation of a notification, if any.
    fn investigation_for(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<InvestigationReport>, StoreError>> + Send;

    /// Investigations started since `since`.
    fn investigations_since(
        &self,
        since: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Gives a lease up (on shutdown), if `holder` holds it.
    fn release_lease(
        &self,
        name: &str,
        holder: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Marks a delivery sent.
    fn delivered(
        &self,
        id: i64,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Schedules another attempt.
    fn retry_later(
        &self,
        id: i64,
        next: DateTime<Utc>,
        error: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives a delivery up.
    fn give_up(&self, id: i64, error: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every outbox row, oldest first.
    fn outbox(&self) -> impl Future<Output = Result<Vec<OutboxRow>, StoreError>> + Send;
}
