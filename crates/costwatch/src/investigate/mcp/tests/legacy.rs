//! The client against the simulator's MCP server on loopback, which
//! simulates the reference gateway: a server of the `initialize` era
//! (2025-06-18 and 2025-03-26) that refuses the 2026-07-28 probe with a
//! 400, so every client here sends `server/discover` first and then
//! initializes.

use super::super::*;
use crate::clock::RecordingSleeper;
use costwatch_sim::mcp::{McpFault, McpFaultKind, McpMode};
use costwatch_sim::{Dataset, SimOptions, SimServer};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../costwatch-sim/data/seed-window.json"
);
const KEY: &str = "sim-admin-key";
const ALL: [&str; 7] = [
    "list_sessions",
    "search_requests",
    "get_request",
    "list_traces",
    "list_models",
    "get_model",
    "get_pricing",
];

async fn sim(mode: McpMode) -> SimServer {
    let d = Dataset::from_fixture(FIXTURE).unwrap();
    let s = SimServer::start(Arc::new(d), SimOptions::default())
        .await
        .unwrap();
    s.mcp().set_mode(mode);
    s
}

fn limits() -> McpLimits {
    McpLimits {
        retry_base: Duration::from_millis(100),
        ..McpLimits::default()
    }
}

fn client_with(s: &SimServer, key: &str, allow: &[&str]) -> (McpClient, RecordingSleeper) {
    let sleeper = RecordingSleeper::default();
    let client = McpClient::new(
        Url::parse(&s.mcp_url()).unwrap(),
        &Secret::new(key),
        allow.iter().map(|t| (*t).to_owned()).collect(),
        Duration::from_secs(10),
    )
    .unwrap()
    .with_limits(limits())
    .with_sleeper(Arc::new(sleeper.clone()));
    (client, sleeper)
}

fn client(s: &SimServer, allow: &[&str]) -> (McpClient, RecordingSleeper) {
    client_with(s, KEY, allow)
}

fn rows(out: &ToolOutput) -> Vec<Value> {
    let v: Value = serde_json::from_str(&out.text).unwrap();
    v["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn tools_outside_the_allowlist_are_refused_without_contacting_the_server() {
    let s = sim(McpMode::Json).await;
    let (c, _) = client(&s, &["list_models"]);
    for name in ["delete_sessions", "get_request", "list_models ", ""] {
        let err = c.call_tool(name, json!({})).await.unwrap_err();
        assert!(
            matches!(&err, InvestigateError::Rejected(m) if m.contains("not allowed") && m.contains("list_models")),
            "{err:?}"
        );
    }
    let err = c.call_tool("list_models", json!(["x"])).await.unwrap_err();
    assert!(matches!(err, InvestigateError::Rejected(_)));
    assert_eq!(s.stats().hits("/v1/mcp"), 0);
    assert!(s.mcp().calls().is_empty());
    assert_eq!(c.session_id().await, None);

    // Once a session is open, refusals still send nothing.
    let out = c.call_tool("list_models", Value::Null).await.unwrap();
    assert_eq!(rows(&out).len(), 2);
    let before = s.stats().hits("/v1/mcp");
    // server/discover (refused: the simulator speaks the initialize era),
    // initialize, initialized, tools/call.
    assert_eq!(before, 4);
    assert!(c.call_tool("get_request", json!({})).await.is_err());
    assert_eq!(s.stats().hits("/v1/mcp"), before);
    assert_eq!(s.mcp().count("tools/call"), 1);
}

#[tokio::test]
async fn list_tools_follows_pages_and_keeps_allowlist_order() {
    let s = sim(McpMode::Json).await;
    let allow = [
        "get_pricing",
        "list_sessions",
        "not_a_tool",
        "search_requests",
        "list_sessions",
    ];
    let (c, _) = client(&s, &allow);
    assert_eq!(
        c.allowlist(),
        [
            "get_pricing",
            "list_sessions",
            "not_a_tool",
            "search_requests"
        ]
    );
    let tools = c.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["get_pricing", "list_sessions", "search_requests"]);
    assert_eq!(tools[1].input_schema["required"], json!(["start", "end"]));
    assert!(!tools[1].description.is_empty());
    assert_eq!(s.mcp().count("tools/list"), 2);
    let all = c.server_tools().await.unwrap();
    let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ALL);
    // Same list every time: a prompt cache can hold it.
    assert_eq!(c.list_tools().await.unwrap(), tools);
}

