//! Tests of the MCP endpoint over HTTP: sessions, transport headers, the
//! paged tool list and toolsets, tool answers and errors, faults, the event
//! stream.

use super::wire::{INVALID_PARAMS, METHOD_NOT_FOUND, PARSE_ERROR, UNAUTHORIZED, sse_body};
use super::*;
use crate::{SimOptions, SimServer};
use axum::http::header;
use serde_json::{Value, json};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seed-window.json");
const KEY: &str = "sim-admin-key";
const START: &str = "2026-10-11T11:24:00Z";
const END: &str = "2026-10-11T11:32:00Z";

async fn server() -> SimServer {
    let d = Dataset::from_fixture(FIXTURE).unwrap();
    SimServer::start(Arc::new(d), SimOptions::default())
        .await
        .unwrap()
}

fn fixture() -> Value {
    serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap()
}

/// A raw MCP POST with the gateway headers, minus those named in `drop`.
async fn post(
    s: &SimServer,
    session: Option<&str>,
    body: Value,
    drop: &[&str],
) -> reqwest::Response {
    let mut headers = vec![
        ("authorization", format!("Bearer {KEY}")),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("content-type", "application/json".to_owned()),
        ("x-mcp-readonly", "true".to_owned()),
        ("x-mcp-toolsets", "logs".to_owned()),
    ];
    if let Some(id) = session {
        headers.push(("mcp-session-id", id.to_owned()));
        headers.push(("mcp-protocol-version", "2025-06-18".to_owned()));
    }
    let mut req = reqwest::Client::new()
        .post(s.mcp_url())
        .body(body.to_string());
    for (k, v) in headers.iter().filter(|(k, _)| !drop.contains(k)) {
        req = req.header(*k, v);
    }
    req.send().await.unwrap()
}

/// The JSON-RPC message of a JSON or SSE answer (the last message event).
async fn message(res: reqwest::Response) -> Value {
    let is_sse = res.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream");
    let body = res.bytes().await.unwrap();
    if !is_sse {
        return serde_json::from_slice(&body).unwrap();
    }
    let events = sse_data(&body);
    serde_json::from_str(events.last().unwrap()).unwrap()
}

