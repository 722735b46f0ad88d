//! Silences: kept through the built binary (SQLite and PostgreSQL), and
//! honoured by the daemon's evaluation. A silence holds back what would be
//! queued for matching incidents, counts each held-back notification once,
//! and when it ends, what it held back and is still owed is notified once.

use crate::daemon::{Recorder, policy, settings};
use crate::operator::{command, json_of, run, seeded, stdout_of};
use crate::pg::PgCluster;
use crate::support::*;
use chrono::{DateTime, Utc};
use costwatch::alerting;
use costwatch::clock::{Clock, FakeClock, SystemClock};
use costwatch::daemon::Daemon;
use costwatch::notify::outbox::Channel;
use costwatch::notify::{AlertKind, AlertStatus};
use costwatch::pipeline::{Pipeline, Schedule};
use costwatch::silence::{SilenceEnd, SilenceRequest};
use costwatch::source::reference::ReferenceSource;
use costwatch::store::{SilenceStore, SqlStore, Store};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tempfile::TempDir;

/// Hourly windows from 11:00 of the seed day, read two minutes after they end.
fn hourly() -> Schedule {
    Schedule {
        job: "main".into(),
        windows: costwatch::config::WindowConfig {
            size: Duration::from_secs(3600),
            settle_lag: Duration::from_secs(120),
            start: Some(ts("2026-10-11T11:00:00Z")),
            max_backfill: Duration::from_secs(7 * 86_400),
        },
    }
}

/// A silence of `kind` from `from` to `until`.
async fn silence(store: &SqlStore, kind: &str, from: DateTime<Utc>, until: DateTime<Utc>) -> i64 {
    let new = SilenceRequest {
        kind: Some(kind.to_owned()),
        end: Some(SilenceEnd::Until(until)),
        author: "ana".into(),
        reason: format!("{kind} is known"),
        ..SilenceRequest::default()
    }
    .check(from, &["feature".to_owned()])
    .unwrap();
    store.add_silence(&new, from).await.unwrap().id
}

/// The log lines of this thread's tracing events, for a current-thread test.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

impl Logs {
    fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

struct Rig {
    daemon: Daemon<ReferenceSource, SqlStore>,
    store: SqlStore,
    clock: FakeClock,
    recorder: Arc<Recorder>,
    metrics: Arc<costwatch::ops::metrics::Metrics>,
    _sim: costwatch_sim::SimServer,
    _dir: TempDir,
}

/// The daemon over the seed window on a SQLite state, its clock at `at`.
async fn rig(at: DateTime<Utc>) -> Rig {
    let sim = start_sim(seed_dataset()).await;
    let (source, _) = gateway(&sim, 50);
    let dir = TempDir::new().unwrap();
    let store = SqlStore::open(&sqlite_url(&dir)).await.unwrap();
    let clock = FakeClock::new(at);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let pipeline = Pipeline::new(
        source,
        store.clone(),
        detector(),
        hourly(),
        4,
        shared.clone(),
    );
    let recorder = Arc::new(Recorder::default());
    let s = settings(vec![recorder.clone() as Arc<dyn Channel>]);
    let metrics = s.metrics.clone();
    Rig {
        daemon: Daemon::new(pipeline, s, shared),
        store,
        clock,
        recorder,
        metrics,
        _sim: sim,
        _dir: dir,
    }
}

impl Rig {
    /// A tick at `at`.
    async fn tick(&self, at: &str) -> costwatch::daemon::TickReport {
        self.clock.set(ts(at));
        self.daemon.tick().await.unwrap()
    }

    /// `(kind, status)` of every alert received so far, in order.
    fn received(&self) -> Vec<(AlertKind, AlertStatus)> {
        self.recorder
            .received
            .lock()
            .unwrap()
            .iter()
            .map(|a| (a.kind, a.status))
            .collect()
    }

    fn silenced_metric(&self, kind: &str) -> Option<f64> {
        let page = self.metrics.render();
        let name = format!("costwatch_alerts_silenced_total{{kind=\"{kind}\"}}");
        metric(&page, &name)
    }
}

#[tokio::test]
async fn a_silence_holds_back_counts_once_and_its_end_releases_what_is_owed_once() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let r = rig(ts("2026-10-11T12:05:00Z")).await;
    let id = silence(
        &r.store,
        "retry_loop",
        ts("2026-10-11T12:00:00Z"),
        ts("2026-10-11T13:00:00Z"),
    )
    .await;

