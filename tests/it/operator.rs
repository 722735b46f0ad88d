//! The operator's read commands through the built binary, on a SQLite state
//! written by `costwatch once` over the seed window: `findings`,
//! `incidents` and `incident show`, their filters and formats, and gateway
//! text escaped in every one of them.

use crate::cli::{SEED_WASTE, seed_with_hostile_ids};
use crate::support::*;
use costwatch::investigate::InvestigationReport;
use costwatch::printable::is_unsafe;
use costwatch::store::{SqlStore, Store, StoredInvestigation};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;

/// Where the seed window's findings land: `(kind, group)`.
pub const SEED_INCIDENTS: [(&str, &str); 3] = [
    ("no_cache", "feature=support-agent"),
    ("oversized_model", "feature=triage"),
    ("retry_loop", "feature=checkout"),
];

/// A configuration over hourly windows from 11:00 of the seed day, its
/// state in `dir` (`state.db`), with three channels that are never
/// contacted: email, a Slack webhook and an Alertmanager webhook.
pub fn config(dir: &Path) -> PathBuf {
    let path = dir.join("costwatch.yaml");
    let yaml = "\
source:
  api_url: http://127.0.0.1:9/v1
windows:
  size: 1h
  start: 2026-10-11T11:00:00Z
state:
  url: sqlite://state.db
notify:
  email:
    host: 127.0.0.1
    port: 9
    security: none
    from: costwatch <costwatch@example.com>
    to: [ops@example.com]
  webhooks:
    - name: chat
      url: http://127.0.0.1:9/hooks/chat
      shape: slack
    - name: am
      url: http://127.0.0.1:9/api/v2/alerts
      shape: alertmanager
";
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `costwatch ARGS --config config`.
pub fn command(config: &Path, args: &[&str]) -> Command {
    let mut cmd = costwatch_command(args);
    cmd.arg("--config").arg(config);
    cmd
}

/// Runs a command off the async runtime.
pub async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("the binary runs"))
        .await
        .unwrap()
}

