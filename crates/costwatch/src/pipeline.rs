//! Window by window: read every page of a window, check it, and store its
//! findings, baselines and the new watermark in one transaction.
//!
//! A window is done only when all its pages were read, every drill-down
//! answered and the commit succeeded; on any failure nothing of it is stored,
//! the watermark stays, and the same window is tried again on the next run.
//! Windows are processed strictly in order, so none is skipped or counted twice.

use crate::clock::Clock;
use crate::config::WindowConfig;
use crate::detect::{
    CachingEvidence, Catalogue, Confirmed, Detector, Diagnostic, Finding, GroupBaseline, Held,
    HeldFindings,
};
use crate::source::{ModelPrice, RequestRecord, SessionRecord, Source, SourceError, Window};
use crate::store::{Store, StoreError, WindowCommit, WindowStore};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How far back a model's traffic counts as "in use" when judging prices.
const MODELS_IN_USE_LOOKBACK_DAYS: i64 = 7;

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The gateway could not be read; the window stays due. (The message
    /// carries the source error's text, so it is not also a `source()`,
    /// which would print it twice in a chain.)
    #[error("window {window}: {error}")]
    Source {
        /// The window that failed.
        window: Window,
        /// What failed.
        error: SourceError,
    },
    /// The catalogue could not be read.
    #[error("model catalogue: {0}")]
    Models(SourceError),
    /// The run's deadline passed while the gateway was being read; the
    /// window (or the catalogue, when `window` is `None`) stays due.
    #[error("{}: not read within the tick's deadline of {}", what_timed_out(window), humantime::format_duration(*after))]
    Deadline {
        /// The window being read, `None` for the catalogue.
        window: Option<Window>,
        /// How long the run was given.
        after: Duration,
    },
    /// State could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn what_timed_out(window: &Option<Window>) -> String {
    match window {
        Some(w) => format!("window {w}"),
        None => "model catalogue".to_owned(),
    }
}

/// When a run must stop reading the gateway: the deadline of a daemon tick.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// The instant, on tokio's clock.
    pub at: Instant,
    /// How long the run was given, for messages.
    pub after: Duration,
}

impl Deadline {
    /// The longest deadline kept as given; beyond it (ten years), the timer
    /// could not hold it anyway.
    const LONGEST: Duration = Duration::from_secs(10 * 365 * 86_400);

    /// A deadline `after` from now.
    pub fn after(after: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + after.min(Deadline::LONGEST),
            after,
        }
    }

    /// Runs `read` until the deadline; `None` when it passed first (`read`
    /// is then dropped, which abandons its requests).
    async fn bound<T>(deadline: Option<Deadline>, read: impl Future<Output = T>) -> Option<T> {
        match deadline {
            Some(d) => tokio::time::timeout_at(d.at, read).await.ok(),
            None => Some(read.await),
        }
    }
}

/// Where windows come from: a job and how its windows are cut (reached
/// through it: `schedule.size`).
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Name of the job (its watermark is kept under this name).
    pub job: String,
    /// The `windows` section.
    pub windows: WindowConfig,
}

impl std::ops::Deref for Schedule {
    type Target = WindowConfig;

    fn deref(&self) -> &WindowConfig {
        &self.windows
    }
}

impl std::ops::DerefMut for Schedule {
    fn deref_mut(&mut self) -> &mut WindowConfig {
        &mut self.windows
    }
}

impl Schedule {
    /// The schedule of the daemon's `main` job that `windows` describes.
    pub fn main(windows: &WindowConfig) -> Schedule {
        Schedule {
            job: "main".to_owned(),
            windows: windows.clone(),
        }
    }

    fn size(&self) -> ChronoDuration {
        ChronoDuration::from_std(self.size).unwrap_or(ChronoDuration::minutes(15))
    }

