//! A real client: the official OpenTelemetry Python SDK with the official
//! OpenAI GenAI instrumentation (`opentelemetry-instrumentation-openai-v2`)
//! drives the real `openai` client against a small local OpenAI-compatible
//! server and exports the spans over OTLP/HTTP to `costwatch run`
//! (`source.kind: otlp`). The sessions are the seed window's, call for call,
//! each inside an `invoke_agent` span carrying its conversation id.
//!
//! The instrumentation (2.4b0) records no cached tokens on chat spans (its
//! chat path reads only `prompt_tokens` and `completion_tokens`), so nothing
//! tells a conversation that never read the cache from one that did: the
//! daemon must find the oversized model and the retry loop, named by their
//! conversation ids, and no no_cache finding at all (no false one for the
//! caching sessions either). costwatch reads a missing count as 0 only
//! where the same instrumentation reports counts on other spans, which
//! 2.4b0 never does (`otel_genai_interop.rs` runs its successor, which
//! does).
//!
//! The Python side is `tests/peers/otel_agent.py`, in the venv
//! `.ci/otel-peer.sh` makes (found through `COSTWATCH_OTEL_PYTHON`).

use crate::support::{Running, eventually, manifest_dir, seed_dataset, seed_models_file};
use chrono::{DurationRound, TimeDelta, Timelike};
use costwatch::clock::{Clock, SystemClock};
use costwatch::store::{SqlStore, Store, WindowStore};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;
use tempfile::TempDir;

fn otel_python() -> PathBuf {
    crate::support::peer_python(
        "COSTWATCH_OTEL",
        "costwatch-otel",
        "the OpenTelemetry SDK",
        ".ci/otel-peer.sh",
    )
}

/// The seed window's sessions as the agent's scenario, each call with the
/// usage the local server is to answer.
pub(crate) fn scenario() -> serde_json::Value {
    let seed = seed_dataset();
    let sessions: Vec<_> = seed
        .sessions
        .iter()
        .map(|s| {
            let mut requests = s.requests.clone();
            requests.sort_by_key(|r| r.created_at);
            json!({
                "session_id": s.session_id,
                "service": s.labels.get("feature").cloned().unwrap_or_else(|| "agent".into()),
                "calls": requests.iter().map(|r| json!({
                    "model": r.model,
                    "input_tokens": r.input_tokens,
                    "cached_tokens": r.cached_tokens,
                    "output_tokens": r.output_tokens,
                    "status": r.status,
                    "http_status": r.http_status,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "sessions": sessions })
}

/// What [`feed_the_seed`] leaves: the running daemon, its folder and the
/// one-minute window the agent ran in.
pub(crate) struct Fed {
    pub dir: TempDir,
    pub window_start: chrono::DateTime<chrono::Utc>,
    pub daemon: Running,
}

/// Starts `costwatch run` with an OTLP receiver over one-minute windows and
/// runs the seed scenario through `agent` (a script in `tests/peers`, with
/// `python`), exporting to it; the agent's calls all fall in one window.
pub(crate) async fn feed_the_seed(python: &std::path::Path, agent: &str) -> Fed {
    feed(python, agent, scenario(), (84, 8)).await
}

/// [`feed_the_seed`] with `scenario`, whose `(calls, errors)` the agent
/// must report.
pub(crate) async fn feed(
    python: &std::path::Path,
    agent: &str,
    scenario: serde_json::Value,
    (calls, errors): (usize, usize),
) -> Fed {
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("scenario.json"), scenario.to_string()).unwrap();
    std::fs::write(
        dir.path().join("models.json"),
        seed_models_file().to_string(),
    )
    .unwrap();
    std::fs::write(dir.path().join("otlp_token"), "otlp-test-token\n").unwrap();

    // One-minute windows: the agent starts early in a minute, so the whole
    // seed window lands in one of them, read 10 seconds after it ends.
    let mut now = SystemClock.now();
    // Five services start side by side (a second or two of imports each,
    // more on a loaded machine): forty seconds is room to spare.
    if now.second() > 20 {
        tokio::time::sleep(Duration::from_secs(u64::from(61 - now.second()))).await;
        now = SystemClock.now();
    }
    let window_start = now.duration_trunc(TimeDelta::minutes(1)).unwrap();
    let config = dir.path().join("costwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "source:\n  kind: otlp\n  listen: 127.0.0.1:0\n  token_file: otlp_token\n  \
             models_file: models.json\n\
             windows:\n  size: 1m\n  settle_lag: 10s\n  start: {}\n\
             schedule:\n  cron: \"*/2 * * * * *\"\n\
             group_by: [service.name]\n\
             state:\n  url: sqlite://state.db\n\
             server:\n  listen: null\n\
             rules: [{}]\n",
            window_start.to_rfc3339(),
            manifest_dir().join("rules").display()
        ),
    )
    .unwrap();
    let daemon = Running::start(&config, &[]);
    let addr = eventually("the OTLP receiver", || async {
        daemon
            .log()
            .lines()
            .filter(|l| l.contains("OTLP receiver listening"))
            .find_map(|l| {
                let at = l.find("addr=")? + "addr=".len();
                l[at..].split_whitespace().next().map(str::to_owned)
            })
    })
    .await;

    let out = std::process::Command::new(python)
        .arg(manifest_dir().join("tests/peers").join(agent))
        .args([
            "--scenario",
            dir.path().join("scenario.json").to_str().unwrap(),
        ])
        .args(["--endpoint", &format!("http://{addr}/v1/traces")])
        .args([
            "--token-file",
            dir.path().join("otlp_token").to_str().unwrap(),
        ])
        .arg("--gzip")
        .output()
        .expect("the agent runs");
    assert!(
        out.status.success(),
        "agent failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(summary["calls"], calls, "{summary}");
    assert_eq!(summary["errors"], errors, "{summary}");
    assert!(
        SystemClock.now() < window_start + TimeDelta::minutes(1),
        "the agent ran past its window; the test assumes one window"
    );

    Fed {
        dir,
        window_start,
        daemon,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_instrumentation_feeds_costwatch_run() {
    let python = otel_python();
    let Fed {
        dir,
        window_start,
        daemon,
        ..
    } = feed_the_seed(&python, "otel_agent.py").await;

    // The window is read once its settle lag has passed.
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let store = SqlStore::open(&state).await.unwrap();
    eventually("the agent's window to be read", || async {
        let w = store.watermark("main").await.ok()??;
        (w >= window_start + TimeDelta::minutes(1)).then_some(())
    })
    .await;
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
    let mut want = seed_dataset().truth.by_kind;
    assert_eq!(
        want.remove("no_cache").map(|s| s.len()),
        Some(1),
        "the seed has one no-cache conversation"
    );
    want.retain(|_, v| !v.is_empty());
    assert_eq!(found, want, "{}", daemon.log());
    priced_and_grouped_by_service(&findings, &scenario());
}

/// Every finding over spans was priced by costwatch (spans carry no cost)
/// and grouped by the resource's `service.name`: the service `scenario`
/// ran its session in (the seed's feature).
pub(crate) fn priced_and_grouped_by_service(
    findings: &[costwatch::detect::Finding],
    scenario: &serde_json::Value,
) {
    for f in findings {
        assert_eq!(
            f.evidence["cost_computed"], true,
            "priced by costwatch: {f:?}"
        );
        let service = scenario["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["session_id"] == f.session_id.as_str())
            .and_then(|s| s["service"].as_str());
        assert_eq!(
            f.labels.get("service.name").map(String::as_str),
            service,
            "the resource's service.name is the group"
        );
    }
}
