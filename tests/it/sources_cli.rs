//! The row sources through the built binary: `check --online` against the
//! simulated LiteLLM proxy and Langfuse host, and `demo --source`.

use crate::cli::SEED_WASTE;
use crate::support::{costwatch_command, start_sim};
use chrono::{DurationRound, TimeDelta};
use costwatch::clock::{Clock, SystemClock};
use costwatch_sim::scenario::{self, ScenarioParams};
use costwatch_sim::server::SimServer;
use std::process::Output;
use tempfile::TempDir;

/// A day of simulated traffic ending about now, so the last hour has calls.
async fn recent_sim() -> SimServer {
    let now = SystemClock.now();
    let today = now.duration_trunc(TimeDelta::days(1)).unwrap();
    let params = ScenarioParams {
        seed: 11,
        days: 1,
        start: today - TimeDelta::days(1) + (now - today),
        ..ScenarioParams::default()
    };
    start_sim(scenario::generate(&params)).await
}

/// `check --config F --online` with `source` as the source section.
async fn check_online(source: String, key: &str) -> Output {
    let dir = TempDir::new().unwrap();
    let config = dir.path().join("costwatch.yaml");
    std::fs::write(
        &config,
        format!("source:\n{source}state: {{url: 'sqlite::memory:'}}\n"),
    )
    .unwrap();
    let mut cmd = costwatch_command(&["check", "--config", config.to_str().unwrap(), "--online"]);
    cmd.env("COSTWATCH_ADMIN_KEY", key);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    drop(dir);
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_online_reads_the_last_hour_of_each_row_source() {
    let sim = recent_sim().await;
    let litellm = format!("  kind: litellm\n  api_url: {}\n", sim.litellm_url());
    let langfuse = format!(
        "  kind: langfuse\n  api_url: {}\n  public_key: {}\n",
        sim.langfuse_url(),
        sim.langfuse().public_key()
    );
    for (kind, source) in [("litellm", &litellm), ("langfuse", &langfuse)] {
        let out = check_online(source.clone(), sim.admin_key()).await;
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", text(&out.stderr));
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("source ({kind}): ok")))
            .unwrap_or_else(|| panic!("{kind}: {stdout}"));
        assert!(!line.contains(" 0 calls"), "{kind}: {line}");
        assert!(!stdout.contains("warning"), "{kind}: {stdout}");
        // A caching facts line per cache-capable model in use, each fact
        // with its origin.
        let facts: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("caching facts: "))
            .collect();
        assert!(
            facts
                .iter()
                .any(|l| l.starts_with("caching facts: gpt-6-luna: minimum ")),
            "{kind}: {stdout}"
        );
        for l in &facts {
            let origins = ["table", "models_file", "rule", "observed"];
            let named = |part: &str| origins.iter().any(|o| part.contains(&format!("({o}")));
            let (min, lifetime) = l.split_once(", lifetime ").unwrap();
            assert!(named(min) && named(lifetime), "{kind}: {l}");
        }
    }

    // Spans in files: read like the others. Without cache-read counts (the
    // official OpenAI instrumentation writes none) the check says what
    // that costs.
    let now = SystemClock.now();
    let mut requests = costwatch_sim::otlp::export_requests(
        sim.dataset(),
        now - TimeDelta::hours(2),
        now + TimeDelta::hours(1),
        64,
    );
    for (strip, want_warning) in [(false, false), (true, true)] {
        if strip {
            for span in requests
                .iter_mut()
                .flat_map(|r| &mut r.resource_spans)
                .flat_map(|r| &mut r.scope_spans)
                .flat_map(|s| &mut s.spans)
            {
                span.attributes
                    .retain(|a| a.key != "gen_ai.usage.cache_read.input_tokens");
            }
        }
        let traces = TempDir::new().unwrap();
        costwatch_sim::otlp::write_json_lines(traces.path(), &requests, 8).unwrap();
        let source = format!("  kind: otlp_files\n  path: {}\n", traces.path().display());
        let out = check_online(source, "").await;
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let line = stdout
            .lines()
            .find(|l| l.starts_with("source (otlp_files): ok"))
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(!line.contains(" 0 calls"), "{line}");
        assert_eq!(
            stdout.contains("no_cache cannot judge them"),
            want_warning,
            "{stdout}"
        );
    }

    // A refused key names the settings to fix, and never shows the key.
    let out = check_online(litellm.clone(), "sk-wrong-key-123").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("COSTWATCH_ADMIN_KEY"), "{stderr}");
    assert!(!stderr.contains("sk-wrong-key-123"), "{stderr}");
    let out = check_online(langfuse.clone(), "sk-wrong-key-123").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("source.public_key"), "{stderr}");

    // Calls without session ids are named.
    let all: Vec<String> = sim
        .dataset()
        .sessions
        .iter()
        .map(|s| s.session_id.clone())
        .collect();
    sim.langfuse().serve_without_session_id(all);
    let out = check_online(langfuse, sim.admin_key()).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("warning: no call carries a session id"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_hour_is_a_warning_that_says_where_to_look() {
    // The seed window is in October: nothing in the last hour.
    let sim = start_sim(crate::support::seed_dataset()).await;
    let source = format!("  kind: litellm\n  api_url: {}\n", sim.litellm_url());
    let out = check_online(source, sim.admin_key()).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("warning: no calls between"), "{stdout}");
    assert!(stdout.contains("source.api_url"), "{stdout}");
}

