//! Replaying a historical range through the same pipeline the daemon runs,
//! and scoring the findings against known truth.
//!
//! A window whose read fails (after the source's own retries of each page)
//! is read again, as the daemon reads it again on its next tick: after a
//! backoff, a bounded number of times ([`WindowRetries`]). The replay
//! reports the windows that needed it; one that still fails ends the replay
//! with its error.

use crate::clock::{Clock, Sleeper, TokioSleeper};
use crate::detect::{Detector, Finding, Kind};
use crate::http::RetryPolicy;
use crate::pipeline::{Pipeline, PipelineError, Schedule, WindowReport};
use crate::source::{HttpLimits, Source, Window};
use crate::store::{MemoryStore, SqlStore, WindowStore, is_throwaway};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The job name backtests keep their watermark under.
pub const BACKTEST_JOB: &str = "backtest";

/// What a replay produced.
#[derive(Debug, Default)]
pub struct Replay {
    /// New findings, in window order.
    pub findings: Vec<Finding>,
    /// Windows processed.
    pub windows: usize,
    /// Sessions read (a session active in two windows counts twice).
    pub sessions: u64,
    /// Sessions drilled into.
    pub drilldowns: usize,
    /// Windows (or the catalogue) read again after a failed read, in order.
    pub retried: Vec<RetriedRead>,
}

/// A read that failed and succeeded when read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetriedRead {
    /// The window; `None` for the model catalogue.
    pub window: Option<Window>,
    /// Reads it took, the successful one included.
    pub reads: u32,
    /// Why the last failed read failed.
    pub last_error: String,
}

/// How a replay reads again a window whose read failed.
#[derive(Clone)]
pub struct WindowRetries {
    /// Reads of one window in all, the first included (at least 1).
    pub reads: u32,
    /// The wait before each new read: `retry_base` doubling up to
    /// `retry_max`, as between attempts at one page.
    pub backoff: RetryPolicy,
    /// How the waits are made (tests record them).
    pub sleeper: Arc<dyn Sleeper>,
}

impl std::fmt::Debug for WindowRetries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowRetries")
            .field("reads", &self.reads)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl WindowRetries {
    /// Reads of a window by default: with the source's retries of each page
    /// behind every read, four more reads ride out a fault that outlasted
    /// them, and a gateway that is down ends the replay within seconds.
    pub const READS: u32 = 5;

    /// [`WindowRetries::READS`] reads, waiting between them as the source
    /// waits between attempts at a page, on the tokio timer.
    pub fn like_source(limits: &HttpLimits) -> WindowRetries {
        WindowRetries {
            reads: WindowRetries::READS,
            backoff: RetryPolicy::exponential(
                WindowRetries::READS - 1,
                limits.retry_base,
                limits.retry_max,
            ),
            sleeper: Arc::new(TokioSleeper),
        }
    }

    /// One read: a failure ends the replay.
    pub fn none() -> WindowRetries {
        WindowRetries {
            reads: 1,
            backoff: RetryPolicy::exponential(0, Duration::ZERO, Duration::ZERO),
            sleeper: Arc::new(TokioSleeper),
        }
    }

    /// After `failures` failed reads of one window, the wait before the next
    /// read, or `None` when no read is left.
    fn wait_after(&self, failures: u32) -> Option<Duration> {
        (failures < self.reads.max(1)).then(|| self.backoff.delay(failures.saturating_sub(1), None))
    }

    /// The same retries, waiting on `sleeper`.
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> WindowRetries {
        self.sleeper = sleeper;
        self
    }
}

/// The read that failed, if `e` is a failed read worth another: `Some(None)`
/// for the catalogue, `Some(Some(window))` for a window.
fn failed_read(e: &PipelineError) -> Option<Option<Window>> {
    match e {
        PipelineError::Source {
            window,
            error: source,
        } if source.is_retryable() => Some(Some(*window)),
        PipelineError::Models(source) if source.is_retryable() => Some(None),
        PipelineError::Deadline { window, .. } => Some(*window),
        _ => None,
    }
}