    // The seed window: three incidents; the retry loop's firing is held back.
    let t = r.tick("2026-10-11T12:05:00Z").await;
    assert_eq!(t.windows, 1);
    let mut kinds: Vec<AlertKind> = t.alerts.iter().map(|a| a.kind).collect();
    kinds.sort_by_key(|k| k.as_str());
    assert_eq!(kinds, [AlertKind::NoCache, AlertKind::OversizedModel]);
    assert_eq!(t.silenced.len(), 1);
    assert_eq!(
        (t.silenced[0].silence_id, t.silenced[0].kind.as_str()),
        (id, "retry_loop")
    );
    assert_eq!(t.silenced[0].status, "firing");
    assert_eq!(r.received().len(), 2);
    assert_eq!(r.silenced_metric("retry_loop"), Some(1.0));
    let held = r.store.open_incidents().await.unwrap();
    let retry = held
        .iter()
        .find(|i| i.kind == "retry_loop")
        .unwrap()
        .clone();
    assert_eq!(
        (retry.notified, retry.sequence),
        (None, 0),
        "the incident's notification state is left as it was"
    );
    assert_eq!(retry.session_count, 1, "the incident itself goes on");
    let line = logs.lines("notification held back by a silence");
    assert_eq!(line.len(), 1, "{line:?}");
    assert!(line[0].contains(&format!("silence={id}")), "{}", line[0]);
    assert!(line[0].contains(&retry.fingerprint), "{}", line[0]);

    // Still silenced: held back again, but counted and logged once.
    let t = r.tick("2026-10-11T12:30:00Z").await;
    assert_eq!(t.silenced.len(), 1);
    assert!(t.alerts.is_empty());
    assert_eq!(r.silenced_metric("retry_loop"), Some(1.0));
    assert_eq!(logs.lines("notification held back by a silence").len(), 1);
    assert_eq!(r.received().len(), 2);

    // 13:00: the silence ran out (it covers [12:00, 13:00)). This evaluation
    // logs its end, naming it, and tells of the retry loop that is still
    // going on: once.
    let t = r.tick("2026-10-11T13:00:00Z").await;
    assert!(t.silenced.is_empty());
    assert_eq!(t.alerts.len(), 1, "{:?}", t.alerts);
    assert_eq!(t.alerts[0].fingerprint, retry.fingerprint);
    assert_eq!(
        (t.alerts[0].status, t.alerts[0].sequence),
        (AlertStatus::Firing, 1)
    );
    assert_eq!(r.received().len(), 3);
    let ended = logs.lines("silence ended");
    assert_eq!(ended.len(), 1, "{ended:?}");
    for want in [
        format!("silence={id}"),
        "how=\"ran out\"".to_owned(),
        "held_back_still_open=1".to_owned(),
    ] {
        assert!(ended[0].contains(&want), "{want} in {}", ended[0]);
    }