/// The data of each event of an SSE body (events end at a blank line,
/// `data:` lines are joined with newlines; an event with empty data, like
/// the priming event, is skipped as MCP clients do). The client's own parser is checked against
/// this server in the workspace's integration tests.
fn sse_data(body: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(body).unwrap();
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in text.split("\r\n").flat_map(|l| l.split('\n')) {
        if line.is_empty() {
            let joined = data.join("\n");
            data.clear();
            if !joined.is_empty() {
                events.push(joined);
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            data.push(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    if !data.is_empty() {
        events.push(data.join("\n"));
    }
    events
}

async fn open(s: &SimServer) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let res = post(s, None, init, &[]).await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let m = message(res).await;
    assert_eq!(m["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(m["id"], 1);
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(s, Some(&id), done, &[]).await.status(), 202);
    id
}

async fn call(s: &SimServer, session: &str, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": tool, "arguments": args}});
    let res = post(s, Some(session), body, &[]).await;
    assert_eq!(res.status(), 200);
    message(res).await
}

fn text(m: &Value) -> Value {
    assert_eq!(m["result"]["isError"], false, "{m}");
    serde_json::from_str(m["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
}

fn error_text(m: &Value) -> String {
    assert_eq!(m["result"]["isError"], true, "{m}");
    m["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn sessions_are_opened_by_initialize_and_required_after() {
    let s = server().await;
    let id = open(&s).await;
    assert!(id.starts_with("sim-"));
    assert_eq!(s.mcp().open_sessions(), 1);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let res = post(&s, None, ping.clone(), &[]).await;
    assert_eq!(res.status(), 400);
    assert_eq!(
        post(&s, Some("sim-nope"), ping.clone(), &[]).await.status(),
        404
    );
    assert_eq!(
        message(post(&s, Some(&id), ping.clone(), &[]).await).await["result"],
        json!({})
    );
    // An unknown protocol version is refused; an old one is negotiated.
    let mut req = reqwest::Client::new()
        .post(s.mcp_url())
        .body(ping.to_string());
    for (k, v) in [
        ("authorization", "Bearer sim-admin-key"),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("x-mcp-readonly", "true"),
        ("mcp-session-id", id.as_str()),
        ("mcp-protocol-version", "2099-01-01"),
    ] {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), 400);
    let old = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize",
                     "params": {"protocolVersion": "2024-11-05"}});
    let m = message(post(&s, None, old, &[]).await).await;
    assert_eq!(m["result"]["protocolVersion"], "2025-06-18");
    // DELETE ends a session; expire_sessions ends them all.
    let del = reqwest::Client::new()
        .delete(s.mcp_url())
        .bearer_auth(KEY)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 200);
    assert_eq!(post(&s, Some(&id), ping, &[]).await.status(), 404);
    s.mcp().expire_sessions();
    assert_eq!(s.mcp().open_sessions(), 0);
}

#[tokio::test]
async fn transport_headers_are_checked() {
    let s = server().await;
    let id = open(&s).await;
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let res = post(&s, Some(&id), ping.clone(), &["authorization"]).await;
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers()["www-authenticate"], "Bearer");
    assert_eq!(message(res).await["error"]["code"], UNAUTHORIZED);
    assert_eq!(
        post(&s, Some(&id), ping.clone(), &["accept"])
            .await
            .status(),
        406
    );
    assert_eq!(
        post(&s, Some(&id), ping.clone(), &["content-type"])
            .await
            .status(),
        415
    );
    assert_eq!(
        post(&s, Some(&id), ping.clone(), &["x-mcp-readonly"])
            .await
            .status(),
        400
    );
    let get = reqwest::Client::new()
        .get(s.mcp_url())
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    let unauth_get = reqwest::Client::new()
        .get(s.mcp_url())
        .send()
        .await
        .unwrap();
    assert_eq!(unauth_get.status(), 401);
    // Every request was recorded, the key never.
    let calls = s.mcp().calls();
    assert_eq!(calls.len(), 2 + 4 + 2);
    assert_eq!(calls[2].header("authorization"), None);
    assert_eq!(calls[3].header("authorization"), Some("Bearer [admin key]"));
    assert_eq!(calls[3].method, "ping");
    assert!(
        calls
            .iter()
            .all(|c| !format!("{:?}", c.headers).contains(KEY))
    );
    assert_eq!(calls[6].http_method, "GET");
    // Bodies that are not one JSON-RPC object.
    let raw = |body: &'static str| {
        reqwest::Client::new()
            .post(s.mcp_url())
            .bearer_auth(KEY)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("x-mcp-readonly", "true")
            .header("mcp-session-id", id.clone())
            .body(body)
            .send()
    };
    let res = raw("{not json").await.unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(message(res).await["error"]["code"], PARSE_ERROR);
    assert_eq!(raw("[]").await.unwrap().status(), 400);
    let res = raw(r#"{"jsonrpc":"2.0","id":5,"method":"resources/list"}"#)
        .await
        .unwrap();
    assert_eq!(message(res).await["error"]["code"], METHOD_NOT_FOUND);
}

#[tokio::test]
async fn tools_list_is_paginated_and_toolsets_hide_the_log_tools() {
    let s = server().await;
    let id = open(&s).await;
    let list = |cursor: Option<String>, drop: &'static [&'static str]| {
        let params = cursor.map_or(json!({}), |c| json!({ "cursor": c }));
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params});
        let (s, id) = (&s, id.clone());
        async move { message(post(s, Some(&id), body, drop).await).await }
    };
    let first = list(None, &[]).await;
    let names = |m: &Value| -> Vec<String> {
        m["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(&first),
        [
            "list_sessions",
            "search_requests",
            "get_request",
            "list_traces"
        ]
    );
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let second = list(Some(cursor), &[]).await;
    assert_eq!(names(&second), ["list_models", "get_model", "get_pricing"]);
    assert!(second["result"].get("nextCursor").is_none());
    for t in first["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object");
        assert_eq!(t["inputSchema"]["additionalProperties"], false);
    }
    let bad = list(Some("garbage".into()), &[]).await;
    assert_eq!(bad["error"]["code"], INVALID_PARAMS);
    // Without the logs toolset only the catalogue is there.
    let catalogue = list(None, &["x-mcp-toolsets"]).await;
    assert_eq!(
        names(&catalogue),
        ["list_models", "get_model", "get_pricing"]
    );
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                      "params": {"name": "list_sessions", "arguments": {}}});
    let m = message(post(&s, Some(&id), body, &["x-mcp-toolsets"]).await).await;
    assert_eq!(m["error"]["code"], INVALID_PARAMS);
}