/// Replays `[from, to)` window by window into the store at `state_url`,
/// reading a failed window again as `retries` says. `on_window` sees each
/// window. A throwaway URL (`sqlite::memory:`, see
/// [`crate::store::is_throwaway`]) keeps the state in process memory
/// ([`MemoryStore`]): nobody can read it afterwards, and a window's commit
/// then costs no database statements; any other URL opens that database.
#[allow(clippy::too_many_arguments)]
pub async fn replay<S, F>(
    source: S,
    detector: Detector,
    state_url: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
    drilldown_concurrency: usize,
    clock: Arc<dyn Clock>,
    retries: &WindowRetries,
    on_window: F,
) -> Result<Replay, PipelineError>
where
    S: Source + Clone + 'static,
    F: FnMut(&WindowReport),
{
    let range = Range {
        from,
        to,
        window,
        drilldown_concurrency,
    };
    if is_throwaway(state_url) {
        let store = MemoryStore::new();
        replay_into(source, detector, store, range, clock, retries, on_window).await
    } else {
        let store = SqlStore::open(state_url).await?;
        replay_into(source, detector, store, range, clock, retries, on_window).await
    }
}

/// What [`replay`] reads, and how.
struct Range {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
    drilldown_concurrency: usize,
}

async fn replay_into<S, St, F>(
    source: S,
    detector: Detector,
    store: St,
    range: Range,
    clock: Arc<dyn Clock>,
    retries: &WindowRetries,
    mut on_window: F,
) -> Result<Replay, PipelineError>
where
    S: Source + Clone + 'static,
    St: WindowStore,
    F: FnMut(&WindowReport),
{
    let Range {
        from,
        to,
        window,
        drilldown_concurrency,
    } = range;
    let schedule = Schedule {
        job: BACKTEST_JOB.to_owned(),
        windows: crate::config::WindowConfig {
            size: window,
            settle_lag: Duration::ZERO,
            start: Some(from),
            max_backfill: Duration::ZERO,
        },
    };
    let pipeline = Pipeline::new(
        source,
        store,
        detector,
        schedule,
        drilldown_concurrency,
        clock,
    )
    .carrying();
    let mut out = Replay::default();
    // The read that failed last and has not succeeded since: what, how
    // often, and why.
    let mut failing: Option<(Option<Window>, u32, String)> = None;
    loop {
        let result = pipeline
            .run_due(to, |r| {
                if let Some((window, failures, last_error)) = failing.take() {
                    out.retried.push(RetriedRead {
                        window,
                        reads: failures + 1,
                        last_error,
                    });
                }
                out.windows += 1;
                out.sessions += r.sessions;
                out.drilldowns += r.drilldowns;
                out.findings.extend(r.new_findings.iter().cloned());
                on_window(r);
            })
            .await;
        let error = match result {
            Ok(_) => return Ok(out),
            Err(e) => e,
        };
        let Some(read) = failed_read(&error) else {
            return Err(error);
        };
        let failures = match &failing {
            Some((w, n, _)) if *w == read => n + 1,
            _ => 1,
        };
        let Some(wait) = retries.wait_after(failures) else {
            tracing::warn!(reads = failures, error = %error, "the read failed every time; the replay stops");
            return Err(error);
        };
        tracing::warn!(
            reads = failures,
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            error = %error,
            "read failed; reading it again"
        );
        failing = Some((read, failures, error.to_string()));
        retries.sleeper.sleep(wait).await;
    }
}

/// Precision and recall of one kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassScore {
    /// The kind.
    pub kind: Kind,
    /// Flagged and truly wasteful.
    pub true_positives: usize,
    /// Flagged but healthy (or wasteful in another way).
    pub false_positives: usize,
    /// Wasteful but not flagged.
    pub false_negatives: usize,
    /// `tp / (tp + fp)`; 1 when nothing was flagged.
    pub precision: f64,
    /// `tp / (tp + fn)`; 1 when there was nothing to find.
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
}