    /// `t` rounded down to a window boundary (multiples of the size since the epoch).
    pub fn align(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        let size = self.size().num_milliseconds().max(1);
        let ms = t.timestamp_millis();
        let aligned = ms - ms.rem_euclid(size);
        DateTime::from_timestamp_millis(aligned).unwrap_or(t)
    }

    /// The windows from `watermark` that are due at `now` (ended at least
    /// `settle_lag` ago), in order.
    pub fn due(
        &self,
        watermark: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> impl Iterator<Item = Window> + '_ {
        let size = self.size();
        let lag = ChronoDuration::from_std(self.settle_lag).unwrap_or_default();
        let mut start = watermark;
        std::iter::from_fn(move || {
            let end = start + size;
            if end + lag > now {
                return None;
            }
            let w = Window { start, end };
            start = end;
            Some(w)
        })
    }
}

/// What one window produced.
#[derive(Debug, Clone)]
pub struct WindowReport {
    /// The window.
    pub window: Window,
    /// Sessions read.
    pub sessions: u64,
    /// Pages read.
    pub pages: u64,
    /// Gateway calls retried.
    pub retries: u64,
    /// Sessions drilled into.
    pub drilldowns: usize,
    /// Retry-loop suspects left unread by their rule's `drilldown_budget`.
    pub drilldowns_skipped: u64,
    /// no_cache findings held after this window for the windows after it
    /// to decide (sessions still going at its end; see `detect::held`).
    pub held: usize,
    /// Findings first seen in this window.
    pub new_findings: Vec<Finding>,
    /// Findings of sessions already reported, with updated figures.
    pub seen_again: usize,
    /// Odd data noticed.
    pub diagnostics: Vec<Diagnostic>,
}

/// The most groups whose baselines a run carries from window to window
/// (see [`Pipeline::carrying`]); past it, the others are read from the
/// store each window, as without carrying. At the default 512 samples a
/// ring, a carried baseline holds at most 10 KB of samples (its three
/// rings, and sorted copies of the two whose medians are asked): about
/// 40 MB for this many groups.
pub const MAX_CARRIED_GROUPS: usize = 4_096;
/// The most sessions whose request rows a run carries from window to
/// window (those whose last call is before a window are let go at its
/// start); past it, the others are read again when drilled into.
pub const MAX_CARRIED_SESSIONS: usize = 1_024;

/// What a carrying run keeps from window to window.
#[derive(Default)]
struct Carried {
    /// The baselines committed, by group.
    baselines: HashMap<String, GroupBaseline>,
    /// The request rows drilled into, by session, with the session's
    /// aggregate row as it was when they were read.
    drilled: Drilled,
    /// When each model was last seen carrying traffic (the end of its last
    /// window), read from the store once and then kept as committed.
    models_seen: Option<BTreeMap<String, DateTime<Utc>>>,
    /// The findings held after the last window (see `detect::held`), read
    /// from the store once and then kept as committed.
    held: Option<Vec<Held>>,
    /// What the traffic showed of the models' caches (`detect::caching`),
    /// read from the store once and then kept as committed.
    caching: Option<CachingEvidence>,
}

/// Request rows by session, with the aggregate row they were read for.
type Drilled = HashMap<String, (SessionRecord, Arc<Vec<RequestRecord>>)>;

/// A window read and judged, not yet stored.
struct Read {
    judgement: crate::detect::Judgement,
    pages: u64,
    retries: u64,
    drilldowns: usize,
}

/// The window pipeline.
pub struct Pipeline<S, St> {
    source: S,
    store: St,
    detector: Detector,
    schedule: Schedule,
    drilldown_concurrency: usize,
    clock: Arc<dyn Clock>,
    carrying: bool,
}

