//! Today's official OpenAI instrumentation as a real client:
//! `opentelemetry-instrumentation-genai-openai` 1.3b0 with
//! `opentelemetry-util-genai` 1.3b0 drives the real `openai` client (3.x)
//! against the small local OpenAI-compatible server of
//! `tests/peers/otel_agent.py` and exports the spans over OTLP/HTTP to
//! `costwatch run` (`source.kind: otlp`). The sessions are the seed
//! window's, call for call, each inside a
//! `TelemetryHandler().workflow(conversation_id=...)`.
//!
//! This instrumentation writes `gen_ai.usage.cache_read.input_tokens` only
//! when the answer's `prompt_tokens_details.cached_tokens` is above 0. The
//! seed's never-caching conversation (`replay-mismatch-…`, prompts of
//! 4,092 tokens, 0 cached) has no cache-read count on any of its spans,
//! while other calls of the same instrumentation to the same model read
//! the cache: costwatch must read its calls as 0 cached and find it as
//! no_cache, beside the oversized model and the retry loop, with no false
//! no_cache for the caching conversations nor for the services whose
//! spans never carry a count (`triage`, `search`).
//!
//! Two new services come with it, each its group's only session, whose
//! spans never carry a count either: a `research` conversation of 12
//! calls whose prompt grows from 3,025 to about 6,000 tokens, each holding
//! the last one's, on the model every other service's conversations
//! cache, reading nothing (found at once, judged against the model's
//! other sessions: a feature broken from its first conversation); and a
//! `bulk-tagging` batch of unrelated prompts that never caches either
//! (quiet: nothing says they share a prefix).
//!
//! The Python side is `tests/peers/otel_genai_agent.py`, in the venv
//! `.ci/otel-peer-genai.sh` makes (found through
//! `COSTWATCH_OTEL_GENAI_PYTHON`).

use crate::support::{eventually, seed_dataset};
use chrono::TimeDelta;
use costwatch::clock::{Clock, SystemClock};
use costwatch::store::{SqlStore, Store, WindowStore};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn genai_python() -> PathBuf {
    crate::support::peer_python(
        "COSTWATCH_OTEL_GENAI",
        "costwatch-otel-genai",
        "opentelemetry-instrumentation-genai-openai",
        ".ci/otel-peer-genai.sh",
    )
}

/// The research conversation's id.
const RESEARCH: &str = "research-5e1f0c2a9b77";
/// The batch's id.
const BATCH: &str = "bulk-tagging-0d4c7e91a3f2";

/// The seed's sessions and the two new services' only sessions, on the
/// model the seed's conversations cache on; and how many calls that is.
fn scenario_with_newcomers() -> (serde_json::Value, usize) {
    let mut scenario = super::otel_interop::scenario();
    let model = "gpt-6-luna";
    let call = |input: u64, output: u64| {
        json!({"model": model, "input_tokens": input, "cached_tokens": 0,
               "output_tokens": output, "status": "success", "http_status": 200})
    };
    let mut input = 3_025;
    let mut research = Vec::new();
    for k in 0..12u64 {
        let output = 120 + 17 * (k % 5);
        research.push(call(input, output));
        // The next prompt: this one, its answer and a new turn.
        input += output + 90 + 11 * (k % 3);
    }
    let batch: Vec<_> = [2_100, 1_300, 3_400, 1_800, 2_900, 1_500, 3_800, 2_200]
        .into_iter()
        .map(|i| call(i, 40))
        .collect();
    let added = research.len() + batch.len();
    let sessions = scenario["sessions"].as_array_mut().unwrap();
    sessions.push(json!({"session_id": RESEARCH, "service": "research", "calls": research}));
    sessions.push(json!({"session_id": BATCH, "service": "bulk-tagging", "calls": batch}));
    (scenario, 84 + added)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todays_openai_instrumentation_feeds_costwatch_run_and_a_never_caching_conversation_is_found()
 {
    let python = genai_python();
    let (scenario, calls) = scenario_with_newcomers();
    let super::otel_interop::Fed {
        dir,
        window_start,
        daemon,
        ..
    } = super::otel_interop::feed(&python, "otel_genai_agent.py", scenario.clone(), (calls, 8))
        .await;

    // The no_cache finding of a conversation whose last call is less than a
    // cache lifetime before its window's end is held for the next window
    // (judge_once_ended), which does not list it: it stands there.
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let store = SqlStore::open(&state).await.unwrap();
    for (what, windows) in [("the agent's window", 1), ("the window after it", 2)] {
        eventually(&format!("{what} to be read"), || async {
            let w = store.watermark("main").await.ok()??;
            (w >= window_start + TimeDelta::minutes(windows)).then_some(())
        })
        .await;
    }
    let findings = store
        .findings(window_start - TimeDelta::hours(1), SystemClock.now())
        .await
        .unwrap();
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &findings {
        found
            .entry(f.kind.as_str().to_owned())
            .or_default()
            .insert(f.session_id.clone());
    }
    let seed = seed_dataset();
    let mut want = seed.truth.by_kind.clone();
    assert_eq!(
        want.get("no_cache").map(|s| s.len()),
        Some(1),
        "the seed has one no-cache conversation"
    );
    // The research conversation is found from its first session; the
    // batch, alone in its group too, is not.
    want.entry("no_cache".to_owned())
        .or_default()
        .insert(RESEARCH.to_owned());
    want.retain(|_, v| !v.is_empty());
    assert_eq!(found, want, "{}", daemon.log());
    let research = findings.iter().find(|f| f.session_id == RESEARCH).unwrap();
    assert_eq!(
        research.evidence["judged_against"], "model",
        "{}",
        research.evidence
    );
    assert_eq!(research.evidence["conversation"], true);
    assert!(!found.values().any(|s| s.contains(BATCH)));
    super::otel_interop::priced_and_grouped_by_service(&findings, &scenario);
}