#[tokio::test]
async fn tools_answer_with_the_rest_rows() {
    let s = server().await;
    s.mcp().set_mode(McpMode::Sse);
    let id = open(&s).await;
    let fx = fixture();
    let all = text(
        &call(
            &s,
            &id,
            "list_sessions",
            json!({"start": START, "end": END}),
        )
        .await,
    );
    assert_eq!(all["data"], fx["data"]);
    assert_eq!(all["next_cursor"], Value::Null);

    // Pages of 10, following next_cursor, give the same rows.
    let mut rows = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let args = json!({"start": START, "end": END, "limit": 10, "cursor": cursor});
        let page = text(&call(&s, &id, "list_sessions", args).await);
        rows.extend(page["data"].as_array().unwrap().iter().cloned());
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(Value::Array(rows), fx["data"]);

    let labelled = json!({"start": START, "end": END, "labels": {"case": "retry-loop"}});
    let one = text(&call(&s, &id, "list_sessions", labelled).await);
    assert_eq!(one["data"][0]["session_id"], "retry-loop-7f2e81c09ab5");
    assert_eq!(one["data"].as_array().unwrap().len(), 1);

    let loop_rows = text(
        &call(
            &s,
            &id,
            "search_requests",
            json!({"session_id": "retry-loop-7f2e81c09ab5"}),
        )
        .await,
    );
    let rows = loop_rows["data"].as_array().unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[0]["error_type"], "RateLimitError");
    assert_eq!(rows[0].as_object().unwrap().len(), 14);
    let errors = text(
        &call(
            &s,
            &id,
            "search_requests",
            json!({"session_id": "retry-loop-7f2e81c09ab5", "status": "error", "limit": 3}),
        )
        .await,
    );
    assert_eq!(errors["data"].as_array().unwrap().len(), 3);
    assert!(errors["next_cursor"].is_string());
    let sol = text(
        &call(
            &s,
            &id,
            "search_requests",
            json!({"start": START, "end": END, "model": "gpt-6.1-sol"}),
        )
        .await,
    );
    assert!(
        sol["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["model"] == "gpt-6.1-sol")
    );
    assert_eq!(sol["data"].as_array().unwrap().len(), 3);

    let rid = rows[0]["request_id"].as_str().unwrap();
    let one = text(&call(&s, &id, "get_request", json!({"request_id": rid})).await);
    assert_eq!(one, rows[0]);
    let models = text(&call(&s, &id, "list_models", json!({})).await);
    assert_eq!(models["data"], fx["models"]);
    let price = text(&call(&s, &id, "get_pricing", json!({"model": "gpt-6-luna"})).await);
    assert_eq!(price["usd_per_mtok"]["output"], 0.4);
    let traces = text(&call(&s, &id, "list_traces", json!({"start": START, "end": END})).await);
    assert_eq!(traces["data"], json!([]));
}