    // Later ticks: nothing twice, and the end is logged once.
    for at in ["2026-10-11T13:05:00Z", "2026-10-11T13:30:00Z"] {
        let t = r.tick(at).await;
        assert!(t.alerts.is_empty(), "{at}: {:?}", t.alerts);
    }
    assert_eq!(r.received().len(), 3);
    assert_eq!(logs.lines("silence ended").len(), 1);
    let keys: Vec<String> = r
        .store
        .outbox()
        .await
        .unwrap()
        .iter()
        .map(|o| o.idempotency_key.clone())
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert_eq!(r.silenced_metric("retry_loop"), Some(1.0));
    assert_eq!(
        r.store.silenced_of(&retry.fingerprint).await.unwrap().len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolutions_under_a_silence_are_held_back_and_an_episode_inside_one_is_never_told() {
    let r = rig(ts("2026-10-11T12:05:00Z")).await;
    // Oversized models are silenced before anything happens.
    let quiet = silence(
        &r.store,
        "oversized_model",
        ts("2026-10-11T12:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
    )
    .await;
    let t = r.tick("2026-10-11T12:05:00Z").await;
    assert_eq!(t.alerts.len(), 2);
    assert_eq!(r.received().len(), 2, "no_cache and retry_loop were told");

    // No-cache is silenced after it was told.
    let later = silence(
        &r.store,
        "no_cache",
        ts("2026-10-11T12:10:00Z"),
        ts("2026-10-12T00:00:00Z"),
    )
    .await;
    // Two quiet hours of data resolve all three at 14:00 of data time.
    for at in ["2026-10-11T13:05:00Z", "2026-10-11T14:05:00Z"] {
        r.tick(at).await;
    }
    assert!(
        r.store.open_incidents().await.unwrap().is_empty(),
        "all resolved"
    );
    let mut got = r.received();
    got.sort_by_key(|(k, s)| (k.as_str(), *s == AlertStatus::Resolved));
    assert_eq!(
        got,
        [
            (AlertKind::NoCache, AlertStatus::Firing),
            (AlertKind::RetryLoop, AlertStatus::Firing),
            (AlertKind::RetryLoop, AlertStatus::Resolved),
        ],
        "the silenced resolutions and the silenced episode were not sent"
    );
    assert_eq!(r.silenced_metric("no_cache"), Some(1.0), "its resolution");
    assert_eq!(
        r.silenced_metric("oversized_model"),
        Some(2.0),
        "its firing and its resolution"
    );

    // Both silences end: nothing is owed, nothing is sent.
    let now = ts("2026-10-11T14:10:00Z");
    r.store.expire_silence(quiet, now).await.unwrap();
    r.store.expire_silence(later, now).await.unwrap();
    let t = r.tick("2026-10-11T14:20:00Z").await;
    assert!(t.alerts.is_empty(), "{:?}", t.alerts);
    assert_eq!(r.received().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silences_are_added_listed_and_expired_through_the_binary() {
    let (dir, cfg) = seeded(seed_dataset()).await;
    let add = |args: &[&str]| {
        let mut cmd = command(&cfg, &["silence", "add"]);
        cmd.args(args);
        cmd
    };
    let out = run(add(&[
        "--match",
        "feature=checkout",
        "--kind",
        "retry_loop",
        "--for",
        "2h",
        "--reason",
        "fix deploying",
        "--author",
        "ana",
    ]))
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1\n",
        "only the id on stdout"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("it matches 1 open incident now"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tomorrow = (SystemClock.now() + chrono::Duration::days(1)).to_rfc3339();
    let two = stdout_of(add(&[
        "--group",
        "feature=triage",
        "--until",
        &tomorrow,
        "--reason",
        "sol week",
    ]))
    .await;
    assert_eq!(two, "2\n");

    // Refused: nothing is stored, every problem is said, exit 1.
    for (args, want) in [
        (vec!["--for", "1h", "--reason", "r"], "no matcher"),
        (
            vec!["--match", "feature=a", "--for", "0s", "--reason", "r"],
            "--for: must be positive",
        ),
        (
            vec!["--match", "team=x", "--for", "1h", "--reason", "r"],
            "team can never match",
        ),
        (
            vec![
                "--match",
                "feature=a",
                "--until",
                "2020-01-01T00:00:00Z",
                "--reason",
                "r",
            ],
            "already past",
        ),
        (vec!["--match", "feature=a", "--for", "1h"], "--reason"),
        (
            vec!["--match", "feature=a", "--reason", "r"],
            "--for DURATION or --until TIME",
        ),
    ] {
        let out = run(add(&args)).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
    let out = run(add(&[
        "--match",
        "feature=a",
        "--for",
        "1h",
        "--until",
        &tomorrow,
        "--reason",
        "r",
    ]))
    .await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "--for and --until together are a usage error"
    );

    let list = json_of(command(&cfg, &["silence", "list", "--format", "json"])).await;
    let ids: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(list[0]["state"], "active");
    assert_eq!(list[0]["kind"], "retry_loop");
    assert_eq!(
        list[0]["matchers"],
        serde_json::json!({"feature": "checkout"})
    );
    assert_eq!(list[0]["author"], "ana");
    assert_eq!(list[1]["group"], "feature=triage");
    assert_eq!(
        list[1]["ends_at"],
        ts(&tomorrow).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );

    // The incidents they match show it.
    let incidents = json_of(command(&cfg, &["incidents", "--format", "json"])).await;
    for i in incidents.as_array().unwrap() {
        let want = match i["group"].as_str().unwrap() {
            "feature=checkout" => serde_json::json!(1),
            "feature=triage" => serde_json::json!(2),
            _ => serde_json::Value::Null,
        };
        assert_eq!(i["silenced_by"], want, "{i}");
    }
    let fp = incidents
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["group"] == "feature=checkout")
        .unwrap()["fingerprint"]
        .as_str()
        .unwrap()
        .to_owned();
    let show = stdout_of(command(&cfg, &["incident", "show", &fp])).await;
    assert!(show.contains("Silenced   by silence 1 until"), "{show}");

    let table = stdout_of(command(&cfg, &["silence", "list"])).await;
    assert!(
        table.lines().next().unwrap().starts_with("ID  STATE"),
        "{table}"
    );
    assert!(
        table.contains("kind=retry_loop feature=checkout"),
        "{table}"
    );

    // Expire: once; again, or an unknown id, is an error.
    let out = stdout_of(command(&cfg, &["silence", "expire", "1"])).await;
    assert!(out.starts_with("silence 1 expired at "), "{out}");
    let active = json_of(command(&cfg, &["silence", "list", "--format", "json"])).await;
    assert_eq!(active.as_array().unwrap().len(), 1);
    assert_eq!(active[0]["id"], 2);
    let all = json_of(command(
        &cfg,
        &["silence", "list", "--all", "--format", "json"],
    ))
    .await;
    let states: Vec<(i64, &str)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_i64().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [(1, "expired"), (2, "active")]);
    assert!(all[0]["expired_at"].is_string());
    for (id, want) in [
        ("1", "silence 1 already ended"),
        ("42", "no silence with id 42"),
    ] {
        let out = run(command(&cfg, &["silence", "expire", id])).await;
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains(want), "{id}");
    }
    let csv = stdout_of(command(
        &cfg,
        &["silence", "list", "--all", "--format", "csv"],
    ))
    .await;
    assert!(
        csv.starts_with("id,state,kind,group,matchers,starts,ends,expired,author,reason\r\n"),
        "{csv}"
    );
    assert_eq!(csv.matches("\r\n").count(), 3);

    // An id is never given twice, not even after an expiry.
    let three = stdout_of(add(&[
        "--kind", "no_cache", "--for", "10m", "--reason", "r",
    ]))
    .await;
    assert_eq!(three, "3\n");
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgresql_share_silences_kept_through_the_binary() {
    let pg = PgCluster::start();
    let url = pg.url();
    let sim = start_sim(seed_dataset()).await;
    // The seed hour, committed to the shared state.
    let a = SqlStore::open(&url).await.unwrap();
    let (source, _) = gateway(&sim, 50);
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(ts("2026-10-11T12:05:00Z")));
    let pipeline = Pipeline::new(source, a.clone(), detector(), hourly(), 4, clock);
    let reports = pipeline
        .run_due(ts("2026-10-11T12:05:00Z"), |_| {})
        .await
        .unwrap();
    assert_eq!(reports.len(), 1);

    // The operator keeps silences through the binary, several at once.
    let dir = TempDir::new().unwrap();
    let cfg = dir.path().join("costwatch.yaml");
    std::fs::write(
        &cfg,
        "source:\n  api_url: http://127.0.0.1:9/v1\n\
         notify:\n  webhooks:\n    - name: am\n      url: http://127.0.0.1:9/api/v2/alerts\n      shape: alertmanager\n",
    )
    .unwrap();
    let cli = |args: &[&str]| {
        let mut cmd = command(&cfg, args);
        cmd.env("COSTWATCH_STATE__URL", &url);
        cmd
    };
    let adds: Vec<_> = (0..4)
        .map(|n| {
            let reason = format!("parallel {n}");
            run(cli(&[
                "silence",
                "add",
                "--group",
                "feature=nowhere",
                "--for",
                "1h",
                "--reason",
                &reason,
            ]))
        })
        .collect();
    let mut ids = Vec::new();
    for out in futures_join(adds).await {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ids.push(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<i64>()
                .unwrap(),
        );
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "no id twice: {ids:?}");
    let id: i64 = stdout_of(cli(&[
        "silence",
        "add",
        "--match",
        "feature=checkout",
        "--for",
        "1h",
        "--reason",
        "checkout fix deploying",
    ]))
    .await
    .trim()
    .parse()
    .unwrap();

    let channels = ["am".to_owned()];
    let evaluate = |store: SqlStore| {
        let channels = channels.clone();
        async move {
            let now = SystemClock.now();
            let plan = alerting::plan(
                &store,
                "main",
                &policy(),
                ts("2026-10-11T12:00:00Z"),
                true,
                now,
            )
            .await
            .unwrap();
            plan.enqueue(&store, &channels, now, now + chrono::Duration::days(1))
                .await
                .unwrap();
            let first = alerting::silences::record_held_back(&store, &plan)
                .await
                .unwrap();
            (plan, first)
        }
    };
    // Replica A evaluates: the checkout incident is held back.
    let (plan, first) = evaluate(a.clone()).await;
    assert_eq!(plan.alerts.len(), 2, "{:?}", plan.alerts);
    assert_eq!(plan.silenced.len(), 1);
    assert_eq!(plan.silenced[0].silence_id, id);
    assert_eq!(first.len(), 1);
    // Replica B, its own pool: the same silence holds, counted once.
    let b = SqlStore::open(&url).await.unwrap();
    let (plan, first) = evaluate(b.clone()).await;
    assert!(plan.alerts.is_empty());
    assert_eq!(plan.silenced.len(), 1);
    assert!(first.is_empty(), "already recorded by replica A");

    // What the binary shows from the shared state.
    let list = json_of(cli(&["silence", "list", "--format", "json"])).await;
    assert_eq!(list.as_array().unwrap().len(), 5);
    let preview = json_of(cli(&["alerts", "--format", "json"])).await;
    assert_eq!(preview["silenced"][0]["silence_id"], id, "{preview}");

    // Expired through the binary: the next evaluation, on replica B, tells
    // of the incident once; replica A then has nothing more to send.
    stdout_of(cli(&["silence", "expire", &id.to_string()])).await;
    let ended = alerting::silences::notice_ended(&b, SystemClock.now())
        .await
        .unwrap();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].silence.id, id);
    assert_eq!(ended[0].still_open.len(), 1);
    let (plan, _) = evaluate(b.clone()).await;
    assert_eq!(plan.alerts.len(), 1);
    assert_eq!(plan.alerts[0].kind, AlertKind::RetryLoop);
    assert!(plan.silenced.is_empty());
    assert!(
        alerting::silences::notice_ended(&a, SystemClock.now())
            .await
            .unwrap()
            .is_empty()
    );
    let (plan, _) = evaluate(a.clone()).await;
    assert!(plan.alerts.is_empty(), "{:?}", plan.alerts);
    let keys: Vec<String> = a
        .outbox()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.idempotency_key)
        .collect();
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((keys.len(), unique.len()), (3, 3), "{keys:?}");