#[tokio::test]
async fn every_message_carries_the_headers_and_the_session() {
    for mode in [McpMode::Json, McpMode::Sse] {
        let s = sim(mode).await;
        let (c, _) = client(&s, &ALL);
        c.list_tools().await.unwrap();
        let out = c
            .call_tool(
                "search_requests",
                json!({"session_id": "retry-loop-7f2e81c09ab5", "limit": 3}),
            )
            .await
            .unwrap();
        assert!(!out.is_error);
        assert_eq!(rows(&out).len(), 3);
        let sid = c.session_id().await.unwrap();
        assert_eq!(c.protocol_version().await.as_deref(), Some("2025-06-18"));
        let calls = s.mcp().calls();
        let methods: Vec<&str> = calls.iter().map(|c| c.method.as_str()).collect();
        assert_eq!(
            methods,
            [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/list",
                "tools/call"
            ],
            "{mode:?}"
        );
        for (i, call) in calls.iter().enumerate() {
            assert_eq!(call.header("authorization"), Some("Bearer [admin key]"));
            assert_eq!(
                call.header("accept"),
                Some("application/json, text/event-stream")
            );
            assert_eq!(call.header("content-type"), Some("application/json"));
            assert_eq!(call.header("x-mcp-readonly"), Some("true"));
            assert_eq!(call.header("x-mcp-toolsets"), Some("logs"));
            if i == 0 {
                // The probe: 2026-07-28 request metadata, no session.
                assert_eq!(call.header("mcp-session-id"), None);
                assert_eq!(call.header("mcp-protocol-version"), Some("2026-07-28"));
                assert_eq!(call.header("mcp-method"), Some("server/discover"));
            } else if i == 1 {
                assert_eq!(call.header("mcp-session-id"), None);
                assert_eq!(call.header("mcp-protocol-version"), None);
            } else {
                assert_eq!(call.header("mcp-session-id"), Some(sid.as_str()));
                assert_eq!(call.header("mcp-protocol-version"), Some("2025-06-18"));
                // The request metadata headers belong to 2026-07-28 only.
                assert_eq!(call.header("mcp-method"), None);
                assert_eq!(call.header("mcp-name"), None);
            }
        }
    }
}

#[tokio::test]
async fn a_failing_tool_is_a_result_and_a_json_rpc_error_is_rejected() {
    let s = sim(McpMode::Sse).await;
    let (c, _) = client(&s, &ALL);
    let out = c
        .call_tool(
            "list_sessions",
            json!({"start": "yesterday", "end": "today"}),
        )
        .await
        .unwrap();
    assert!(out.is_error);
    assert!(out.text.contains("RFC 3339"), "{}", out.text);

    s.mcp().faults().push(McpFault::on(
        "list_models",
        McpFaultKind::RpcError {
            code: -32603,
            message: "internal trouble".into(),
        },
    ));
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert_eq!(
        err,
        InvestigateError::Rejected("tools/call: json-rpc error -32603: internal trouble".into())
    );
    s.mcp().faults().push(McpFault::any(McpFaultKind::RpcError {
        code: -32700,
        message: "parse error".into(),
    }));
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert!(matches!(err, InvestigateError::Protocol(_)), "{err:?}");
    // JSON-RPC errors are not retried.
    assert_eq!(s.mcp().count("tools/call"), 3);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_then_transient() {
    let s = sim(McpMode::Json).await;
    let (c, sleeper) = client(&s, &ALL);
    let f = s.mcp().faults();
    f.push(McpFault::on(
        "list_models",
        McpFaultKind::HttpStatus { status: 503 },
    ));
    f.push(McpFault::on(
        "list_models",
        McpFaultKind::HttpStatus { status: 429 },
    ));
    let out = c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(rows(&out).len(), 2);
    // 100 ms backoff, then the server's Retry-After of 1 s.
    assert_eq!(
        sleeper.delays(),
        [Duration::from_millis(100), Duration::from_secs(1)]
    );
    assert_eq!(s.mcp().count("tools/call"), 3);

    f.set_persistent(McpFault::any(McpFaultKind::HttpStatus { status: 502 }));
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Transient(m) if m.contains("502")),
        "{err:?}"
    );
    // One attempt and max_retries (2) more.
    assert_eq!(s.mcp().count("tools/call"), 6);
    assert_eq!(sleeper.delays().len(), 4);
    assert_eq!(sleeper.delays()[3], Duration::from_millis(200));
}

