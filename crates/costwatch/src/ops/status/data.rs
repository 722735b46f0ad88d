//! What the status page shows, read from the state database at one moment:
//! plain serialisable data, rendered as HTML by `html.rs` and given as is
//! by `/?format=json`.
//!
//! Each section is read on its own and keeps its own error, so a query
//! that fails costs that section only. Every list is capped: one more row
//! than shown is asked for, to say that there are more.

use crate::domain::Kind;
use crate::incidents::{SOURCE_UNHEALTHY, fingerprint};
use crate::investigate::{BudgetLedger, LedgerError};
use crate::pipeline::Schedule;
use crate::silence::Silence;
use crate::store::inspect::{FindingQuery, IncidentQuery, IncidentRow};
use crate::store::status::{DayImpact, GroupImpact, JobRow, WindowState};
use crate::store::{Inspect, SqlStore, StatusStore, Store, StoreError};
use chrono::{DateTime, Duration as ChronoDuration, NaiveDate, Utc};
use serde::Serialize;

/// Days of impact shown, the main job's watermark's day the last.
pub const IMPACT_DAYS: u32 = 30;
/// Days in a week, of those compared to say whether it is getting worse.
pub const WEEK_DAYS: usize = 7;
/// Groups shown with the most impact over those days.
pub const TOP_GROUPS_SHOWN: usize = 10;
/// Incidents shown, open or resolved, most recently active first.
pub const LAST_INCIDENTS_SHOWN: usize = 10;
/// Open incidents shown, most recently active first.
pub const INCIDENTS_SHOWN: usize = 50;
/// Findings shown, newest first.
pub const FINDINGS_SHOWN: usize = 50;
/// How far back findings are shown, from the main job's watermark.
pub const FINDINGS_SPAN: ChronoDuration = ChronoDuration::hours(24);
/// Active silences shown, those ending first first.
pub const SILENCES_SHOWN: usize = 50;
/// Jobs shown, by name.
pub const JOBS_SHOWN: usize = 8;
/// Windows shown per job, newest first.
pub const WINDOWS_SHOWN: usize = 12;

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    /// When it was read (wall time).
    pub generated_at: DateTime<Utc>,
    /// The replica that served it, and what only it knows.
    pub replica: ReplicaView,
    /// The impact per day and kind over the last [`IMPACT_DAYS`] days of data.
    pub impact: Section<ImpactView>,
    /// The groups with the most impact over those days.
    pub top_groups: Section<Capped<GroupView>>,
    /// The incidents last active, open or resolved.
    pub last_incidents: Section<Capped<IncidentView>>,
    /// Open (firing) incidents.
    pub incidents: Section<Capped<IncidentView>>,
    /// Findings first seen in the last day of data.
    pub findings: Section<FindingsView>,
    /// Silences active now.
    pub silences: Section<Capped<SilenceView>>,
    /// Each job's watermark and last windows.
    pub jobs: Section<Capped<JobView>>,
    /// Whether the gateway can be read.
    pub source: Section<SourceView>,
    /// Today's investigation spend against its cap.
    pub budget: Section<BudgetView>,
}

/// A section as read, or why it could not be.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Section<T> {
    /// Read.
    Read(T),
    /// The query failed.
    Failed {
        /// Why.
        error: String,
    },
}

impl<T> Section<T> {
    /// The section, or its error as text.
    fn from_result(r: Result<T, StoreError>) -> Section<T> {
        match r {
            Ok(v) => Section::Read(v),
            Err(e) => Section::Failed {
                error: e.to_string(),
            },
        }
    }

    /// The value, when it was read.
    pub fn read(&self) -> Option<&T> {
        match self {
            Section::Read(v) => Some(v),
            Section::Failed { .. } => None,
        }
    }
}

/// A list cut at its cap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capped<T> {
    /// What is shown.
    pub items: Vec<T>,
    /// Whether there were more than shown.
    pub more: bool,
}

impl<T> Capped<T> {
    /// The first `cap` of `items` (read with one more than `cap`).
    pub fn of(mut items: Vec<T>, cap: usize) -> Capped<T> {
        let more = items.len() > cap;
        items.truncate(cap);
        Capped { items, more }
    }
}

/// What this replica knows that the state database does not: how its own
/// ticks went.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReplicaView {
    /// Its name in leases and outbox claims.
    pub name: String,
    /// When it last ticked (wall time).
    pub last_tick: Option<DateTime<Utc>>,
    /// Whether it held the detection job at its last tick.
    pub leader: bool,
    /// Ticks in a row, as the job's holder, whose read of the gateway
    /// failed (0 after one that did not).
    pub failed_reads_in_row: u32,
    /// Why `/healthz` says it is unhealthy, if it does.
    pub unhealthy: Option<String>,
}

