//! What reaches a person: an incident below the alert floor is recorded but
//! not sent, and an incident that fires again soon after it resolved
//! continues its episode instead of alerting as a new one. Through the
//! state database (SQLite and PostgreSQL) and the daemon's evaluation.

use crate::daemon::policy;
use crate::pg::PgCluster;
use crate::support::*;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::alerting::evaluate::plan;
use costwatch::config::Severity;
use costwatch::detect::{Finding, Kind};
use costwatch::incidents::AlertPolicy;
use costwatch::notify::AlertStatus;
use costwatch::source::{Labels, Window};
use costwatch::store::{SqlStore, Store, WindowCommit, WindowStore};
use std::collections::{BTreeSet, HashMap};
use tempfile::TempDir;

const JOB: &str = "main";

fn hour(h: i64) -> DateTime<Utc> {
    ts("2026-10-11T00:00:00Z") + ChronoDuration::hours(h)
}

/// A retry_loop finding in `feature=checkout` for the window starting at
/// hour `h`.
pub(crate) fn finding(h: i64, session: &str, impact_usd: f64) -> Finding {
    let labels = Labels::from([("feature".to_owned(), "checkout".to_owned())]);
    Finding {
        kind: Kind::RetryLoop,
        session_id: session.to_owned(),
        window: Window {
            start: hour(h),
            end: hour(h + 1),
        },
        severity: Severity::Warning,
        rule: "retries".to_owned(),
        group: "feature=checkout".to_owned(),
        labels,
        cost_usd: impact_usd * 2.0,
        impact_usd,
        evidence: serde_json::json!({}),
        explanation: "calls repeated".to_owned(),
    }
}

/// Hourly windows from hour 0, each committed with its findings and then
/// evaluated as the daemon does; returns `(hour, status, sequence)` of every
/// alert the evaluations queued.
async fn run(
    store: &SqlStore,
    p: &AlertPolicy,
    hours: i64,
    findings: &[Finding],
) -> Vec<(i64, AlertStatus, u32)> {
    store.init_watermark(JOB, hour(0), hour(0)).await.unwrap();
    let baselines = HashMap::new();
    let models = BTreeSet::new();
    let mut out = Vec::new();
    for h in 0..hours {
        let window = Window {
            start: hour(h),
            end: hour(h + 1),
        };
        let of_window: Vec<Finding> = findings
            .iter()
            .filter(|f| f.window == window)
            .cloned()
            .collect();
        let commit = WindowCommit {
            findings: &of_window,
            baselines: &baselines,
            models_seen: &models,
            caching: costwatch::detect::CachingEvidence::none(),
            held: None,
            sessions: 10,
            pages: 1,
            now: window.end,
        };
        store.commit_window(JOB, window, commit).await.unwrap();
        let planned = plan(store, JOB, p, window.end, true, window.end)
            .await
            .unwrap();
        planned
            .enqueue(store, &["hook".to_owned()], window.end, hour(h + 48))
            .await
            .unwrap();
        out.extend(planned.alerts.iter().map(|a| (h, a.status, a.sequence)));
    }
    out
}

/// A loop at hours 1 and 5 (resolved at hour 4 in between, after two quiet
/// hours), then one at hour 20 (long after).
fn flapping() -> Vec<Finding> {
    vec![
        finding(1, "s-1", 0.002),
        finding(5, "s-2", 0.002),
        finding(20, "s-3", 0.002),
    ]
}