    // The read commands on the shared state.
    let rows = json_of(cli(&[
        "findings",
        "--kind",
        "retry_loop",
        "--kind",
        "no_cache",
        "--format",
        "json",
    ]))
    .await;
    assert_eq!(rows.as_array().unwrap().len(), 2);
    let rows = json_of(cli(&[
        "findings", "--limit", "1", "--since", "10000d", "--format", "json",
    ]))
    .await;
    assert_eq!(rows.as_array().unwrap().len(), 1);
    let open = json_of(cli(&[
        "incidents",
        "--status",
        "open",
        "--group",
        "feature=checkout",
        "--format",
        "json",
    ]))
    .await;
    assert_eq!(open.as_array().unwrap().len(), 1);
    assert_eq!(open[0]["notifications"], 1);
    let fp = open[0]["fingerprint"].as_str().unwrap().to_owned();
    let show = json_of(cli(&["incident", "show", &fp[..8], "--format", "json"])).await;
    assert_eq!(show["held_back"][0]["silence_id"], id);
    assert_eq!(show["notifications"][0]["channels"][0]["status"], "pending");
    // Delivered a while ago: the dry run shows Alertmanager's re-posts due.
    let now = SystemClock.now();
    for d in a
        .claim_deliveries("test", now, now + chrono::Duration::minutes(1), 100)
        .await
        .unwrap()
    {
        a.delivered(d.id, now - chrono::Duration::minutes(10))
            .await
            .unwrap();
    }
    let preview = json_of(cli(&["alerts", "--render", "--format", "json"])).await;
    let origins: Vec<&str> = preview["upcoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["origin"].as_str().unwrap())
        .collect();
    assert_eq!(origins, ["repost", "repost", "repost"], "{preview}");
    a.close().await;
    b.close().await;
}

/// Runs the futures together and returns their outputs in order.
async fn futures_join<F>(fs: Vec<F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