/// The impact of the findings first seen on each day of a span of data
/// time (UTC days).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImpactView {
    /// Every day of the span, oldest first; a day without findings has no
    /// kinds.
    pub days: Vec<DayView>,
    /// Where the span ends: the main job's watermark, or now when it has
    /// none. The last day is the one before it.
    pub until: DateTime<Utc>,
    /// The impact over all the days.
    pub total_usd: f64,
    /// The impact over the last [`WEEK_DAYS`] days.
    pub last_week_usd: f64,
    /// The impact over the [`WEEK_DAYS`] days before those.
    pub week_before_usd: f64,
}

impl ImpactView {
    /// The impact of `kind` over all the days.
    pub fn kind_usd(&self, kind: Kind) -> f64 {
        self.days
            .iter()
            .flat_map(|d| &d.kinds)
            .filter(|k| k.kind == kind)
            .map(|k| k.impact_usd)
            .sum()
    }
}

/// One day's impact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayView {
    /// The UTC day.
    pub day: NaiveDate,
    /// Each kind with findings that day, in [`Kind::ALL`]'s order.
    pub kinds: Vec<KindDay>,
}

impl DayView {
    /// The day's impact, every kind.
    pub fn impact_usd(&self) -> f64 {
        self.kinds.iter().map(|k| k.impact_usd).sum()
    }
}

/// One kind's findings on one day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindDay {
    /// The kind.
    pub kind: Kind,
    /// Its findings (one per session).
    pub sessions: u64,
    /// Their impact, in dollars.
    pub impact_usd: f64,
}

/// The days from `first` to `last` (UTC), each with what `rows` say of it.
pub fn impact_view(
    first: NaiveDate,
    last: NaiveDate,
    until: DateTime<Utc>,
    rows: &[DayImpact],
) -> ImpactView {
    let days: Vec<DayView> = first
        .iter_days()
        .take_while(|d| *d <= last)
        .map(|day| DayView {
            day,
            kinds: Kind::ALL
                .iter()
                .filter_map(|kind| {
                    let r = rows.iter().find(|r| r.day == day && r.kind == *kind)?;
                    Some(KindDay {
                        kind: *kind,
                        sessions: r.sessions,
                        impact_usd: r.impact_usd,
                    })
                })
                .collect(),
        })
        .collect();
    let sum = |days: &[DayView]| days.iter().map(DayView::impact_usd).sum::<f64>();
    let n = days.len();
    let last_week = &days[n.saturating_sub(WEEK_DAYS)..];
    let week_before = &days[n.saturating_sub(2 * WEEK_DAYS)..n.saturating_sub(WEEK_DAYS)];
    ImpactView {
        total_usd: sum(&days),
        last_week_usd: sum(last_week),
        week_before_usd: sum(week_before),
        until,
        days,
    }
}

/// A peer group's findings of one kind over the days of [`ImpactView`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupView {
    /// The peer group.
    pub group: String,
    /// The kind.
    pub kind: Kind,
    /// Its findings (one per session).
    pub sessions: u64,
    /// Their impact, in dollars.
    pub impact_usd: f64,
}

impl From<GroupImpact> for GroupView {
    fn from(g: GroupImpact) -> GroupView {
        GroupView {
            group: g.group,
            kind: g.kind,
            sessions: g.sessions,
            impact_usd: g.impact_usd,
        }
    }
}

/// An incident.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IncidentView {
    /// Its fingerprint (`costwatch incident show` takes it).
    pub fingerprint: String,
    /// `no_cache`, `oversized_model`, `retry_loop` or `source_unhealthy`.
    pub kind: String,
    /// The rule's severity.
    pub severity: String,
    /// The peer group.
    pub group: String,
    /// Whether it is open (firing) rather than resolved.
    pub open: bool,
    /// Sessions in this episode.
    pub sessions: u64,
    /// Their impact, in dollars.
    pub impact_usd: f64,
    /// The start of this episode's first window with a finding (data time).
    pub since: DateTime<Utc>,
    /// The end of its latest window with a finding (data time).
    pub last_finding: DateTime<Utc>,
    /// Whether this episode was notified.
    pub notified: bool,
    /// Notifications queued for it so far, every episode.
    pub notifications: u32,
    /// The active silence holding its notifications back.
    pub silenced_by: Option<i64>,
    /// The latest failure (the source's incident).
    pub last_error: Option<String>,
}