async fn a_re_fire_soon_after_the_resolution_is_the_same_episode(url: &str) {
    let store = SqlStore::open(url).await.unwrap();
    let alerts = run(&store, &policy(), 26, &flapping()).await;
    // Fired at hour 1 (window end 2), resolved after two quiet hours; the
    // finding at hour 5 is within reopen_within (6 h) of that resolution:
    // the same episode (its start, its sessions), and, since the
    // resolution was the last word people had and the waste went on, they
    // are told it fires again, then that it ended. Hour 20 is past the
    // reopening time: a new episode, a new firing alert.
    assert_eq!(
        alerts,
        vec![
            (1, AlertStatus::Firing, 1),
            (3, AlertStatus::Resolved, 2),
            (5, AlertStatus::Firing, 3),
            (7, AlertStatus::Resolved, 4),
            (20, AlertStatus::Firing, 5),
            (22, AlertStatus::Resolved, 6),
        ]
    );
    let of = |sequence: u32| {
        let store = &store;
        async move {
            store
                .outbox()
                .await
                .unwrap()
                .into_iter()
                .map(|o| o.alert)
                .find(|a| a.sequence == sequence)
                .unwrap()
        }
    };
    let again = of(3).await;
    assert_eq!((again.session_count, again.starts_at), (2, hour(1)));
    let new_episode = of(5).await;
    assert_eq!(
        (new_episode.session_count, new_episode.starts_at),
        (1, hour(20))
    );
}

/// The continued episode, seen in the state at hour 6: one incident, both
/// sessions, started at hour 1, told that it fires again.
async fn the_continued_episode_counts_from_its_first_start(url: &str) {
    let store = SqlStore::open(url).await.unwrap();
    run(&store, &policy(), 6, &flapping()).await;
    let open = store.open_incidents().await.unwrap();
    assert_eq!(open.len(), 1);
    let i = &open[0];
    assert_eq!((i.session_count, i.started, i.sequence), (2, hour(1), 3));
    assert!(!i.reopened);
}

#[tokio::test]
async fn reopening_can_be_switched_off() {
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    // With reopening switched off, each comeback is an episode of its own.
    let p = AlertPolicy {
        reopen_within: std::time::Duration::ZERO,
        group_wait: std::time::Duration::ZERO,
        ..policy()
    };
    let firing = run(&store, &p, 26, &flapping())
        .await
        .into_iter()
        .filter(|(_, s, _)| *s == AlertStatus::Firing)
        .count();
    assert_eq!(firing, 3);
}

#[tokio::test]
async fn a_re_fire_soon_after_the_resolution_is_the_same_episode_on_sqlite() {
    let dir = TempDir::new().unwrap();
    a_re_fire_soon_after_the_resolution_is_the_same_episode(&sqlite_url(&dir)).await;
    let dir = TempDir::new().unwrap();
    the_continued_episode_counts_from_its_first_start(&sqlite_url(&dir)).await;
}

#[tokio::test]
async fn a_re_fire_soon_after_the_resolution_is_the_same_episode_on_postgres() {
    let pg = PgCluster::start();
    a_re_fire_soon_after_the_resolution_is_the_same_episode(&pg.url()).await;
    let pg = PgCluster::start();
    the_continued_episode_counts_from_its_first_start(&pg.url()).await;
}

#[tokio::test]
async fn an_incident_below_the_floor_is_recorded_not_sent_until_it_rises() {
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    // A floor of $0.05 a day: one $0.0001 session is about $0.0024 a day.
    let p = AlertPolicy {
        min_impact_usd_per_day: 0.05,
        ..policy()
    };
    let findings = vec![
        // Resolved untold at hour 4; its reopening time is hour 10.
        finding(1, "tiny-1", 0.0001),
        // A new episode (hour 12 is past the reopening time), below the
        // floor until its second window: 3 sessions, $0.0061 in the 2
        // hours from 12:00 to 14:00 is about $0.07 a day.
        finding(12, "tiny-2", 0.0001),
        finding(13, "tiny-3", 0.0010),
        finding(13, "big-1", 0.0050),
    ];
    let alerts = run(&store, &p, 15, &findings).await;
    assert_eq!(alerts, vec![(13, AlertStatus::Firing, 1)]);
    // All four findings are on record.
    let findings = store.findings(hour(0), hour(15)).await.unwrap();
    assert_eq!(findings.len(), 4);
    let open = store.open_incidents().await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].session_count, 3);
}
