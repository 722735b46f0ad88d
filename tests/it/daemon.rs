//! The daemon's tick over the simulator with a fake clock: due windows are
//! processed, incidents are alerted once and resolved, and an outage gives
//! one "source unhealthy" alert followed by one catch-up summary.

use crate::support::*;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::clock::{Clock, FakeClock};
use costwatch::daemon::{Daemon, DaemonSettings};
use costwatch::incidents::AlertPolicy;
use costwatch::notify::outbox::Channel;
use costwatch::notify::{Alert, AlertKind, AlertStatus, Notifier, NotifyError};
use costwatch::pipeline::{Pipeline, Schedule};
use costwatch::store::{SqlStore, Store};
use costwatch_sim::scenario::{ScenarioParams, generate};
use costwatch_sim::server::{Fault, FaultKind};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A channel that records what it receives and can fail its first calls.
#[derive(Default)]
pub struct Recorder {
    pub received: Mutex<Vec<Alert>>,
    pub fail_next: AtomicUsize,
}

impl Notifier for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    async fn send(&self, alert: &Alert) -> Result<(), NotifyError> {
        if self.fail_next.load(Ordering::SeqCst) > 0 {
            self.fail_next.fetch_sub(1, Ordering::SeqCst);
            return Err(NotifyError::Transient("receiver down".into()));
        }
        self.received.lock().unwrap().push(alert.clone());
        Ok(())
    }
}

pub fn policy() -> AlertPolicy {
    AlertPolicy {
        reopen_within: Duration::from_secs(6 * 3600),
        ..AlertPolicy::default()
    }
}

/// The daemon settings the tests use, with the given channels.
pub fn settings(channels: Vec<Arc<dyn Channel>>) -> DaemonSettings {
    DaemonSettings {
        policy: policy(),
        max_catch_up_windows: 672,
        tick_timeout: Duration::from_secs(600),
        tick_watch: costwatch::ops::stall::TickWatch::new(),
        max_backfill: Duration::from_secs(7 * 86_400),
        channels,
        metrics: Arc::new(costwatch::ops::metrics::Metrics::new()),
        replica: "test-replica".into(),
        lease_ttl: Duration::from_secs(60),
        claim_ttl: Duration::from_secs(15),
        escalation: None,
    }
}

struct Rig {
    daemon: Daemon<costwatch::source::reference::ReferenceSource, SqlStore>,
    clock: FakeClock,
    recorder: Arc<Recorder>,
    sim: costwatch_sim::server::SimServer,
    start: DateTime<Utc>,
    _dir: tempfile::TempDir,
}

async fn rig(days: u32, first_tick: ChronoDuration) -> Rig {
    rig_with(days, first_tick, policy()).await
}

async fn rig_with(days: u32, first_tick: ChronoDuration, policy: AlertPolicy) -> Rig {
    let params = ScenarioParams {
        days,
        sessions_per_day: 1200,
        ..ScenarioParams::default()
    };
    let start = params.start;
    let sim = start_sim(generate(&params)).await;
    let mut l = limits();
    l.max_retries = 1;
    let (source, _sleeper) = gateway_with(&sim, sim.admin_key(), 50, l);
    let dir = tempfile::tempdir().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let clock = FakeClock::new(start + first_tick);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let schedule = quarter_hours(start);
    let pipeline = Pipeline::new(source, store, detector(), schedule, 4, shared.clone());
    let recorder = Arc::new(Recorder::default());
    let settings = DaemonSettings {
        policy,
        ..settings(vec![recorder.clone() as Arc<dyn Channel>])
    };
    Rig {
        daemon: Daemon::new(pipeline, settings, shared),
        clock,
        recorder,
        sim,
        start,
        _dir: dir,
    }
}

