//! PostgreSQL state: the store contract on both backends, the same findings
//! on both, replicas racing for the budget, and a database outage.

use crate::daemon::{Recorder, settings};
use crate::pg::PgCluster;
use crate::support::*;
use chrono::{Duration as ChronoDuration, NaiveDate, TimeZone, Utc};
use costwatch::clock::{Clock, FakeClock};
use costwatch::daemon::Daemon;
use costwatch::detect::Finding;
use costwatch::investigate::BudgetLedger;
use costwatch::notify::AlertStatus;
use costwatch::notify::outbox::Channel;
use costwatch::pipeline::Pipeline;
use costwatch::source::Window;
use costwatch::store::{SilenceStore, SqlStore, StatusStore, Store, StoreError, WindowStore};
use costwatch_sim::scenario::{ScenarioParams, generate};
use std::sync::Arc;

/// The store's contract, run against one backend.
async fn store_contract(store: &SqlStore) {
    calibration_contract(store).await;
    let t = |h: i64| Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap() + ChronoDuration::hours(h);
    let w = Window {
        start: t(0),
        end: t(1),
    };
    assert_eq!(store.init_watermark("job", t(0), t(0)).await.unwrap(), t(0));
    assert_eq!(
        store.init_watermark("job", t(5), t(0)).await.unwrap(),
        t(0),
        "an existing watermark wins"
    );
    let empty = std::collections::HashMap::new();
    let models = std::collections::BTreeSet::new();
    let commit = |now| costwatch::store::WindowCommit {
        findings: &[],
        baselines: &empty,
        models_seen: &models,
        caching: costwatch::detect::CachingEvidence::none(),
        held: None,
        sessions: 3,
        pages: 1,
        now,
    };
    store.commit_window("job", w, commit(t(1))).await.unwrap();
    assert!(matches!(
        store.commit_window("job", w, commit(t(1))).await,
        Err(StoreError::AlreadyProcessed(_))
    ));
    assert_eq!(store.watermark("job").await.unwrap(), Some(t(1)));

    // Baselines are packed, many to a statement, and read back equal;
    // models seen are recorded at the window's end.
    let mut baselines = std::collections::HashMap::new();
    for i in 0..120u32 {
        let mut b = costwatch::detect::GroupBaseline::new(512);
        b.log_requests.push(f64::from(i) / 7.0);
        b.cached_share.push(0.25);
        b.model_calls
            .insert(format!("m{}", i % 3), f64::from(i) + 0.1);
        baselines.insert(format!("feature=f{i}"), b);
    }
    let seen: std::collections::BTreeSet<String> = ["m0".into(), "m1".into()].into();
    store.init_watermark("job-b", t(0), t(0)).await.unwrap();
    let with_baselines = costwatch::store::WindowCommit {
        baselines: &baselines,
        models_seen: &seen,
        caching: costwatch::detect::CachingEvidence::none(),
        held: None,
        ..commit(t(1))
    };
    store
        .commit_window("job-b", w, with_baselines)
        .await
        .unwrap();
    let groups: Vec<String> = baselines.keys().cloned().collect();
    assert_eq!(store.load_baselines(&groups).await.unwrap(), baselines);
    assert_eq!(
        store.models_in_use(t(1)).await.unwrap(),
        ["m0".to_owned(), "m1".to_owned()]
    );

    // Evaluations: the next one covers the windows committed since the last
    // one, which is recorded with its alerts and never moves back.
    let span = store.evaluation_span("job").await.unwrap();
    assert_eq!((span.windows, span.span), (1, Some(w)));
    let evaluated = |to| Some(costwatch::store::Evaluated { job: "job", to });
    store
        .enqueue(evaluated(t(1)), &[], &[], &[], t(1), t(2))
        .await
        .unwrap();
    assert_eq!(store.evaluation_span("job").await.unwrap().windows, 0);
    store
        .enqueue(evaluated(t(0)), &[], &[], &[], t(1), t(2))
        .await
        .unwrap();
    assert_eq!(store.evaluation_span("job").await.unwrap().windows, 0);

    // Leases: one holder at a time; an expired lease is taken over.
    assert!(store.try_lease("job:x", "a", t(0), t(1)).await.unwrap());
    assert!(!store.try_lease("job:x", "b", t(0), t(1)).await.unwrap());
    assert!(
        store.try_lease("job:x", "a", t(0), t(2)).await.unwrap(),
        "the holder renews"
    );
    assert!(
        store.try_lease("job:x", "b", t(3), t(4)).await.unwrap(),
        "expired: taken over"
    );
    store.release_lease("job:x", "b").await.unwrap();
    assert!(
        store.try_lease("job:x", "a", t(3), t(4)).await.unwrap(),
        "released: free at once"
    );

    // Outbox claims: a row claimed by one replica is not handed to another
    // until the claim expires.
    let alert = costwatch::notify::sample_alert(t(0));
    store
        .enqueue(
            None,
            &[],
            std::slice::from_ref(&alert),
            &["hook".into()],
            t(0),
            t(10),
        )
        .await
        .unwrap();
    store
        .enqueue(None, &[], &[alert], &["hook".into()], t(0), t(10))
        .await
        .unwrap();
    let a = store.claim_deliveries("a", t(0), t(1), 10).await.unwrap();
    assert_eq!(a.len(), 1, "the same alert enqueued twice is one row");
    assert!(
        store
            .claim_deliveries("b", t(0), t(1), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .claim_deliveries("b", t(2), t(3), 10)
            .await
            .unwrap()
            .len(),
        1,
        "expired claim"
    );
    store.delivered(a[0].id, t(2)).await.unwrap();
    assert!(
        store
            .claim_deliveries("c", t(9), t(10), 10)
            .await
            .unwrap()
            .is_empty(),
        "sent rows stay sent"
    );
    assert!(
        store
            .claim_reposts("c", "hook", t(9), t(9), t(10), 10)
            .await
            .unwrap()
            .is_empty(),
        "an alert of no incident is never posted again"
    );

    // Order: a later notification of the same incident and channel waits
    // while an earlier one is claimed, even by another replica.
    let firing = crate::delivery::notification("fp-order", AlertStatus::Firing, 1, t(0));
    let resolved = crate::delivery::notification("fp-order", AlertStatus::Resolved, 2, t(0));
    store
        .enqueue(
            None,
            &[],
            &[firing, resolved],
            &["hook".into()],
            t(4),
            t(10),
        )
        .await
        .unwrap();
    let a = store.claim_deliveries("a", t(4), t(5), 10).await.unwrap();
    assert_eq!(keys_of(&a), ["fp-order:firing:1"]);
    assert!(
        store
            .claim_deliveries("b", t(4), t(5), 10)
            .await
            .unwrap()
            .is_empty(),
        "the resolution waits while its firing notification is claimed"
    );
    store.retry_later(a[0].id, t(6), "down").await.unwrap();
    assert!(
        store
            .claim_deliveries("b", t(5), t(6), 10)
            .await
            .unwrap()
            .is_empty(),
        "and while it waits in backoff"
    );
    let a = store.claim_deliveries("a", t(6), t(7), 10).await.unwrap();
    assert_eq!(keys_of(&a), ["fp-order:firing:1"]);
    store.delivered(a[0].id, t(6)).await.unwrap();
    let b = store.claim_deliveries("b", t(6), t(7), 10).await.unwrap();
    assert_eq!(keys_of(&b), ["fp-order:resolved:2"], "then it goes");
    store.delivered(b[0].id, t(6)).await.unwrap();

    // Budget: never over the cap.
    let day = NaiveDate::from_ymd_opt(2026, 11, 2).unwrap();
    assert!(store.reserve(day, 0.6, 1.0).await.unwrap());
    assert!(!store.reserve(day, 0.6, 1.0).await.unwrap());
    store.settle(day, 0.6, 0.25).await.unwrap();
    assert!(store.reserve(day, 0.6, 1.0).await.unwrap());
    assert!((store.spent(day).await.unwrap() - 0.85).abs() < 1e-9);

    // The status page's queries: bounded, newest first, read only.
    let next = Window {
        start: t(1),
        end: t(2),
    };
    store
        .record_failure("job", next, "down", t(2))
        .await
        .unwrap();
    let jobs = store.jobs(10).await.unwrap();
    assert_eq!(jobs.len(), 2, "job and job-b");
    let job = jobs.iter().find(|j| j.job == "job").unwrap();
    assert_eq!(job.watermark, t(1));
    assert_eq!(job.evaluated, Some(t(1)));
    let windows = store.recent_windows("job", 10).await.unwrap();
    let seen: Vec<_> = windows
        .iter()
        .map(|w| (w.row.window, w.row.status.as_str(), w.row.attempts))
        .collect();
    assert_eq!(seen, [(next, "failed", 1), (w, "done", 1)]);
    assert_eq!(store.recent_windows("job", 1).await.unwrap().len(), 1);
    let done = store.last_done_window("job").await.unwrap().unwrap();
    assert_eq!((done.row.window, done.updated_at), (w, t(1)));
    assert!(store.last_done_window("other").await.unwrap().is_none());
    let lease = store.lease("job:x").await.unwrap().unwrap();
    assert_eq!((lease.holder.as_str(), lease.expires_at), ("a", t(4)));
    let gateway = costwatch::incidents::fingerprint("source_unhealthy", "job", "gateway");
    assert!(store.incident(&gateway).await.unwrap().is_none());
    store.source_failed("job", "down", t(2)).await.unwrap();
    let incident = store.incident(&gateway).await.unwrap().unwrap().incident;
    assert!(incident.firing);
    assert_eq!(incident.last_error.as_deref(), Some("down"));
    for (hours, reason) in [(3, "later"), (2, "sooner")] {
        store
            .add_silence(
                &costwatch::silence::NewSilence {
                    kind: Some("no_cache".into()),
                    group: None,
                    matchers: Default::default(),
                    starts_at: t(2),
                    ends_at: t(2 + hours),
                    author: "ops".into(),
                    reason: reason.into(),
                },
                t(2),
            )
            .await
            .unwrap();
    }
    let active = store.active_silences(t(2), 1).await.unwrap();
    assert_eq!(active.len(), 1, "the limit holds");
    assert_eq!(active[0].reason, "sooner", "the one ending first");
    assert_eq!(store.active_silences(t(4), 10).await.unwrap().len(), 1);
    assert!(store.active_silences(t(1), 10).await.unwrap().is_empty());
    // Last: it adds jobs of its own.
    held_contract(store).await;
}

/// What prompt estimators learned: one row per model and method, replaced
/// whole, bounded when read.
/// Held findings: replaced by the commit that changes them, left by one
/// that does not, per job, and dropped when windows are skipped.
async fn held_contract(store: &SqlStore) {
    use costwatch::detect::Held;
    let t =
        |m: i64| Utc.with_ymd_and_hms(2026, 11, 3, 0, 0, 0).unwrap() + ChronoDuration::minutes(m);
    let window = |i: i64| Window {
        start: t(15 * i),
        end: t(15 * i + 15),
    };
    let held = |id: &str, quiet: i64| Held {
        finding: Finding {
            explanation: "one miss, 'quoted' \"text\"".into(),
            ..crate::episodes::finding(0, id, 0.0001)
        },
        quiet_at: t(quiet),
        alone: quiet % 2 == 0,
        peers: None,
    };
    fn commit(
        held: Option<&[Held]>,
        now: chrono::DateTime<Utc>,
    ) -> costwatch::store::WindowCommit<'_> {
        static EMPTY: std::sync::LazyLock<
            std::collections::HashMap<String, costwatch::detect::GroupBaseline>,
        > = std::sync::LazyLock::new(Default::default);
        static MODELS: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        costwatch::store::WindowCommit {
            findings: &[],
            baselines: &EMPTY,
            models_seen: &MODELS,
            caching: costwatch::detect::CachingEvidence::none(),
            held,
            sessions: 1,
            pages: 1,
            now,
        }
    }
    for job in ["held-a", "held-b"] {
        store.init_watermark(job, t(0), t(0)).await.unwrap();
    }
    let first = [held("s-1", 17), held("s-2", 20)];
    store
        .commit_window("held-a", window(0), commit(Some(&first), t(15)))
        .await
        .unwrap();
    store
        .commit_window("held-b", window(0), commit(Some(&first[..1]), t(15)))
        .await
        .unwrap();
    assert_eq!(store.held_findings("held-a").await.unwrap(), first);
    // A commit that changes nothing leaves them.
    store
        .commit_window("held-a", window(1), commit(None, t(30)))
        .await
        .unwrap();
    assert_eq!(store.held_findings("held-a").await.unwrap(), first);
    // One that changes them replaces them, for its job only.
    // One session held for two kinds.
    let oversized = Held {
        finding: Finding {
            kind: costwatch::domain::Kind::OversizedModel,
            ..held("s-3", 50).finding
        },
        quiet_at: t(60),
        alone: false,
        // What a finding of a thin group waits for reads back as written.
        peers: Some(costwatch::detect::PeerWait {
            min_peers: 5,
            min_peer_cached_share: 0.15,
            until: t(1500),
            peers: 3,
            median: Some(0.625),
        }),
    };
    // (Read back in session, then kind order.)
    let second = [oversized, held("s-3", 50)];
    store
        .commit_window("held-a", window(2), commit(Some(&second), t(45)))
        .await
        .unwrap();
    assert_eq!(store.held_findings("held-a").await.unwrap(), second);
    assert_eq!(store.held_findings("held-b").await.unwrap(), first[..1]);
    // A commit the watermark refuses writes none of them.
    assert!(matches!(
        store
            .commit_window("held-a", window(2), commit(Some(&[]), t(45)))
            .await,
        Err(StoreError::AlreadyProcessed(_))
    ));
    assert_eq!(store.held_findings("held-a").await.unwrap(), second);
    // Skipped windows were never looked at: what was held is dropped.
    store.skip_to("held-a", t(45), t(90), t(90)).await.unwrap();
    assert!(store.held_findings("held-a").await.unwrap().is_empty());
    assert_eq!(store.held_findings("held-b").await.unwrap(), first[..1]);
}

