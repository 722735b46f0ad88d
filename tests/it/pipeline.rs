//! The window contract: a window is done only when all its pages were read
//! and its findings stored; failures keep it due; restarts resume from the
//! watermark; nothing is reported twice.

use crate::support::{
    clock, detector, gateway, replay_15m, seed_dataset, sqlite_url, start_sim, ts, unique_keys,
};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::detect::{Detector, Finding, Kind};
use costwatch::pipeline::{Pipeline, PipelineError, Schedule, WindowReport};
use costwatch::source::reference::ReferenceSource;
use costwatch::source::{
    ModelPrice, ReadStats, RequestRecord, SessionRecord, Source, SourceError, Window,
};
use costwatch::store::{SqlStore, Store, WindowStore};
use costwatch_sim::scenario::catalogue;
use costwatch_sim::{
    Dataset, Fault, FaultHandle, FaultKind, FaultPath, ScenarioParams, SimRequest, SimSession,
    Truth, generate,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tempfile::TempDir;

const JOB: &str = "main";
const HOUR: Duration = Duration::from_secs(3600);

/// A pipeline over hourly windows from `from`, read as soon as they end.
fn pipeline<S: Source + Clone + 'static>(
    source: S,
    store: SqlStore,
    from: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Pipeline<S, SqlStore> {
    pipeline_with(source, store, detector(), from, now)
}

/// [`pipeline`] with the detector `det`.
fn pipeline_with<S: Source + Clone + 'static>(
    source: S,
    store: SqlStore,
    det: Detector,
    from: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Pipeline<S, SqlStore> {
    let schedule = Schedule {
        job: JOB.to_owned(),
        windows: costwatch::config::WindowConfig {
            size: HOUR,
            settle_lag: Duration::ZERO,
            start: Some(from),
            max_backfill: Duration::ZERO,
        },
    };
    Pipeline::new(source, store, det, schedule, 4, clock(now))
}

/// Two days of generated traffic, small enough to replay in well under a second.
fn two_days() -> Dataset {
    generate(&ScenarioParams {
        days: 2,
        sessions_per_day: 600,
        ..Default::default()
    })
}

/// The findings of an uninterrupted run over `[from, to)` with fresh state.
async fn clean_run(dataset: Dataset, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Finding> {
    let sim = start_sim(dataset).await;
    let (source, _) = gateway(&sim, 10);
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let p = pipeline(source, store, from, to);
    let reports = p.run_due(to, |_| {}).await.unwrap();
    assert_eq!(
        reports.len() as i64,
        (to - from).num_hours(),
        "every window processed"
    );
    let stored = p.store().findings(from, to).await.unwrap();
    let reported: Vec<Finding> = reports
        .iter()
        .flat_map(|r| r.new_findings.iter().cloned())
        .collect();
    assert_eq!(unique_keys(&stored), unique_keys(&reported));
    stored
}

/// The findings by `(kind, session_id)`, to compare figures as well as ids.
fn by_key(findings: &[Finding]) -> BTreeMap<(Kind, String), Finding> {
    findings
        .iter()
        .map(|f| ((f.kind, f.session_id.clone()), f.clone()))
        .collect()
}

/// Findings of windows starting in `[from, to)`.
fn in_range(findings: &[Finding], from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Finding> {
    findings
        .iter()
        .filter(|f| from <= f.window.start && f.window.start < to)
        .cloned()
        .collect()
}

/// The gateway client, except that once the read of the window starting at
/// `window_start` has delivered `after_rows` sessions, `fault` is set as a
/// persistent fault on the simulator (once): the rest of that window's pages
/// and everything after are damaged until the test clears it.
#[derive(Clone)]
struct BreaksDuringWindow {
    inner: ReferenceSource,
    faults: FaultHandle,
    window_start: DateTime<Utc>,
    after_rows: usize,
    fault: Fault,
    fired: Arc<AtomicBool>,
}

impl Source for BreaksDuringWindow {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        self.inner.models().await
    }

    async fn sessions<F>(&self, window: Window, mut sink: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        let armed = window.start == self.window_start && !self.fired.load(Ordering::SeqCst);
        let mut seen = 0;
        self.inner
            .sessions(window, |s| {
                sink(s);
                seen += 1;
                if armed && seen == self.after_rows {
                    self.fired.store(true, Ordering::SeqCst);
                    self.faults.set_persistent(Some(self.fault.clone()));
                }
            })
            .await
    }

    async fn session_requests(&self, session_id: &str) -> Result<Vec<RequestRecord>, SourceError> {
        self.inner.session_requests(session_id).await
    }
}

/// A damaged second page of the third window fails the run and stores
/// nothing of that window; once the gateway is healthy again the next run
/// picks up at that window and ends where a clean run ends.
async fn damaged_page_in_third_window(fault: FaultKind, error_mentions: &str) {
    let dataset = two_days();
    let (from, to) = (ts("2026-11-03T12:00:00Z"), ts("2026-11-03T17:00:00Z"));
    let third = Window {
        start: from + ChronoDuration::hours(2),
        end: from + ChronoDuration::hours(3),
    };
    let clean = clean_run(dataset.clone(), from, to).await;
    assert!(
        !in_range(&clean, third.start, third.end).is_empty(),
        "the third window has findings to lose"
    );
    assert!(!in_range(&clean, from, third.start).is_empty());
    assert!(
        dataset.sessions_in(third.start, third.end, &[], None).len() > 10,
        "the third window has a second page"
    );

    let sim = start_sim(dataset).await;
    let (gateway, _) = gateway(&sim, 10);
    let source = BreaksDuringWindow {
        inner: gateway,
        faults: sim.faults(),
        window_start: third.start,
        after_rows: 10,
        fault: Fault::on(FaultPath::Sessions, fault),
        fired: Arc::default(),
    };
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let p = pipeline(source, store, from, to);

    let mut seen: Vec<WindowReport> = Vec::new();
    let err = p.run_due(to, |r| seen.push(r.clone())).await.unwrap_err();
    match &err {
        PipelineError::Source {
            window,
            error: source,
        } => {
            assert_eq!(*window, third);
            assert!(source.is_retryable(), "{source:?}");
        }
        other => panic!("expected a source error, got {other:?}"),
    }
    assert_eq!(seen.len(), 2, "windows 1 and 2 were reported");

    let store = p.store();
    assert_eq!(store.watermark(JOB).await.unwrap(), Some(third.start));
    let windows = store.windows(JOB).await.unwrap();
    assert_eq!(windows.len(), 3, "{windows:#?}");
    for w in &windows[..2] {
        assert_eq!((w.status.as_str(), w.attempts), ("done", 1), "{w:#?}");
        assert_eq!(w.last_error, None);
    }
    let failed = &windows[2];
    assert_eq!(failed.window, third);
    assert_eq!((failed.status.as_str(), failed.attempts), ("failed", 1));
    let message = failed.last_error.clone().unwrap_or_default();
    assert!(message.contains("sessions page 2"), "{message}");
    assert!(message.contains(error_mentions), "{message}");
    assert!(
        store.findings(third.start, to).await.unwrap().is_empty(),
        "nothing of the failed window (or later) is stored"
    );
    assert_eq!(
        unique_keys(&store.findings(from, to).await.unwrap()),
        unique_keys(&in_range(&clean, from, third.start)),
    );

    // The outage is over: the next run starts at the failed window.
    sim.faults().clear();
    let reports = p.run_due(to, |_| {}).await.unwrap();
    let starts: Vec<DateTime<Utc>> = reports.iter().map(|r| r.window.start).collect();
    assert_eq!(
        starts,
        (2..5)
            .map(|h| from + ChronoDuration::hours(h))
            .collect::<Vec<_>>()
    );
    let windows = store.windows(JOB).await.unwrap();
    assert_eq!(windows.len(), 5);
    assert!(windows.iter().all(|w| w.status == "done"), "{windows:#?}");
    assert_eq!(
        windows[2].attempts, 2,
        "one failed attempt, one that worked"
    );
    assert_eq!(store.watermark(JOB).await.unwrap(), Some(to));
    let finals = store.findings(from, to).await.unwrap();
    assert_eq!(unique_keys(&finals), unique_keys(&clean));
    assert_eq!(by_key(&finals), by_key(&clean), "the same figures as well");
    let reported: Vec<Finding> = seen
        .iter()
        .chain(&reports)
        .flat_map(|r| r.new_findings.iter().cloned())
        .collect();
    assert_eq!(unique_keys(&reported), unique_keys(&clean));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_page_keeps_its_window_due() {
    damaged_page_in_third_window(FaultKind::Truncated, "sessions page 2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_without_cost_keeps_its_window_due() {
    damaged_page_in_third_window(
        FaultKind::DropField {
            field: "cost_usd".into(),
        },
        "cost_usd",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_tokens_above_input_keep_their_window_due() {
    // Taken as it was, the row would be capped and read as fully cached,
    // hiding a no_cache finding; failing the page keeps the window due.
    damaged_page_in_third_window(
        FaultKind::SetField {
            row: 7,
            field: "cached_tokens".into(),
            value: 4_000_000_000u64.into(),
        },
        "sessions page 2: data[7].cached_tokens: 4000000000 is above input_tokens ",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_from_the_watermark() {
    let dataset = two_days();
    let from = ts("2026-11-02T00:00:00Z");
    let middle = ts("2026-11-03T00:00:00Z");
    let to = ts("2026-11-04T00:00:00Z");
    let clean = clean_run(dataset.clone(), from, to).await;
    assert!(!in_range(&clean, from, middle).is_empty());
    assert!(!in_range(&clean, middle, to).is_empty());

    let sim = start_sim(dataset).await;
    let dir = TempDir::new().unwrap();
    let url = sqlite_url(&dir);

    // The first process handles the first day, then stops.
    let first = {
        let (source, _) = gateway(&sim, 10);
        let p = pipeline(source, SqlStore::open(&url).await.unwrap(), from, middle);
        let reports = p.run_due(middle, |_| {}).await.unwrap();
        p.store().close().await;
        reports
    };
    assert_eq!(first.len(), 24);

    // A new process opens the same file and carries on.
    let store = SqlStore::open(&url).await.unwrap();
    assert_eq!(store.watermark(JOB).await.unwrap(), Some(middle));
    let (source, _) = gateway(&sim, 10);
    let p = pipeline(source, store, from, to);
    let second = p.run_due(to, |_| {}).await.unwrap();
    assert_eq!(second.len(), 24);
    assert_eq!(second[0].window.start, middle);

    let store = p.store();
    let windows = store.windows(JOB).await.unwrap();
    assert_eq!(windows.len(), 48);
    for (i, w) in windows.iter().enumerate() {
        let start = from + ChronoDuration::hours(i as i64);
        assert_eq!(
            w.window,
            Window {
                start,
                end: start + ChronoDuration::hours(1)
            }
        );
        assert_eq!((w.status.as_str(), w.attempts), ("done", 1), "{w:#?}");
    }
    let reports: Vec<&WindowReport> = first.iter().chain(&second).collect();
    let sessions: Vec<u64> = windows.iter().map(|w| w.sessions).collect();
    assert_eq!(
        sessions,
        reports.iter().map(|r| r.sessions).collect::<Vec<_>>()
    );

    // Stored once each, reported once each, and the same as without the restart.
    let stored = store.findings(from, to).await.unwrap();
    let clean_keys = unique_keys(&clean);
    assert_eq!(unique_keys(&stored), clean_keys);
    let reported: Vec<Finding> = reports
        .iter()
        .flat_map(|r| r.new_findings.iter().cloned())
        .collect();
    assert_eq!(unique_keys(&reported), clean_keys);
    // Baselines survived the restart: the figures match too.
    assert_eq!(by_key(&stored), by_key(&clean));
}

/// A hand-made request of `session`.
fn call(
    session: &str,
    n: usize,
    at: DateTime<Utc>,
    (input, cached): (u64, u64),
    error: bool,
) -> SimRequest {
    let luna = &catalogue()[0];
    let output = if error { 0 } else { 120 };
    SimRequest {
        request_id: format!("req_{session}_{n:03}"),
        session_id: session.to_owned(),
        created_at: at,
        model: luna.id.clone(),
        status: if error { "error" } else { "success" }.to_owned(),
        http_status: if error { 429 } else { 200 },
        error_type: error.then(|| "RateLimitError".to_owned()),
        input_tokens: input,
        cached_tokens: cached,
        cache_write_tokens: 0,
        output_tokens: output,
        cost_usd: luna.cost(input, cached, output),
        latency_ms: 800,
        labels: checkout_labels(),
    }
}

fn checkout_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("feature".to_owned(), "checkout".to_owned()),
        ("env".to_owned(), "prod".to_owned()),
    ])
}

fn session(id: &str, requests: Vec<SimRequest>) -> SimSession {
    SimSession {
        session_id: id.to_owned(),
        labels: checkout_labels(),
        requests,
        fixed_row: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_growing_across_a_boundary_is_reported_once() {
    let (from, boundary, to) = (
        ts("2026-10-12T10:00:00Z"),
        ts("2026-10-12T11:00:00Z"),
        ts("2026-10-12T12:00:00Z"),
    );
    let looping = "checkout-0000000100p5";
    // Ten identical rate-limited calls before the boundary, six more after.
    let mut calls: Vec<SimRequest> = (0..10)
        .map(|i| {
            let at = boundary - ChronoDuration::minutes(10) + ChronoDuration::seconds(20 * i);
            call(looping, i as usize, at, (2_000, 1_800), true)
        })
        .collect();
    calls.extend((0..6).map(|i| {
        let at = boundary + ChronoDuration::minutes(1) + ChronoDuration::seconds(20 * i);
        call(looping, 10 + i as usize, at, (2_000, 1_800), i < 5)
    }));
    let mut sessions = vec![session(looping, calls)];
    // Healthy checkouts in both windows: three calls with growing prompts,
    // each reading the previous prompt from the cache.
    for (k, start) in [(1, from), (2, from), (3, boundary), (4, boundary)] {
        let id = format!("checkout-00000000000{k}");
        let t0 = start + ChronoDuration::minutes(5 * k);
        let calls = (0..3)
            .map(|i| {
                let input = 1_500 + 400 * i as u64;
                let cached = if i == 0 { 0 } else { input - 400 };
                let at = t0 + ChronoDuration::seconds(30 * i as i64);
                call(&id, i, at, (input, cached), false)
            })
            .collect();
        sessions.push(session(&id, calls));
    }
    let sim = start_sim(Dataset::new(catalogue(), sessions, Truth::default())).await;
    let (source, _) = gateway(&sim, 10);
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let p = pipeline(source, store, from, to);

    // At 11:00 the gateway has seen the first ten calls.
    sim.set_now(Some(boundary));
    let first = p.run_due(boundary, |_| {}).await.unwrap();
    assert_eq!(first.len(), 1);
    let found: Vec<&Finding> = first[0].new_findings.iter().collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(
        (found[0].kind, found[0].session_id.as_str()),
        (Kind::RetryLoop, looping)
    );
    assert_eq!(found[0].evidence["requests"], 10);

    // At 12:00 the same session is larger and still looping.
    sim.set_now(Some(to));
    let second = p.run_due(to, |_| {}).await.unwrap();
    assert_eq!(second.len(), 1);
    assert!(
        second[0].new_findings.is_empty(),
        "reported again: {:#?}",
        second[0].new_findings
    );
    assert_eq!(second[0].seen_again, 1, "the later window saw it again");

    let stored = p.store().findings(from, to).await.unwrap();
    assert_eq!(stored.len(), 1, "{stored:#?}");
    let f = &stored[0];
    assert_eq!((f.kind, f.session_id.as_str()), (Kind::RetryLoop, looping));
    assert_eq!(
        f.window.start, from,
        "kept under the window it was first found in"
    );
    assert_eq!(
        f.evidence["requests"], 16,
        "the figures are the latest: {}",
        f.evidence
    );
    // The eight minutes between the two bursts outlast `max_run_gap_seconds`:
    // the longest run is the first burst's ten calls.
    assert_eq!(f.evidence["longest_identical_run"], 10);
    assert_eq!(f.evidence["error_streak"], 15);
    let windows = p.store().windows(JOB).await.unwrap();
    assert_eq!(
        windows.iter().map(|w| w.findings).collect::<Vec<_>>(),
        [1, 0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_again_at_the_same_time_does_nothing() {
    let sim = start_sim(seed_dataset()).await;
    let (source, _) = gateway(&sim, 10);
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let (from, now) = (ts("2026-10-11T10:00:00Z"), ts("2026-10-11T13:00:00Z"));
    let p = pipeline(source, store, from, now);

    let first = p.run_due(now, |_| {}).await.unwrap();
    assert_eq!(first.len(), 3);
    let found: usize = first.iter().map(|r| r.new_findings.len()).sum();
    assert_eq!(found, 3);
    let windows = p.store().windows(JOB).await.unwrap();
    let findings = p.store().findings(from, now).await.unwrap();
    assert_eq!(unique_keys(&findings).len(), 3);
    let hits = sim.stats();

    let mut called = 0;
    let again = p.run_due(now, |_| called += 1).await.unwrap();
    assert!(again.is_empty());
    assert_eq!(called, 0);
    assert_eq!(p.store().windows(JOB).await.unwrap(), windows);
    assert_eq!(p.store().findings(from, now).await.unwrap(), findings);
    assert_eq!(p.store().watermark(JOB).await.unwrap(), Some(now));
    assert_eq!(sim.stats(), hits, "the gateway was not called");

    // An earlier time (a clock step back) does nothing either.
    let earlier = p
        .run_due(now - ChronoDuration::minutes(30), |_| {})
        .await
        .unwrap();
    assert!(earlier.is_empty());
    assert_eq!(p.store().windows(JOB).await.unwrap().len(), 3);
}

/// A replay keeps the baselines each window commits, the request rows it
/// drilled into, and when each model was last seen, for the next windows
/// rather than reading them again: the findings, their order, the stored
/// baselines and models are those of a pipeline that reads them every
/// window. The gateway also lists a model ten times cheaper than any in
/// traffic, which the state has seen six days before the run (another
/// job's window): for the run's first day it is the cheapest model in use,
/// and "premium" is measured against it.
#[tokio::test]
async fn carried_baselines_find_and_store_what_reading_them_back_does() {
    let mut dataset = two_days();
    let mut pico = catalogue()[0].clone();
    pico.id = "gpt-6-pico".to_owned();
    pico.input_usd_per_mtok /= 10.0;
    pico.output_usd_per_mtok /= 10.0;
    dataset.models.push(pico);
    let every_model: std::collections::BTreeSet<String> =
        dataset.models.iter().map(|m| m.id.clone()).collect();
    let from = ts("2026-11-02T00:00:00Z");
    let to = from + ChronoDuration::days(2);
    let sim = start_sim(dataset).await;
    let earlier = Window {
        start: from - ChronoDuration::days(6) - ChronoDuration::hours(1),
        end: from - ChronoDuration::days(6),
    };
    let mut runs = Vec::new();
    for carrying in [false, true] {
        let (source, _) = gateway(&sim, 10);
        let dir = TempDir::new().unwrap();
        let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
        store
            .init_watermark("earlier", earlier.start, from)
            .await
            .unwrap();
        store
            .commit_window(
                "earlier",
                earlier,
                costwatch::store::WindowCommit {
                    findings: &[],
                    baselines: &std::collections::HashMap::new(),
                    models_seen: &every_model,
                    caching: costwatch::detect::CachingEvidence::none(),
                    held: None,
                    sessions: 0,
                    pages: 0,
                    now: from,
                },
            )
            .await
            .unwrap();
        let p = pipeline(source, store, from, to);
        let p = if carrying { p.carrying() } else { p };
        let asked = sim.stats().hits("/v1/requests");
        let reports = p.run_due(to, |_| {}).await.unwrap();
        let drilled = sim.stats().hits("/v1/requests") - asked;
        assert_eq!(reports.len(), 48);
        let findings: Vec<Finding> = reports
            .iter()
            .flat_map(|r| r.new_findings.iter().cloned())
            .collect();
        let mut groups: Vec<String> = findings.iter().map(|f| f.group.clone()).collect();
        groups.sort();
        groups.dedup();
        let baselines = p.store().load_baselines(&groups).await.unwrap();
        let mut models = p.store().models_last_seen().await.unwrap();
        models.sort();
        assert_eq!(models.len(), every_model.len(), "{models:?}");
        runs.push((findings, groups, baselines, drilled, dir, models));
    }
    let (carried, read) = (&runs[1], &runs[0]);
    // Request rows were read again only where a session changed.
    assert!(
        carried.3 < read.3,
        "request pages: {} carrying, {} reading",
        carried.3,
        read.3
    );
    assert!(
        !read.0.is_empty() && read.1.len() > 1,
        "findings in several groups"
    );
    assert_eq!(carried.0, read.0);
    assert_eq!(carried.2.len(), read.1.len());
    assert_eq!(carried.2, read.2);
    assert_eq!(carried.5, read.5);
}

/// Four peers that cache, from `from` five minutes apart: three calls
/// each, every call reading the prompt before it.
fn caching_peers(from: DateTime<Utc>) -> impl Iterator<Item = SimSession> {
    (0..4).map(move |k| {
        let id = format!("caching-{k}");
        let t0 = from + ChronoDuration::minutes(5 * k);
        let calls = (0..3)
            .map(|i| {
                let input = 1_500 + 400 * i as u64;
                let cached = if i == 0 { 0 } else { input - 400 };
                call(
                    &id,
                    i,
                    t0 + ChronoDuration::seconds(30 * i as i64),
                    (input, cached),
                    false,
                )
            })
            .collect();
        session(&id, calls)
    })
}

/// Findings and request-row reads of one hourly window over the gateway:
/// among four sessions that cache, two that never cached (four calls each),
/// one of two calls whose second missed, and one whose single missed read
/// came long before the window's end.
async fn broken_cache_window() -> (Vec<(Kind, String)>, u64) {
    let (from, to) = (ts("2026-10-12T10:00:00Z"), ts("2026-10-12T11:00:00Z"));
    let uncached = |id: &str, start: DateTime<Utc>, sizes: &[u64]| {
        let calls = sizes
            .iter()
            .enumerate()
            .map(|(i, &input)| {
                let at = start + ChronoDuration::seconds(20 * i as i64);
                call(id, i, at, (input, 0), false)
            })
            .collect();
        session(id, calls)
    };
    let four = [1_300, 1_350, 1_400, 1_450];
    let caching = caching_peers(from + ChronoDuration::minutes(30));
    let mut sessions = vec![
        uncached("broken-1", from + ChronoDuration::minutes(5), &four),
        uncached("broken-2", from + ChronoDuration::minutes(10), &four),
        uncached(
            "two-calls",
            from + ChronoDuration::minutes(20),
            &[1_205, 1_278],
        ),
        uncached(
            "one-miss",
            from + ChronoDuration::minutes(25),
            &[900, 1_100, 1_200],
        ),
    ];
    sessions.extend(caching);
    let sim = start_sim(Dataset::new(catalogue(), sessions, Truth::default())).await;
    sim.set_now(Some(to));
    let (source, _) = gateway(&sim, 10);
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let p = pipeline_with(source, store, detector(), from, to);
    let reports = p.run_due(to, |_| {}).await.unwrap();
    assert_eq!(reports.len(), 1);
    let mut found: Vec<(Kind, String)> = p
        .store()
        .findings(from, to)
        .await
        .unwrap()
        .into_iter()
        .map(|f| (f.kind, f.session_id))
        .collect();
    found.sort();
    assert_eq!(
        reports[0].drilldowns as u64,
        sim.stats().hits("/v1/requests")
    );
    (found, sim.stats().hits("/v1/requests"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_missed_read_is_never_a_finding_even_beside_a_broken_cache() {
    let nc = |ids: &[&str]| -> Vec<(Kind, String)> {
        ids.iter()
            .map(|id| (Kind::NoCache, id.to_string()))
            .collect()
    };
    // The two sessions that never cached are found, each with its causes;
    // beside them, the session of two calls is not even read, and the one
    // whose only cacheable call missed is read and left alone.
    let (found, reads) = broken_cache_window().await;
    assert_eq!(found, nc(&["broken-1", "broken-2"]));
    assert_eq!(reads, 3, "broken-1, broken-2 and one-miss");
}

/// Two hourly windows over the gateway: four sessions that cache and
/// `still-going`, whose three calls (two missed reads) end two minutes
/// before the first window's end, then `later` calls of it in the second
/// window. Each window is read by a pipeline of its own, as the daemon's
/// ticks do, or both by one carrying run, as a replay does. Returns the
/// no_cache findings stored and how many findings the store held after
/// each window.
async fn still_going_across(later: &[(u64, u64)], carrying: bool) -> (Vec<Finding>, [usize; 2]) {
    let (from, boundary, to) = (
        ts("2026-10-12T10:00:00Z"),
        ts("2026-10-12T11:00:00Z"),
        ts("2026-10-12T12:00:00Z"),
    );
    let id = "still-going";
    let start = boundary - ChronoDuration::seconds(160);
    let mut calls: Vec<SimRequest> = [1_300, 1_350, 1_400]
        .iter()
        .enumerate()
        .map(|(i, &input)| {
            call(
                id,
                i,
                start + ChronoDuration::seconds(20 * i as i64),
                (input, 0),
                false,
            )
        })
        .collect();
    for (k, &tokens) in later.iter().enumerate() {
        let at = boundary + ChronoDuration::minutes(2 + k as i64);
        calls.push(call(id, 3 + k, at, tokens, false));
    }
    let mut sessions = vec![session(id, calls)];
    sessions.extend(caching_peers(from + ChronoDuration::minutes(10)));
    let sim = start_sim(Dataset::new(catalogue(), sessions, Truth::default())).await;
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let mut held = [0; 2];
    if carrying {
        // A replay's gateway has every call of both windows already.
        let (source, _) = gateway(&sim, 10);
        let p = pipeline(source, store.clone(), from, to).carrying();
        let reports = p.run_due(to, |_| {}).await.unwrap();
        assert_eq!(reports.len(), 2);
        held[1] = store.held_findings(JOB).await.unwrap().len();
    } else {
        for (k, now) in [boundary, to].into_iter().enumerate() {
            // Live: the gateway shows only what happened by now.
            sim.set_now(Some(now));
            let (source, _) = gateway(&sim, 10);
            let p = pipeline(source, store.clone(), from, now);
            let reports = p.run_due(now, |_| {}).await.unwrap();
            assert_eq!(reports.len(), 1);
            held[k] = store.held_findings(JOB).await.unwrap().len();
            assert_eq!(
                reports[0].held, held[k],
                "the report says what the store holds"
            );
        }
    }
    let found = store
        .findings(from, to)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.kind == Kind::NoCache)
        .collect();
    (found, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_still_going_stands_once_it_has_ended() {
    let window_2 = Window {
        start: ts("2026-10-12T11:00:00Z"),
        end: ts("2026-10-12T12:00:00Z"),
    };
    // Ended right after the first window: held there (stored with the
    // window), and standing in the second, which shows no call of it.
    let (found, held) = still_going_across(&[], false).await;
    assert_eq!(held, [1, 0]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].session_id, "still-going");
    assert_eq!(found[0].window, window_2);
    assert_eq!(found[0].evidence["judged_once_ended"], true);
    // A replay carries it from window to window: the same finding.
    let (replayed, held) = still_going_across(&[], true).await;
    assert_eq!(held[1], 0);
    assert_eq!(replayed, found);
    // Caching from its fourth call on, in the second window: it was
    // caching late, and is not flagged.
    let (found, held) = still_going_across(&[(1_300, 1_024)], false).await;
    assert_eq!(held, [1, 0]);
    assert!(found.is_empty(), "{found:?}");
    let (found, _) = still_going_across(&[(1_300, 1_024)], true).await;
    assert!(found.is_empty(), "{found:?}");
}

/// A replay whose state is thrown away keeps it in memory; one given a
/// database keeps it there. Both report the same findings, figure for
/// figure and in the same order, on both scenario families (sessions
/// crossing windows, findings held until their session ends, baselines
/// carried from window to window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_in_memory_finds_what_a_replay_into_a_database_finds() {
    let params = ScenarioParams {
        days: 2,
        sessions_per_day: 1500,
        ..Default::default()
    };
    let families = [
        ("base", generate(&params)),
        (
            "adversarial",
            costwatch_sim::scenario::adversarial::generate(&params),
        ),
    ];
    let (from, to) = (params.start, params.start + ChronoDuration::days(2));
    for (family, dataset) in families {
        let sim = start_sim(dataset).await;
        let dir = TempDir::new().unwrap();
        let mut runs = Vec::new();
        for url in ["sqlite::memory:".to_owned(), sqlite_url(&dir)] {
            let (source, _) = gateway(&sim, 50);
            let r = replay_15m(source, &url, from, to).await;
            assert_eq!(r.windows, 192, "{family}: every window of {url}");
            runs.push(serde_json::to_value(&r.findings).unwrap());
        }
        let found = runs[0].as_array().map_or(0, Vec::len);
        assert!(found > 20, "{family}: a real amount of findings: {found}");
        assert_eq!(runs[0], runs[1], "{family}: the same findings");
        // The database really was written: its findings are the reported ones.
        let stored = SqlStore::open(&sqlite_url(&dir))
            .await
            .unwrap()
            .findings(from, to)
            .await
            .unwrap();
        assert_eq!(stored.len(), found, "{family}: stored as reported");
    }
}
