//! The client against scripted servers: one that speaks 2026-07-28 and
//! checks its request metadata as the specification says a server must,
//! servers of the `initialize` era refusing the probe in the ways the
//! specification names, and refusals that are not a fallback.

use super::super::*;
use super::fake::{Answer, Fake, Form, Script, Seen};
use crate::clock::RecordingSleeper;
use std::sync::atomic::{AtomicBool, Ordering};

const KEY: &str = "fake-admin-key";

fn client(fake: &Fake, allow: &[&str]) -> (McpClient, RecordingSleeper) {
    let sleeper = RecordingSleeper::default();
    let client = McpClient::new(
        fake.url(),
        &Secret::new(KEY),
        allow.iter().map(|t| (*t).to_owned()).collect(),
        Duration::from_secs(10),
    )
    .unwrap()
    .with_limits(McpLimits {
        retry_base: Duration::from_millis(100),
        ..McpLimits::default()
    })
    .with_sleeper(Arc::new(sleeper.clone()));
    (client, sleeper)
}

/// The tools of the scripted servers: one plain, one mirroring an argument
/// into `Mcp-Param-Session`, one whose annotation is invalid (on a number).
fn tools() -> Value {
    json!([
        {"name": "list_models", "description": "Models.", "inputSchema": {"type": "object"}},
        {"name": "search_requests", "description": "Rows.", "inputSchema": {
            "type": "object",
            "properties": {
                "session_id": {"type": "string", "x-mcp-header": "Session"},
                "limit": {"type": "integer"},
            },
        }},
        {"name": "bad_tool", "description": "Invalid.", "inputSchema": {
            "type": "object",
            "properties": {"ratio": {"type": "number", "x-mcp-header": "Ratio"}},
        }},
    ])
}

/// A 2026-07-28 server as the specification describes one: it refuses a
/// request whose `MCP-Protocol-Version` does not match `_meta` or whose
/// `Mcp-Method`, `Mcp-Name` or `Mcp-Param-Session` do not match the body
/// (400, `HeaderMismatch`), another revision (400,
/// `UnsupportedProtocolVersion`) and `initialize`; answers in `form`.
fn modern(seen: &Seen, form: Form) -> Answer {
    let header_version = seen.header("mcp-protocol-version");
    if seen.method() == "initialize" || header_version.is_none() {
        return Answer::error(
            400,
            seen,
            -32022,
            "Unsupported protocol version",
            Some(json!({"supported": ["2026-07-28"], "requested": header_version})),
        );
    }
    if seen.meta_version() != header_version || seen.header("mcp-method") != Some(seen.method()) {
        return Answer::error(400, seen, -32020, "Header mismatch", None);
    }
    if header_version != Some("2026-07-28") {
        return Answer::error(
            400,
            seen,
            -32022,
            "Unsupported protocol version",
            Some(json!({"supported": ["2026-07-28"], "requested": header_version})),
        );
    }
    let meta = seen.meta().unwrap();
    if meta
        .get("io.modelcontextprotocol/clientCapabilities")
        .is_none()
    {
        return Answer::error(400, seen, -32602, "missing clientCapabilities", None);
    }
    let answer = match seen.method() {
        "server/discover" => Answer::result(
            seen,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                   "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"}),
        ),
        "tools/list" => Answer::result(
            seen,
            json!({"resultType": "complete", "tools": tools(), "ttlMs": 0, "cacheScope": "public"}),
        ),
        "tools/call" => {
            let name = seen.body["params"]["name"].as_str().unwrap_or_default();
            if seen.header("mcp-name") != Some(name) {
                return Answer::error(400, seen, -32020, "Mcp-Name does not match", None);
            }
            let session = seen.body.pointer("/params/arguments/session_id");
            if name == "search_requests"
                && seen.header("mcp-param-session") != session.and_then(Value::as_str)
            {
                return Answer::error(400, seen, -32020, "Mcp-Param-Session does not match", None);
            }
            let text = format!("{name} {}", seen.body["params"]["arguments"]);
            Answer::result(
                seen,
                json!({"resultType": "complete", "isError": false,
                       "content": [{"type": "text", "text": text}]}),
            )
        }
        other => Answer::error(404, seen, -32601, &format!("no method {other}"), None),
    };
    answer.in_form(form)
}

