//! A Langfuse v4 user's investigation over Langfuse's own MCP server: the
//! daemon reads the seed window from the simulator's Langfuse observations
//! API, and each flagged incident is investigated with the log tools of
//! the simulator's stand-in for `{host}/api/public/mcp`, allowlisted to
//! `listObservations` and `getObservation`, with the project's keys as
//! HTTP Basic. Langfuse refuses the admin key as a bearer token, and a
//! request without keys, as the stand-in shows.

use crate::daemon::{Recorder, settings};
use crate::support::*;
use costwatch::clock::{Clock, FakeClock};
use costwatch::daemon::Daemon;
use costwatch::escalate::Escalation;
use costwatch::investigate::budget::{Caps, Prices};
use costwatch::investigate::mcp::McpClient;
use costwatch::investigate::model::ModelClient;
use costwatch::investigate::run::{RunOptions, StopCode};
use costwatch::investigate::{InvestigateError, ToolProvider};
use costwatch::notify::outbox::Channel;
use costwatch::pipeline::{Pipeline, Schedule};
use costwatch::pricing::table::{PriceTable, default_table};
use costwatch::secret::Secret;
use costwatch::source::langfuse::LangfuseReader;
use costwatch::source::rows::{RowSettings, RowSource, SessionKey};
use costwatch::store::{SqlStore, Store};
use costwatch_sim::langfuse::mcp::McpAuth;
use costwatch_sim::model::{Script, ScriptedCall, ScriptedModelServer, TOP_SESSION};
use costwatch_sim::server::SimServer;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The tools a user allowlists.
const TOOLS: [&str; 2] = ["listObservations", "getObservation"];

/// Fields the scripted model asks for: enough to see where the money went.
const FIELDS: [&str; 6] = [
    "id",
    "sessionId",
    "providedModelName",
    "level",
    "totalCost",
    "usageDetails",
];

fn mcp_url(sim: &SimServer) -> url::Url {
    url::Url::parse(&format!("{}/api/public/mcp", sim.langfuse_url())).unwrap()
}

fn tools() -> Vec<String> {
    TOOLS.iter().map(|t| (*t).to_owned()).collect()
}

/// The MCP client as a Langfuse user needs it: the project's public key
/// and secret key as HTTP Basic.
fn client(sim: &SimServer) -> McpClient {
    let lf = sim.langfuse();
    let secret = Secret::new(lf.secret_key());
    McpClient::new(mcp_url(sim), &secret, tools(), Duration::from_secs(10))
        .unwrap()
        .with_basic_auth(lf.public_key(), &secret)
        .unwrap()
}

fn escalation(sim: &SimServer, model: &ScriptedModelServer) -> Escalation {
    let model = ModelClient::new(
        url::Url::parse(&model.base_url()).unwrap(),
        &Secret::new(model.inference_key()),
        "gpt-6-luna",
        limits(),
    )
    .unwrap();
    Escalation {
        tools: costwatch::investigate::Tools::new(client(sim)),
        model,
        caps: Caps::default(),
        prices: Prices {
            input_usd_per_mtok: 0.10,
            cached_input_usd_per_mtok: 0.01,
            output_usd_per_mtok: 0.40,
        },
        options: RunOptions {
            tools: tools(),
            ..RunOptions::default()
        },
        policy: costwatch::config::EscalateConfig::default(),
    }
}

