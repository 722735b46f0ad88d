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
//! while the other conversations of its service (`support-agent`) read the
//! cache: costwatch must read its calls as 0 cached and find it as no_cache,
//! beside the oversized model and the retry loop, with no false no_cache
//! for the caching conversations nor for the services whose spans never
//! carry a count (`triage`, `search`).
//!
//! The Python side is `tests/peers/otel_genai_agent.py`, in the venv
//! `.ci/otel-peer-genai.sh` makes (found through
//! `COSTWATCH_OTEL_GENAI_PYTHON`).

use crate::support::{eventually, seed_dataset};
use chrono::TimeDelta;
use costwatch::clock::{Clock, SystemClock};
use costwatch::store::{SqlStore, Store, WindowStore};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todays_openai_instrumentation_feeds_costwatch_run_and_a_never_caching_conversation_is_found()
 {
    let python = genai_python();
    let super::otel_interop::Fed {
        dir,
        window_start,
        daemon,
        ..
    } = super::otel_interop::feed_the_seed(&python, "otel_genai_agent.py").await;

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
    want.retain(|_, v| !v.is_empty());
    assert_eq!(found, want, "{}", daemon.log());
    super::otel_interop::priced_and_grouped_by_service(&findings);
}