/// A server of the `initialize` era speaking `version`, with sessions; it
/// answers a request outside a session with `refuse_probe`.
fn legacy(seen: &Seen, version: &str, refuse_probe: &dyn Fn(&Seen) -> Answer) -> Answer {
    match seen.method() {
        "initialize" => Answer::result(
            seen,
            json!({"protocolVersion": version, "capabilities": {"tools": {}},
                   "serverInfo": {"name": "legacy", "version": "1"}}),
        )
        .with_session("s-42"),
        _ if seen.header("mcp-session-id") != Some("s-42") => refuse_probe(seen),
        "notifications/initialized" => Answer::accepted(),
        "tools/list" => Answer::result(seen, json!({"tools": tools()})),
        "tools/call" => Answer::result(
            seen,
            json!({"content": [{"type": "text", "text": "legacy answer"}]}),
        ),
        _ => Answer::error(200, seen, -32601, "no such method", None),
    }
}

fn script(f: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Script {
    Arc::new(f)
}

#[tokio::test]
async fn a_modern_server_gets_meta_and_request_headers_and_no_handshake() {
    for form in [Form::Json, Form::Sse] {
        let fake = Fake::start(script(move |s| modern(s, form))).await;
        let (c, sleeper) = client(&fake, &["search_requests", "list_models", "bad_tool"]);
        let tools = c.list_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        // The tool with an invalid x-mcp-header is left out.
        assert_eq!(names, ["search_requests", "list_models"], "{form:?}");
        let out = c
            .call_tool(
                "search_requests",
                json!({"session_id": "retry-loop-7f2e", "limit": 3}),
            )
            .await
            .unwrap();
        let (tool, arguments) = out.text.split_once(' ').unwrap();
        assert_eq!(tool, "search_requests");
        let arguments: Value = serde_json::from_str(arguments).unwrap();
        assert_eq!(
            arguments,
            json!({"session_id": "retry-loop-7f2e", "limit": 3})
        );
        assert!(!out.is_error);
        c.call_tool("list_models", Value::Null).await.unwrap();
        assert_eq!(c.protocol_version().await.as_deref(), Some("2026-07-28"));
        assert_eq!(c.session_id().await, None);
        assert!(sleeper.delays().is_empty());

        assert_eq!(
            fake.methods(),
            ["server/discover", "tools/list", "tools/call", "tools/call"],
            "{form:?}"
        );
        for seen in fake.seen() {
            assert_eq!(seen.http_method, "POST");
            assert_eq!(seen.header("authorization"), Some("Bearer fake-admin-key"));
            assert_eq!(
                seen.header("accept"),
                Some("application/json, text/event-stream")
            );
            assert_eq!(seen.header("content-type"), Some("application/json"));
            assert_eq!(seen.header("x-mcp-readonly"), Some("true"));
            assert_eq!(seen.header("x-mcp-toolsets"), Some("logs"));
            assert_eq!(seen.header("mcp-session-id"), None);
            assert_eq!(seen.header("mcp-protocol-version"), Some("2026-07-28"));
            assert_eq!(seen.header("mcp-method"), Some(seen.method()));
            let meta = seen.meta().unwrap();
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
        }
        let seen = fake.seen();
        assert_eq!(seen[0].header("mcp-name"), None);
        assert_eq!(seen[1].header("mcp-name"), None);
        assert_eq!(seen[2].header("mcp-name"), Some("search_requests"));
        assert_eq!(seen[2].header("mcp-param-session"), Some("retry-loop-7f2e"));
        assert_eq!(seen[2].body["params"]["arguments"]["limit"], 3);
        assert_eq!(seen[3].header("mcp-name"), Some("list_models"));
        assert_eq!(seen[3].header("mcp-param-session"), None);
        assert_eq!(seen[3].body["params"]["arguments"], json!({}));
    }
}

#[tokio::test]
async fn a_header_mismatch_lists_the_tools_again_and_retries_once() {
    let fake = Fake::start(script(|s| modern(s, Form::Json))).await;
    let (c, _) = client(&fake, &["search_requests"]);
    // Called before any listing: the client cannot know which argument the
    // server wants in a header; the server says so, the client lists the
    // tools and calls again.
    let out = c
        .call_tool("search_requests", json!({"session_id": "s-1"}))
        .await
        .unwrap();
    assert!(out.text.contains("s-1"), "{}", out.text);
    assert_eq!(
        fake.methods(),
        ["server/discover", "tools/call", "tools/list", "tools/call"]
    );
    let seen = fake.seen();
    assert_eq!(seen[1].header("mcp-param-session"), None);
    assert_eq!(seen[3].header("mcp-param-session"), Some("s-1"));

    // A mismatch that stays is refused after the one retry.
    let fake = Fake::start(script(|s| match s.method() {
        "tools/call" => Answer::error(400, s, -32020, "Header mismatch: always", None),
        _ => modern(s, Form::Json),
    }))
    .await;
    let (c, sleeper) = client(&fake, &["list_models"]);
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.contains("400") && m.contains("always")),
        "{err:?}"
    );
    assert_eq!(
        fake.methods(),
        ["server/discover", "tools/call", "tools/list", "tools/call"]
    );
    assert!(sleeper.delays().is_empty());
}