/// Scores findings against the truth (kind name -> session ids). A session
/// flagged twice for the same kind counts once.
pub fn score(findings: &[Finding], truth: &BTreeMap<String, BTreeSet<String>>) -> Vec<ClassScore> {
    let empty = BTreeSet::new();
    Kind::ALL
        .into_iter()
        .map(|kind| {
            let flagged: BTreeSet<&str> = findings
                .iter()
                .filter(|f| f.kind == kind)
                .map(|f| f.session_id.as_str())
                .collect();
            let want = truth.get(kind.as_str()).unwrap_or(&empty);
            let tp = flagged.iter().filter(|s| want.contains(**s)).count();
            let fp = flagged.len() - tp;
            let fn_ = want.len() - tp;
            let precision = if flagged.is_empty() {
                1.0
            } else {
                tp as f64 / flagged.len() as f64
            };
            let recall = if want.is_empty() {
                1.0
            } else {
                tp as f64 / want.len() as f64
            };
            let f1 = if precision + recall == 0.0 {
                0.0
            } else {
                2.0 * precision * recall / (precision + recall)
            };
            ClassScore {
                kind,
                true_positives: tp,
                false_positives: fp,
                false_negatives: fn_,
                precision,
                recall,
                f1,
            }
        })
        .collect()
}

