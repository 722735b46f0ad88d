//! Windows are committed in their own transactions and incidents evaluated
//! in a later one. A crash between the two must not lose an alert: the next
//! evaluation, by a fresh process, decides exactly what the lost one would
//! have, because everything it decides on is stored.

use crate::daemon::{Recorder, settings};
use crate::support::*;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::clock::{Clock, FakeClock};
use costwatch::daemon::Daemon;
use costwatch::incidents::Incident;
use costwatch::notify::outbox::Channel;
use costwatch::notify::{Alert, AlertKind, AlertStatus};
use costwatch::pipeline::{Pipeline, Schedule};
use costwatch::source::reference::ReferenceSource;
use costwatch::store::{SqlStore, Store};
use costwatch_sim::SimServer;
use costwatch_sim::scenario::{ScenarioParams, generate};
use std::sync::Arc;
use tempfile::TempDir;

fn schedule(start: DateTime<Utc>) -> Schedule {
    quarter_hours(start)
}

/// A fresh process: a new connection to the state and a new daemon.
async fn process(
    sim: &SimServer,
    url: &str,
    start: DateTime<Utc>,
    clock: &FakeClock,
) -> Daemon<ReferenceSource, SqlStore> {
    let (source, _) = gateway(sim, 50);
    let store = SqlStore::open(url).await.unwrap();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let pipeline = Pipeline::new(
        source,
        store,
        detector(),
        schedule(start),
        4,
        shared.clone(),
    );
    let channels = vec![Arc::new(Recorder::default()) as Arc<dyn Channel>];
    Daemon::new(pipeline, settings(channels), shared)
}

/// What the state says was decided: every outbox row's alert, and the
/// incidents still open with their notification state.
async fn decided(store: &SqlStore) -> (Vec<Alert>, Vec<Incident>) {
    let alerts = store
        .outbox()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.alert)
        .collect();
    (alerts, store.open_incidents().await.unwrap())
}

/// The first tick of a daemon at `at` over a day and nine hours of windows
/// (a catch-up: one summary), after a process that committed the first
/// `crashed_after` windows and died before evaluating them; `None` is the
/// run without a crash.
async fn first_tick(
    sim: &SimServer,
    start: DateTime<Utc>,
    at: DateTime<Utc>,
    crashed_after: Option<usize>,
) -> (Vec<Alert>, Vec<Incident>) {
    let dir = TempDir::new().unwrap();
    let url = sqlite_url(&dir);
    let clock = FakeClock::new(at);
    if let Some(k) = crashed_after {
        // What a tick does before it evaluates: commit windows, here `k`.
        let (source, _) = gateway(sim, 50);
        let store = SqlStore::open(&url).await.unwrap();
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let p = Pipeline::new(source, store, detector(), schedule(start), 4, shared);
        assert_eq!(
            p.run_due_bounded(at, k, None, |_| {}).await.unwrap().len(),
            k
        );
    }
    let restarted = process(sim, &url, start, &clock).await;
    restarted.tick().await.unwrap();
    decided(restarted.store()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_crash_between_committing_windows_and_evaluating_them_changes_the_alerts() {
    let params = ScenarioParams {
        days: 2,
        sessions_per_day: 1200,
        ..ScenarioParams::default()
    };
    let start = params.start;
    let sim = start_sim(generate(&params)).await;
    // 09:02 on day 2: 132 windows are due.
    let at = start + ChronoDuration::hours(24 + 9) + ChronoDuration::minutes(2);
    let (alerts, incidents) = first_tick(&sim, start, at, None).await;
    assert_eq!(alerts.len(), 1, "one catch-up summary: {alerts:#?}");
    assert_eq!(alerts[0].kind, AlertKind::CatchUpSummary);
    assert!(
        alerts[0].title.contains("132 windows"),
        "{}",
        alerts[0].title
    );
    let titles = |a: &[Alert]| -> Vec<String> { a.iter().map(|a| a.title.clone()).collect() };
    for crash in [132, 131, 100, 16, 1] {
        let (a, i) = first_tick(&sim, start, at, Some(crash)).await;
        assert_eq!(titles(&a), titles(&alerts), "crash after {crash} windows");
        assert_eq!(a, alerts, "crash after {crash} windows: the same alerts");
        assert_eq!(
            i, incidents,
            "crash after {crash} windows: the same incidents"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_a_failed_read_and_its_evaluation_still_tells_of_the_outage() {
    let params = ScenarioParams {
        days: 1,
        sessions_per_day: 600,
        ..ScenarioParams::default()
    };
    let start = params.start;
    let sim = start_sim(generate(&params)).await;
    let dir = TempDir::new().unwrap();
    let url = sqlite_url(&dir);
    let clock = FakeClock::new(start + ChronoDuration::minutes(17));
    let first = process(&sim, &url, start, &clock).await;
    first.tick().await.unwrap();
    // A tick fails to read the gateway and records it; the process dies
    // before the evaluation that would have fired the outage alert.
    first
        .store()
        .source_failed("main", "gateway answered 503", clock.now())
        .await
        .unwrap();
    // The gateway answers again by the time a new process ticks.
    clock.advance(ChronoDuration::minutes(15));
    let restarted = process(&sim, &url, start, &clock).await;
    restarted.tick().await.unwrap();
    let told: Vec<(AlertKind, AlertStatus)> = restarted
        .store()
        .outbox()
        .await
        .unwrap()
        .iter()
        .map(|o| (o.alert.kind, o.alert.status))
        .filter(|(k, _)| *k == AlertKind::SourceUnhealthy)
        .collect();
    assert_eq!(told, [(AlertKind::SourceUnhealthy, AlertStatus::Resolved)]);
}
