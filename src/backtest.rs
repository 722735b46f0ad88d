//! Replaying a historical range through the same pipeline the daemon runs,
//! and scoring the findings against known truth.

use crate::clock::Clock;
use crate::detect::{Detector, Finding, Kind};
use crate::pipeline::{Pipeline, PipelineError, Schedule, WindowReport};
use crate::source::Source;
use crate::store::SqlStore;
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
}

/// Replays `[from, to)` window by window into the store at `state_url`
/// (`sqlite::memory:` for a throwaway one). `on_window` sees each window.
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
    mut on_window: F,
) -> Result<Replay, PipelineError>
where
    S: Source + Clone + 'static,
    F: FnMut(&WindowReport),
{
    let store = SqlStore::open(state_url).await?;
    let schedule = Schedule {
        job: BACKTEST_JOB.to_owned(),
        size: window,
        settle_lag: Duration::ZERO,
        start: Some(from),
        max_backfill: Duration::ZERO,
    };
    let pipeline = Pipeline::new(
        source,
        store,
        detector,
        schedule,
        drilldown_concurrency,
        clock,
    );
    let mut out = Replay::default();
    pipeline
        .run_due(to, |r| {
            out.windows += 1;
            out.sessions += r.sessions;
            out.drilldowns += r.drilldowns;
            out.findings.extend(r.new_findings.iter().cloned());
            on_window(r);
        })
        .await?;
    Ok(out)
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