fn by_kind(alerts: &[Alert]) -> BTreeMap<(&'static str, &'static str), usize> {
    let mut m = BTreeMap::new();
    for a in alerts {
        let status = if a.status == AlertStatus::Firing {
            "firing"
        } else {
            "resolved"
        };
        *m.entry((a.kind.as_str(), status)).or_default() += 1;
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_process_due_windows_and_alert_each_incident_once_then_resolve_it() {
    let r = rig(2, ChronoDuration::minutes(17)).await;
    // Every 15 minutes for two days: one window per tick.
    let mut windows = 0;
    for _ in 0..(2 * 96) {
        let t = r.daemon.tick().await.unwrap();
        assert!(t.source_error.is_none());
        assert!(t.windows <= 1, "one window per tick, got {}", t.windows);
        windows += t.windows;
        r.clock.advance(ChronoDuration::minutes(15));
    }
    assert_eq!(
        windows,
        2 * 96,
        "every window that ended 2 minutes before a tick"
    );
    let rows = r.daemon.store().windows("main").await.unwrap();
    assert_eq!(rows.len(), windows);
    assert!(rows.iter().all(|w| w.status == "done" && w.attempts == 1));

    let received = r.recorder.received.lock().unwrap().clone();
    let keys: std::collections::BTreeSet<String> =
        received.iter().map(|a| a.idempotency_key()).collect();
    assert_eq!(
        keys.len(),
        received.len(),
        "no notification delivered twice"
    );
    // The no_cache incident of day 2 in support-agent: fired once, resolved once.
    let support: Vec<&Alert> = received
        .iter()
        .filter(|a| a.kind == AlertKind::NoCache && a.group == "feature=support-agent")
        .collect();
    let firing = support
        .iter()
        .filter(|a| a.status == AlertStatus::Firing)
        .count();
    let resolved = support
        .iter()
        .filter(|a| a.status == AlertStatus::Resolved)
        .count();
    assert_eq!(
        (firing, resolved),
        (1, 1),
        "{:#?}",
        support
            .iter()
            .map(|a| (&a.title, a.status))
            .collect::<Vec<_>>()
    );
    let fire = support
        .iter()
        .find(|a| a.status == AlertStatus::Firing)
        .unwrap();
    let done = support
        .iter()
        .find(|a| a.status == AlertStatus::Resolved)
        .unwrap();
    assert_eq!(fire.fingerprint, done.fingerprint);
    assert!(
        done.session_count > fire.session_count,
        "the incident kept growing after the first alert"
    );
    assert!(!fire.sessions.is_empty() && fire.sessions.len() <= 5);
    assert!(
        fire.title
            .starts_with("[costwatch] no_cache in feature=support-agent"),
        "{}",
        fire.title
    );
    // Every incident alternates: fired, resolved, (a new episode) fired, ...
    // never fired twice within one episode.
    let mut per_incident: BTreeMap<String, Vec<(u32, AlertStatus)>> = BTreeMap::new();
    for a in &received {
        per_incident
            .entry(a.fingerprint.clone())
            .or_default()
            .push((a.sequence, a.status));
    }
    for (fp, mut seq) in per_incident {
        seq.sort_by_key(|(n, _)| *n);
        for (i, (n, status)) in seq.iter().enumerate() {
            assert_eq!(*n as usize, i + 1, "{fp}: sequence numbers run 1, 2, 3...");
            let expected = if i % 2 == 0 {
                AlertStatus::Firing
            } else {
                AlertStatus::Resolved
            };
            assert_eq!(*status, expected, "{fp}: {seq:?}");
        }
    }
    assert!(
        r.daemon
            .store()
            .outbox()
            .await
            .unwrap()
            .iter()
            .all(|o| o.status == "sent")
    );
    let _ = r.start;
}

/// The first firing no_cache alert of support-agent over two days of
/// quarter-hour ticks with `policy`.
async fn first_support_alert(policy: AlertPolicy) -> Alert {
    let r = rig_with(2, ChronoDuration::minutes(17), policy).await;
    for _ in 0..(2 * 96) {
        r.daemon.tick().await.unwrap();
        r.clock.advance(ChronoDuration::minutes(15));
    }
    let received = r.recorder.received.lock().unwrap().clone();
    received
        .into_iter()
        .find(|a| {
            a.kind == AlertKind::NoCache
                && a.group == "feature=support-agent"
                && a.status == AlertStatus::Firing
        })
        .expect("the support-agent incident fires")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_wait_holds_the_first_alert_for_the_windows_after_the_first() {
    let at_once = first_support_alert(policy()).await;
    let waited = first_support_alert(AlertPolicy {
        group_wait: Duration::from_secs(45 * 60),
        ..policy()
    })
    .await;
    // The same incident, from the same start; told of two ticks later,
    // once its first window's start is 45 minutes behind, with what the
    // windows since found.
    assert_eq!(waited.fingerprint, at_once.fingerprint);
    assert_eq!(waited.starts_at, at_once.starts_at);
    assert_eq!(
        waited.created_at - at_once.created_at,
        ChronoDuration::minutes(30)
    );
    assert!(
        waited.session_count > at_once.session_count,
        "{} > {}",
        waited.session_count,
        at_once.session_count
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_six_hour_outage_gives_one_unhealthy_alert_then_one_catch_up_summary() {
    // Start at 09:02 on day 2: the first tick catches up from midnight of day 1.
    let r = rig(
        2,
        ChronoDuration::hours(24 + 9) + ChronoDuration::minutes(2),
    )
    .await;
    let first = r.daemon.tick().await.unwrap();
    assert_eq!(first.windows, 96 + 36, "a day and nine hours of windows");
    let after_first = r.recorder.received.lock().unwrap().len();
    assert!(
        by_kind(&r.recorder.received.lock().unwrap())
            .keys()
            .all(|(k, _)| *k == "catch_up_summary"),
        "a catch-up sends one summary instead of one alert per incident"
    );
    assert_eq!(
        after_first, 1,
        "day 1's incidents began and ended during the catch-up: one summary"
    );
    let summary = r.recorder.received.lock().unwrap()[0].clone();
    assert!(
        summary
            .summary
            .contains("oversized_model in feature=triage"),
        "{}",
        summary.summary
    );

    // Six hours of gateway outage, a tick every 15 minutes.
    r.sim
        .faults()
        .set_persistent(Some(Fault::any(FaultKind::ServerError { status: 503 })));
    let watermark_before = first.watermark.unwrap();
    for _ in 0..24 {
        r.clock.advance(ChronoDuration::minutes(15));
        let t = r.daemon.tick().await.unwrap();
        assert!(t.source_error.is_some());
        assert_eq!(t.windows, 0);
        assert_eq!(
            t.watermark,
            Some(watermark_before),
            "no window is skipped during the outage"
        );
    }
    let during: Vec<Alert> = r.recorder.received.lock().unwrap()[after_first..].to_vec();
    assert_eq!(
        by_kind(&during),
        BTreeMap::from([(("source_unhealthy", "firing"), 1)]),
        "one alert, not a storm"
    );

    // The gateway is back: one tick catches up every window of the outage.
    r.sim.faults().clear();
    r.clock.advance(ChronoDuration::minutes(15));
    let back = r.daemon.tick().await.unwrap();
    assert!(back.source_error.is_none());
    assert_eq!(
        back.windows, 25,
        "the 24 windows of the outage and the one that just ended"
    );
    let after: Vec<Alert> = r.recorder.received.lock().unwrap()[after_first + 1..].to_vec();
    let kinds = by_kind(&after);
    assert_eq!(kinds.get(&("source_unhealthy", "resolved")), Some(&1));
    assert_eq!(
        kinds.get(&("catch_up_summary", "firing")),
        Some(&1),
        "{kinds:?}"
    );
    assert_eq!(kinds.values().sum::<usize>(), 2, "{kinds:?}");
    let summary = after
        .iter()
        .find(|a| a.kind == AlertKind::CatchUpSummary)
        .unwrap();
    assert!(summary.title.contains("25 windows"), "{}", summary.title);

    // Every window from the start to the watermark is done exactly once.
    let rows = r.daemon.store().windows("main").await.unwrap();
    assert_eq!(rows.len(), 96 + 36 + 25);
    assert!(rows.iter().all(|w| w.status == "done"));
    for pair in rows.windows(2) {
        assert_eq!(
            pair[0].window.end, pair[1].window.start,
            "no gap, no overlap"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_fails_for_a_while_gets_each_alert_once_after() {
    let r = rig(
        2,
        ChronoDuration::hours(24 + 9) + ChronoDuration::minutes(2),
    )
    .await;
    r.recorder.fail_next.store(3, Ordering::SeqCst);
    r.daemon.tick().await.unwrap();
    assert!(r.recorder.received.lock().unwrap().is_empty());
    let pending = r.daemon.store().outbox().await.unwrap();
    assert!(!pending.is_empty());
    assert!(
        pending
            .iter()
            .all(|o| o.status == "pending" && o.attempts == 1)
    );
    // Retries happen at 30 s, 60 s, ... after each failure.
    for _ in 0..4 {
        r.clock.advance(ChronoDuration::minutes(5));
        r.daemon.deliver().await.unwrap();
    }
    let received = r.recorder.received.lock().unwrap().clone();
    assert_eq!(received.len(), pending.len());
    let rows = r.daemon.store().outbox().await.unwrap();
    assert!(rows.iter().all(|o| o.status == "sent"), "{rows:?}");
}

/// A real HTTP receiver that answers 503 to its first `fail` requests.
async fn flaky_receiver(fail: usize) -> (Arc<Mutex<Vec<String>>>, String) {
    use axum::http::{HeaderMap, StatusCode};
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let left = Arc::new(AtomicUsize::new(fail));
    let (s, l) = (seen.clone(), left.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap| {
            let (s, l) = (s.clone(), l.clone());
            async move {
                if l.load(Ordering::SeqCst) > 0 {
                    l.fetch_sub(1, Ordering::SeqCst);
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
                let key = headers
                    .get("x-costwatch-idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                s.lock().unwrap().push(key.to_owned());
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (seen, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_down_for_a_while_gets_each_alert_once_and_other_channels_are_not_held_up() {
    use costwatch::config::WebhookShape;
    use costwatch::notify::webhook::{WebhookNotifier, WebhookSettings};
    let (seen, url) = flaky_receiver(3).await;
    let webhook = WebhookNotifier::new(WebhookSettings {
        name: "hook".into(),
        url: url::Url::parse(&url).unwrap(),
        shape: WebhookShape::Generic,
        secret_file: None,
        secret: None,
        timeout: Duration::from_secs(5),
        repost_interval: Duration::from_secs(60),
    })
    .unwrap();
    let mut r = rig(
        2,
        ChronoDuration::hours(24 + 9) + ChronoDuration::minutes(2),
    )
    .await;
    // Two channels: the flaky webhook and the in-process recorder.
    let recorder = Arc::new(Recorder::default());
    r.daemon = rebuild_with_channels(&r, vec![Arc::new(webhook), recorder.clone()]).await;
    r.daemon.tick().await.unwrap();
    assert_eq!(
        recorder.received.lock().unwrap().len(),
        1,
        "the other channel got its alert at once"
    );
    assert!(seen.lock().unwrap().is_empty(), "the webhook is still down");
    for _ in 0..6 {
        r.clock.advance(ChronoDuration::minutes(5));
        r.daemon.deliver().await.unwrap();
    }
    let keys = seen.lock().unwrap().clone();
    assert_eq!(
        keys.len(),
        1,
        "delivered once, after it came back: {keys:?}"
    );
    assert_eq!(
        keys[0],
        recorder.received.lock().unwrap()[0].idempotency_key()
    );
    let rows = r.daemon.store().outbox().await.unwrap();
    let hook = rows.iter().find(|o| o.channel == "hook").unwrap();
    assert_eq!(
        (hook.status.as_str(), hook.attempts),
        ("sent", 4),
        "three 503s, then success"
    );
}

/// The rig's daemon again, on the same store and clock, with other channels.
async fn rebuild_with_channels(
    r: &Rig,
    channels: Vec<Arc<dyn Channel>>,
) -> Daemon<costwatch::source::reference::ReferenceSource, SqlStore> {
    let (source, _) = gateway_with(&r.sim, r.sim.admin_key(), 50, limits());
    let shared: Arc<dyn Clock> = Arc::new(r.clock.clone());
    let schedule = Schedule {
        job: "main".into(),
        windows: costwatch::config::WindowConfig {
            size: Duration::from_secs(900),
            settle_lag: Duration::from_secs(120),
            start: Some(r.start),
            max_backfill: Duration::from_secs(7 * 86_400),
        },
    };
    let store = r.daemon.store().clone();
    let pipeline = Pipeline::new(source, store, detector(), schedule, 4, shared.clone());
    let settings = settings(channels);
    Daemon::new(pipeline, settings, shared)
}