/// Findings first seen in `[since, until)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingsView {
    /// A day before `until`.
    pub since: DateTime<Utc>,
    /// The main job's watermark, or now when it has none.
    pub until: DateTime<Utc>,
    /// The findings, newest first.
    pub list: Capped<FindingView>,
}

/// A finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingView {
    /// The window it was first seen in.
    pub window_start: DateTime<Utc>,
    /// Its kind.
    pub kind: String,
    /// Its rule's severity.
    pub severity: String,
    /// The session.
    pub session_id: String,
    /// The peer group.
    pub group: String,
    /// What the session cost.
    pub cost_usd: f64,
    /// What it cost above its peers.
    pub impact_usd: f64,
    /// One sentence a person can check.
    pub explanation: String,
}

/// An active silence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SilenceView {
    /// Its id (`costwatch silence expire` takes it).
    pub id: i64,
    /// What it matches, as `silence list` shows it.
    pub conditions: String,
    /// When it began.
    pub starts_at: DateTime<Utc>,
    /// When it ends.
    pub ends_at: DateTime<Utc>,
    /// Who added it.
    pub author: String,
    /// Why.
    pub reason: String,
    /// Open incidents (of those shown) it holds back now.
    pub holding: usize,
}

/// A job's progress and its last windows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView {
    /// The job.
    pub job: String,
    /// Every window before it is done.
    pub watermark: DateTime<Utc>,
    /// How far the watermark is behind now, in seconds (wall time).
    pub lag_seconds: i64,
    /// Windows that ended at least the settle lag ago and wait to be read
    /// (the daemon's own job only).
    pub windows_due: Option<u64>,
    /// The watermark its last incident evaluation reached.
    pub evaluated: Option<DateTime<Utc>>,
    /// Its last windows, newest first.
    pub windows: Capped<WindowView>,
}

/// A window's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowView {
    /// Inclusive start.
    pub start: DateTime<Utc>,
    /// Exclusive end.
    pub end: DateTime<Utc>,
    /// `done` or `failed`.
    pub status: String,
    /// Attempts made.
    pub attempts: u64,
    /// Sessions read.
    pub sessions: u64,
    /// New findings.
    pub findings: u64,
    /// The last failure.
    pub last_error: Option<String>,
    /// When it was committed, or when its last attempt failed.
    pub updated_at: DateTime<Utc>,
}

impl From<WindowState> for WindowView {
    fn from(w: WindowState) -> WindowView {
        WindowView {
            start: w.row.window.start,
            end: w.row.window.end,
            status: w.row.status,
            attempts: w.row.attempts,
            sessions: w.row.sessions,
            findings: w.row.findings,
            last_error: w.row.last_error,
            updated_at: w.updated_at,
        }
    }
}

/// Whether the gateway can be read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceView {
    /// The job that reads it.
    pub job: String,
    /// `false` while its `source_unhealthy` incident is open.
    pub healthy: bool,
    /// The `source_unhealthy` incident, open or last resolved.
    pub incident: Option<SourceIncident>,
    /// When a window was last committed: the last time the gateway was
    /// read whole.
    pub last_read: Option<DateTime<Utc>>,
    /// That window.
    pub last_read_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// The replica holding the job's lease.
    pub lease_holder: Option<String>,
    /// When that lease runs out unless renewed.
    pub lease_expires: Option<DateTime<Utc>>,
    /// What no_cache judges each model the traffic showed something of
    /// with (rule defaults, shipped table), naming a table value the
    /// traffic contradicts.
    pub caching_facts: Vec<crate::detect::no_cache::CachingFacts>,
}

/// The gateway's incident.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceIncident {
    /// Whether it is open.
    pub open: bool,
    /// The first failure of its episode (wall time).
    pub since: DateTime<Utc>,
    /// The latest failure (wall time).
    pub last_failure: DateTime<Utc>,
    /// Its message.
    pub last_error: Option<String>,
    /// Whether this episode was notified.
    pub notified: bool,
}

/// Today's investigation spend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetView {
    /// Whether investigations are enabled.
    pub enabled: bool,
    /// The UTC day.
    pub day: NaiveDate,
    /// Spent and reserved so far, every replica.
    pub spent_usd: f64,
    /// The day's cap (`investigation.caps.max_usd_per_day`).
    pub cap_usd: f64,
    /// Investigations started today.
    pub investigations: u64,
}

/// What the page is read against: the state, the daemon's job and the
/// investigation settings. Replaced on every reload.
#[derive(Debug, Clone)]
pub struct Parts {
    /// The state database.
    pub store: SqlStore,
    /// The daemon's job.
    pub schedule: Schedule,
    /// Whether investigations are enabled.
    pub investigations: bool,
    /// The day's investigation cap.
    pub day_cap_usd: f64,
}

