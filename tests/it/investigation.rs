//! Escalation in the daemon: the seed window's incidents investigated over
//! the simulator's MCP endpoint by the scripted model, the investigation
//! attached to each alert, the budget persisted across a restart, and no
//! model call at all when escalation is off.

use crate::daemon::{Recorder, settings};
use crate::support::*;
use chrono::Duration as ChronoDuration;
use costwatch::clock::{Clock, FakeClock};
use costwatch::daemon::Daemon;
use costwatch::escalate::Escalation;
use costwatch::investigate::BudgetLedger;
use costwatch::investigate::budget::{Caps, Prices};
use costwatch::investigate::mcp::McpClient;
use costwatch::investigate::model::ModelClient;
use costwatch::investigate::run::{RunOptions, StopCode};
use costwatch::notify::outbox::Channel;
use costwatch::pipeline::{Pipeline, Schedule};
use costwatch::secret::Secret;
use costwatch::store::SqlStore;
use costwatch_sim::model::{Script, ScriptedCall, ScriptedModelServer};
use costwatch_sim::server::SimServer;
use std::sync::Arc;
use std::time::Duration;

fn escalation(sim: &SimServer, model: &ScriptedModelServer) -> Escalation {
    let tools = McpClient::new(
        url::Url::parse(&sim.mcp_url()).unwrap(),
        &Secret::new(sim.admin_key()),
        RunOptions::default().tools,
        Duration::from_secs(10),
    )
    .unwrap();
    let model = ModelClient::new(
        url::Url::parse(&model.base_url()).unwrap(),
        &Secret::new(model.inference_key()),
        "gpt-6-luna",
        limits(),
    )
    .unwrap();
    Escalation {
        tools: costwatch::investigate::Tools::new(tools),
        model,
        caps: Caps::default(),
        prices: Prices {
            input_usd_per_mtok: 0.10,
            cached_input_usd_per_mtok: 0.01,
            output_usd_per_mtok: 0.40,
        },
        options: RunOptions::default(),
        policy: costwatch::config::EscalateConfig::default(),
    }
}

