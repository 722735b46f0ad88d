//! The investigation for every source: `costwatch run` over the LiteLLM
//! proxy's spend logs, Langfuse's observations, the calls the OTLP
//! receiver stored and OTLP files escalates the seed window's incidents,
//! and each investigation reads the flagged session's calls through
//! costwatch's own log tools (`investigation.log_tools` left to its
//! default): no MCP server is configured anywhere.

use crate::support::{
    Running, costwatch_command, free_port, manifest_dir, seed_models_file, start_sim,
};
use chrono::TimeDelta;
use costwatch::clock::SystemClock;
use costwatch::domain::investigation::InvestigationReport;
use costwatch::ingest::{self, ReceiverSettings};
use costwatch::ops::metrics::Metrics;
use costwatch::source::otlp::{Receiver, SpanMapping};
use costwatch::store::SqlStore;
use costwatch::store::inspect::{IncidentQuery, Inspect};
use costwatch_sim::Dataset;
use costwatch_sim::model::{Script, ScriptedModelServer};
use costwatch_sim::server::SimServer;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

/// The seed window's waste: one session per kind.
const FLAGGED: [&str; 3] = [
    "replay-mismatch-a14896679e70",
    "subagent-sol-9b31c0e4d2aa",
    "retry-loop-7f2e81c09ab5",
];