/// The scores as an aligned text table.
pub fn score_table(scores: &[ClassScore]) -> String {
    let mut out = format!(
        "{:<16} {:>5} {:>5} {:>5} {:>9} {:>7} {:>6}\n",
        "kind", "tp", "fp", "fn", "precision", "recall", "f1"
    );
    for s in scores {
        out.push_str(&format!(
            "{:<16} {:>5} {:>5} {:>5} {:>9.3} {:>7.3} {:>6.3}\n",
            s.kind.as_str(),
            s.true_positives,
            s.false_positives,
            s.false_negatives,
            s.precision,
            s.recall,
            s.f1
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Severity;
    use crate::source::Window;

    fn finding(kind: Kind, id: &str) -> Finding {
        Finding {
            kind,
            session_id: id.into(),
            window: Window {
                start: DateTime::<Utc>::UNIX_EPOCH,
                end: DateTime::<Utc>::UNIX_EPOCH,
            },
            severity: Severity::Warning,
            rule: "r".into(),
            group: "g".into(),
            labels: Default::default(),
            cost_usd: 0.0,
            impact_usd: 0.0,
            evidence: serde_json::Value::Null,
            explanation: String::new(),
        }
    }

    #[test]
    fn the_spend_preview_honours_the_hourly_limit_and_the_daily_cap() {
        let prices = crate::investigate::budget::Prices {
            input_usd_per_mtok: 1.0,
            cached_input_usd_per_mtok: 0.1,
            output_usd_per_mtok: 4.0,
        };
        let base = crate::notify::sample_alert(DateTime::<Utc>::UNIX_EPOCH);
        let at = |h: i64| {
            let mut a = base.clone();
            a.window.end = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::minutes(h * 60 + 5);
            a
        };
        // Three alerts in hour 0, one in hour 1; at most two an hour.
        let alerts = vec![at(0), at(0), at(0), at(1)];
        let p = spend_preview(&alerts, |_| true, 2, &prices, 0.05, 1.0);
        assert_eq!((p.investigations, p.over_hourly_limit), (3, 1));
        let typical = (2_600.0 * 1.0 + 120.0 * 4.0) / 1e6;
        assert!(
            (p.typical_usd - 3.0 * typical).abs() < 1e-12,
            "{}",
            p.typical_usd
        );
        assert!((p.worst_usd - 0.15).abs() < 1e-12);
        // The daily cap bounds the worst case.
        let p = spend_preview(&alerts, |_| true, 10, &prices, 0.05, 0.12);
        assert!((p.worst_usd - 0.12).abs() < 1e-12, "{}", p.worst_usd);
        // Alerts the policy does not want cost nothing.
        assert_eq!(
            spend_preview(&alerts, |_| false, 10, &prices, 0.05, 1.0).investigations,
            0
        );
    }

    #[test]
    fn scores_count_each_session_once_and_per_kind() {
        let truth = BTreeMap::from([
            (
                "no_cache".to_string(),
                BTreeSet::from(["a".to_string(), "b".to_string()]),
            ),
            ("retry_loop".to_string(), BTreeSet::from(["c".to_string()])),
        ]);
        let found = vec![
            finding(Kind::NoCache, "a"),
            finding(Kind::NoCache, "a"),
            finding(Kind::NoCache, "x"),
            finding(Kind::RetryLoop, "c"),
        ];
        let s = score(&found, &truth);
        assert_eq!(
            (
                s[0].true_positives,
                s[0].false_positives,
                s[0].false_negatives
            ),
            (1, 1, 1)
        );
        assert!((s[0].precision - 0.5).abs() < 1e-9 && (s[0].recall - 0.5).abs() < 1e-9);
        assert_eq!(s[1].kind, Kind::OversizedModel);
        assert_eq!((s[1].precision, s[1].recall), (1.0, 1.0));
        assert_eq!((s[2].true_positives, s[2].f1), (1, 1.0));
    }
}

/// What a replay through the daemon's alerting produced.
#[derive(Debug, Default)]
pub struct AlertReplay {
    /// Every alert the daemon would have sent, in order.
    pub alerts: Vec<crate::notify::Alert>,
    /// Investigations run (with `--investigate`).
    pub investigations: usize,
    /// What they cost.
    pub investigation_usd: f64,
    /// Their records, as the throwaway state kept them, oldest first.
    pub records: Vec<crate::store::StoredInvestigation>,
}

/// Replays `[from, to)` through the daemon's own tick, one window at a
/// time, with throwaway state and no channel: the alerts (and, with an
/// escalation, the investigations) a live run would have produced.
///
/// A tick that could not read its window is run again at the same time,
/// as `retries` says, before the replay moves on.
#[allow(clippy::too_many_arguments)]
pub async fn replay_alerts<S>(
    source: S,
    detector: Detector,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
    policy: crate::incidents::AlertPolicy,
    escalation: Option<crate::escalate::Escalation>,
    retries: &WindowRetries,
) -> Result<AlertReplay, crate::store::StoreError>
where
    S: Source + Clone + 'static,
{
    use crate::daemon::{Daemon, DaemonSettings};
    use crate::investigate::BudgetLedger;
    let store = SqlStore::open("sqlite::memory:").await?;
    let clock = crate::clock::FakeClock::new(from);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let schedule = Schedule {
        job: BACKTEST_JOB.to_owned(),
        windows: crate::config::WindowConfig {
            size: window,
            settle_lag: Duration::ZERO,
            start: Some(from),
            max_backfill: Duration::from_secs(u64::from(u32::MAX)),
        },
    };
    let pipeline = Pipeline::new(source, store.clone(), detector, schedule, 4, shared.clone());
    let settings = DaemonSettings {
        policy: crate::incidents::AlertPolicy {
            delivery_deadline: Duration::from_secs(3600),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(1),
            ..policy
        },
        max_catch_up_windows: 1,
        // A replay has no schedule to keep: no deadline to speak of.
        tick_timeout: Duration::from_secs(u64::from(u32::MAX)),
        tick_watch: crate::ops::stall::TickWatch::new(),
        max_backfill: Duration::from_secs(u64::from(u32::MAX)),
        channels: Vec::new(),
        metrics: Arc::new(crate::ops::metrics::Metrics::new()),
        replica: "backtest".to_owned(),
        lease_ttl: Duration::from_secs(3600),
        claim_ttl: Duration::from_secs(60),
        escalation: escalation.map(Arc::new),
    };
    let daemon = Daemon::new(pipeline, settings, shared);
    let step = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::minutes(15));
    let mut out = AlertReplay::default();
    let mut at = from + step;
    let mut failures = 0;
    while at <= to {
        clock.set(at);
        let r = daemon.tick().await?;
        out.investigations += r.investigations;
        out.alerts.extend(r.alerts);
        if let Some(error) = r.source_error {
            failures += 1;
            if let Some(wait) = retries.wait_after(failures) {
                tracing::warn!(reads = failures, error = %error, "read failed; reading it again");
                retries.sleeper.sleep(wait).await;
                continue;
            }
            tracing::warn!(reads = failures, error = %error, "the read failed every time; moving on");
        }
        failures = 0;
        at += step;
    }
    if out.investigations > 0 {
        use crate::store::Store;
        let limit = u32::try_from(out.investigations).unwrap_or(u32::MAX);
        out.records = store.stored_investigations(limit).await?;
        out.records.reverse();
    }
    let mut day = from.date_naive();
    loop {
        out.investigation_usd += store.spent(day).await.unwrap_or(0.0);
        match day.succ_opt() {
            Some(next) if next <= to.date_naive() => day = next,
            _ => break,
        }
    }
    Ok(out)
}

/// What escalating the alerts of a replay would cost, without calling a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendPreview {
    /// Alerts the escalation policy would investigate (after the hourly limit).
    pub investigations: usize,
    /// Alerts the hourly limit would leave uninvestigated.
    pub over_hourly_limit: usize,
    /// Expected total, at the typical size of a run.
    pub typical_usd: f64,
    /// Upper bound: every run at its per-run cap (and every day at its cap).
    pub worst_usd: f64,
    /// The busiest day's expected spend.
    pub busiest_day_usd: f64,
}

/// A typical run measured on the seed scenario: two model calls, one tool
/// call, about 2,600 prompt and 120 completion tokens.
pub const TYPICAL_RUN_TOKENS: (u64, u64) = (2_600, 120);

/// Estimates what the escalation policy would have spent on `alerts`.
pub fn spend_preview(
    alerts: &[crate::notify::Alert],
    wants: impl Fn(&crate::notify::Alert) -> bool,
    max_per_hour: u64,
    prices: &crate::investigate::budget::Prices,
    max_usd_per_run: f64,
    max_usd_per_day: f64,
) -> SpendPreview {
    let typical = prices.cost(&crate::investigate::model::Usage {
        prompt_tokens: TYPICAL_RUN_TOKENS.0,
        cached_tokens: 0,
        completion_tokens: TYPICAL_RUN_TOKENS.1,
    });
    let mut per_hour: BTreeMap<i64, u64> = BTreeMap::new();
    let mut per_day: BTreeMap<chrono::NaiveDate, (f64, f64)> = BTreeMap::new();
    let (mut n, mut over) = (0, 0);
    for a in alerts.iter().filter(|a| wants(a)) {
        let hour = a.window.end.timestamp() / 3600;
        let used = per_hour.entry(hour).or_default();
        if *used >= max_per_hour {
            over += 1;
            continue;
        }
        *used += 1;
        n += 1;
        let d = per_day.entry(a.window.end.date_naive()).or_default();
        d.0 += typical;
        d.1 += max_usd_per_run;
    }
    let typical_usd = per_day.values().map(|(t, _)| t.min(max_usd_per_day)).sum();
    let worst_usd = per_day.values().map(|(_, w)| w.min(max_usd_per_day)).sum();
    let busiest_day_usd = per_day.values().map(|(t, _)| *t).fold(0.0, f64::max);
    SpendPreview {
        investigations: n,
        over_hourly_limit: over,
        typical_usd,
        worst_usd,
        busiest_day_usd,
    }
}