/// A daemon over the seed window (one hourly window, 11:00-12:00).
pub(crate) async fn daemon(
    sim: &SimServer,
    url: &str,
    esc: Option<Escalation>,
    recorder: Arc<Recorder>,
) -> Daemon<costwatch::source::reference::ReferenceSource, SqlStore> {
    let (source, _) = gateway(sim, 50);
    let store = SqlStore::open(url).await.unwrap();
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(ts("2026-10-11T12:05:00Z")));
    let schedule = Schedule {
        job: "main".into(),
        windows: costwatch::config::WindowConfig {
            size: Duration::from_secs(3600),
            settle_lag: Duration::from_secs(120),
            start: Some(ts("2026-10-11T11:00:00Z")),
            max_backfill: Duration::from_secs(3650 * 86_400),
        },
    };
    let pipeline = Pipeline::new(source, store, detector(), schedule, 4, clock.clone());
    let mut s = settings(vec![recorder as Arc<dyn Channel>]);
    s.escalation = esc.map(Arc::new);
    Daemon::new(pipeline, s, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flagged_incidents_are_investigated_and_the_alert_carries_the_transcript_and_cost() {
    let sim = start_sim(seed_dataset()).await;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    let recorder = Arc::new(Recorder::default());
    let d = daemon(&sim, &url, Some(escalation(&sim, &model)), recorder.clone()).await;
    let tick = d.tick().await.unwrap();
    assert_eq!(tick.windows, 1);
    assert_eq!(
        tick.investigations, 3,
        "one per incident of the seed window"
    );

    let alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 3);
    let mut total = 0.0;
    for a in &alerts {
        let inv = a
            .investigation
            .as_ref()
            .expect("the alert carries its investigation");
        assert_eq!(inv.stop_reason, StopCode::Answered, "{inv:?}");
        let cost = inv.cost_usd;
        assert!(cost > 0.0 && cost <= 0.05, "{cost}");
        total += cost;
        let input = inv.input_tokens;
        assert!(input <= 1_700, "whole run within the token target: {input}");
        assert!(!inv.summary.is_empty());
        let text = &costwatch::notify::render::transcript_text(inv);
        assert!(
            text.contains("search_requests"),
            "every tool call is in the transcript"
        );
        assert!(
            !text.contains(sim.admin_key()),
            "no secret in the transcript"
        );
    }
    assert!(
        model
            .requests()
            .iter()
            .all(|r| !r.body.contains(sim.admin_key())),
        "the admin key never reaches the model"
    );

    // The day's spend is in the state database and survives a restart.
    let day = ts("2026-10-11T12:05:00Z").date_naive();
    drop(d);
    let reopened = SqlStore::open(&url).await.unwrap();
    let spent = reopened.spent(day).await.unwrap();
    assert!(
        (spent - total).abs() < 1e-9,
        "ledger {spent} vs alerts {total}"
    );
    assert!(
        !reopened
            .reserve(day, 1.0 - spent + 1e-6, 1.0)
            .await
            .unwrap(),
        "the cap still counts today's runs"
    );

    // A second tick (or a restart) does not investigate the same alerts again.
    let recorder2 = Arc::new(Recorder::default());
    let calls = model.requests().len();
    let d2 = daemon(&sim, &url, Some(escalation(&sim, &model)), recorder2).await;
    assert_eq!(d2.tick().await.unwrap().investigations, 0);
    assert_eq!(model.requests().len(), calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_escalation_off_a_flagged_window_alerts_without_any_model_call() {
    let sim = start_sim(seed_dataset()).await;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let d = daemon(&sim, &sqlite_url(&dir), None, recorder.clone()).await;
    let tick = d.tick().await.unwrap();
    assert_eq!((tick.windows, tick.investigations), (1, 0));
    let alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 3, "the alerts still go out");
    assert!(alerts.iter().all(|a| a.investigation.is_none()));
    assert!(model.requests().is_empty(), "no model call");
    assert_eq!(sim.mcp().count("tools/call"), 0, "no tool call either");
    let _ = ChronoDuration::zero();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backtest_investigate_runs_the_escalations_and_the_preview_calls_no_model() {
    let sim = start_sim(seed_dataset()).await;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("costwatch.yaml");
    std::fs::write(
        &cfg,
        format!(
            "source:\n  api_url: {}\nwindows:\n  size: 1h\n\
             investigation:\n  mcp_url: {}\n  llm_url: {}\n  model: gpt-6-luna\n\
             \x20 prices: {{input_usd_per_mtok: 0.10, cached_input_usd_per_mtok: 0.01, output_usd_per_mtok: 0.40}}\n\
             rules: [{}]\n",
            sim.base_url(),
            sim.mcp_url(),
            model.base_url(),
            manifest_dir().join("rules").display()
        ),
    )
    .unwrap();
    let run = |extra: &'static str| {
        let mut cmd = costwatch_command(&[
            "backtest",
            "--config",
            cfg.to_str().unwrap(),
            "--from",
            "2026-10-11T11:00:00Z",
            "--to",
            "2026-10-11T12:00:00Z",
            "--format",
            "jsonl",
            extra,
        ]);
        cmd.env("COSTWATCH_ADMIN_KEY", sim.admin_key())
            .env("COSTWATCH_INFERENCE_KEY", model.inference_key());
        async move {
            tokio::task::spawn_blocking(move || cmd.output().unwrap())
                .await
                .unwrap()
        }
    };
    let preview = run("--spend-preview").await;
    let err = String::from_utf8_lossy(&preview.stderr);
    assert_eq!(preview.status.code(), Some(0), "{err}");
    assert!(err.contains("3 would be investigated"), "{err}");
    assert!(model.requests().is_empty(), "a preview calls no model");

    let out = run("--investigate").await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("investigated: 3 runs"), "{err}");
    assert!(!model.requests().is_empty());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("drives the cost"),
        "the answers are printed: {stdout}"
    );
    // Per run: its stop reason, rounds, tokens and cost, then its transcript.
    assert_eq!(
        stdout
            .matches(": answered; 2 rounds, 1 tool call; ")
            .count(),
        3,
        "{stdout}"
    );
    assert!(
        stdout.contains("input tokens (0 cached, 0%) + "),
        "{stdout}"
    );
    assert!(stdout.contains("    round 1: tool_choice auto"), "{stdout}");
    assert!(stdout.contains("    tool call search_requests"), "{stdout}");

    // With --state, the records are kept there and shown by run id.
    let state = format!("sqlite://{}", dir.path().join("backtest.db").display());
    let mut cmd = costwatch_command(&[
        "backtest",
        "--config",
        cfg.to_str().unwrap(),
        "--from",
        "2026-10-11T11:00:00Z",
        "--to",
        "2026-10-11T12:00:00Z",
        "--format",
        "jsonl",
        "--investigate",
        "--state",
        &state,
    ]);
    cmd.env("COSTWATCH_ADMIN_KEY", sim.admin_key())
        .env("COSTWATCH_INFERENCE_KEY", model.inference_key());
    let kept = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&kept.stderr);
    assert_eq!(kept.status.code(), Some(0), "{err}");
    assert!(err.contains("records kept in"), "{err}");
    let list = costwatch_command(&["investigation", "list", "--state", &state])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    assert_eq!(listed.lines().count(), 3, "{listed}");
    let run_id = listed
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap();
    let show = costwatch_command(&["investigation", "show", run_id, "--state", &state])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert_eq!(
        show.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    assert!(
        shown.contains(&format!("costwatch investigation {run_id}")),
        "{shown}"
    );
    assert!(shown.contains("tool call search_requests"), "{shown}");
    assert!(!shown.contains(sim.admin_key()));
    let missing = costwatch_command(&["investigation", "show", "inv-nope", "--state", &state])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_never_stops_is_capped_and_the_alert_still_goes_out_with_the_partial_transcript()
 {
    let sim = start_sim(seed_dataset()).await;
    let model = ScriptedModelServer::start(Script::NeverStops(ScriptedCall::search_top_session()))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let mut esc = escalation(&sim, &model);
    esc.caps.max_rounds = 3;
    esc.caps.max_tool_calls = 2;
    let d = daemon(&sim, &sqlite_url(&dir), Some(esc), recorder.clone()).await;
    d.tick().await.unwrap();
    let alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 3, "every alert goes out");
    for a in &alerts {
        let inv = a.investigation.as_ref().unwrap();
        let stop = inv.stop_reason.as_str();
        assert!(["max_tool_calls", "max_rounds"].contains(&stop), "{stop}");
        assert!(inv.tool_calls <= 2, "{inv:?}");
        assert!(inv.rounds <= 3, "{inv:?}");
        assert!(inv.cost_usd <= 0.05);
        assert!(
            costwatch::notify::render::transcript_text(inv).contains("round 1"),
            "the partial transcript is attached"
        );
    }
    // Each run's model calls: at most max_rounds, the last one forced to answer.
    let per_run = model.requests().len() as f64 / 3.0;
    assert!(per_run <= 3.0, "{per_run}");
}