async fn calibration_contract(store: &SqlStore) {
    use costwatch::investigate::CalibrationStore;
    use costwatch::investigate::model::ToolChoice;
    use costwatch::investigate::tokens::{CALIBRATION_WINDOW, Sample};
    let sample = |i: i64| Sample {
        run: format!("inv-{i}"),
        kind: if i % 2 == 0 {
            ToolChoice::Auto
        } else {
            ToolChoice::None
        },
        raw: 1_000 + i as u64,
        results: 10,
        bytes: 4_000,
        result_bytes: 40,
        tools: 300,
        tool_bytes: 1_200,
        reported: 900,
        predicted: 910,
        predicted_by_bytes: 0,
        at_ms: i,
    };
    assert!(
        store
            .load_calibration("m", "pieces-v1")
            .await
            .unwrap()
            .is_empty()
    );
    let two = vec![sample(1), sample(2)];
    store
        .save_calibration("m", "pieces-v1", &two, 5)
        .await
        .unwrap();
    assert_eq!(store.load_calibration("m", "pieces-v1").await.unwrap(), two);
    assert!(
        store
            .load_calibration("m", "o200k_base")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .load_calibration("other", "pieces-v1")
            .await
            .unwrap()
            .is_empty()
    );
    // Replaced whole, and never more than the window is kept.
    let many: Vec<Sample> = (0..CALIBRATION_WINDOW as i64 + 3).map(sample).collect();
    store
        .save_calibration("m", "pieces-v1", &many, 6)
        .await
        .unwrap();
    let kept = store.load_calibration("m", "pieces-v1").await.unwrap();
    assert_eq!(kept.len(), CALIBRATION_WINDOW);
    assert_eq!(kept.last(), many.last());
    assert_eq!(kept.first().map(|s| s.at_ms), Some(3));
}