#[tokio::test]
async fn servers_of_the_initialize_era_get_initialize_after_the_probe() {
    type Refusal = fn(&Seen) -> Answer;
    let cases: [(&str, Refusal, &str); 6] = [
        // The modern refusal naming older revisions: the newest shared one.
        (
            "-32022 listing older revisions",
            |s| {
                Answer::error(
                    400,
                    s,
                    -32022,
                    "Unsupported protocol version",
                    Some(
                        json!({"supported": ["2025-06-18", "2025-03-26"], "requested": "2026-07-28"}),
                    ),
                )
            },
            "2025-06-18",
        ),
        // Legacy refusals: a 400 without a modern error, in any shape.
        (
            "400 with a json-rpc error",
            |s| Answer::error(400, s, -32600, "Bad Request: Missing session ID", None),
            "2025-11-25",
        ),
        (
            "400 with text",
            |_| Answer::plain(400, "Bad Request"),
            "2025-11-25",
        ),
        (
            "404 without a body",
            |_| Answer::plain(404, ""),
            "2025-11-25",
        ),
        (
            "method not found in a 200",
            |s| Answer::error(200, s, -32601, "Method not found", None),
            "2025-11-25",
        ),
        // A discovery result that lists only older revisions.
        (
            "a discovery result without 2026-07-28",
            |s| {
                Answer::result(
                    s,
                    json!({"supportedVersions": ["2025-03-26"], "capabilities": {}}),
                )
            },
            "2025-03-26",
        ),
    ];
    for (case, refuse, asked) in cases {
        // The server chooses the revision asked for.
        let chosen = asked;
        let fake = Fake::start(script(move |s| legacy(s, chosen, &refuse))).await;
        let (c, sleeper) = client(&fake, &["list_models"]);
        let out = c.call_tool("list_models", json!({})).await.unwrap();
        assert_eq!(out.text, "legacy answer", "{case}");
        c.call_tool("list_models", json!({})).await.unwrap();
        assert_eq!(
            c.protocol_version().await.as_deref(),
            Some(chosen),
            "{case}"
        );
        assert_eq!(c.session_id().await.as_deref(), Some("s-42"), "{case}");
        assert!(sleeper.delays().is_empty(), "{case}");
        // Negotiated once for the client: one request more than the
        // handshake alone.
        assert_eq!(
            fake.methods(),
            [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/call",
                "tools/call"
            ],
            "{case}"
        );
        let seen = fake.seen();
        assert_eq!(seen[1].body["params"]["protocolVersion"], asked, "{case}");
        assert_eq!(seen[1].body["params"]["clientInfo"]["name"], "costwatch");
        assert_eq!(seen[1].header("mcp-protocol-version"), None, "{case}");
        for call in &seen[2..] {
            assert_eq!(call.header("mcp-session-id"), Some("s-42"), "{case}");
            assert_eq!(call.header("mcp-protocol-version"), Some(chosen), "{case}");
            assert_eq!(call.header("mcp-method"), None, "{case}");
            assert_eq!(call.meta(), None, "{case}");
        }
    }
}