#[tokio::test]
async fn bad_arguments_are_error_results_the_model_can_act_on() {
    let s = server().await;
    let id = open(&s).await;
    let cases = [
        (
            "list_sessions",
            json!({"start": START}),
            "start and end go together",
        ),
        (
            "list_sessions",
            json!({"start": "yesterday", "end": END}),
            "RFC 3339",
        ),
        (
            "list_sessions",
            json!({"start": START, "end": END, "limit": 51}),
            "from 1 to 50",
        ),
        (
            "list_sessions",
            json!({"start": START, "end": END, "limit": "5"}),
            "from 1 to 50",
        ),
        (
            "list_sessions",
            json!({"start": START, "end": END, "colour": "red"}),
            "unknown argument `colour`",
        ),
        (
            "list_sessions",
            json!({"start": START, "end": END, "cursor": "abc"}),
            "cursor",
        ),
        (
            "list_sessions",
            json!({"start": START, "end": END, "labels": {"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6"}}),
            "at most 5",
        ),
        ("search_requests", json!({}), "give session_id"),
        (
            "search_requests",
            json!({"session_id": "x", "status": "weird"}),
            "success",
        ),
        (
            "get_request",
            json!({"request_id": "req_nope"}),
            "no request",
        ),
        (
            "get_model",
            json!({"model": "gpt-7"}),
            "known models: gpt-6-luna",
        ),
        ("get_model", json!({}), "model is required"),
        ("list_models", json!({"x": 1}), "none expected"),
    ];
    for (tool, args, want) in cases {
        let m = call(&s, &id, tool, args.clone()).await;
        let text = error_text(&m);
        assert!(
            text.starts_with("error: ") && text.contains(want),
            "{tool} {args}: {text}"
        );
    }
    // A cursor from one query does not continue another.
    let page = text(
        &call(
            &s,
            &id,
            "list_sessions",
            json!({"start": START, "end": END, "limit": 5}),
        )
        .await,
    );
    let other =
        json!({"start": START, "end": "2026-10-11T11:30:00Z", "cursor": page["next_cursor"]});
    assert!(error_text(&call(&s, &id, "list_sessions", other).await).contains("cursor"));
    let m = call(&s, &id, "drop_table", json!({})).await;
    assert_eq!(m["error"]["code"], INVALID_PARAMS);
}

#[tokio::test]
async fn faults_are_served_per_tool_in_order() {
    let s = server().await;
    let id = open(&s).await;
    let f = s.mcp().faults();
    f.push(McpFault::on(
        "get_model",
        McpFaultKind::HugeText { bytes: 1_000_000 },
    ));
    f.push(McpFault::any(McpFaultKind::RpcError {
        code: -32603,
        message: "boom".into(),
    }));
    f.push(McpFault::on(
        "list_models",
        McpFaultKind::HttpStatus { status: 429 },
    ));
    let m = call(&s, &id, "list_models", json!({})).await;
    assert_eq!(m["error"], json!({"code": -32603, "message": "boom"}));
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": "list_models", "arguments": {}}});
    let res = post(&s, Some(&id), body, &[]).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(f.pending(), 1);
    let m = call(&s, &id, "get_model", json!({"model": "gpt-6-luna"})).await;
    let huge = m["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(huge.len(), 1_000_000);
    assert_eq!(f.pending(), 0);
    assert_eq!(f.served(), 3);
    f.set_persistent(McpFault::on(
        "list_models",
        McpFaultKind::Delay { millis: 50 },
    ));
    let started = std::time::Instant::now();
    text(&call(&s, &id, "list_models", json!({})).await);
    assert!(started.elapsed() >= Duration::from_millis(50));
    text(&call(&s, &id, "get_model", json!({"model": "gpt-6-luna"})).await);
    assert_eq!(f.served(), 4);
    f.clear();
    assert_eq!(s.mcp().count("tools/call"), 5);
}

#[test]
fn the_event_stream_is_awkward_but_valid() {
    let m = json!({"jsonrpc": "2.0", "id": 4, "result": {"a": [1, 2]}});
    let body = sse_body(&m);
    assert!(body.contains("\r\n") && !body.replace("\r\n", "").contains('\n'));
    let events = sse_data(body.as_bytes());
    assert_eq!(events.len(), 2);
    assert!(events[0].contains("notifications/message"));
    assert!(events[1].lines().count() > 3);
    assert_eq!(serde_json::from_str::<Value>(&events[1]).unwrap(), m);
}

#[tokio::test]
async fn the_router_also_serves_on_its_own() {
    let d = Arc::new(Dataset::from_fixture(FIXTURE).unwrap());
    let app = Router::new().nest_service("/v1/mcp", router(d, KEY.into(), McpMode::Sse));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/v1/mcp"))
        .bearer_auth(KEY)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("x-mcp-readonly", "true")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().contains_key("mcp-session-id"));
    assert_eq!(
        message(res).await["result"]["protocolVersion"],
        "2025-03-26"
    );
}