#[tokio::test]
async fn an_expired_session_is_initialized_again_once() {
    let s = sim(McpMode::Sse).await;
    let (c, _) = client(&s, &ALL);
    c.connect().await.unwrap();
    let first = c.session_id().await.unwrap();
    s.mcp().expire_sessions();
    let out = c
        .call_tool("get_model", json!({"model": "gpt-6-luna"}))
        .await
        .unwrap();
    assert!(
        out.text.contains("\"supports_prompt_cache\":true"),
        "{}",
        out.text
    );
    let second = c.session_id().await.unwrap();
    assert_ne!(first, second);
    assert_eq!(s.mcp().count("initialize"), 2);
    assert_eq!(s.mcp().count("tools/call"), 2);
    assert_eq!(s.mcp().open_sessions(), 1);

    c.close().await;
    assert_eq!(s.mcp().open_sessions(), 0);
    assert_eq!(c.session_id().await, None);
    c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(s.mcp().count("initialize"), 3);
}

#[tokio::test]
async fn the_tool_list_is_fetched_once_and_again_after_the_session_is_lost() {
    let s = sim(McpMode::Json).await;
    let (c, _) = client(&s, &ALL);
    let first = c.list_tools().await.unwrap();
    let pages = s.mcp().count("tools/list");
    assert!(pages >= 1);
    for _ in 0..3 {
        assert_eq!(c.list_tools().await.unwrap(), first);
    }
    assert_eq!(s.mcp().count("tools/list"), pages, "kept, not listed again");
    // The server forgets the session: the next message opens a new one,
    // and the list is asked for again, since the server may have changed.
    s.mcp().expire_sessions();
    c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(c.list_tools().await.unwrap(), first);
    assert_eq!(s.mcp().count("tools/list"), 2 * pages);
    // Closing the client forgets it too.
    c.close().await;
    c.list_tools().await.unwrap();
    assert_eq!(s.mcp().count("tools/list"), 3 * pages);
}

#[tokio::test]
async fn a_wrong_key_is_rejected_without_retries() {
    let s = sim(McpMode::Json).await;
    let (c, sleeper) = client_with(&s, "not-the-key", &ALL);
    let err = c.list_tools().await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.contains("401") && m.contains("admin key")),
        "{err:?}"
    );
    assert!(!format!("{err}").contains("not-the-key"));
    // A 401 says nothing about the era: no fallback to initialize.
    assert_eq!(s.mcp().count("server/discover"), 1);
    assert_eq!(s.mcp().count(""), 1);
    assert!(sleeper.delays().is_empty());
    assert!(!format!("{c:?}").contains("not-the-key"));
}

#[tokio::test]
async fn huge_answers_pass_up_to_the_cap_and_are_refused_beyond() {
    let s = sim(McpMode::Sse).await;
    let (c, _) = client(&s, &ALL);
    let f = s.mcp().faults();
    f.push(McpFault::on(
        "list_models",
        McpFaultKind::HugeText { bytes: 1 << 20 },
    ));
    let out = c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(out.text.len(), 1 << 20);
    assert!(!out.is_error);

    let small = McpLimits {
        max_body_bytes: 64 << 10,
        ..limits()
    };
    let c = client(&s, &ALL).0.with_limits(small);
    f.push(McpFault::on(
        "list_models",
        McpFaultKind::HugeText { bytes: 1 << 20 },
    ));
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.contains("max_body_bytes")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_hanging_server_times_out_as_transient() {
    let s = sim(McpMode::Json).await;
    let (c, sleeper) = client(&s, &ALL);
    let c = McpClient {
        timeout: Duration::from_millis(300),
        ..c
    }
    .with_limits(McpLimits {
        max_retries: 1,
        ..limits()
    });
    c.connect().await.unwrap();
    let f = s.mcp().faults();
    f.set_persistent(McpFault::on("list_traces", McpFaultKind::Hang));
    let started = std::time::Instant::now();
    let err = c
        .call_tool(
            "list_traces",
            json!({"start": "2026-10-11T11:24:00Z", "end": "2026-10-11T11:32:00Z"}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Transient(m) if m.contains("no answer within 300 ms")),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(s.mcp().count("tools/call"), 2);
    assert_eq!(sleeper.delays(), [Duration::from_millis(100)]);
    f.clear();
    let out = c
        .call_tool(
            "list_traces",
            json!({"start": "2026-10-11T11:24:00Z", "end": "2026-10-11T11:32:00Z"}),
        )
        .await
        .unwrap();
    assert!(rows(&out).is_empty());
}

#[test]
fn only_http_urls_and_header_safe_keys_are_accepted() {
    let allow = vec!["list_models".to_owned()];
    let t = Duration::from_secs(1);
    let key = Secret::new("k");
    assert!(McpClient::new(Url::parse("ftp://x/").unwrap(), &key, allow.clone(), t).is_err());
    let bad = Secret::new("a\nb");
    assert!(McpClient::new(Url::parse("http://x/").unwrap(), &bad, allow, t).is_err());
}