/// Reads every section at `now`.
pub async fn read(parts: &Parts, now: DateTime<Utc>, replica: ReplicaView) -> Status {
    let store = &parts.store;
    let job = parts.schedule.job.as_str();
    let jobs = store.jobs(JOBS_SHOWN + 1).await;
    let main_watermark = jobs
        .as_ref()
        .ok()
        .and_then(|j| j.iter().find(|r| r.job == job))
        .map(|r| r.watermark);
    let silences = store.active_silences(now, SILENCES_SHOWN + 1).await;
    let incidents = store
        .list_incidents(&IncidentQuery {
            open: Some(true),
            limit: Some(INCIDENTS_SHOWN + 1),
            ..IncidentQuery::default()
        })
        .await;
    let held = |i: &IncidentRow| -> Option<i64> {
        silences
            .as_ref()
            .ok()?
            .iter()
            .find(|s| s.is_active(now) && s.matches(&i.incident))
            .map(|s| s.id)
    };
    let incident_views = incidents.as_ref().map(|rows| {
        let views = rows.iter().map(|r| incident_view(r, held(r))).collect();
        Capped::of(views, INCIDENTS_SHOWN)
    });
    let last_incidents = store
        .list_incidents(&IncidentQuery {
            limit: Some(LAST_INCIDENTS_SHOWN + 1),
            ..IncidentQuery::default()
        })
        .await
        .map(|rows| {
            let views = rows.iter().map(|r| incident_view(r, held(r))).collect();
            Capped::of(views, LAST_INCIDENTS_SHOWN)
        });
    let until = main_watermark.unwrap_or(now);
    let (first, last) = impact_days(until);
    let from = first.and_time(chrono::NaiveTime::MIN).and_utc();
    let silence_views = silences.as_ref().map(|list| {
        let views = list
            .iter()
            .map(|s| silence_view(s, incidents.as_deref().unwrap_or_default(), now))
            .collect();
        Capped::of(views, SILENCES_SHOWN)
    });
    Status {
        generated_at: now,
        replica,
        impact: Section::from_result(
            store
                .daily_impact(from, until)
                .await
                .map(|rows| impact_view(first, last, until, &rows)),
        ),
        top_groups: Section::from_result(
            store
                .top_groups(from, until, TOP_GROUPS_SHOWN + 1)
                .await
                .map(|rows| {
                    let views = rows.into_iter().map(GroupView::from).collect();
                    Capped::of(views, TOP_GROUPS_SHOWN)
                }),
        ),
        last_incidents: Section::from_result(last_incidents),
        incidents: section(incident_views),
        findings: Section::from_result(findings(store, until).await),
        silences: section(silence_views),
        jobs: Section::from_result(match jobs {
            Ok(rows) => job_views(parts, rows, now).await,
            Err(e) => Err(e),
        }),
        source: Section::from_result(source(store, job).await),
        budget: Section::from_result(budget(parts, now).await),
    }
}

/// The first and last of the [`IMPACT_DAYS`] days of data before `until`
/// (UTC): the last is the day of the moment before it.
pub fn impact_days(until: DateTime<Utc>) -> (NaiveDate, NaiveDate) {
    let last = (until - ChronoDuration::milliseconds(1)).date_naive();
    let first = last
        .checked_sub_days(chrono::Days::new(u64::from(IMPACT_DAYS) - 1))
        .unwrap_or(last);
    (first, last)
}

/// A section from a result whose error is borrowed.
fn section<T>(r: Result<T, &StoreError>) -> Section<T> {
    match r {
        Ok(v) => Section::Read(v),
        Err(e) => Section::Failed {
            error: e.to_string(),
        },
    }
}

fn incident_view(r: &IncidentRow, silenced_by: Option<i64>) -> IncidentView {
    let i = &r.incident;
    IncidentView {
        fingerprint: i.fingerprint.clone(),
        kind: i.kind.clone(),
        severity: i.severity.as_str().to_owned(),
        group: i.group.clone(),
        open: i.firing,
        sessions: i.session_count,
        impact_usd: i.impact_usd,
        since: i.started,
        last_finding: i.last_finding,
        notified: i.notified.is_some(),
        notifications: i.sequence,
        silenced_by,
        last_error: i.last_error.clone(),
    }
}

