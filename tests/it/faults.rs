//! Transient gateway faults. Under 20% injected faults (500, 429, slow
//! answers, truncated JSON) a replay and the daemon find exactly what a
//! fault-free run finds; a window whose read fails is read again and
//! reported; and `costwatch run` against a gateway whose cursors cycle says
//! so (log, `/healthz`, `/metrics`, a `source_unhealthy` alert) instead of
//! paging forever while reporting healthy.

use crate::support::*;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::backtest::{self, RetriedRead, WindowRetries};
use costwatch::clock::RecordingSleeper;
use costwatch::detect::Finding;
use costwatch::source::Window;
use costwatch::store::{SqlStore, Store, WindowStore};
use costwatch_sim::scenario::{ScenarioParams, generate};
use costwatch_sim::{Dataset, Fault, FaultKind, FaultPath, RandomFaults, SimServer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tempfile::TempDir;

/// One request in five goes wrong: a 500, a 429, a slow answer or a
/// truncated body, as likely each.
fn one_in_five(seed: u64) -> RandomFaults {
    RandomFaults {
        path: FaultPath::Any,
        rate: 0.2,
        kinds: vec![
            FaultKind::ServerError { status: 500 },
            FaultKind::RateLimit {
                retry_after_secs: 0,
            },
            FaultKind::Delay { millis: 20 },
            FaultKind::Truncated,
        ],
        seed,
    }
}

/// Two days of generated traffic.
fn two_days() -> (Dataset, DateTime<Utc>, DateTime<Utc>) {
    let params = ScenarioParams {
        days: 2,
        sessions_per_day: 600,
        ..ScenarioParams::default()
    };
    let from = params.start;
    (generate(&params), from, from + ChronoDuration::days(2))
}

/// The findings keyed by kind, session and window, to compare every figure.
fn by_key(findings: &[Finding]) -> BTreeMap<(String, String, DateTime<Utc>), Finding> {
    let map: BTreeMap<_, _> = findings
        .iter()
        .map(|f| {
            let key = (
                f.kind.as_str().to_owned(),
                f.session_id.clone(),
                f.window.start,
            );
            (key, f.clone())
        })
        .collect();
    assert_eq!(map.len(), findings.len(), "a finding reported twice");
    map
}

/// Requests the simulator answered, every route.
fn requests(sim: &SimServer) -> u64 {
    sim.stats().hits.values().sum()
}

/// Replays the seed window's hour (11:00 to 12:00) from `sim`, reading a
/// failed window again like the daemon; the backoff waits it took.
async fn replay_seed_hour(
    sim: &SimServer,
) -> (
    Result<backtest::Replay, costwatch::pipeline::PipelineError>,
    RecordingSleeper,
) {
    let (source, _) = gateway(sim, 50);
    let waits = RecordingSleeper::default();
    let retries = WindowRetries::like_source(&limits()).with_sleeper(Arc::new(waits.clone()));
    let to = ts("2026-10-11T12:00:00Z");
    let replay = backtest::replay(
        source,
        detector(),
        "sqlite::memory:",
        ts("2026-10-11T11:00:00Z"),
        to,
        Duration::from_secs(3600),
        4,
        clock(to),
        &retries,
        |_| {},
    )
    .await;
    (replay, waits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_reads_a_failed_window_again_and_reports_it() {
    let sim = start_sim(seed_dataset()).await;
    // The window's first read fails: its page stays truncated through
    // every retry of the source (3 retries, 4 reads).
    for _ in 0..4 {
        sim.faults()
            .push(Fault::on(FaultPath::Sessions, FaultKind::Truncated));
    }
    let (from, to) = (ts("2026-10-11T11:00:00Z"), ts("2026-10-11T12:00:00Z"));
    let (replay, waits) = replay_seed_hour(&sim).await;
    let replay = replay.expect("the window read whole the second time");
    assert_eq!(replay.windows, 1);
    assert_eq!(replay.findings.len(), 3, "the seed window's three sessions");
    assert_eq!(replay.retried.len(), 1, "{:?}", replay.retried);
    let RetriedRead {
        window,
        reads,
        last_error,
    } = &replay.retried[0];
    assert_eq!(
        *window,
        Some(Window {
            start: from,
            end: to
        })
    );
    assert_eq!(*reads, 2);
    assert!(last_error.contains("sessions page 1"), "{last_error}");
    assert!(last_error.contains("read 4 times"), "{last_error}");
    assert_eq!(
        waits.delays(),
        [limits().retry_base],
        "one backoff before the second read"
    );
    assert_eq!(sim.faults().pending(), 0);

    // A gateway that stays broken ends the replay after the reads allowed.
    sim.faults().set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::ServerError { status: 503 },
    )));
    let (replay, waits) = replay_seed_hour(&sim).await;
    let err = replay.unwrap_err();
    assert!(err.to_string().contains("503"), "{err}");
    assert_eq!(waits.delays().len(), WindowRetries::READS as usize - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_under_twenty_percent_faults_finds_what_a_clean_one_finds() {
    let (dataset, from, to) = two_days();
    let sim = start_sim(dataset).await;
    let replay = |retries: WindowRetries| {
        let (source, _) = gateway(&sim, 20);
        async move {
            backtest::replay(
                source,
                detector(),
                "sqlite::memory:",
                from,
                to,
                Duration::from_secs(3600),
                4,
                clock(to),
                &retries,
                |_| {},
            )
            .await
        }
    };
    let clean = replay(WindowRetries::none()).await.unwrap();
    assert!(clean.retried.is_empty());
    let clean_requests = requests(&sim);
    assert!(
        clean.findings.len() > 20,
        "{} findings",
        clean.findings.len()
    );

    sim.faults().set_random(Some(one_in_five(11)));
    let retries =
        WindowRetries::like_source(&limits()).with_sleeper(Arc::new(RecordingSleeper::default()));
    let faulty = replay(retries)
        .await
        .expect("the replay rides out the faults");
    let served = sim.faults().served();
    assert!(
        served * 10 > clean_requests,
        "{served} faults in about {clean_requests} requests"
    );
    assert_eq!(faulty.windows, clean.windows);
    assert_eq!(by_key(&faulty.findings), by_key(&clean.findings));
}

/// A configuration for `costwatch backtest` and `costwatch run` against the
/// simulator: short backoffs (the process really waits), windows of
/// `window` from `start`, a tick every second, and the extra `yaml`.
fn config(dir: &TempDir, window: &str, start: DateTime<Utc>, yaml: &str) -> PathBuf {
    let path = dir.path().join("costwatch.yaml");
    let text = format!(
        "source:\n  api_url: http://127.0.0.1:9/v1\n  page_limit: 20\n  max_retries: 5\n  retry_base: 1ms\n  retry_max: 5ms\n\
         windows:\n  size: {window}\n  settle_lag: 0s\n  start: {}\n  max_backfill: 3650d\n\
         schedule:\n  cron: \"* * * * * *\"\n  max_catch_up_windows: 5000\n\
         {yaml}",
        start.to_rfc3339()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `costwatch backtest --format jsonl` over `[from, to)`: its exit code,
/// its findings (one JSON object a line, sorted) and its stderr.
async fn backtest_jsonl(
    config: &Path,
    sim: &SimServer,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> (Option<i32>, Vec<String>, String) {
    let (from, to) = (from.to_rfc3339(), to.to_rfc3339());
    let mut cmd = costwatch_command(&[
        "backtest",
        "--config",
        config.to_str().unwrap(),
        "--from",
        &from,
        "--to",
        &to,
        "--format",
        "jsonl",
    ]);
    cmd.env("COSTWATCH_SOURCE__API_URL", sim.base_url())
        .env("COSTWATCH_ADMIN_KEY", sim.admin_key());
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    (
        out.status.code(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backtest_under_twenty_percent_faults_prints_the_findings_of_a_clean_backtest() {
    let (dataset, from, to) = two_days();
    let sim = start_sim(dataset).await;
    let dir = TempDir::new().unwrap();
    let cfg = config(&dir, "1h", from, "server:\n  listen: null\n");

    let (code, clean, stderr) = backtest_jsonl(&cfg, &sim, from, to).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(clean.len() > 20, "{} findings", clean.len());
    let clean_requests = requests(&sim);

    sim.faults().set_random(Some(one_in_five(23)));
    let (code, faulty, stderr) = backtest_jsonl(&cfg, &sim, from, to).await;
    assert_eq!(code, Some(0), "{stderr}");
    let served = sim.faults().served();
    assert!(
        served * 10 > clean_requests,
        "{served} faults in about {clean_requests} requests"
    );
    assert_eq!(faulty, clean, "the same findings, field for field");
    assert!(stderr.contains("backtest: 48 windows"), "{stderr}");

    // The first window's page stays truncated through the source's six
    // reads: the window fails, is read again, and the report says so.
    sim.faults().clear();
    for _ in 0..6 {
        sim.faults()
            .push(Fault::on(FaultPath::Sessions, FaultKind::Truncated));
    }
    let (code, again, stderr) = backtest_jsonl(&cfg, &sim, from, to).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(again, clean);
    assert!(
        stderr.contains("backtest: read again after a failed read: 1\n"),
        "{stderr}"
    );
    let first = Window {
        start: from,
        end: from + ChronoDuration::hours(1),
    };
    assert!(
        stderr.contains(&format!("  window {first}: 2 reads; last failure: ")),
        "{stderr}"
    );
    assert!(stderr.contains("(read 6 times)"), "{stderr}");
}

/// Runs `costwatch run` with `cfg` until its watermark reaches `until`;
/// returns the findings it stored over `[from, until)`.
async fn run_until(
    cfg: &Path,
    sim: &SimServer,
    dir: &TempDir,
    name: &str,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<Finding> {
    let state = format!("sqlite://{}", dir.path().join(name).display());
    let daemon = Running::start(
        cfg,
        &[
            ("COSTWATCH_SOURCE__API_URL", &sim.base_url()),
            ("COSTWATCH_ADMIN_KEY", sim.admin_key()),
            ("COSTWATCH_STATE__URL", &state),
        ],
    );
    // The daemon migrates the state file first; it is read only after.
    daemon.wait_for_log("costwatch is running", 1).await;
    let started = std::time::Instant::now();
    loop {
        let store = SqlStore::open(&state).await.unwrap();
        let watermark = store.watermark("main").await.unwrap();
        store.close().await;
        if watermark >= Some(until) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the watermark is at {watermark:?}, not at {until}:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(daemon);
    let store = SqlStore::open(&state).await.unwrap();
    let findings = store.findings(from, until).await.unwrap();
    store.close().await;
    findings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_under_twenty_percent_faults_stores_the_findings_of_a_clean_run() {
    let (dataset, from, _) = two_days();
    let sim = start_sim(dataset).await;
    let dir = TempDir::new().unwrap();
    // Daily windows from the first day of traffic to the last midnight.
    let cfg = config(&dir, "24h", from, "server:\n  listen: null\n");
    let until = ts("2026-11-05T00:00:00Z");

    let clean = run_until(&cfg, &sim, &dir, "clean.db", from, until).await;
    assert!(clean.len() > 20, "{} findings", clean.len());
    let clean_requests = requests(&sim);

    sim.faults().set_random(Some(one_in_five(42)));
    let faulty = run_until(&cfg, &sim, &dir, "faulty.db", from, until).await;
    let served = sim.faults().served();
    assert!(
        served * 10 > clean_requests,
        "{served} faults in about {clean_requests} requests"
    );
    assert_eq!(by_key(&faulty), by_key(&clean));
}

/// A webhook receiver that keeps every body it is sent.
async fn receiver() -> (Arc<Mutex<Vec<serde_json::Value>>>, String) {
    let got: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let app = axum::Router::new()
        .route(
            "/hook",
            post(
                |State(got): State<Arc<Mutex<Vec<serde_json::Value>>>>, body: String| async move {
                    if let Ok(v) = serde_json::from_str(&body) {
                        got.lock().unwrap().push(v);
                    }
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (got, url)
}

/// The alerts of `kind` received, by status.
fn alerts(got: &Mutex<Vec<serde_json::Value>>, kind: &str, status: &str) -> usize {
    let got = got.lock().unwrap();
    got.iter()
        .filter(|a| a["kind"] == kind && a["status"] == status)
        .count()
}

/// `GET http://{addr}{path}`: status and body.
async fn get(addr: &str, path: &str) -> (u16, String) {
    let res = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_against_cycling_cursors_reports_the_gateway_unhealthy_instead_of_paging_forever() {
    let sim = start_sim(seed_dataset()).await;
    // Cursors A, B, A, B, ... on every listing of sessions.
    sim.faults().set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::CursorCycle { pages: 3 },
    )));
    let (got, hook) = receiver().await;
    let dir = TempDir::new().unwrap();
    let seed_day = ts("2026-10-11T00:00:00Z");
    let cfg = config(
        &dir,
        "24h",
        seed_day,
        &format!(
            "alerts:\n  retry_base: 1s\n  retry_max: 2s\n\
             notify:\n  webhooks:\n    - name: receiver\n      url: {hook}\n      timeout: 5s\n\
             server:\n  listen: 127.0.0.1:0\n"
        ),
    );
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let daemon = Running::start(
        &cfg,
        &[
            ("COSTWATCH_SOURCE__API_URL", &sim.base_url()),
            ("COSTWATCH_ADMIN_KEY", sim.admin_key()),
            ("COSTWATCH_STATE__URL", &state),
        ],
    );
    let addr = daemon.ops_addr().await;
    daemon.wait_for_log("costwatch is running", 1).await;

    // The tick fails instead of paging forever: /healthz turns 503, with
    // the reason, and the log says why.
    let (status, body) = eventually("/healthz 503", || async {
        let (status, body) = get(&addr, "/healthz").await;
        (status == 503).then_some((status, body))
    })
    .await;
    assert_eq!(status, 503);
    assert!(daemon.count("the cursors cycle") >= 1, "{}", daemon.log());
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "unhealthy");
    let reason = health["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("page 3 leads back to the cursor page 1 gave"),
        "{reason}"
    );
    let (_, metrics) = get(&addr, "/metrics").await;
    assert!(metrics.contains("\ncostwatch_up 0\n"), "{metrics}");
    assert!(
        !metrics.contains("costwatch_gateway_errors_total{kind=\"invalid\"} 0"),
        "{metrics}"
    );
    eventually("a source_unhealthy alert", || async {
        (alerts(&got, "source_unhealthy", "firing") == 1).then_some(())
    })
    .await;
    // Nothing was committed: the seed day stays due.
    let store = SqlStore::open(&state).await.unwrap();
    assert_eq!(store.watermark("main").await.unwrap(), Some(seed_day));
    assert!(
        store
            .findings(seed_day, ts("2030-01-01T00:00:00Z"))
            .await
            .unwrap()
            .is_empty()
    );
    store.close().await;

    // The gateway pages properly again: the next tick catches up, and the
    // incident resolves.
    sim.faults().clear();
    eventually("/healthz 200", || async {
        (get(&addr, "/healthz").await.0 == 200).then_some(())
    })
    .await;
    eventually("the resolved notification", || async {
        (alerts(&got, "source_unhealthy", "resolved") == 1).then_some(())
    })
    .await;
    let (_, metrics) = get(&addr, "/metrics").await;
    assert!(metrics.contains("\ncostwatch_up 1\n"), "{metrics}");
    assert_eq!(
        alerts(&got, "source_unhealthy", "firing"),
        1,
        "one alert, not a storm"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spend_preview_replay_runs_a_failed_tick_again() {
    let sim = start_sim(seed_dataset()).await;
    let (from, to) = (ts("2026-10-11T11:00:00Z"), ts("2026-10-11T12:00:00Z"));
    let replay = |retries: WindowRetries| {
        let (source, _) = gateway(&sim, 50);
        async move {
            backtest::replay_alerts(
                source,
                detector(),
                from,
                to,
                Duration::from_secs(3600),
                crate::daemon::policy(),
                None,
                &retries,
            )
            .await
            .unwrap()
        }
    };
    let titles = |alerts: &[costwatch::notify::Alert]| -> Vec<String> {
        let mut t: Vec<String> = alerts
            .iter()
            .filter(|a| a.kind != costwatch::notify::AlertKind::SourceUnhealthy)
            .map(|a| a.title.clone())
            .collect();
        t.sort();
        t
    };
    let clean = replay(WindowRetries::none()).await;
    assert!(!titles(&clean.alerts).is_empty());

    // The window's first read fails through every retry of its page.
    for _ in 0..4 {
        sim.faults()
            .push(Fault::on(FaultPath::Sessions, FaultKind::Truncated));
    }
    let retries =
        WindowRetries::like_source(&limits()).with_sleeper(Arc::new(RecordingSleeper::default()));
    let again = replay(retries).await;
    assert_eq!(titles(&again.alerts), titles(&clean.alerts));
}
