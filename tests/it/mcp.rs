//! The MCP client against two independent servers: the built-in simulator's
//! MCP endpoint (the reference gateway: the `initialize` era) and a real MCP
//! server built with the official Python SDK (`tests/peers/mcp_gateway.py`,
//! `mcp` 2.3.0) serving 2026-07-28 only, 2025-11-25 only, or both eras, each
//! in JSON and in SSE response mode, over the seed window.

use crate::support::free_port;
use crate::support::{SEED_WINDOW, seed_dataset, start_sim};
use costwatch::clock::RecordingSleeper;
use costwatch::investigate::mcp::{McpClient, McpLimits};
use costwatch::investigate::{InvestigateError, ToolOutput, ToolProvider};
use costwatch::secret::Secret;
use costwatch_sim::SimServer;
use costwatch_sim::mcp::McpMode;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;
use url::Url;

const KEY: &str = "sim-admin-key";
const START: &str = "2026-10-11T11:24:00Z";
const END: &str = "2026-10-11T11:32:00Z";
const RETRY_LOOP: &str = "retry-loop-7f2e81c09ab5";
const ALL_TOOLS: [&str; 7] = [
    "list_sessions",
    "search_requests",
    "get_request",
    "list_traces",
    "list_models",
    "get_model",
    "get_pricing",
];

fn fixture() -> Value {
    serde_json::from_str(SEED_WINDOW).unwrap()
}

/// The fixture's request rows of one session, in time order.
fn fixture_requests(session_id: &str) -> Vec<Value> {
    let mut rows: Vec<Value> = fixture()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["session_id"] == session_id)
        .cloned()
        .collect();
    rows.sort_by(|a, b| {
        (a["created_at"].as_str(), a["request_id"].as_str())
            .cmp(&(b["created_at"].as_str(), b["request_id"].as_str()))
    });
    rows
}

fn client(url: &str, key: &str, allow: &[&str]) -> McpClient {
    McpClient::new(
        Url::parse(url).unwrap(),
        &Secret::new(key),
        allow.iter().map(|t| (*t).to_owned()).collect(),
        Duration::from_secs(10),
    )
    .unwrap()
    .with_limits(McpLimits {
        retry_base: Duration::from_millis(10),
        ..McpLimits::default()
    })
    .with_sleeper(Arc::new(RecordingSleeper::default()))
}

fn data(out: &ToolOutput) -> Value {
    assert!(!out.is_error, "{}", out.text);
    serde_json::from_str(&out.text).unwrap()
}