impl<S, St> Pipeline<S, St>
where
    S: Source + Clone + 'static,
    St: WindowStore,
{
    /// Ties a source, a store and the detector together.
    pub fn new(
        source: S,
        store: St,
        detector: Detector,
        schedule: Schedule,
        drilldown_concurrency: usize,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Pipeline {
            source,
            store,
            detector,
            schedule,
            drilldown_concurrency: drilldown_concurrency.max(1),
            clock,
            carrying: false,
        }
    }

    /// Carries what a window learned to the next windows of the same run,
    /// instead of reading it again: for a pipeline that is the only writer
    /// of its state's baselines and reads a gateway's history (a
    /// backtest's replay).
    ///
    /// - The baselines each window commits are kept rather than read back
    ///   from the store. The store still gets every window's baselines in
    ///   the window's transaction; what is kept is exactly what was
    ///   written.
    /// - The models in use come from the store's table of when each model
    ///   was last seen, read once, then kept as each window commits it.
    /// - The request rows of a session drilled into are kept with its
    ///   aggregate row, and used again when the session is drilled into in
    ///   a later window with the very same aggregate (no call added, none
    ///   changed); any difference reads them again.
    ///
    /// So the findings are the same. The daemon does not carry: replicas
    /// and jobs share the baselines, and each window reads them.
    pub fn carrying(mut self) -> Self {
        self.carrying = true;
        self
    }

    /// The source the windows are read through (its clones share what it
    /// carries from window to window).
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The store, for reading results.
    pub fn store(&self) -> &St {
        &self.store
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The job's watermark, setting the first one when the job is new.
    pub async fn watermark(&self, now: DateTime<Utc>) -> Result<DateTime<Utc>, StoreError> {
        if let Some(w) = self.store.watermark(&self.schedule.job).await? {
            return Ok(w);
        }
        let backfill = ChronoDuration::from_std(self.schedule.max_backfill).unwrap_or_default();
        let first = self
            .schedule
            .align(self.schedule.start.unwrap_or(now - backfill));
        self.store
            .init_watermark(&self.schedule.job, first, now)
            .await
    }

    /// Processes every window due at `now` (never later than the clock's
    /// current time), in order, calling `on_window` after each. Stops at the
    /// first window that fails (it stays due).
    pub async fn run_due<F>(
        &self,
        now: DateTime<Utc>,
        on_window: F,
    ) -> Result<Vec<WindowReport>, PipelineError>
    where
        F: FnMut(&WindowReport),
    {
        self.run_due_bounded(now, usize::MAX, None, on_window).await
    }

    /// Like [`Pipeline::run_due`], but processes at most `max_windows`
    /// windows, and reads the gateway only until `deadline`: the window being
    /// read then fails with [`PipelineError::Deadline`]. Either way the rest
    /// stay due for the next run.
    pub async fn run_due_bounded<F>(
        &self,
        now: DateTime<Utc>,
        max_windows: usize,
        deadline: Option<Deadline>,
        mut on_window: F,
    ) -> Result<Vec<WindowReport>, PipelineError>
    where
        F: FnMut(&WindowReport),
    {
        // A window is read only once it has happened: whatever `now` a caller
        // asks for (`once --at`, a replay's end), nothing is committed whose
        // end plus `settle_lag` is after the clock's real now. Committing a
        // future window would move the watermark past data not yet written.
        let real_now = self.clock.now();
        if now > real_now {
            tracing::warn!(
                asked = %now,
                now = %real_now,
                "windows after the current time are not due yet; processing up to now"
            );
        }
        let now = now.min(real_now);
        let watermark = self.watermark(now).await?;
        let due: Vec<Window> = self
            .schedule
            .due(watermark, now)
            .take(max_windows)
            .collect();
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let models = Deadline::bound(deadline, self.source.models())
            .await
            .ok_or_else(|| PipelineError::Deadline {
                window: None,
                after: deadline.map(|d| d.after).unwrap_or_default(),
            })?
            .map_err(PipelineError::Models)?;
        let mut reports = Vec::with_capacity(due.len());
        let mut carried: Option<Carried> = self.carrying.then(Carried::default);
        for window in due {
            match self
                .process_window(window, &models, deadline, &mut carried)
                .await
            {
                Ok(report) => {
                    on_window(&report);
                    reports.push(report);
                }
                Err(e) => {
                    let message = e.to_string();
                    tracing::warn!(window = %window, error = %message, "window failed; it will be retried");
                    if let Err(store_err) = self
                        .store
                        .record_failure(&self.schedule.job, window, &message, self.clock.now())
                        .await
                    {
                        tracing::error!(error = %store_err, "could not record the failed window");
                    }
                    return Err(e);
                }
            }
        }
        Ok(reports)
    }

    /// Reads, checks and stores one window; the reading stops at `deadline`
    /// (the commit, once reached, is never cut short). What `carried`
    /// holds (a carrying run's) is taken from it rather than from the
    /// store or the gateway, and what the window committed and read is
    /// added to it.
    async fn process_window(
        &self,
        window: Window,
        models: &[ModelPrice],
        deadline: Option<Deadline>,
        carried: &mut Option<Carried>,
    ) -> Result<WindowReport, PipelineError> {
        if let Some(c) = carried {
            // A session whose last call is before this window is not in it
            // or any later one as it was: its rows are not needed again.
            c.drilled
                .retain(|_, (seen, _)| seen.last_request_at >= window.start);
        }
        let prior = match carried.as_mut().and_then(|c| c.held.take()) {
            Some(held) => held,
            None => self.store.held_findings(&self.schedule.job).await?,
        };
        let caching = match carried.as_mut().and_then(|c| c.caching.take()) {
            Some(caching) => caching,
            None => self.store.caching_evidence().await?,
        };
        let mut held = HeldFindings::new(prior);
        let read = Deadline::bound(
            deadline,
            self.read_window(window, models, &caching, &mut held, carried.as_mut()),
        )
        .await
        .ok_or_else(|| PipelineError::Deadline {
            window: Some(window),
            after: deadline.map(|d| d.after).unwrap_or_default(),
        })??;
        let Read {
            mut judgement,
            pages,
            retries,
            drilldowns,
        } = read;
        // Findings held before this window stand or go by what it showed:
        // whether their session ended.
        let fresh = std::mem::take(&mut judgement.held);
        let settled = held.settle(window, fresh, &judgement.baselines);
        judgement.findings.extend(settled.stand);
        let all = judgement.findings.len();
        let new_findings = self
            .store
            .commit_window(
                &self.schedule.job,
                window,
                WindowCommit {
                    findings: &judgement.findings,
                    baselines: &judgement.baselines,
                    models_seen: &judgement.models_seen,
                    caching: &judgement.caching,
                    held: settled.changed.then_some(settled.held.as_slice()),
                    sessions: judgement.sessions,
                    pages,
                    now: self.clock.now(),
                },
            )
            .await?;
        let held_after = settled.held.len();
        if let Some(carried) = carried {
            carried.held = Some(settled.held);
            let mut caching = caching;
            caching.merge(&judgement.caching);
            carried.caching = Some(caching);
            if let Some(seen) = &mut carried.models_seen {
                for m in &judgement.models_seen {
                    seen.insert(m.clone(), window.end);
                }
            }
            let kept = &mut carried.baselines;
            for (group, mut b) in std::mem::take(&mut judgement.baselines) {
                if kept.len() < MAX_CARRIED_GROUPS || kept.contains_key(&group) {
                    // Its medians are asked again every window it is seen.
                    b.keep_sorted();
                    kept.insert(group, b);
                }
            }
        }
        // An empty window (a receiver's first catch-up has hundreds) is a
        // detail.
        macro_rules! processed {
            ($level:ident) => {
                tracing::$level!(
                    window = %window,
                    sessions = judgement.sessions,
                    pages,
                    drilldowns,
                    drilldowns_skipped = judgement.drilldowns_skipped,
                    new_findings = new_findings.len(),
                    held = held_after,
                    "window processed"
                )
            };
        }
        if judgement.sessions == 0 && new_findings.is_empty() && held_after == 0 {
            processed!(debug);
        } else {
            processed!(info);
        }
        Ok(WindowReport {
            window,
            sessions: judgement.sessions,
            pages,
            retries,
            drilldowns,
            drilldowns_skipped: judgement.drilldowns_skipped,
            held: held_after,
            seen_again: all - new_findings.len(),
            new_findings,
            diagnostics: std::mem::take(&mut judgement.diagnostics),
        })
    }

    /// Reads one window (twice when it has too many candidates), judges it
    /// and drills into the candidates that need their request rows. Stores nothing.
    async fn read_window(
        &self,
        window: Window,
        models: &[ModelPrice],
        caching: &CachingEvidence,
        held: &mut HeldFindings,
        mut carried: Option<&mut Carried>,
    ) -> Result<Read, PipelineError> {
        let since = window.start - ChronoDuration::days(MODELS_IN_USE_LOOKBACK_DAYS);
        let in_use = self.models_in_use(since, carried.as_deref_mut()).await?;
        // The catalogue is made once the window's calls are read, with the
        // prices they taught laid on the source's (`Source::window_models`),
        // what the source's prices leave out of a model's caching filled
        // from the shipped caching facts, and what the traffic showed of
        // the models' caches laid over both.
        let begin = || {
            let models = crate::pricing::table::overlay(models, self.source.window_models());
            let (models, tabled) = crate::pricing::caching::fill(models);
            let mut catalogue =
                Catalogue::new(models, in_use.iter().map(String::as_str)).with_tabled(tabled);
            catalogue.learn(caching);
            self.detector.begin(window, catalogue)
        };
        let mut begun = None;
        let stats = self
            .source
            .sessions(window, |s: SessionRecord| {
                held.saw(&s.session_id);
                begun.get_or_insert_with(begin).observe(s)
            })
            .await
            .map_err(|source| PipelineError::Source {
                window,
                error: source,
            })?;
        let analysis = begun.unwrap_or_else(begin);
        let history = self
            .history(
                analysis.groups(),
                carried.as_deref_mut().map(|c| &mut c.baselines),
            )
            .await?;
        let (mut pages, mut retries) = (stats.pages, stats.retries);
        let mut judgement = if analysis.overflowed() {
            // Too many candidates to keep: the baselines are complete now, so
            // a second read judges every session as it streams by.
            let mut again = analysis.rejudge(history);
            let second = self
                .source
                .sessions(window, |s: SessionRecord| again.observe(s))
                .await
                .map_err(|source| PipelineError::Source {
                    window,
                    error: source,
                })?;
            pages += second.pages;
            retries += second.retries;
            again.finish()
        } else {
            analysis.judge(history)
        };
        let drilldowns = judgement.drilldowns.len();
        let confirmed = self
            .drill_down(
                window,
                std::mem::take(&mut judgement.drilldowns),
                carried.map(|c| &mut c.drilled),
            )
            .await?;
        judgement.confirmed(confirmed);
        Ok(Read {
            judgement,
            pages,
            retries,
            drilldowns,
        })
    }

    /// The models seen carrying traffic since `since`, in name order: from
    /// what `carried` keeps (read from the store the first time), else from
    /// the store.
    async fn models_in_use(
        &self,
        since: DateTime<Utc>,
        carried: Option<&mut Carried>,
    ) -> Result<Vec<String>, StoreError> {
        let Some(carried) = carried else {
            return self.store.models_in_use(since).await;
        };
        let seen = match &mut carried.models_seen {
            Some(seen) => seen,
            None => carried
                .models_seen
                .insert(self.store.models_last_seen().await?.into_iter().collect()),
        };
        Ok(seen
            .iter()
            .filter(|(_, last)| **last >= since)
            .map(|(m, _)| m.clone())
            .collect())
    }

    /// The stored baselines of `groups`: those `carried` holds taken out of
    /// it (the window's commit puts back what it stored; a window that
    /// fails ends the run, and its carried state with it), the others from
    /// the store.
    async fn history(
        &self,
        groups: Vec<String>,
        carried: Option<&mut HashMap<String, GroupBaseline>>,
    ) -> Result<HashMap<String, GroupBaseline>, StoreError> {
        let Some(carried) = carried else {
            return self.store.load_baselines(&groups).await;
        };
        let mut history = HashMap::with_capacity(groups.len());
        let mut missing = Vec::new();
        for g in groups {
            match carried.remove(&g) {
                Some(b) => {
                    history.insert(g, b);
                }
                None => missing.push(g),
            }
        }
        if !missing.is_empty() {
            history.extend(self.store.load_baselines(&missing).await?);
        }
        Ok(history)
    }

    /// Fetches the requests of each drill-down candidate (retry loops,
    /// no_cache sessions near the cacheable minimum, sessions whose
    /// aggregates could hide tiny premium calls; a few at a time) and keeps
    /// the confirmed ones. Any failed drill-down fails the window.
    async fn drill_down(
        &self,
        window: Window,
        candidates: Vec<crate::detect::Drilldown>,
        mut drilled: Option<&mut Drilled>,
    ) -> Result<Confirmed, PipelineError> {
        let mut confirmed = Confirmed::default();
        let mut pending = Vec::with_capacity(candidates.len());
        for c in candidates {
            let known = drilled
                .as_deref()
                .and_then(|d| d.get(&c.session.session_id))
                .filter(|(seen, _)| *seen == c.session)
                .map(|(_, rows)| rows.clone());
            match known {
                Some(rows) => confirmed.extend(self.detector.confirm(&c, &rows, window)),
                None => pending.push(c),
            }
        }
        let mut pending = pending.into_iter();
        let mut running: JoinSet<(crate::detect::Drilldown, Result<_, SourceError>)> =
            JoinSet::new();
        loop {
            while running.len() < self.drilldown_concurrency {
                let Some(c) = pending.next() else { break };
                let source = self.source.clone();
                running.spawn(async move {
                    let r = source.session_requests(&c.session.session_id).await;
                    (c, r)
                });
            }
            let Some(joined) = running.join_next().await else {
                break;
            };
            let (candidate, requests) = joined.map_err(|e| PipelineError::Source {
                window,
                error: SourceError::Transient(format!("drill-down task failed: {e}")),
            })?;
            let requests = requests.map_err(|source| PipelineError::Source {
                window,
                error: source,
            })?;
            confirmed.extend(self.detector.confirm(&candidate, &requests, window));
            if let Some(d) = drilled.as_deref_mut()
                && (d.len() < MAX_CARRIED_SESSIONS || d.contains_key(&candidate.session.session_id))
            {
                let id = candidate.session.session_id.clone();
                d.insert(id, (candidate.session, Arc::new(requests)));
            }
        }
        Ok(confirmed)
    }
}

impl<S, St> Pipeline<S, St>
where
    S: Source + Clone + 'static,
    St: Store,
{
    /// Moves the watermark past the windows older than `max_backfill`
    /// before `now`, with one warning (history is `costwatch backtest`'s);
    /// how many windows it skipped.
    pub async fn skip_older_than(
        &self,
        now: DateTime<Utc>,
        max_backfill: Duration,
    ) -> Result<i64, StoreError> {
        let watermark = self.watermark(now).await?;
        let backfill = ChronoDuration::from_std(max_backfill).unwrap_or(ChronoDuration::MAX);
        let oldest = self.schedule.align(now - backfill);
        if watermark >= oldest {
            return Ok(0);
        }
        let size = self.schedule.size();
        let skipped = (oldest - watermark).num_milliseconds() / size.num_milliseconds().max(1);
        tracing::warn!(
            from = %watermark,
            to = %oldest,
            windows = skipped,
            "windows older than windows.max_backfill are skipped; `costwatch backtest --from` reads history"
        );
        self.store
            .skip_to(&self.schedule.job, watermark, oldest, now)
            .await?;
        Ok(skipped)
    }
}