#[tokio::test]
async fn an_unsupported_version_sharing_nothing_is_rejected_naming_both_lists() {
    let fake = Fake::start(script(|s| {
        Answer::error(
            400,
            s,
            -32022,
            "Unsupported protocol version",
            Some(json!({"supported": ["2027-01-01", "2024-11-05"], "requested": "2026-07-28"})),
        )
    }))
    .await;
    let (c, sleeper) = client(&fake, &["list_models"]);
    for _ in 0..2 {
        let err = c.list_tools().await.unwrap_err();
        assert_eq!(
            err,
            InvestigateError::Rejected(
                "server/discover: no protocol version in common: the server speaks \
                 2027-01-01, 2024-11-05; costwatch speaks 2026-07-28, 2025-11-25, \
                 2025-06-18, 2025-03-26"
                    .into()
            )
        );
    }
    // One probe per attempt, never an initialize, never a retry.
    assert_eq!(fake.methods(), ["server/discover", "server/discover"]);
    assert!(sleeper.delays().is_empty());
    assert_eq!(c.protocol_version().await, None);
}

#[tokio::test]
async fn modern_refusals_of_the_probe_are_not_a_fallback() {
    let fake = Fake::start(script(|s| {
        Answer::error(400, s, -32020, "Header mismatch: Mcp-Method", None)
    }))
    .await;
    let (c, _) = client(&fake, &["list_models"]);
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.starts_with("server/discover:") && m.contains("Mcp-Method")),
        "{err:?}"
    );
    assert_eq!(fake.methods(), ["server/discover"]);

    // A 2026-07-28 server without server/discover is still one.
    let fake = Fake::start(script(|s| match s.method() {
        "server/discover" => Answer::error(404, s, -32601, "Method not found", None),
        _ => modern(s, Form::Json),
    }))
    .await;
    let (c, _) = client(&fake, &["list_models"]);
    c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(fake.methods(), ["server/discover", "tools/call"]);
    assert_eq!(c.protocol_version().await.as_deref(), Some("2026-07-28"));
}

#[tokio::test]
async fn a_server_that_drops_the_revision_is_negotiated_again() {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let fake = Fake::start(script(move |s| {
        if !flag.load(Ordering::SeqCst) {
            return modern(s, Form::Json);
        }
        legacy(s, "2025-11-25", &|s| {
            Answer::error(
                400,
                s,
                -32022,
                "Unsupported protocol version",
                Some(json!({"supported": ["2025-11-25"], "requested": "2026-07-28"})),
            )
        })
    }))
    .await;
    let (c, _) = client(&fake, &["list_models"]);
    c.list_tools().await.unwrap();
    assert_eq!(c.protocol_version().await.as_deref(), Some("2026-07-28"));
    dropped.store(true, Ordering::SeqCst);
    let out = c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(out.text, "legacy answer");
    assert_eq!(c.protocol_version().await.as_deref(), Some("2025-11-25"));
    // The tool list is asked for again: the server changed.
    c.list_tools().await.unwrap();
    assert_eq!(
        fake.methods(),
        [
            "server/discover",
            "tools/list",
            "tools/call",
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
            "tools/list"
        ]
    );
    assert_eq!(
        fake.seen()[4].body["params"]["protocolVersion"],
        "2025-11-25"
    );
}

#[tokio::test]
async fn results_that_ask_for_input_are_refused() {
    let fake = Fake::start(script(|s| match s.method() {
        "tools/call" => Answer::result(
            s,
            json!({"resultType": "input_required", "inputRequests": {}}),
        ),
        _ => modern(s, Form::Json),
    }))
    .await;
    let (c, _) = client(&fake, &["list_models"]);
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.contains("input_required")),
        "{err:?}"
    );
}