fn names(tools: &[costwatch::investigate::ToolSpec]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

/// The calls every server must answer the same way over the seed window.
async fn check_seed_tools(c: &McpClient) {
    let fx = fixture();
    let sessions = data(
        &c.call_tool("list_sessions", json!({"start": START, "end": END}))
            .await
            .unwrap(),
    );
    assert_eq!(sessions["data"], fx["data"]);
    assert_eq!(sessions["data"].as_array().unwrap().len(), 26);
    assert!(sessions["next_cursor"].is_null());

    let calls = data(
        &c.call_tool("search_requests", json!({"session_id": RETRY_LOOP}))
            .await
            .unwrap(),
    );
    let rows = calls["data"].as_array().unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(rows, &fixture_requests(RETRY_LOOP));
    assert_eq!(rows[0]["error_type"], "RateLimitError");
    assert_eq!(rows[9]["status"], "success");

    // Paging with a small limit walks the same rows.
    let first = data(
        &c.call_tool(
            "search_requests",
            json!({"session_id": RETRY_LOOP, "limit": 4}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(first["data"].as_array().unwrap()[..], rows[..4]);
    let second = data(
        &c.call_tool(
            "search_requests",
            json!({"session_id": RETRY_LOOP, "limit": 4, "cursor": first["next_cursor"]}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(second["data"].as_array().unwrap()[..], rows[4..8]);

    // A bad argument is a result the model can read, not an error.
    let bad = c
        .call_tool("list_sessions", json!({"start": "yesterday", "end": END}))
        .await
        .unwrap();
    assert!(bad.is_error);
    assert!(bad.text.contains("RFC 3339"), "{}", bad.text);
}

// ---------------------------------------------------------------------------
// The built-in simulator.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn sim_mcp_in_json_and_sse_modes() {
    for mode in [McpMode::Json, McpMode::Sse] {
        let sim = start_sim(seed_dataset()).await;
        sim.mcp().set_mode(mode);
        let allow = [
            "search_requests",
            "list_sessions",
            "get_pricing",
            "update_budget",
        ];
        let c = client(&sim.mcp_url(), KEY, &allow);
        let tools = c.list_tools().await.unwrap();
        assert_eq!(
            names(&tools),
            ["search_requests", "list_sessions", "get_pricing"]
        );
        // Seven tools, four a page: both pages were read.
        assert_eq!(sim.mcp().count("tools/list"), 2);
        assert_eq!(names(&c.server_tools().await.unwrap()), ALL_TOOLS);
        check_seed_tools(&c).await;

        let refused = c.call_tool("get_request", json!({})).await.unwrap_err();
        assert!(matches!(refused, InvestigateError::Rejected(_)));
        assert_eq!(sim.mcp().count("tools/call"), 5, "{mode:?}");

        let sid = c.session_id().await.expect("a session id");
        let calls = sim.mcp().calls();
        // The simulator speaks the initialize era: it refuses the
        // 2026-07-28 probe with a 400, and the client initializes.
        assert_eq!(calls[0].method, "server/discover");
        assert_eq!(calls[1].method, "initialize");
        assert_eq!(calls[2].method, "notifications/initialized");
        assert_eq!(sim.mcp().count("server/discover"), 1);
        assert_eq!(sim.mcp().count("initialize"), 1);
        for (i, call) in calls.iter().enumerate() {
            assert_eq!(call.http_method, "POST");
            assert_eq!(call.header("authorization"), Some("Bearer [admin key]"));
            assert_eq!(
                call.header("accept"),
                Some("application/json, text/event-stream")
            );
            assert_eq!(call.header("content-type"), Some("application/json"));
            assert_eq!(call.header("x-mcp-readonly"), Some("true"));
            assert_eq!(call.header("x-mcp-toolsets"), Some("logs"));
            let (session, version) = (
                call.header("mcp-session-id"),
                call.header("mcp-protocol-version"),
            );
            match i {
                0 => assert_eq!((session, version), (None, Some("2026-07-28"))),
                1 => assert_eq!((session, version), (None, None)),
                _ => {
                    assert_eq!(session, Some(sid.as_str()), "{call:?}");
                    assert_eq!(version, Some("2025-06-18"));
                }
            }
        }
        assert_unauthorized(&sim).await;
    }
}

async fn assert_unauthorized(sim: &SimServer) {
    let before = sim.mcp().calls().len();
    let c = client(&sim.mcp_url(), "wrong-key", &ALL_TOOLS);
    let err = c.list_tools().await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.contains("401")),
        "{err:?}"
    );
    let calls = sim.mcp().calls();
    assert_eq!(calls.len(), before + 1, "a 401 is not retried");
    assert_eq!(calls[before].header("authorization"), Some("[wrong key]"));
}

// ---------------------------------------------------------------------------
// The Python SDK peer.
// ---------------------------------------------------------------------------

pub use crate::support::peers_python;

/// `tests/peers/mcp_gateway.py` on a free loopback port, killed on drop.
pub struct PythonPeer {
    child: Child,
    port: u16,
    log: PathBuf,
    requests: PathBuf,
    _dir: TempDir,
}

impl Drop for PythonPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PythonPeer {
    /// Starts the peer answering in `mode` (`json` or `sse`), serving both
    /// eras of the protocol.
    pub async fn start(mode: &str) -> PythonPeer {
        PythonPeer::serving(mode, None).await
    }

    /// Starts the peer answering in `mode` (`json` or `sse`), serving only
    /// `revision` (`2026-07-28` or `2025-11-25`) when given.
    pub async fn serving(mode: &str, revision: Option<&str>) -> PythonPeer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("peer.log");
        let requests = dir.path().join("requests.jsonl");
        let port = free_port();
        let script = super::support::manifest_dir().join("tests/peers/mcp_gateway.py");
        let mut command = Command::new(peers_python());
        command
            .arg(&script)
            .arg(port.to_string())
            .arg(mode)
            .arg(&requests)
            .env_remove("COSTWATCH_PEER_MCP_REVISION");
        if let Some(revision) = revision {
            command.env("COSTWATCH_PEER_MCP_REVISION", revision);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut peer = PythonPeer {
            child,
            port,
            log,
            requests,
            _dir: dir,
        };
        peer.wait_ready().await;
        peer
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the python mcp peer exited early ({status}):\n{}",
                    self.log_text()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the python mcp peer did not listen on port {} within 30 s:\n{}",
                self.port,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The requests the peer received: `{"method", "headers", "body"}` per
    /// line.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.requests)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// What a peer serves, and what the client should end up speaking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Serves {
    /// 2026-07-28 only.
    Modern,
    /// 2025-11-25 only (the initialize era).
    Legacy,
    /// Both eras (the SDK's default): the client speaks 2026-07-28.
    Both,
}

async fn interop(mode: &str, serves: Serves) {
    let revision = match serves {
        Serves::Modern => Some("2026-07-28"),
        Serves::Legacy => Some("2025-11-25"),
        Serves::Both => None,
    };
    let peer = PythonPeer::serving(mode, revision).await;
    let c = client(
        &peer.url(),
        KEY,
        &[
            "search_requests",
            "list_sessions",
            "get_model",
            "delete_sessions",
        ],
    );
    // Only allowlisted tools, in allowlist order, whatever the server lists.
    let tools = c.list_tools().await.unwrap();
    assert_eq!(
        names(&tools),
        ["search_requests", "list_sessions", "get_model"],
        "{}",
        peer.log_text()
    );
    let schema = &tools[1].input_schema;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["start", "end"]));
    let mut all: Vec<String> = c
        .server_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    all.sort();
    let mut want: Vec<String> = ALL_TOOLS.iter().map(|t| (*t).to_owned()).collect();
    want.sort();
    assert_eq!(all, want);
    let version = match serves {
        Serves::Modern | Serves::Both => "2026-07-28",
        Serves::Legacy => "2025-11-25",
    };
    assert_eq!(c.protocol_version().await.as_deref(), Some(version));

    check_seed_tools(&c).await;
    let unknown = c
        .call_tool("get_model", json!({"model": "gpt-7"}))
        .await
        .unwrap();
    assert!(unknown.is_error && unknown.text.contains("gpt-6-luna"));
    let model = data(
        &c.call_tool("get_model", json!({"model": "gpt-6-luna"}))
            .await
            .unwrap(),
    );
    assert_eq!(model["output_usd_per_mtok"], 0.4);

    // Refused in code: the peer never hears of it.
    let before = peer.requests().len();
    assert!(matches!(
        c.call_tool("list_models", json!({})).await,
        Err(InvestigateError::Rejected(_))
    ));
    assert_eq!(peer.requests().len(), before);

    // Every request carried the gateway headers.
    let requests = peer.requests();
    assert!(requests.len() >= 10, "{requests:?}");
    for r in &requests {
        let h = &r["headers"];
        assert_eq!(r["method"], "POST");
        assert_eq!(h["authorization"], "ok");
        assert_eq!(h["accept"], "application/json, text/event-stream");
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(h["x-mcp-readonly"], "true");
        assert_eq!(h["x-mcp-toolsets"], "logs");
    }
    // The probe first, once for the client.
    let rpc = |r: &Value| r["body"]["method"].as_str().unwrap_or_default().to_owned();
    assert_eq!(rpc(&requests[0]), "server/discover");
    assert_eq!(
        requests
            .iter()
            .filter(|r| rpc(r) == "server/discover")
            .count(),
        1
    );
    match serves {
        Serves::Modern | Serves::Both => check_modern_requests(&requests),
        Serves::Legacy => check_legacy_requests(&c, &peer, &requests).await,
    }

    // Without the admin key: 401, not retried, no fallback.
    let before = peer.requests().len();
    let wrong = client(&peer.url(), "wrong-key", &ALL_TOOLS);
    let err = wrong.list_tools().await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.contains("401")),
        "{err:?}"
    );
    let requests = peer.requests();
    assert_eq!(requests.len(), before + 1);
    assert_eq!(requests[before]["headers"]["authorization"], "wrong");
}

/// A 2026-07-28 exchange: no `initialize`, no session; every request names
/// its revision in `_meta` and in `MCP-Protocol-Version`, its method in
/// `Mcp-Method`, and a tool call its tool in `Mcp-Name`.
fn check_modern_requests(requests: &[Value]) {
    for (i, r) in requests.iter().enumerate() {
        let (h, body) = (&r["headers"], &r["body"]);
        let method = body["method"].as_str().unwrap();
        assert_ne!(method, "initialize");
        assert!(h.get("mcp-session-id").is_none(), "request {i}: {r}");
        assert_eq!(h["mcp-protocol-version"], "2026-07-28", "request {i}");
        assert_eq!(h["mcp-method"], method, "request {i}");
        let meta = &body["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "costwatch"
        );
        if method == "tools/call" {
            assert_eq!(h["mcp-name"], body["params"]["name"], "request {i}");
        } else {
            assert!(h.get("mcp-name").is_none(), "request {i}: {r}");
        }
    }
    assert!(requests.iter().any(|r| r["body"]["method"] == "tools/call"));
}

/// An exchange of the `initialize` era at 2025-11-25 after the refused
/// probe: `initialize` asking for 2025-11-25, then the session on every
/// request; a session the server forgot is opened again, once, without a
/// new probe.
async fn check_legacy_requests(c: &McpClient, peer: &PythonPeer, requests: &[Value]) {
    assert_eq!(requests[0]["headers"]["mcp-protocol-version"], "2026-07-28");
    assert_eq!(requests[1]["body"]["method"], "initialize");
    assert_eq!(
        requests[1]["body"]["params"]["protocolVersion"],
        "2025-11-25"
    );
    assert_eq!(requests[2]["body"]["method"], "notifications/initialized");
    let sid = c.session_id().await.expect("the sdk keeps sessions");
    for (i, r) in requests.iter().enumerate().skip(2) {
        let h = &r["headers"];
        assert_eq!(h["mcp-session-id"], sid.as_str(), "request {i}");
        assert_eq!(h["mcp-protocol-version"], "2025-11-25", "request {i}");
        assert!(h.get("mcp-method").is_none(), "request {i}: {r}");
        assert!(
            r["body"]["params"].get("_meta").is_none(),
            "request {i}: {r}"
        );
    }

    let end = reqwest::Client::new()
        .delete(peer.url())
        .bearer_auth(KEY)
        .header("x-mcp-readonly", "true")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(end.status().is_success(), "{}", end.status());
    let again = data(
        &c.call_tool(
            "search_requests",
            json!({"session_id": RETRY_LOOP, "limit": 1}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(again["data"].as_array().unwrap().len(), 1);
    let new_sid = c.session_id().await.unwrap();
    assert_ne!(new_sid, sid);
    let requests = peer.requests();
    let count = |method: &str| {
        requests
            .iter()
            .filter(|r| r["body"]["method"] == method)
            .count()
    };
    assert_eq!(count("initialize"), 2);
    assert_eq!(count("server/discover"), 1);
}

#[tokio::test]
async fn python_sdk_peer_of_2026_07_28_in_json_mode() {
    interop("json", Serves::Modern).await;
}

/// The SDK answers a 2026-07-28 request with an event stream only once the
/// tool sends a notification (or runs 15 s); these tools send none, so the
/// answers are JSON here too. The scripted server of the unit tests sends
/// 2026-07-28 answers as event streams.
#[tokio::test]
async fn python_sdk_peer_of_2026_07_28_in_sse_mode() {
    interop("sse", Serves::Modern).await;
}

#[tokio::test]
async fn python_sdk_peer_of_2025_11_25_in_json_mode() {
    interop("json", Serves::Legacy).await;
}

#[tokio::test]
async fn python_sdk_peer_of_2025_11_25_in_sse_mode() {
    interop("sse", Serves::Legacy).await;
}

#[tokio::test]
async fn python_sdk_peer_of_both_eras() {
    interop("json", Serves::Both).await;
}
