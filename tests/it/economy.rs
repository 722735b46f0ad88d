//! What an investigation of the seed window costs in tokens, against the
//! official Python MCP SDK serving the gateway's tools
//! (`tests/peers/mcp_gateway.py`) and the scripted model, which counts
//! tokens from the bytes it receives (4 bytes a token). The figures printed
//! here are the ones BENCHMARKS.md reports ("Investigation economy").

use crate::daemon::Recorder;
use crate::investigation::daemon;
use crate::mcp::PythonPeer;
use crate::support::*;
use costwatch::escalate::Escalation;
use costwatch::investigate::budget::{Caps, Prices};
use costwatch::investigate::mcp::McpClient;
use costwatch::investigate::model::ModelClient;
use costwatch::investigate::run::{RunOptions, StopCode};
use costwatch::secret::Secret;
use costwatch_sim::model::{Script, ScriptedModelServer};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The costliest request of `session` in the seed fixture.
fn costliest_request(session: &str) -> String {
    let fx: Value = serde_json::from_str(SEED_WINDOW).unwrap();
    fx["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["session_id"] == session)
        .max_by(|a, b| {
            let c = |r: &Value| r["cost_usd"].as_f64().unwrap();
            c(a).total_cmp(&c(b))
        })
        .and_then(|r| r["request_id"].as_str())
        .unwrap()
        .to_owned()
}

/// The escalation of these tests: the peer's tools, the scripted model,
/// the default caps and policy.
fn escalation(peer: &PythonPeer, model: &ScriptedModelServer) -> Escalation {
    Escalation {
        tools: costwatch::investigate::Tools::new(
            McpClient::new(
                url::Url::parse(&peer.url()).unwrap(),
                &Secret::new("sim-admin-key"),
                RunOptions::default().tools,
                Duration::from_secs(10),
            )
            .unwrap(),
        ),
        model: ModelClient::new(
            url::Url::parse(&model.base_url()).unwrap(),
            &Secret::new(model.inference_key()),
            "gpt-6-luna",
            limits(),
        )
        .unwrap(),
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

/// The seed window's three incidents, each investigated over the Python
/// SDK's MCP server: every run answers, names the session, its costliest
/// request and the cause, and stays within 700 tokens for the first prompt
/// and 1,600 input tokens in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_investigations_are_grounded_and_within_the_token_targets() {
    let sim = start_sim(seed_dataset()).await;
    let peer = PythonPeer::start("json").await;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let escalation = escalation(&peer, &model);
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let daemon = daemon(&sim, &sqlite_url(&dir), Some(escalation), recorder.clone()).await;
    assert_eq!(daemon.tick().await.unwrap().investigations, 3);

    let alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 3);
    let requests = model.requests();
    // Every request of every run opens with the same bytes: the tools,
    // then the instruction (what a provider's prompt cache can serve).
    let prefix = |r: &costwatch_sim::model::RecordedRequest| {
        let system = r.json["messages"][0].to_string();
        let tools = r.json["tools"].to_string();
        assert!(r.body.find("\"tools\"") < r.body.find("\"messages\""));
        format!("{tools}{system}")
    };
    let first = prefix(&requests[0]);
    assert!(first.contains("search_requests") && first.contains("You investigate"));
    assert!(requests.iter().all(|r| prefix(r) == first));
    for a in &alerts {
        let inv = a.investigation.as_ref().unwrap();
        let session = &a.sessions[0].session_id;
        let run: Vec<_> = requests
            .iter()
            .filter(|r| {
                r.client_request_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with(&inv.run_id))
            })
            .collect();
        let first = &run[0];
        let tools_bytes = first.json["tools"].to_string().len();
        let messages = first.json["messages"].as_array().unwrap();
        println!(
            "economy {}: first prompt {} tokens (tool schemas {} B, instruction {} B, digest {} B); \
             whole run {} input ({} cached) + {} output tokens in {} rounds, {} tool calls, ${:.6}",
            a.kind.as_str(),
            first.prompt_tokens,
            tools_bytes,
            messages[0]["content"].as_str().unwrap().len(),
            messages[1]["content"].as_str().unwrap().len(),
            inv.input_tokens,
            inv.cached_tokens,
            inv.output_tokens,
            inv.rounds,
            inv.tool_calls,
            inv.cost_usd,
        );
        assert_eq!(inv.stop_reason, StopCode::Answered, "{}", inv.summary);
        assert_eq!(
            run.iter().map(|r| r.prompt_tokens).sum::<u64>(),
            inv.input_tokens,
            "the run's input tokens are the model's own counts"
        );
        assert!(first.prompt_tokens <= 700, "{}", first.prompt_tokens);
        assert!(inv.input_tokens <= 1_600, "{}", inv.input_tokens);
        // Grounded: the session, its costliest request and the cause.
        let answer = &inv.summary;
        assert!(answer.contains(session.as_str()), "{answer}");
        assert!(
            answer.contains(&costliest_request(session)),
            "{answer} (costliest: {})",
            costliest_request(session)
        );
        let cause = match a.kind.as_str() {
            "retry_loop" => "retry loop",
            "no_cache" => "prompt cache",
            "oversized_model" => "premium model",
            other => panic!("unexpected kind {other}"),
        };
        assert!(answer.contains(cause), "{answer}");
    }
}

/// The seed window's incidents investigated over an official-SDK server
/// that accepts only 2026-07-28, and over one that accepts only
/// 2025-11-25: the client speaks each one's revision, every run answers
/// with the flagged session's rows in its transcript.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn investigations_run_against_servers_of_either_revision_alone() {
    for revision in ["2026-07-28", "2025-11-25"] {
        let sim = start_sim(seed_dataset()).await;
        let peer = PythonPeer::serving("json", Some(revision)).await;
        let model = ScriptedModelServer::start(Script::Investigator)
            .await
            .unwrap();
        let escalation = escalation(&peer, &model);
        let dir = tempfile::tempdir().unwrap();
        let recorder = Arc::new(Recorder::default());
        let daemon = daemon(&sim, &sqlite_url(&dir), Some(escalation), recorder.clone()).await;
        assert_eq!(daemon.tick().await.unwrap().investigations, 3, "{revision}");
        for a in recorder.received.lock().unwrap().iter() {
            let inv = a.investigation.as_ref().unwrap();
            assert_eq!(
                inv.stop_reason,
                StopCode::Answered,
                "{revision}: {}",
                inv.summary
            );
            let call = &inv.transcript[0].tool_calls[0];
            assert_eq!(call.name, "search_requests", "{revision}");
            assert!(
                call.result.contains(&a.sessions[0].session_id),
                "{revision}: {}",
                call.result
            );
        }
    }
}
