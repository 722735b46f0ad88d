//! Three `costwatch run` processes on one PostgreSQL, killed (SIGKILL) and
//! restarted at random points: every window is processed exactly once and
//! every alert reaches the receiver.

use crate::pg::PgCluster;
use crate::support::{costwatch_command, manifest_dir, start_sim};
use axum::http::{HeaderMap, StatusCode};
use chrono::Duration as ChronoDuration;
use costwatch::clock::{Clock, SystemClock};
use costwatch::store::{SqlStore, Store, WindowStore};
use costwatch_sim::scenario::{ScenarioParams, generate};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn spawn(config: &std::path::Path, sim: &str, state: &str, log: &std::path::Path) -> Child {
    let mut cmd = costwatch_command(&["run", "--config", config.to_str().unwrap()]);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    cmd.env("COSTWATCH_SOURCE__API_URL", sim)
        .env("COSTWATCH_ADMIN_KEY", "sim-admin-key")
        .env("COSTWATCH_STATE__URL", state)
        .stdout(Stdio::null())
        .stderr(log);
    cmd.spawn().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_killed_at_random_process_each_window_once_and_deliver_every_alert() {
    let pg = PgCluster::start();
    // Two days of traffic ending now, so the replicas have ~200 windows to catch up.
    let today = SystemClock
        .now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let params = ScenarioParams {
        days: 3,
        sessions_per_day: 800,
        start: today - ChronoDuration::days(2),
        ..ScenarioParams::default()
    };
    let sim = start_sim(generate(&params)).await;

    let deliveries: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let d = deliveries.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap| {
            let d = d.clone();
            async move {
                let key = headers
                    .get("x-costwatch-idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                *d.lock().unwrap().entry(key).or_default() += 1;
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("costwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "source:\n  api_url: http://127.0.0.1:9/v1\n  max_retries: 1\n  retry_base: 100ms\n\
             windows:\n  size: 15m\n  settle_lag: 0s\n  start: {}\n  max_backfill: 3650d\n\
             state:\n  lease_ttl: 3s\n\
             schedule:\n  cron: \"* * * * * *\"\n  max_catch_up_windows: 16\n\
             alerts:\n  retry_base: 1s\n  retry_max: 2s\n\
             notify:\n  webhooks:\n    - name: receiver\n      url: {hook}\n      timeout: 2s\n\
             server:\n  listen: null\n\
             rules: [{}]\n",
            params.start.to_rfc3339(),
            manifest_dir().join("rules").display()
        ),
    )
    .unwrap();
    let state = pg.url();
    let log = dir.path().join("replicas.log");
    let mut replicas: Vec<Child> = (0..3)
        .map(|_| spawn(&config, &sim.base_url(), &state, &log))
        .collect();

    // Kill one replica at a pseudo-random point every ~1.5 s and start it
    // again, until the job has caught up and the outbox is empty.
    let store = SqlStore::open(&state).await.unwrap();
    let target =
        today + ChronoDuration::minutes(15 * ((SystemClock.now() - today).num_minutes() / 15) - 15);
    let started = Instant::now();
    let mut kills = 0;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    loop {
        tokio::time::sleep(Duration::from_millis(700 + seed % 1600)).await;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let caught_up = store
            .watermark("main")
            .await
            .unwrap()
            .is_some_and(|w| w >= target);
        let outbox = store.outbox().await.unwrap();
        let delivered = !outbox.is_empty() && outbox.iter().all(|o| o.status == "sent");
        if caught_up && delivered {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "no convergence:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        if !caught_up || kills < 6 {
            let victim = (seed % 3) as usize;
            let _ = replicas[victim].kill();
            let _ = replicas[victim].wait();
            kills += 1;
            replicas[victim] = spawn(&config, &sim.base_url(), &state, &log);
        }
    }
    for r in &mut replicas {
        let _ = Command::new("kill")
            .args(["-TERM", &r.id().to_string()])
            .status();
    }
    for r in &mut replicas {
        let status = r.wait().unwrap();
        assert_eq!(status.code(), Some(0), "a clean stop");
    }
    assert!(kills >= 6, "replicas were really killed: {kills}");

    // Every window from the start to the watermark: done, committed once, no gap.
    let rows = store.windows("main").await.unwrap();
    assert!(rows.len() >= 190, "{} windows", rows.len());
    assert_eq!(rows[0].window.start, params.start);
    for pair in rows.windows(2) {
        assert_eq!(
            pair[0].window.end, pair[1].window.start,
            "no gap, no overlap"
        );
    }
    assert!(
        rows.iter().all(|w| w.status == "done" && w.attempts == 1),
        "{rows:?}"
    );

    // Every alert in the outbox reached the receiver; a receiver that
    // deduplicates by key has each exactly once.
    let outbox = store.outbox().await.unwrap();
    let enqueued: BTreeSet<String> = outbox.iter().map(|o| o.idempotency_key.clone()).collect();
    let received = deliveries.lock().unwrap().clone();
    let got: BTreeSet<String> = received.keys().cloned().collect();
    assert_eq!(got, enqueued, "every alert delivered, nothing else");
    assert_eq!(outbox.len(), enqueued.len(), "no alert enqueued twice");
    let duplicates: usize = received.values().map(|n| n - 1).sum();
    assert!(
        duplicates <= kills,
        "re-sends only after a kill mid-send: {duplicates} for {kills} kills"
    );
    eprintln!(
        "{} windows, {} alerts, {kills} kills, {duplicates} duplicate deliveries",
        rows.len(),
        enqueued.len()
    );
}