/// Quarter-hour windows from `start`, a tick every 2 seconds,
/// investigations on with `investigation` (the model's lines) and no
/// `mcp_url`.
pub(crate) fn write_config(
    dir: &Path,
    source: &str,
    start: chrono::DateTime<chrono::Utc>,
    investigation: &str,
) -> std::path::PathBuf {
    std::fs::write(dir.join("models.json"), seed_models_file().to_string()).unwrap();
    let path = dir.join("costwatch.yaml");
    let yaml = format!(
        "source:\n{source}  models_file: models.json\n\
         windows: {{size: 15m, settle_lag: 0s, start: '{}'}}\n\
         schedule: {{cron: '*/2 * * * * *', max_catch_up_windows: 5000}}\n\
         state: {{url: 'sqlite://state.db'}}\n\
         server: {{listen: null}}\n\
         alerts: {{summary_after_windows: 10000, group_wait: 0s}}\n\
         investigation:\n  enabled: true\n{investigation}\
         rules: [{}]\n",
        start.to_rfc3339(),
        manifest_dir().join("rules").display()
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The scripted model's lines of the `investigation` section.
fn scripted(model: &ScriptedModelServer) -> String {
    format!(
        "  llm_url: {}\n  model: gpt-6-luna\n\
         \x20 prices: {{input_usd_per_mtok: 0.10, cached_input_usd_per_mtok: 0.01, output_usd_per_mtok: 0.40}}\n",
        model.base_url()
    )
}

/// The investigations of every incident in the state database.
pub(crate) async fn investigations(state: &str) -> Vec<(String, InvestigationReport)> {
    let store = SqlStore::open(state).await.unwrap();
    let mut out = Vec::new();
    for row in store
        .list_incidents(&IncidentQuery::default())
        .await
        .unwrap()
    {
        for inv in store
            .investigations_of(&row.incident.fingerprint)
            .await
            .unwrap()
        {
            out.push((row.incident.kind.clone(), inv.report));
        }
    }
    store.close().await;
    out
}

/// The rows of a tool result as the investigation shapes them
/// (`columns`, `rows`, and the values every row shares in `same`), as
/// objects.
fn table_rows(data: &Value) -> Vec<Value> {
    let columns: Vec<&str> = data["columns"]
        .as_array()
        .unwrap_or_else(|| panic!("{data}"))
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    data["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let mut obj = data["same"].clone();
            for (c, v) in columns.iter().zip(row.as_array().unwrap()) {
                obj[*c] = v.clone();
            }
            obj
        })
        .collect()
}

/// Runs `costwatch run` until the three incidents are investigated, and
/// checks that each investigation read its flagged session's calls.
async fn escalates_through_builtin_tools(
    seed: &Dataset,
    kind: &str,
    dir: &TempDir,
    config: &Path,
    env: &[(&str, &str)],
) {
    let state = format!("sqlite://{}", dir.path().join("state.db").display());
    let running = Running::start(config, env);
    // The daemon creates and migrates the state database first.
    running.wait_for_log("costwatch is running", 1).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let found = loop {
        let list = investigations(&state).await;
        if list.len() >= 3 {
            break list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{kind}: {} investigations; the log:\n{}",
            list.len(),
            running.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    drop(running);
    assert_eq!(found.len(), 3, "{kind}: one per incident");
    for (incident_kind, report) in &found {
        assert_eq!(
            report.stop_reason.as_str(),
            "answered",
            "{kind} {incident_kind}: {report:?}"
        );
        assert_eq!(report.tools_offered, ["search_requests"], "{kind}");
        let calls: Vec<_> = report
            .transcript
            .iter()
            .flat_map(|r| r.tool_calls.iter())
            .collect();
        assert_eq!(calls.len(), 1, "{kind} {incident_kind}");
        let call = calls[0];
        assert_eq!(call.name, "search_requests");
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        let session = args["session_id"].as_str().unwrap();
        assert!(FLAGGED.contains(&session), "{kind}: {session}");
        // The rows are the flagged session's own calls, read from the
        // source: as many as it made, each naming it.
        let result: Value = serde_json::from_str(&call.result)
            .unwrap_or_else(|e| panic!("{kind} {incident_kind}: {e}: {}", call.result));
        let rows = table_rows(&result["data"]);
        // The alert's copy keeps the first rows and says how many there were.
        let total = result["truncated"].as_str().map_or(rows.len(), |note| {
            let of = note.split(" of ").nth(1).unwrap();
            of.split(' ').next().unwrap().parse().unwrap()
        });
        assert_eq!(
            total,
            seed.requests_of(session).unwrap().len(),
            "{kind} {incident_kind}: {call:?}"
        );
        assert!(
            rows.iter().all(|r| r["session_id"] == session),
            "{kind} {incident_kind}: {result}"
        );
    }
}

fn api_env(sim: &SimServer) -> Vec<(&'static str, String)> {
    vec![("COSTWATCH_ADMIN_KEY", sim.admin_key().to_owned())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litellm_and_langfuse_investigations_read_the_source_itself() {
    let (seed, start) = crate::support::recent_seed();
    let sim = start_sim(seed.clone()).await;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let sources = [
        (
            "litellm",
            format!("  kind: litellm\n  api_url: {}\n", sim.litellm_url()),
        ),
        (
            "langfuse",
            format!(
                "  kind: langfuse\n  api_url: {}\n  public_key: {}\n",
                sim.langfuse_url(),
                sim.langfuse().public_key()
            ),
        ),
    ];
    for (kind, source) in sources {
        let dir = TempDir::new().unwrap();
        let config = write_config(dir.path(), &source, start, &scripted(&model));
        let env = api_env(&sim);
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.push(("COSTWATCH_INFERENCE_KEY", model.inference_key()));
        escalates_through_builtin_tools(&seed, kind, &dir, &config, &env).await;
    }
    assert_eq!(
        sim.mcp().count("tools/call"),
        0,
        "the gateway's MCP is never asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_investigations_read_the_stored_calls_and_the_files() {
    let (seed, start) = crate::support::recent_seed();
    let (first, last) = seed.time_range().unwrap();
    let requests =
        costwatch_sim::otlp::export_requests(&seed, first, last + TimeDelta::seconds(1), 64);
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .unwrap();
    let env = [("COSTWATCH_INFERENCE_KEY", model.inference_key())];

    // Files, as the Collector's file exporter writes them.
    let dir = TempDir::new().unwrap();
    costwatch_sim::otlp::write_json_lines(&dir.path().join("traces"), &requests, 4).unwrap();
    let config = write_config(
        dir.path(),
        "  kind: otlp_files\n  path: traces\n",
        start,
        &scripted(&model),
    );
    escalates_through_builtin_tools(&seed, "otlp_files", &dir, &config, &env).await;

    // Spans the receiver stored: posted over OTLP/HTTP to a receiver on
    // the state database before `costwatch run` starts reading it.
    let dir = TempDir::new().unwrap();
    let state = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("state.db").display()
    );
    let store = SqlStore::open(&state).await.unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let history = Duration::from_secs(100 * 365 * 86_400);
    let settings = ReceiverSettings {
        receiver: Receiver {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            retention: history,
            ..Receiver::default()
        },
        mapping: SpanMapping::default(),
        max_in_flight: 4,
        accept_future: history,
        store_timeout: Duration::from_secs(60),
        job: "main".to_owned(),
        settle_lag: history,
    };
    let (addr, task) = ingest::serve(
        settings,
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
        stop_rx,
    )
    .await
    .unwrap();
    let posted =
        costwatch_sim::otlp::post_protobuf(&format!("http://{addr}/v1/traces"), None, &requests)
            .await
            .unwrap();
    assert_eq!(posted.rejected_spans, 0);
    let _ = stop.send(true);
    task.await.unwrap();
    store.close().await;
    let source = format!(
        "  kind: otlp\n  listen: 127.0.0.1:{}\n  retention: 3650d\n",
        free_port()
    );
    let config = write_config(dir.path(), &source, start, &scripted(&model));
    escalates_through_builtin_tools(&seed, "otlp", &dir, &config, &env).await;
}

#[test]
fn check_says_what_the_investigation_needs_per_source() {
    let dir = TempDir::new().unwrap();
    let config = dir.path().join("costwatch.yaml");
    let check = |yaml: &str| {
        std::fs::write(&config, yaml).unwrap();
        let out = costwatch_command(&["check", "--config", config.to_str().unwrap()])
            .env("COSTWATCH_INFERENCE_KEY", "k")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The reference gateway serves its own tools: its default is mcp,
    // which needs the server's URL.
    let (code, err) =
        check("source:\n  api_url: http://127.0.0.1:9/v1\ninvestigation:\n  enabled: true\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("investigation.mcp_url"), "{err}");
    assert!(err.contains("source.kind: reference"), "{err}");
    // Built in: no URL needed, for the reference gateway too.
    let (code, err) = check(
        "source:\n  api_url: http://127.0.0.1:9/v1\ninvestigation:\n  enabled: true\n  log_tools: builtin\n  mcp_url: null\n",
    );
    assert_eq!(code, Some(0), "{err}");
    // Every other kind defaults to builtin.
    let (code, err) =
        check("source:\n  kind: otlp_files\n  path: .\ninvestigation:\n  enabled: true\n");
    assert_eq!(code, Some(0), "{err}");
    // Asked for over MCP without a URL.
    let (code, err) = check(
        "source:\n  kind: otlp_files\n  path: .\ninvestigation:\n  enabled: true\n  log_tools: mcp\n",
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("with log_tools: mcp"), "{err}");
    // MCP on an address others reach needs a token.
    let open =
        "source:\n  kind: otlp_files\n  path: .\nserver:\n  listen: 0.0.0.0:9464\n  mcp: true\n";
    let (code, err) = check(open);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("server.mcp") && err.contains("COSTWATCH_MCP_TOKEN"),
        "{err}"
    );
    std::fs::write(dir.path().join("token"), "s3cret\n").unwrap();
    let (code, err) = check(&format!("{open}  mcp_token_file: token\n"));
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}