/// stdout of a command that must succeed.
pub async fn stdout_of(cmd: Command) -> String {
    let out = run(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON a command printed.
pub async fn json_of(cmd: Command) -> Value {
    let text = stdout_of(cmd).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// A state in a fresh folder: the seed window of `dataset` committed (one
/// hourly window, three findings, three open incidents) as a tick commits
/// it before its evaluation, so nobody has been told of them yet.
pub async fn seeded(dataset: costwatch_sim::Dataset) -> (TempDir, PathBuf) {
    let sim = start_sim(dataset).await;
    let dir = TempDir::new().unwrap();
    let cfg = config(dir.path());
    let env = std::collections::BTreeMap::from([
        ("COSTWATCH_SOURCE__API_URL".to_owned(), sim.base_url()),
        ("COSTWATCH_ADMIN_KEY".to_owned(), sim.admin_key().to_owned()),
    ]);
    let loaded = costwatch::config::load_with_env(&cfg, &env).unwrap();
    let clock: std::sync::Arc<dyn costwatch::clock::Clock> =
        std::sync::Arc::new(costwatch::clock::SystemClock);
    let pipeline = costwatch::app::main_pipeline(&loaded, clock).await.unwrap();
    let reports = pipeline
        .run_due(crate::support::ts("2026-10-11T13:00:00Z"), |_| {})
        .await
        .unwrap();
    let findings: usize = reports.iter().map(|r| r.new_findings.len()).sum();
    assert_eq!((reports.len(), findings), (1, 3));
    pipeline.store().close().await;
    (dir, cfg)
}

/// The URL of the state of a folder made by [`seeded`].
pub fn state_url(dir: &TempDir) -> String {
    sqlite_url(dir)
}

fn kinds(rows: &Value) -> Vec<String> {
    let mut k: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_owned())
        .collect();
    k.sort();
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_listed_with_filters_as_a_table_json_and_csv() {
    let (_dir, cfg) = seeded(seed_dataset()).await;
    let all = json_of(command(&cfg, &["findings", "--format", "json"])).await;
    assert_eq!(
        kinds(&all),
        ["no_cache", "oversized_model", "retry_loop"],
        "{all}"
    );
    let ids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    for id in SEED_WASTE {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let row = &all[0];
    for key in [
        "window_start",
        "severity",
        "rule",
        "group",
        "labels",
        "impact_usd",
        "evidence",
    ] {
        assert!(row.get(key).is_some(), "no {key} in {row}");
    }

    let by_kind = json_of(command(
        &cfg,
        &["findings", "--kind", "retry_loop", "--format", "json"],
    ))
    .await;
    assert_eq!(kinds(&by_kind), ["retry_loop"]);
    let two = json_of(command(
        &cfg,
        &[
            "findings",
            "--kind",
            "retry_loop",
            "--kind",
            "no_cache",
            "--format",
            "json",
        ],
    ))
    .await;
    assert_eq!(kinds(&two), ["no_cache", "retry_loop"]);
    let by_group = json_of(command(
        &cfg,
        &["findings", "--group", "feature=triage", "--format", "json"],
    ))
    .await;
    assert_eq!(kinds(&by_group), ["oversized_model"]);
    // Every finding was first seen in the 11:00 window.
    for (args, n) in [
        (["--since", "2026-10-11T11:00:00Z"], 3),
        (["--since", "2026-10-11T11:00:01Z"], 0),
        (["--until", "2026-10-11T11:00:00Z"], 0),
        (["--until", "2026-10-11T12:00:00Z"], 3),
        // A duration ago: the seed day is long past, so a day back finds
        // nothing and ten thousand days back finds everything.
        (["--since", "24h"], 0),
        (["--since", "10000d"], 3),
    ] {
        let mut cmd = command(&cfg, &["findings", "--format", "json"]);
        cmd.args(args);
        let rows = json_of(cmd).await;
        assert_eq!(rows.as_array().unwrap().len(), n, "{args:?}: {rows}");
    }
    let out = run(command(&cfg, &["findings", "--since", "last tuesday"])).await;
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("RFC 3339"));

    // The limit keeps the newest and says so.
    let out = run(command(
        &cfg,
        &["findings", "--limit", "2", "--format", "json"],
    ))
    .await;
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--limit 0 shows all"));

    // CSV: a header, one line per finding, CRLF line ends.
    let csv = stdout_of(command(&cfg, &["findings", "--format", "csv"])).await;
    let lines: Vec<&str> = csv.split_terminator("\r\n").collect();
    assert_eq!(
        lines[0],
        "window_start,window_end,kind,severity,rule,group,session_id,cost_usd,impact_usd,explanation"
    );
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(!csv.replace("\r\n", "").contains('\n'), "{csv}");
    for id in SEED_WASTE {
        assert_eq!(lines.iter().filter(|l| l.contains(id)).count(), 1, "{id}");
    }
    // Fields with a comma are quoted; quoted fields double their quotes.
    let explanation_field = lines[1].splitn(10, ',').nth(9).unwrap();
    assert!(
        !explanation_field.contains(',') || explanation_field.starts_with('"'),
        "{explanation_field}"
    );

    // The table fits the terminal it is given.
    let mut narrow = command(&cfg, &["findings"]);
    narrow.env("COLUMNS", "100");
    let table = stdout_of(narrow).await;
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("WINDOW") && lines[0].contains("EXPLANATION"),
        "{table}"
    );
    assert_eq!(lines.len(), 4, "{table}");
    for l in &lines {
        assert!(l.chars().count() <= 100, "{} chars: {l}", l.chars().count());
    }
    // Wider, nothing is cut.
    let mut wide = command(&cfg, &["findings"]);
    wide.env("COLUMNS", "1000");
    let table = stdout_of(wide).await;
    assert!(!table.contains('…'), "{table}");
    for f in all.as_array().unwrap() {
        assert!(
            table.contains(f["explanation"].as_str().unwrap()),
            "{table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incidents_are_listed_with_status_kind_group_and_time_filters() {
    let (dir, cfg) = seeded(seed_dataset()).await;
    let all = json_of(command(&cfg, &["incidents", "--format", "json"])).await;
    let mut seen: Vec<(String, String)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["status"], "open", "{i}");
            assert_eq!(i["notifications"], 0, "{i}");
            assert!(i["silenced_by"].is_null(), "{i}");
            (
                i["kind"].as_str().unwrap().to_owned(),
                i["group"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    let want: Vec<(String, String)> = SEED_INCIDENTS
        .iter()
        .map(|(k, g)| ((*k).to_owned(), (*g).to_owned()))
        .collect();
    assert_eq!(seen, want);

    let resolved = json_of(command(
        &cfg,
        &["incidents", "--status", "resolved", "--format", "json"],
    ))
    .await;
    assert_eq!(resolved, Value::Array(vec![]));
    let open = json_of(command(
        &cfg,
        &[
            "incidents",
            "--status",
            "open",
            "--kind",
            "no_cache",
            "--format",
            "json",
        ],
    ))
    .await;
    assert_eq!(kinds(&open), ["no_cache"]);
    let group = json_of(command(
        &cfg,
        &[
            "incidents",
            "--group",
            "feature=checkout",
            "--format",
            "json",
        ],
    ))
    .await;
    assert_eq!(kinds(&group), ["retry_loop"]);
    let later = json_of(command(
        &cfg,
        &[
            "incidents",
            "--since",
            "2026-10-11T12:00:01Z",
            "--format",
            "json",
        ],
    ))
    .await;
    assert_eq!(
        later,
        Value::Array(vec![]),
        "their last finding was at 12:00"
    );
    let during = json_of(command(
        &cfg,
        &[
            "incidents",
            "--since",
            "2026-10-11T12:00:00Z",
            "--until",
            "2026-10-11T11:00:01Z",
            "--format",
            "json",
        ],
    ))
    .await;
    assert_eq!(during.as_array().unwrap().len(), 3);

    // Resolve one in the state: the filters follow.
    let store = SqlStore::open(&state_url(&dir)).await.unwrap();
    let rows = store.open_incidents().await.unwrap();
    let retry = rows.iter().find(|i| i.kind == "retry_loop").unwrap();
    let update = costwatch::store::IncidentUpdate {
        fingerprint: retry.fingerprint.clone(),
        firing: false,
        notified: None,
        notified_sessions: 0,
        sequence: 0,
        reopen_until: None,
    };
    store
        .enqueue(
            None,
            &[update],
            &[],
            &[],
            ts("2026-10-11T14:00:00Z"),
            ts("2026-10-11T15:00:00Z"),
        )
        .await
        .unwrap();
    store.close().await;
    let resolved = json_of(command(
        &cfg,
        &["incidents", "--status", "resolved", "--format", "json"],
    ))
    .await;
    assert_eq!(kinds(&resolved), ["retry_loop"]);
    assert_eq!(resolved[0]["status"], "resolved");

    let csv = stdout_of(command(&cfg, &["incidents", "--format", "csv"])).await;
    let lines: Vec<&str> = csv.split_terminator("\r\n").collect();
    assert!(
        lines[0].starts_with("fingerprint,status,kind,severity,rule,group,sessions"),
        "{csv}"
    );
    assert_eq!(lines.len(), 4, "{csv}");

    let mut table = command(&cfg, &["incidents"]);
    table.env("COLUMNS", "120");
    let table = stdout_of(table).await;
    assert!(
        table.lines().next().unwrap().starts_with("INCIDENT"),
        "{table}"
    );
    assert!(table.lines().all(|l| l.chars().count() <= 120), "{table}");
    assert!(table.contains(&retry.fingerprint[..12]), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_text_is_escaped_in_every_table_and_kept_in_json() {
    let tail = "\u{1b}[2J\r\n2026-10-11 11:00  no_cache  forged\u{202e}\u{9b}0m";
    let (_dir, cfg) = seeded(seed_with_hostile_ids(tail)).await;
    let raw = |text: &str| -> Vec<char> {
        text.chars()
            .filter(|&c| is_unsafe(c) && c != '\n' && c != '\r')
            .collect()
    };
    let escaped = "\\x1b[2J\\r\\n2026-10-11 11:00  no_cache  forged\\u{202e}\\u{9b}0m";
    let mut table = command(&cfg, &["findings"]);
    table.env("COLUMNS", "1000");
    let table = stdout_of(table).await;
    assert!(raw(&table).is_empty(), "{table}");
    assert!(!table.contains('\r'));
    assert_eq!(table.lines().count(), 4, "one line per finding:\n{table}");
    for id in SEED_WASTE {
        assert!(
            table.contains(&format!("{id}{escaped}")),
            "{id} in:\n{table}"
        );
    }
    let csv = stdout_of(command(&cfg, &["findings", "--format", "csv"])).await;
    assert!(raw(&csv).is_empty(), "{csv}");
    assert_eq!(
        csv.matches("\r\n").count(),
        4,
        "no line break of the gateway's:\n{csv}"
    );
    assert!(!csv.replace("\r\n", "").contains(['\r', '\n']));

    let json_text = stdout_of(command(&cfg, &["findings", "--format", "json"])).await;
    assert!(raw(&json_text).is_empty(), "{json_text}");
    let json: Value = serde_json::from_str(&json_text).unwrap();
    for id in SEED_WASTE {
        let want = format!("{id}{tail}");
        assert!(
            json.as_array()
                .unwrap()
                .iter()
                .any(|f| f["session_id"] == want.as_str()),
            "the JSON keeps {want:?}"
        );
    }

    let incidents = json_of(command(&cfg, &["incidents", "--format", "json"])).await;
    let fp = incidents[0]["fingerprint"].as_str().unwrap().to_owned();
    let show = stdout_of(command(&cfg, &["incident", "show", &fp])).await;
    assert!(raw(&show).is_empty(), "{show}");
    assert!(show.contains(escaped), "{show}");
    let show = stdout_of(command(
        &cfg,
        &["incident", "show", &fp, "--format", "json"],
    ))
    .await;
    assert!(raw(&show).is_empty(), "{show}");
    let parsed: Value = serde_json::from_str(&show).unwrap();
    assert!(
        parsed["findings"][0]["session_id"]
            .as_str()
            .unwrap()
            .ends_with(tail),
        "{parsed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incident_show_tells_the_timeline_the_delivery_per_channel_and_the_investigation() {
    let (dir, cfg) = seeded(seed_dataset()).await;
    let store = SqlStore::open(&state_url(&dir)).await.unwrap();
    let loaded = costwatch::config::load(&cfg).unwrap();
    let policy = loaded.alerts.clone();
    let now = ts("2026-10-11T13:05:00Z");
    let channels = ["email".to_owned(), "chat".to_owned()];
    let alerts = costwatch::alerting::evaluate(
        &store,
        "main",
        &policy,
        ts("2026-10-11T12:00:00Z"),
        true,
        &channels,
        now,
        now + chrono::Duration::days(1),
    )
    .await
    .unwrap();
    assert_eq!(alerts.len(), 3, "{alerts:?}");
    let alert = alerts
        .iter()
        .find(|a| a.kind.as_str() == "retry_loop")
        .unwrap()
        .clone();
    // Email took it; the chat webhook failed once and waits for its retry.
    let claimed = store
        .claim_deliveries("test", now, now + chrono::Duration::minutes(1), 100)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 6);
    for d in claimed {
        if d.alert.fingerprint == alert.fingerprint && d.channel == "chat" {
            store
                .retry_later(
                    d.id,
                    ts("2026-10-11T13:15:00Z"),
                    "webhook chat: POST http://127.0.0.1:9/…: 503 Service Unavailable",
                )
                .await
                .unwrap();
        } else {
            store
                .delivered(d.id, ts("2026-10-11T13:05:02Z"))
                .await
                .unwrap();
        }
    }
    let report: InvestigationReport = serde_json::from_value(serde_json::json!({
        "summary": "Session retry-loop-7f2e81c09ab5 retried a failing call nine times.",
        "cost_usd": 0.000912,
        "stop_reason": "answered",
        "stop_detail": null,
        "model": "gpt-6-luna",
        "run_id": "inv-test-1",
        "input_tokens": 2210,
        "cached_tokens": 0,
        "output_tokens": 180,
        "tool_calls": 1,
        "rounds": 2,
        "tools_offered": ["search_requests"],
        "transcript": [],
    }))
    .unwrap();
    store
        .save_investigation(&StoredInvestigation {
            key: alert.idempotency_key(),
            fingerprint: alert.fingerprint.clone(),
            started_at: now,
            report,
            record_json: None,
            step_log: String::new(),
        })
        .await
        .unwrap();
    store.close().await;

    // A unique beginning of the fingerprint is enough.
    let text = stdout_of(command(
        &cfg,
        &["incident", "show", &alert.fingerprint[..10]],
    ))
    .await;
    for want in [
        format!("Incident {} (open)", alert.fingerprint),
        "retry_loop, rule".to_owned(),
        "Group      feature=checkout".to_owned(),
        "Timeline".to_owned(),
        "2026-10-11T11:00:00Z  episode began".to_owned(),
        format!("firing notification #1 queued: {}", alert.title),
        "email: delivered 2026-10-11T13:05:02Z (1 attempt)".to_owned(),
        "chat: queued, 1 attempt so far, next 2026-10-11T13:15:00Z; last error: webhook chat: POST http://127.0.0.1:9/…: 503 Service Unavailable".to_owned(),
        "Findings (1 in all, 1 shown".to_owned(),
        "retry-loop-7f2e81c09ab5".to_owned(),
        "Investigations (1)".to_owned(),
        "stopped: answered; cost $0.0009; 2 rounds, 1 tool call; model gpt-6-luna".to_owned(),
        "    Session retry-loop-7f2e81c09ab5 retried a failing call nine times.".to_owned(),
        "    costwatch investigation inv-test-1".to_owned(),
    ] {
        assert!(text.contains(&want), "missing {want:?} in:\n{text}");
    }
    let timeline: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Timeline")
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(timeline.len() >= 5, "{text}");

    let json = json_of(command(
        &cfg,
        &["incident", "show", &alert.fingerprint, "--format", "json"],
    ))
    .await;
    assert_eq!(json["incident"]["fingerprint"], alert.fingerprint.as_str());
    assert_eq!(json["incident"]["notifications"], 1);
    let n = &json["notifications"][0];
    assert_eq!(n["idempotency_key"], alert.idempotency_key().as_str());
    let channels: Vec<(&str, &str, u64)> = n["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["channel"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(channels, [("email", "sent", 1), ("chat", "pending", 1)]);
    assert!(
        n["channels"][1]["last_error"]
            .as_str()
            .unwrap()
            .contains("503")
    );
    assert_eq!(json["findings_total"], 1);
    assert_eq!(json["findings"][0]["session_id"], "retry-loop-7f2e81c09ab5");
    let inv = &json["investigations"][0];
    assert_eq!(inv["report"]["stop_reason"], "answered");
    assert_eq!(inv["report"]["cost_usd"], 0.000912);
    assert_eq!(inv["report"]["run_id"], "inv-test-1");
    assert_eq!(inv["report"]["rounds"], 2);

    // Unknown, ambiguous and malformed fingerprints: a clear error, exit 1.
    for (id, want) in [
        (
            "0000000000000000",
            "no incident with fingerprint 0000000000000000",
        ),
        (
            "not-a-fingerprint",
            "no incident with fingerprint not-a-fingerprint",
        ),
        ("", "no incident with fingerprint"),
    ] {
        let out = run(command(&cfg, &["incident", "show", id])).await;
        assert_eq!(out.status.code(), Some(1), "{id}");
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{id}: {stderr}");
    }
}