/// A daemon reading the seed window (11:00-12:00) from the simulator's
/// Langfuse observations API, sessions keyed on `sessionId`.
async fn daemon(
    sim: &SimServer,
    url: &str,
    esc: Escalation,
    recorder: Arc<Recorder>,
) -> Daemon<RowSource<LangfuseReader>, SqlStore> {
    let lf = sim.langfuse();
    let rows = RowSettings {
        session_key: SessionKey::Session,
        labels: BTreeMap::new(),
        filter: BTreeMap::new(),
        page_limit: 100,
        max_pages: 1000,
        session_lookback: Duration::from_secs(3600),
        max_open_sessions: 100_000,
        max_kept_rows: 100_000,
    };
    let reader = LangfuseReader::new(
        url::Url::parse(&sim.langfuse_url()).unwrap(),
        lf.public_key(),
        &Secret::new(lf.secret_key()),
        &rows,
        limits(),
    )
    .unwrap();
    let source = RowSource::new(reader, rows, PriceTable::new(default_table()));
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
    s.escalation = Some(Arc::new(esc));
    Daemon::new(pipeline, s, clock)
}

/// The rows of a tool result as the model saw it: `data` is a list of
/// rows, or the table the investigation makes of one
/// (`{"same", "columns", "rows"}`).
fn rows_of(result: &Value) -> Vec<BTreeMap<String, Value>> {
    let data = &result["data"];
    if let Some(rows) = data.as_array() {
        return rows
            .iter()
            .map(|r| r.as_object().unwrap().clone().into_iter().collect())
            .collect();
    }
    let same: BTreeMap<String, Value> = data["same"]
        .as_object()
        .map(|m| m.clone().into_iter().collect())
        .unwrap_or_default();
    let columns: Vec<&str> = data["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    data["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cells| {
            let mut row = same.clone();
            for (c, v) in columns.iter().zip(cells.as_array().unwrap()) {
                row.insert((*c).to_owned(), v.clone());
            }
            row
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flagged_sessions_are_investigated_through_langfuse_mcp_with_the_project_keys() {
    let sim = start_sim(seed_dataset()).await;
    let call = ScriptedCall::new(
        "listObservations",
        json!({
            "filter": [{"column": "sessionId", "operator": "=", "value": TOP_SESSION}],
            "fields": FIELDS,
            "limit": 100,
        }),
    );
    // First too many rows at once, which the server's schema refuses.
    let too_many = ScriptedCall::new(
        "listObservations",
        json!({
            "filter": [{"column": "sessionId", "operator": "=", "value": TOP_SESSION}],
            "limit": 500,
        }),
    );
    let model = ScriptedModelServer::start(Script::Answer {
        calls: vec![too_many, call],
        text: "The session's observations show where the cost went.".to_owned(),
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    let recorder = Arc::new(Recorder::default());
    let d = daemon(&sim, &url, escalation(&sim, &model), recorder.clone()).await;
    let tick = d.tick().await.unwrap();
    assert_eq!(tick.windows, 1);
    assert_eq!(
        tick.investigations, 3,
        "one per incident of the seed window: {tick:?}"
    );

    let alerts = recorder.received.lock().unwrap().clone();
    assert_eq!(alerts.len(), tick.investigations);
    let mut looked_up = BTreeSet::new();
    for a in &alerts {
        let inv = a.investigation.as_ref().expect("investigated");
        assert_eq!(inv.stop_reason, StopCode::Answered, "{inv:?}");
        assert_eq!(inv.tools_offered, TOOLS, "the writes never reach the model");
        let text = costwatch::notify::render::transcript_text(inv);
        assert!(text.contains("listObservations"), "{text}");
        assert!(
            !text.contains(sim.langfuse().secret_key()),
            "no secret in the transcript"
        );
    }

    // The whole record keeps every result as the model saw it.
    let store = SqlStore::open(&url).await.unwrap();
    let stored = store.stored_investigations(10).await.unwrap();
    assert_eq!(stored.len(), alerts.len());
    for s in &stored {
        let record: Value = serde_json::from_str(s.record_json.as_deref().unwrap()).unwrap();
        let calls: Vec<&Value> = record["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["tool_calls"].as_array().unwrap())
            .collect();
        assert_eq!(calls.len(), 2, "{record}");
        // The refusal reaches the model as the server worded it.
        assert_eq!(calls[0]["status"], "tool_error", "{}", calls[0]);
        let refusal = calls[0]["result"].as_str().unwrap();
        assert!(
            refusal.contains(
                "MCP error -32602: Validation failed: limit: Too big: expected number to be <=100"
            ),
            "{refusal}"
        );
        let c = calls[1];
        assert_eq!(c["name"], "listObservations");
        assert_eq!(c["status"], "ok", "{c}");
        assert_eq!(c["truncated"], false, "{c}");
        let args: Value = serde_json::from_str(c["arguments"].as_str().unwrap()).unwrap();
        let session = args["filter"][0]["value"].as_str().unwrap().to_owned();
        let alert = alerts
            .iter()
            .find(|a| a.idempotency_key() == s.key)
            .expect("the alert it explains");
        assert!(
            alert.sessions.iter().any(|x| x.session_id == session),
            "{session} is one of the incident's sessions"
        );
        let result: Value = serde_json::from_str(c["result"].as_str().unwrap()).unwrap();
        let rows = rows_of(&result);
        let mut want: Vec<&costwatch_sim::SimRequest> = sim
            .dataset()
            .requests_of(&session)
            .unwrap()
            .iter()
            .collect();
        want.sort_by_key(|r| std::cmp::Reverse((r.created_at, r.request_id.clone())));
        let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
        let want_ids: Vec<&str> = want.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(
            ids, want_ids,
            "every observation of {session}, newest first"
        );
        for (row, r) in rows.iter().zip(&want) {
            assert_eq!(row["sessionId"], json!(session));
            assert_eq!(row["providedModelName"], json!(r.model));
            assert!((row["totalCost"].as_f64().unwrap() - r.cost_usd).abs() < 1e-9);
            assert_eq!(
                row["level"],
                json!(if r.is_error() { "ERROR" } else { "DEFAULT" })
            );
            assert!(row["url"].as_str().unwrap().contains("/traces/"));
        }
        looked_up.insert(session);
    }
    assert_eq!(looked_up.len(), stored.len(), "one session per incident");
    assert_eq!(
        looked_up,
        BTreeSet::from([
            "replay-mismatch-a14896679e70".to_owned(),
            "retry-loop-7f2e81c09ab5".to_owned(),
            "subagent-sol-9b31c0e4d2aa".to_owned(),
        ]),
        "the seed window's three flagged sessions"
    );

    // What the stand-in saw: the probe of 2026-07-28 refused, initialize,
    // then stateless requests, every one with the project's key pair.
    let lf = sim.langfuse();
    let seen = lf.mcp_calls();
    assert!(!seen.is_empty());
    for c in &seen {
        assert!(
            c.auth.is_project_key_pair(lf.public_key()),
            "{} {}: {:?}",
            c.http_method,
            c.method,
            c.auth
        );
        assert_eq!(
            c.session_id, None,
            "a stateless server hands out no session"
        );
    }
    let methods: Vec<(&str, u16)> = seen.iter().map(|c| (c.method.as_str(), c.status)).collect();
    assert_eq!(
        &methods[..4],
        [
            ("server/discover", 400),
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/list", 200),
        ]
    );
    let tool_calls: Vec<_> = seen.iter().filter(|c| c.method == "tools/call").collect();
    assert_eq!(tool_calls.len(), 2 * stored.len());
    for c in tool_calls {
        // JSON-RPC errors travel in a 200 too.
        assert_eq!(c.tool.as_deref(), Some("listObservations"));
        assert_eq!(c.status, 200);
        assert_eq!(c.protocol_version.as_deref(), Some("2025-11-25"));
        assert!(c.arguments.as_ref().unwrap()["sessionId"].is_null());
    }
    assert!(
        model
            .requests()
            .iter()
            .all(|r| !r.body.contains(lf.secret_key())),
        "the secret key never reaches the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_project_keys_langfuse_mcp_refuses_the_client() {
    let sim = start_sim(seed_dataset()).await;
    let lf = sim.langfuse();

    // The client as it is without Basic: the admin key (here Langfuse's
    // secret key) as a bearer token, which Langfuse reads as a public key.
    let bearer = McpClient::new(
        mcp_url(&sim),
        &Secret::new(lf.secret_key()),
        tools(),
        Duration::from_secs(10),
    )
    .unwrap();
    let refused = bearer.list_tools().await.unwrap_err();
    assert!(
        matches!(refused, InvestigateError::Rejected(_)),
        "{refused}"
    );
    assert!(refused.to_string().contains("401"), "{refused}");
    assert!(!refused.to_string().contains(lf.secret_key()), "{refused}");
    let seen = lf.mcp_calls();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|c| c.status == 401 && c.auth == McpAuth::Bearer { public_key: false })
    );

    // Straight HTTP: no key is a 401, a public key as bearer token a 403,
    // both `{"error", "code"}` without WWW-Authenticate.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let post = || {
        reqwest::Client::new()
            .post(mcp_url(&sim))
            .header("accept", "application/json, text/event-stream")
            .json(&list)
    };
    let cases = [
        (
            post(),
            401,
            "MCP error -32600: Authentication failed. Please check your API key.",
        ),
        (
            post().bearer_auth(lf.public_key()),
            403,
            "MCP error -32600: Access forbidden. You do not have permission to access this resource.",
        ),
        (
            post().basic_auth(lf.public_key(), Some("sk-lf-wrong")),
            401,
            "MCP error -32600: Authentication failed. Please check your API key.",
        ),
    ];
    for (rb, status, message) in cases {
        let res = rb.send().await.unwrap();
        assert_eq!(res.status().as_u16(), status);
        assert!(res.headers().get("www-authenticate").is_none());
        let body: Value = res.json().await.unwrap();
        assert_eq!(body, json!({"error": message, "code": -32600}));
    }

    // With the key pair the listing carries reads and writes; the
    // allowlist keeps the two reads.
    let c = client(&sim);
    let names: Vec<String> = c
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, TOOLS);
    let all: Vec<String> = c
        .server_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(all.iter().any(|t| t == "createScore"), "{all:?}");
    let refused = c.call_tool("createScore", json!({})).await.unwrap_err();
    assert!(
        matches!(refused, InvestigateError::Rejected(_)),
        "{refused}"
    );
}

/// The configuration a Langfuse user writes (`log_tools: mcp` with
/// Langfuse's MCP URL) builds an escalation whose tools reach the server
/// with the project's key pair: listing works, where the bearer key alone
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_escalation_reaches_langfuses_mcp_with_the_key_pair() {
    let sim = start_sim(seed_dataset()).await;
    let lf = sim.langfuse();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("costwatch.yaml");
    std::fs::write(
        &path,
        format!(
            "source:\n  kind: langfuse\n  api_url: {}\n  public_key: {}\n\
             investigation:\n  enabled: true\n  log_tools: mcp\n  mcp_url: {}\n\
             \x20 tools: [listObservations, getObservation]\n  llm_url: http://127.0.0.1:9/v1\n\
             \x20 prices: {{input_usd_per_mtok: 0.10, cached_input_usd_per_mtok: 0.01, output_usd_per_mtok: 0.40}}\n",
            sim.langfuse_url(),
            lf.public_key(),
            mcp_url(&sim),
        ),
    )
    .unwrap();
    let env: BTreeMap<String, String> = [
        ("COSTWATCH_ADMIN_KEY", lf.secret_key()),
        ("COSTWATCH_INFERENCE_KEY", "unused"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let cfg = costwatch::config::load_with_env(&path, &env).unwrap();
    let escalation = costwatch::app::escalation(&cfg, None)
        .await
        .unwrap()
        .unwrap();
    let listed: Vec<String> = escalation
        .tools
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(listed, TOOLS);
}