#[test]
fn demo_runs_through_each_row_source() {
    for kind in ["litellm", "langfuse", "otlp", "otlp_files"] {
        let out = costwatch_command(&["demo", "--days", "1", "--source", kind])
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", text(&out.stderr));
        assert!(stdout.contains(&format!("source.kind: {kind}")), "{stdout}");
        // Each alert's investigation ran over costwatch's own tools.
        assert!(
            stdout.contains("costwatch's own log tools over the source"),
            "{stdout}"
        );
        assert_eq!(stdout.matches(", answered").count(), 3, "{kind}: {stdout}");
        for session in SEED_WASTE {
            assert!(
                stdout.contains(session),
                "{kind}: {session} not in:\n{stdout}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_stops_once_and_leaves_the_window_due() {
    let sim = start_sim(crate::support::seed_dataset()).await;
    let dir = TempDir::new().unwrap();
    let config = dir.path().join("costwatch.yaml");
    std::fs::write(
        &config,
        format!(
            "source:\n  kind: litellm\n  api_url: {}\nwindows: {{start: '2026-10-11T11:00:00Z'}}\n\
             state: {{url: 'sqlite://state.db'}}\n",
            sim.litellm_url()
        ),
    )
    .unwrap();
    let run = |key: &'static str| {
        let mut cmd = costwatch_command(&[
            "once",
            "--config",
            config.to_str().unwrap(),
            "--at",
            "2026-10-11T12:30:00Z",
        ]);
        cmd.env("COSTWATCH_ADMIN_KEY", key);
        async move {
            tokio::task::spawn_blocking(move || cmd.output().unwrap())
                .await
                .unwrap()
        }
    };
    let refused = run("sk-wrong").await;
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("COSTWATCH_ADMIN_KEY"), "{stderr}");
    // The right key then processes the window the refused run left due.
    let ok = run("sim-admin-key").await;
    let stdout = text(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    for session in SEED_WASTE {
        assert!(stdout.contains(session), "{session} not in:\n{stdout}");
    }
}

/// `once` over a folder of Collector files, as a user with exported traces
/// and no receiver would run it; a malformed line keeps the window due.
#[test]
fn once_reads_a_folder_of_collector_files() {
    let seed = crate::support::seed_dataset();
    let dir = TempDir::new().unwrap();
    let traces = dir.path().join("traces");
    let (first, last) = seed.time_range().unwrap();
    let requests =
        costwatch_sim::otlp::export_requests(&seed, first, last + TimeDelta::seconds(1), 16);
    costwatch_sim::otlp::write_json_lines(&traces, &requests, 2).unwrap();
    let models = crate::support::seed_models_file();
    std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
    let config = dir.path().join("costwatch.yaml");
    std::fs::write(
        &config,
        "source:\n  kind: otlp_files\n  path: traces\n  models_file: models.json\n\
         windows: {size: 1h, start: '2026-10-11T11:00:00Z'}\n\
         state: {url: 'sqlite://state.db'}\n",
    )
    .unwrap();
    let once = || {
        costwatch_command(&[
            "once",
            "--config",
            config.to_str().unwrap(),
            "--at",
            "2026-10-11T12:30:00Z",
        ])
        .output()
        .unwrap()
    };

    // A line cut off while the exporter was writing it.
    std::fs::write(traces.join("partial.jsonl"), "{\"resourceSpans\": [\n").unwrap();
    let cut = once();
    assert_eq!(cut.status.code(), Some(1), "{}", text(&cut.stdout));
    let stderr = text(&cut.stderr);
    assert!(
        stderr.contains("partial.jsonl:1"),
        "names the file and line: {stderr}"
    );

    // Written whole by the next try: the window that stayed due is read.
    std::fs::remove_file(traces.join("partial.jsonl")).unwrap();
    let ok = once();
    let stdout = text(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    for session in SEED_WASTE {
        assert!(stdout.contains(session), "{session} not in:\n{stdout}");
    }
}