/// What the model's prompt estimator learned is kept in the state
/// database: after a restart (a new store and model client on the same
/// file), the first call of a run on another incident is estimated within
/// 15% above the model's count (bounded from other incidents' digests,
/// whose text differs), where a process on an empty state starts from the
/// bound's prior, half as much again above it or more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_calibration_survives_a_restart() {
    use costwatch::domain::Kind;
    use costwatch::investigate::CalibrationStore;
    let sim = start_sim(seed_dataset()).await;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    // The first process investigates the retry loop only.
    let mut first = escalation(&sim, &model);
    first.policy.kinds = vec![Kind::RetryLoop];
    let recorder = Arc::new(Recorder::default());
    let d = daemon(&sim, &url, Some(first), recorder.clone()).await;
    assert_eq!(d.tick().await.unwrap().investigations, 1);
    drop(d);
    let store = SqlStore::open(&url).await.unwrap();
    let stored = store
        .load_calibration("gpt-6-luna", "pieces-v1")
        .await
        .unwrap();
    assert_eq!(stored.len(), 2, "one sample per model call: {stored:?}");

    // The restarted process investigates the two others.
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(ts("2026-10-11T12:10:00Z")));
    let alerts = recorder.received.lock().unwrap().clone();
    let mut others: Vec<_> = alerts
        .iter()
        .filter(|a| a.investigation.is_none())
        .cloned()
        .collect();
    assert_eq!(others.len(), 2);
    let restarted = escalation(&sim, &model);
    let (ran, _) = restarted.enrich(&store, &mut others, &clock).await.unwrap();
    assert_eq!(ran, 2);
    for a in &others {
        let inv = a.investigation.as_ref().unwrap();
        for r in &inv.transcript {
            let (estimate, count) = (
                r.request.estimated_prompt_tokens,
                r.usage.unwrap().prompt_tokens,
            );
            println!(
                "restart {} round {}: {estimate} vs {count}",
                a.kind.as_str(),
                r.index
            );
            assert!(estimate >= count, "{estimate} < {count}");
            assert!(estimate * 100 <= count * 115, "{estimate} vs {count}");
        }
    }
    assert_eq!(
        store
            .load_calibration("gpt-6-luna", "pieces-v1")
            .await
            .unwrap()
            .len(),
        6,
        "the restarted process wrote what it learned beside what it loaded"
    );

    // The same incident on an empty state: the prior, far above the count.
    let empty = tempfile::tempdir().unwrap();
    let fresh = SqlStore::open(&sqlite_url(&empty)).await.unwrap();
    let mut again = vec![others[0].clone()];
    again[0].investigation = None;
    escalation(&sim, &model)
        .enrich(&fresh, &mut again, &clock)
        .await
        .unwrap();
    let r = &again[0].investigation.as_ref().unwrap().transcript[0];
    let count = r.usage.unwrap().prompt_tokens;
    assert!(
        r.request.estimated_prompt_tokens * 2 > count * 3,
        "uncalibrated: {} vs {count}",
        r.request.estimated_prompt_tokens
    );
}
