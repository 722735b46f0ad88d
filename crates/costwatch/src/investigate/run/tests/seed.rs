//! The seed scenario end to end, through the real pipeline.

use super::*;

/// The seed window through the real pipeline: its flagged sessions as
/// the alerts the daemon would send, and the simulator serving it (REST
/// and MCP).
async fn seed_alerts() -> (costwatch_sim::SimServer, Vec<Alert>) {
    use crate::incidents::{Decision, Incident, build_alert, fingerprint};
    let fixture = costwatch_sim::SEED_WINDOW;
    let dataset = costwatch_sim::Dataset::from_fixture_str(fixture).unwrap();
    let sim = costwatch_sim::SimServer::start(Arc::new(dataset), Default::default())
        .await
        .unwrap();
    let source = crate::source::reference::ReferenceSource::new(
        url::Url::parse(&sim.base_url()).unwrap(),
        &Secret::new(sim.admin_key()),
        50,
        Default::default(),
        limits(Duration::from_secs(10)),
    )
    .unwrap();
    let rules = crate::config::load_rules(&[
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../rules")
    ])
    .unwrap();
    let detector = crate::detect::Detector {
        rules,
        group_by: vec!["feature".to_owned()],
        baseline_samples: 512,
        max_candidates: 10_000,
    };
    let (from, to) = (
        Utc.with_ymd_and_hms(2026, 10, 11, 11, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 10, 11, 12, 0, 0).unwrap(),
    );
    let replay = crate::backtest::replay(
        source,
        detector,
        "sqlite::memory:",
        from,
        to,
        Duration::from_secs(3600),
        4,
        Arc::new(FakeClock::new(to)),
        &crate::backtest::WindowRetries::none(),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(replay.findings.len(), 3);
    let alerts = replay
        .findings
        .iter()
        .map(|f| {
            let kind = f.kind.as_str();
            let incident = Incident {
                fingerprint: fingerprint(kind, &f.rule, &f.group),
                kind: kind.to_owned(),
                rule: f.rule.clone(),
                group: f.group.clone(),
                labels: f.labels.clone(),
                severity: f.severity,
                firing: true,
                started: f.window.start,
                last_finding: f.window.end,
                session_count: 1,
                impact_usd: f.impact_usd,
                sequence: 0,
                notified: None,
                notified_sessions: 0,
                last_error: None,
                reopened: false,
            };
            let session = AlertSession {
                session_id: f.session_id.clone(),
                cost_usd: f.cost_usd,
                impact_usd: f.impact_usd,
                explanation: f.explanation.clone(),
                evidence: f.evidence.clone(),
                link: None,
                what_to_do: String::new(),
            };
            build_alert(&incident, Decision::Fire, vec![session], to, to)
        })
        .collect();
    (sim, alerts)
}

/// The seed scenario end to end: the real pipeline's alerts, the
/// simulator's MCP endpoint through the MCP client, the scripted model's
/// default script. Reports the first prompt's size and the whole run's
/// input tokens, and holds the first prompt to 700 tokens and the run to
/// 1,700. The simulator's schema is richer than the official Python SDK's
/// (a description, format or bound on every parameter): the targets of
/// 1,600 for a run are held against that server, in `tests/it/economy.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_scenario_stays_under_1700_input_tokens() {
    let (sim, alerts) = seed_alerts().await;
    let server = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let (model, _) = client(&server, Duration::from_secs(10));
    let mcp = crate::investigate::mcp::McpClient::new(
        url::Url::parse(&sim.mcp_url()).unwrap(),
        &Secret::new(sim.admin_key()),
        DEFAULT_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        Duration::from_secs(10),
    )
    .unwrap();
    let ledger = MemoryLedger::new();
    let clock = FakeClock::new(now());
    let caps = Caps::default();
    let opts = RunOptions::default();
    for alert in &alerts {
        let before = server.requests().len();
        let inv = investigate(
            alert,
            &mcp,
            &model,
            &ledger,
            &caps,
            &prices(),
            &clock,
            &opts,
        )
        .await;
        let requests = &server.requests()[before..];
        assert_eq!(
            inv.stop_reason,
            StopReason::Answered,
            "{}",
            render_text(&inv)
        );
        assert_eq!(inv.totals.tool_calls, 1, "{}", render_text(&inv));
        assert_eq!(inv.rounds[0].tool_calls[0].status, ToolCallStatus::Ok);
        let first = &requests[0];
        let tools_bytes = first.json["tools"].to_string().len();
        let messages = first.json["messages"].as_array().unwrap();
        let system_bytes = messages[0]["content"].as_str().unwrap().len();
        let digest_bytes = messages[1]["content"].as_str().unwrap().len();
        println!(
            "seed {}: first prompt {} tokens (tool schemas {} B, instruction {} B, digest {} B); \
             whole run {} input + {} output tokens in {} rounds, {} tool calls, ${:.6}; \
             tool result {} B",
            alert.kind.as_str(),
            first.prompt_tokens,
            tools_bytes,
            system_bytes,
            digest_bytes,
            inv.totals.input_tokens,
            inv.totals.output_tokens,
            inv.totals.rounds,
            inv.totals.tool_calls,
            inv.totals.cost_usd,
            inv.rounds[0].tool_calls[0].result.len(),
        );
        assert!(first.prompt_tokens <= 700, "{}", first.prompt_tokens);
        assert!(
            inv.totals.input_tokens <= 1_700,
            "{} input tokens on the seed {} alert",
            inv.totals.input_tokens,
            alert.kind.as_str()
        );
        let answer = inv.answer.as_deref().unwrap();
        assert!(answer.contains(&alert.sessions[0].session_id), "{answer}");
    }
    mcp.close().await;
    sim.shutdown().await.unwrap();
}