fn keys_of(deliveries: &[costwatch::store::Delivery]) -> Vec<String> {
    deliveries
        .iter()
        .map(|d| d.alert.idempotency_key())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_contract_holds_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    store_contract(&SqlStore::open(&sqlite_url(&dir)).await.unwrap()).await;
    let pg = PgCluster::start();
    store_contract(&SqlStore::open(&pg.url()).await.unwrap()).await;
}

/// The status page's overview: impact summed per UTC day and kind (a
/// window starting at 23:00 and one at midnight fall on two days), and
/// the groups with the most impact, most first, cut at the limit.
async fn overview_contract(store: &SqlStore) {
    use costwatch::domain::{Kind, Severity};
    let t = |h: i64| Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap() + ChronoDuration::hours(h);
    let finding = |id: &str, kind: Kind, group: &str, w: Window, usd: f64| Finding {
        kind,
        session_id: id.into(),
        window: w,
        severity: Severity::Warning,
        rule: kind.as_str().into(),
        group: group.into(),
        labels: Default::default(),
        cost_usd: 2.0 * usd,
        impact_usd: usd,
        evidence: serde_json::Value::Null,
        explanation: String::new(),
    };
    let (empty, models) = (
        std::collections::HashMap::new(),
        std::collections::BTreeSet::new(),
    );
    store
        .init_watermark("overview", t(22), t(22))
        .await
        .unwrap();
    let late = Window {
        start: t(22),
        end: t(23),
    };
    let eve = Window {
        start: t(23),
        end: t(24),
    };
    let midnight = Window {
        start: t(24),
        end: t(25),
    };
    for (w, found) in [
        (
            late,
            vec![finding("out", Kind::NoCache, "feature=x", late, 100.0)],
        ),
        (
            eve,
            vec![
                finding("e-1", Kind::NoCache, "feature=a", eve, 0.5),
                finding("e-2", Kind::NoCache, "feature=b", eve, 0.25),
                finding("e-3", Kind::RetryLoop, "feature=b", eve, 3.0),
            ],
        ),
        (
            midnight,
            vec![
                finding("m-1", Kind::NoCache, "feature=a", midnight, 1.0),
                finding("m-2", Kind::OversizedModel, "feature=c", midnight, 2.0),
            ],
        ),
    ] {
        let commit = costwatch::store::WindowCommit {
            findings: &found,
            baselines: &empty,
            models_seen: &models,
            caching: costwatch::detect::CachingEvidence::none(),
            held: None,
            sessions: 3,
            pages: 1,
            now: w.end,
        };
        store.commit_window("overview", w, commit).await.unwrap();
    }
    let days: Vec<(NaiveDate, Kind, u64, f64)> = store
        .daily_impact(t(23), t(25))
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.day, d.kind, d.sessions, d.impact_usd))
        .collect();
    let (nov1, nov2) = (t(0).date_naive(), t(24).date_naive());
    assert_eq!(
        days,
        [
            (nov1, Kind::NoCache, 2, 0.75),
            (nov1, Kind::RetryLoop, 1, 3.0),
            (nov2, Kind::NoCache, 1, 1.0),
            (nov2, Kind::OversizedModel, 1, 2.0),
        ],
        "the window before the range is left out"
    );
    let groups: Vec<(String, Kind, u64, f64)> = store
        .top_groups(t(23), t(25), 3)
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.group, g.kind, g.sessions, g.impact_usd))
        .collect();
    assert_eq!(
        groups,
        [
            ("feature=b".to_owned(), Kind::RetryLoop, 1, 3.0),
            ("feature=c".to_owned(), Kind::OversizedModel, 1, 2.0),
            ("feature=a".to_owned(), Kind::NoCache, 2, 1.5),
        ]
    );
    assert!(store.daily_impact(t(0), t(22)).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_overview_reads_the_same_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    overview_contract(&SqlStore::open(&sqlite_url(&dir)).await.unwrap()).await;
    let pg = PgCluster::start();
    overview_contract(&SqlStore::open(&pg.url()).await.unwrap()).await;
}