fn silence_view(s: &Silence, open: &[IncidentRow], now: DateTime<Utc>) -> SilenceView {
    SilenceView {
        id: s.id,
        conditions: s.conditions(),
        starts_at: s.starts_at,
        ends_at: s.ends_at,
        author: s.author.clone(),
        reason: s.reason.clone(),
        holding: open
            .iter()
            .filter(|r| s.is_active(now) && s.matches(&r.incident))
            .count(),
    }
}

async fn findings(store: &SqlStore, until: DateTime<Utc>) -> Result<FindingsView, StoreError> {
    let since = until - FINDINGS_SPAN;
    let rows = store
        .list_findings(&FindingQuery {
            since: Some(since),
            until: Some(until),
            limit: Some(FINDINGS_SHOWN + 1),
            ..FindingQuery::default()
        })
        .await?;
    let views = rows
        .into_iter()
        .map(|f| FindingView {
            window_start: f.window.start,
            kind: f.kind.as_str().to_owned(),
            severity: f.severity.as_str().to_owned(),
            session_id: f.session_id,
            group: f.group,
            cost_usd: f.cost_usd,
            impact_usd: f.impact_usd,
            explanation: f.explanation,
        })
        .collect();
    Ok(FindingsView {
        since,
        until,
        list: Capped::of(views, FINDINGS_SHOWN),
    })
}

async fn job_views(
    parts: &Parts,
    rows: Vec<JobRow>,
    now: DateTime<Utc>,
) -> Result<Capped<JobView>, StoreError> {
    let mut views = Vec::with_capacity(rows.len());
    for (n, r) in rows.into_iter().enumerate() {
        // The extra row only says there are more jobs: its windows are not read.
        let windows = if n < JOBS_SHOWN {
            parts
                .store
                .recent_windows(&r.job, WINDOWS_SHOWN + 1)
                .await?
        } else {
            Vec::new()
        };
        let windows_due =
            (r.job == parts.schedule.job).then(|| due(&parts.schedule, r.watermark, now));
        views.push(JobView {
            lag_seconds: (now - r.watermark).num_seconds(),
            windows_due,
            evaluated: r.evaluated,
            windows: Capped::of(
                windows.into_iter().map(WindowView::from).collect(),
                WINDOWS_SHOWN,
            ),
            watermark: r.watermark,
            job: r.job,
        });
    }
    Ok(Capped::of(views, JOBS_SHOWN))
}

/// Whole windows from `watermark` that ended at least the settle lag
/// before `now`.
fn due(schedule: &Schedule, watermark: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    let size = schedule.size.as_millis().max(1);
    let settle = ChronoDuration::from_std(schedule.settle_lag).unwrap_or(ChronoDuration::zero());
    let ready = (now - settle - watermark).num_milliseconds();
    u64::try_from(ready).map_or(0, |ms| {
        u64::try_from(u128::from(ms) / size).unwrap_or(u64::MAX)
    })
}

async fn source(store: &SqlStore, job: &str) -> Result<SourceView, StoreError> {
    let incident = store
        .incident(&fingerprint(SOURCE_UNHEALTHY, job, "gateway"))
        .await?
        .map(|r| SourceIncident {
            open: r.incident.firing,
            since: r.incident.started,
            last_failure: r.incident.last_finding,
            last_error: r.incident.last_error,
            notified: r.incident.notified.is_some(),
        });
    let last = store.last_done_window(job).await?;
    let lease = store.lease(&format!("job:{job}")).await?;
    let caching_facts = {
        use crate::store::WindowStore;
        crate::detect::no_cache::CachingFacts::of_evidence(&store.caching_evidence().await?)
    };
    Ok(SourceView {
        job: job.to_owned(),
        healthy: !incident.as_ref().is_some_and(|i| i.open),
        incident,
        last_read: last.as_ref().map(|w| w.updated_at),
        last_read_window: last.map(|w| (w.row.window.start, w.row.window.end)),
        lease_holder: lease.as_ref().map(|l| l.holder.clone()),
        lease_expires: lease.map(|l| l.expires_at),
        caching_facts,
    })
}

async fn budget(parts: &Parts, now: DateTime<Utc>) -> Result<BudgetView, StoreError> {
    let day = now.date_naive();
    let spent = parts.store.spent(day).await.map_err(|e| match e {
        LedgerError::Unavailable(m) => StoreError::Unavailable(m),
        LedgerError::Corrupt(m) => StoreError::Corrupt(m),
    })?;
    let midnight = day.and_time(chrono::NaiveTime::MIN).and_utc();
    let investigations = parts.store.investigations_since(midnight).await?;
    Ok(BudgetView {
        enabled: parts.investigations,
        day,
        spent_usd: spent,
        cap_usd: parts.day_cap_usd,
        investigations,
    })
}