#[tokio::test]
async fn closing_forgets_the_era() {
    let fake = Fake::start(script(|s| modern(s, Form::Json))).await;
    let (c, _) = client(&fake, &["list_models"]);
    c.connect().await.unwrap();
    c.close().await;
    assert_eq!(c.protocol_version().await, None);
    c.call_tool("list_models", json!({})).await.unwrap();
    // No session to end: no DELETE; the next call probes again.
    assert_eq!(
        fake.methods(),
        ["server/discover", "server/discover", "tools/call"]
    );
}

#[tokio::test]
async fn an_initialize_refused_for_its_revision_makes_the_next_call_probe_again() {
    // The probe was answered by a server of the initialize era; by the time
    // of `initialize`, one of 2026-07-28 only answers.
    let probed = Arc::new(AtomicBool::new(false));
    let flag = probed.clone();
    let fake = Fake::start(script(move |s| {
        if s.method() == "server/discover" && !flag.swap(true, Ordering::SeqCst) {
            return Answer::plain(400, "Bad Request: no session");
        }
        modern(s, Form::Json)
    }))
    .await;
    let (c, _) = client(&fake, &["list_models"]);
    let err = c.call_tool("list_models", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, InvestigateError::Rejected(m) if m.contains("-32022") && m.contains("the server speaks 2026-07-28")),
        "{err:?}"
    );
    c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(
        fake.methods(),
        [
            "server/discover",
            "initialize",
            "server/discover",
            "tools/call"
        ]
    );
    assert_eq!(c.protocol_version().await.as_deref(), Some("2026-07-28"));
}

#[tokio::test]
async fn a_request_sent_again_gets_a_new_id() {
    let failed = Arc::new(AtomicBool::new(false));
    let flag = failed.clone();
    let fake = Fake::start(script(move |s| {
        if s.method() == "tools/call" && !flag.swap(true, Ordering::SeqCst) {
            return Answer::plain(503, "busy");
        }
        modern(s, Form::Sse)
    }))
    .await;
    let (c, sleeper) = client(&fake, &["list_models"]);
    c.call_tool("list_models", json!({})).await.unwrap();
    assert_eq!(sleeper.delays(), [Duration::from_millis(100)]);
    let seen = fake.seen();
    let ids: Vec<&Value> = seen.iter().map(|s| &s.body["id"]).collect();
    assert_eq!(
        fake.methods(),
        ["server/discover", "tools/call", "tools/call"]
    );
    assert!(ids.iter().all(|id| id.is_u64()), "{ids:?}");
    assert_ne!(ids[1], ids[2]);
    assert_eq!(seen[1].body["params"], seen[2].body["params"]);
}

#[tokio::test]
async fn basic_auth_replaces_the_bearer_key_on_every_message() {
    let fake = Fake::start(script(move |s| {
        legacy(s, "2025-11-25", &|s| {
            Answer::error(
                400,
                s,
                -32000,
                "Bad Request: Unsupported protocol version",
                None,
            )
        })
    }))
    .await;
    let (c, _) = client(&fake, &["search_requests"]);
    let c = c
        .with_basic_auth("pk-lf-1", &Secret::new("sk-lf-2"))
        .unwrap();
    c.call_tool("search_requests", json!({"session_id": "s"}))
        .await
        .unwrap();
    assert_eq!(
        fake.methods(),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    // base64("pk-lf-1:sk-lf-2")
    for seen in fake.seen() {
        assert_eq!(
            seen.header("authorization"),
            Some("Basic cGstbGYtMTpzay1sZi0y"),
            "{}",
            seen.method()
        );
    }
    assert!(!format!("{c:?}").contains("sk-lf-2"));

    for (user, password) in [("pk:lf", "sk"), ("", "sk"), ("pk\n", "sk"), ("pk", "")] {
        let (c, _) = client(&fake, &["search_requests"]);
        let refused = c.with_basic_auth(user, &Secret::new(password)).unwrap_err();
        assert!(
            matches!(refused, InvestigateError::Rejected(_)),
            "{user:?}: {refused}"
        );
    }
}