fn keyed(findings: &[Finding]) -> Vec<(String, String, i64)> {
    let mut v: Vec<(String, String, i64)> = findings
        .iter()
        .map(|f| {
            (
                f.kind.as_str().to_owned(),
                f.session_id.clone(),
                (f.impact_usd * 1e8).round() as i64,
            )
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_data_gives_the_same_findings_on_sqlite_and_postgres() {
    let params = ScenarioParams {
        days: 2,
        sessions_per_day: 1200,
        ..ScenarioParams::default()
    };
    let sim = start_sim(generate(&params)).await;
    let (from, to) = (params.start, params.start + ChronoDuration::days(2));
    let dir = tempfile::tempdir().unwrap();
    let pg = PgCluster::start();
    let mut results = Vec::new();
    for url in [sqlite_url(&dir), pg.url()] {
        let (source, _) = gateway(&sim, 50);
        let r = replay_15m(source, &url, from, to).await;
        // Stored figures are the latest (a session seen again updates them);
        // reported ones are from the window that first found it.
        let stored = SqlStore::open(&url)
            .await
            .unwrap()
            .findings(from, to)
            .await
            .unwrap();
        results.push((keyed(&r.findings), keyed(&stored)));
    }
    assert!(
        results[0].0.len() > 40,
        "a real amount of findings: {}",
        results[0].0.len()
    );
    assert_eq!(results[0].0, results[1].0, "the same findings reported");
    assert_eq!(results[0].1, results[1].1, "the same findings stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_for_the_last_dollars_never_exceed_the_daily_cap() {
    let pg = PgCluster::start();
    let day = NaiveDate::from_ymd_opt(2026, 11, 2).unwrap();
    let (cap, price) = (1.0, 0.013);
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let store = SqlStore::open(&pg.url()).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let mut won = 0u32;
            for _ in 0..100 {
                if store.reserve(day, price, cap).await.unwrap() {
                    won += 1;
                }
            }
            won
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += t.await.unwrap();
    }
    let spent = SqlStore::open(&pg.url())
        .await
        .unwrap()
        .spent(day)
        .await
        .unwrap();
    assert!(spent <= cap + 1e-12, "spent {spent}");
    assert_eq!(
        won,
        (cap / price).floor() as u32,
        "every cent that fits, and not one more"
    );
    assert!((spent - f64::from(won) * price).abs() < 1e-9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_survives_a_database_outage_and_catches_up() {
    let pg = PgCluster::start();
    let params = ScenarioParams {
        days: 1,
        sessions_per_day: 600,
        ..ScenarioParams::default()
    };
    let start = params.start;
    let sim = start_sim(generate(&params)).await;
    let (source, _) = gateway(&sim, 50);
    let store = SqlStore::open(&pg.url()).await.unwrap();
    let fake = FakeClock::new(start + ChronoDuration::hours(2) + ChronoDuration::minutes(2));
    let shared: Arc<dyn Clock> = Arc::new(fake.clone());
    let schedule = quarter_hours(start);
    let pipeline = Pipeline::new(source, store, detector(), schedule, 4, shared.clone());
    let settings = settings(vec![Arc::new(Recorder::default()) as Arc<dyn Channel>]);
    let daemon = Daemon::new(pipeline, settings, shared);
    assert_eq!(daemon.tick().await.unwrap().windows, 8);

    pg.stop();
    for _ in 0..4 {
        fake.advance(ChronoDuration::minutes(15));
        let err = daemon.tick().await.expect_err("the database is down");
        assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
        assert!(!err.to_string().is_empty());
    }
    pg.start_again();
    fake.advance(ChronoDuration::minutes(15));
    let back = daemon.tick().await.unwrap();
    assert_eq!(back.windows, 5, "the four missed windows and the new one");
    let rows = daemon.store().windows("main").await.unwrap();
    assert_eq!(rows.len(), 13);
    assert!(rows.iter().all(|w| w.status == "done" && w.attempts == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_online_verifies_the_database_and_names_a_wrong_one() {
    let pg = PgCluster::start();
    let run = |url: String| async move {
        let mut cmd = costwatch_command(&[
            "check",
            "--config",
            "config/costwatch.example.yaml",
            "--online",
        ]);
        cmd.env("COSTWATCH_STATE__URL", url);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    };
    let ok = run(pg.url()).await;
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("state database: ok (Postgres)"));
    let bad = run(format!(
        "postgres://nobody:hunter2@127.0.0.1:{}/postgres",
        pg.port + 1
    ))
    .await;
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        err.contains("state.url") && err.contains("Connection refused"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "the password never shows: {err}");
}
