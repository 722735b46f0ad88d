//! The MCP endpoint against a running simulator: the stateless exchange,
//! the keys and host checks, the observation tools over the seed window,
//! and their protocol errors, checked against Langfuse's sources.

use super::*;
use crate::dataset::Dataset;
use crate::server::{SimOptions, SimServer};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

async fn server() -> SimServer {
    let d = Dataset::from_fixture_str(crate::SEED_WINDOW).unwrap();
    SimServer::start(Arc::new(d), SimOptions::default())
        .await
        .unwrap()
}

fn url(s: &SimServer) -> String {
    format!("{}/api/public/mcp", s.langfuse_url())
}

/// A POST with the project's keys and the headers a client sends.
fn request(s: &SimServer) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url(s))
        .basic_auth(s.langfuse().public_key(), Some(s.langfuse().secret_key()))
        .header("accept", "application/json, text/event-stream")
}

async fn send(rb: reqwest::RequestBuilder, body: &Value) -> (u16, HeaderMap, Value) {
    let res = rb.json(body).send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn rpc(s: &SimServer, method: &str, params: Value) -> Value {
    let (status, _, body) = send(
        request(s),
        &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], 7);
    body
}

/// A tool's result parsed from its one text block; panics on an error.
async fn call(s: &SimServer, tool: &str, arguments: Value) -> Value {
    let body = rpc(
        s,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await;
    let content = body["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(content.len(), 1);
    assert_eq!(content[0]["type"], "text");
    assert!(body["result"].get("isError").is_none());
    serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap()
}

/// A tool's JSON-RPC error: code and message.
async fn call_error(s: &SimServer, tool: &str, arguments: Value) -> (i64, String) {
    let body = rpc(
        s,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await;
    let e = &body["error"];
    assert!(body.get("result").is_none(), "{body}");
    (
        e["code"].as_i64().unwrap(),
        e["message"].as_str().unwrap().to_owned(),
    )
}

/// The session with the most calls, and its call ids, newest first.
fn busiest(s: &SimServer) -> (String, Vec<String>) {
    let session = s
        .dataset()
        .sessions
        .iter()
        .max_by_key(|x| (x.requests.len(), x.session_id.clone()))
        .unwrap();
    let mut calls: Vec<&crate::SimRequest> = session.requests.iter().collect();
    calls.sort_by(|a, b| {
        (b.created_at.timestamp_millis(), &b.request_id)
            .cmp(&(a.created_at.timestamp_millis(), &a.request_id))
    });
    (
        session.session_id.clone(),
        calls.iter().map(|r| r.request_id.clone()).collect(),
    )
}

fn session_filter(session: &str) -> Value {
    json!([{"column": "sessionId", "operator": "=", "value": session}])
}

#[tokio::test]
async fn the_session_filter_lists_that_sessions_observations_page_by_page() {
    let s = server().await;
    let (session, want) = busiest(&s);
    assert!(want.len() >= 3, "{want:?}");
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({"filter": session_filter(&session), "limit": 2});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = call(&s, "listObservations", args).await;
        pages += 1;
        for row in page["data"].as_array().unwrap() {
            let keys: Vec<&str> = row
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let want_keys: BTreeSet<&str> = [
                "id",
                "traceId",
                "startTime",
                "endTime",
                "parentObservationId",
                "type",
                "name",
                "level",
                "statusMessage",
                "isRootObservation",
                "providedModelName",
                "latency",
                "url",
            ]
            .into();
            assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), want_keys);
            assert_eq!(
                row["traceId"],
                json!(crate::langfuse::trace_id_of(&session))
            );
            assert_eq!(
                row["url"],
                json!(format!(
                    "{}/project/sim-project/traces/{}?observation={}",
                    s.langfuse_url(),
                    row["traceId"].as_str().unwrap(),
                    row["id"].as_str().unwrap()
                ))
            );
            ids.push(row["id"].as_str().unwrap().to_owned());
        }
        match page["meta"]["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert_eq!(page["meta"], json!({}));
                break;
            }
        }
    }
    assert_eq!(ids, want, "every call of the session, newest first");
    assert_eq!(pages, want.len().div_ceil(2));

    // The text is the server's: pretty, keys in the order it builds them.
    let body = rpc(
        &s,
        "tools/call",
        json!({"name": "listObservations", "arguments": {"filter": session_filter(&session), "limit": 1}}),
    )
    .await;
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("{\n  \"data\": [\n    {\n      \"id\": \""),
        "{text}"
    );
    let id_at = text.find("\"id\"").unwrap();
    let latency_at = text.find("\"latency\"").unwrap();
    let url_at = text.find("\"url\"").unwrap();
    assert!(id_at < latency_at && latency_at < url_at, "{text}");
}

#[tokio::test]
async fn a_top_level_session_id_is_dropped_and_lists_the_whole_project() {
    let s = server().await;
    let (session, want) = busiest(&s);
    let page = call(
        &s,
        "listObservations",
        json!({"sessionId": session, "fields": ["id", "sessionId"], "limit": 100}),
    )
    .await;
    let sessions: BTreeSet<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sessionId"].as_str().unwrap())
        .collect();
    assert!(sessions.len() > 1, "not filtered: {sessions:?}");
    assert!(page["data"].as_array().unwrap().len() > want.len());
}

#[tokio::test]
async fn get_observation_projects_the_fields_asked_for() {
    let s = server().await;
    let (session, want) = busiest(&s);
    let r = s
        .dataset()
        .requests_of(&session)
        .unwrap()
        .iter()
        .find(|r| r.request_id == want[0])
        .unwrap()
        .clone();
    let o = call(
        &s,
        "getObservation",
        json!({"observationId": r.request_id, "fields": ["id", "sessionId", "providedModelName", "totalCost", "usageDetails"]}),
    )
    .await;
    assert_eq!(o["id"], json!(r.request_id));
    assert_eq!(o["sessionId"], json!(session));
    assert_eq!(o["providedModelName"], json!(r.model));
    assert!((o["totalCost"].as_f64().unwrap() - r.cost_usd).abs() < 1e-12);
    assert_eq!(o["usageDetails"]["output"], json!(r.output_tokens));
    assert!(o["url"].as_str().unwrap().contains("/traces/"));
    assert_eq!(o.as_object().unwrap().len(), 6);

    let all = call(
        &s,
        "getObservation",
        json!({"observationId": r.request_id, "fields": ["*"]}),
    )
    .await;
    assert_eq!(
        all.as_object().unwrap().len(),
        39 + 1,
        "every field and the url: {all}"
    );
}

#[tokio::test]
async fn arguments_and_lookups_that_fail_are_protocol_errors() {
    let s = server().await;
    let (session, _) = busiest(&s);
    let cases = [
        (
            "listObservations",
            json!({"limit": 101}),
            -32602,
            "MCP error -32602: Validation failed: limit: Too big: expected number to be <=100",
        ),
        (
            "listObservations",
            json!({"limit": 0, "level": "LOUD"}),
            -32602,
            "MCP error -32602: Validation failed: limit: Too small: expected number to be >=1, level: Invalid option: expected one of \"DEBUG\"|\"DEFAULT\"|\"WARNING\"|\"ERROR\"",
        ),
        (
            "listObservations",
            json!({"filter": [{"column": "session", "operator": "=", "value": session}]}),
            -32602,
            "MCP error -32602: Validation failed: filter.0.column: Invalid observation filter column \"session\". Call getObservationFilterSchema for accepted columns.",
        ),
        (
            "listObservations",
            json!({"filter": [{"column": "sessionId", "operator": "any of", "value": [session]}]}),
            -32602,
            "MCP error -32602: Validation failed: filter.0.operator: Invalid option: expected one of \"=\"|\"contains\"|\"does not contain\"|\"starts with\"|\"ends with\", filter.0.value: Invalid input: expected string, received array",
        ),
        (
            "listObservations",
            json!({"fields": ["id", "tokens"]}),
            -32602,
            "MCP error -32602: Validation failed: fields: Invalid observation field \"tokens\". Call getObservationFieldSchema for accepted fields.",
        ),
        (
            "listObservations",
            json!({"cursor": "not a cursor"}),
            -32600,
            "MCP error -32600: Invalid cursor format",
        ),
        (
            "listObservations",
            json!({"fields": ["id", "metadata", "input"]}),
            -32600,
            "MCP error -32600: Accessing observation input, metadata requires traceId, an id filter, or both fromStartTime and toStartTime.",
        ),
        (
            "getObservation",
            json!({"observationId": "req_missing"}),
            -32600,
            "MCP error -32600: Observation req_missing not found",
        ),
        (
            "getObservation",
            json!({}),
            -32602,
            "MCP error -32602: Validation failed: observationId: Invalid input: expected string, received undefined",
        ),
        (
            "searchTraces",
            json!({}),
            -32603,
            "Unknown tool: searchTraces",
        ),
    ];
    for (tool, args, code, message) in cases {
        assert_eq!(
            call_error(&s, tool, args.clone()).await,
            (code, message.to_owned()),
            "{tool} {args}"
        );
    }
    // With a trace in scope, metadata may be read.
    let trace = crate::langfuse::trace_id_of(&session);
    let page = call(
        &s,
        "listObservations",
        json!({"traceId": trace, "fields": ["id", "metadata"], "limit": 1}),
    )
    .await;
    assert!(page["data"][0]["metadata"].is_object());
}

#[tokio::test]
async fn stateless_initialize_and_the_2026_revision_refused() {
    let s = server().await;
    // 2026-07-28: no server/discover; the header is refused before any JSON-RPC.
    let (status, _, body) = send(
        request(&s).header("mcp-protocol-version", "2026-07-28"),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32000);
    assert_eq!(
        body["error"]["message"],
        "Bad Request: Unsupported protocol version: 2026-07-28 (supported versions: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05, 2024-10-07)"
    );
    assert_eq!(body["id"], Value::Null);

    for (asked, got) in [("2025-06-18", "2025-06-18"), ("2026-07-28", "2025-11-25")] {
        let (status, headers, body) = send(
            request(&s),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": asked, "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .await;
        assert_eq!(status, 200);
        assert!(headers.get("mcp-session-id").is_none(), "stateless");
        assert_eq!(body["result"]["protocolVersion"], got);
        assert_eq!(body["result"]["serverInfo"]["name"], "langfuse");
        assert_eq!(body["result"]["capabilities"], json!({"tools": {}}));
    }
    let (status, _, _) = send(
        request(&s).header("mcp-protocol-version", "2025-11-25"),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202);

    // No handshake needed: each request stands alone.
    let list = rpc(&s, "tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "listObservations",
            "getObservation",
            "getObservationFieldSchema",
            "getObservationFilterSchema",
            "getObservationFilterValues",
            "deleteDatasetItem",
            "createScore"
        ]
    );
    for t in &tools[..5] {
        assert_eq!(t["annotations"], json!({"readOnlyHint": true}), "{t}");
    }
    assert_eq!(tools[6]["annotations"], json!({"destructiveHint": true}));
    let schema = &tools[0]["inputSchema"];
    assert_eq!(schema["properties"]["limit"]["maximum"], 100);
    assert_eq!(schema["required"], json!(["limit"]));
    assert!(schema["properties"].get("sessionId").is_none());
    assert_eq!(
        rpc(&s, "resources/list", json!({})).await["error"]["code"],
        -32601
    );
    assert!(
        s.langfuse()
            .mcp_calls()
            .iter()
            .all(|c| c.session_id.is_none())
    );
}

#[tokio::test]
async fn keys_hosts_and_headers_are_checked_as_langfuse_checks_them() {
    let s = server().await;
    let lf = s.langfuse();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let bare = || {
        reqwest::Client::new()
            .post(url(&s))
            .header("accept", "application/json, text/event-stream")
    };
    let unauthorized = json!({"error": "MCP error -32600: Authentication failed. Please check your API key.", "code": -32600});
    let forbidden = json!({"error": "MCP error -32600: Access forbidden. You do not have permission to access this resource.", "code": -32600});
    let cases: Vec<(reqwest::RequestBuilder, u16, Value, McpAuth)> = vec![
        (bare(), 401, unauthorized.clone(), McpAuth::Missing),
        (
            bare().bearer_auth(lf.public_key()),
            403,
            forbidden.clone(),
            McpAuth::Bearer { public_key: true },
        ),
        (
            bare().bearer_auth(lf.secret_key()),
            401,
            unauthorized.clone(),
            McpAuth::Bearer { public_key: false },
        ),
        (
            bare().basic_auth(lf.public_key(), Some("sk-lf-wrong")),
            401,
            unauthorized.clone(),
            McpAuth::Basic {
                user: lf.public_key().to_owned(),
                secret_ok: false,
            },
        ),
        (
            bare().header("authorization", "Basic !!!"),
            401,
            unauthorized.clone(),
            McpAuth::Malformed,
        ),
    ];
    for (rb, status, body, auth) in cases {
        let (got, headers, got_body) = send(rb, &list).await;
        assert_eq!((got, got_body), (status, body));
        assert!(headers.get("www-authenticate").is_none());
        let last = lf.mcp_calls().pop().unwrap();
        assert_eq!((last.auth, last.status), (auth, status));
    }
    // The key is found by its secret: another public key still passes.
    let (status, _, _) = send(
        bare().basic_auth("pk-lf-other", Some(lf.secret_key())),
        &list,
    )
    .await;
    assert_eq!(status, 200);

    // Hosts outside NEXTAUTH_URL, the allowed list and loopback: 403.
    let (status, _, body) = send(request(&s).header("host", "langfuse.internal:3000"), &list).await;
    assert_eq!((status, body), (403, forbidden));
    lf.allow_mcp_host("langfuse.internal");
    let (status, _, _) = send(request(&s).header("host", "langfuse.internal:3000"), &list).await;
    assert_eq!(status, 200);
    let (status, _, _) = send(request(&s).header("origin", "https://evil.example"), &list).await;
    assert_eq!(status, 403);

    // The transport's own checks.
    let json_only = reqwest::Client::new()
        .post(url(&s))
        .basic_auth(lf.public_key(), Some(lf.secret_key()))
        .header("accept", "application/json");
    let (status, _, body) = send(json_only, &list).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (406, Some(-32000))
    );
    let res = request(&s)
        .header("content-type", "text/plain")
        .body(list.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415);
}

#[tokio::test]
async fn without_the_v4_opt_in_the_observation_tools_are_not_there() {
    let s = server().await;
    s.langfuse().set_v4_opt_in(false);
    let list = rpc(&s, "tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["deleteDatasetItem", "createScore"]);
    assert_eq!(
        call_error(&s, "listObservations", json!({})).await,
        (-32603, "Unknown tool: listObservations".to_owned())
    );
}

#[tokio::test]
async fn filter_values_count_and_page_and_schemas_describe_the_tools() {
    let s = server().await;
    let (session, want) = busiest(&s);
    let first = call(
        &s,
        "getObservationFilterValues",
        json!({"column": "sessionId", "limit": 1}),
    )
    .await;
    assert_eq!(first["type"], "VALUES");
    assert_eq!(
        first["values"],
        json!([{"value": session, "count": want.len()}])
    );
    let cursor = first["meta"]["cursor"].as_str().unwrap();
    let second = call(
        &s,
        "getObservationFilterValues",
        json!({"column": "sessionId", "limit": 100, "cursor": cursor}),
    )
    .await;
    let total: u64 = second["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["count"].as_u64().unwrap())
        .sum();
    assert_eq!(total as usize + want.len(), s.dataset().request_count());
    assert_eq!(second["meta"], json!({}));

    let range = call(
        &s,
        "getObservationFilterValues",
        json!({"column": "totalCost"}),
    )
    .await;
    assert_eq!(range["type"], "RANGE");
    assert_eq!(range["range"]["count"], json!(s.dataset().request_count()));

    let fields = call(&s, "getObservationFieldSchema", json!({})).await;
    assert_eq!(
        fields["defaultFields"],
        json!([
            "id",
            "traceId",
            "startTime",
            "endTime",
            "parentObservationId",
            "type",
            "name",
            "level",
            "statusMessage",
            "isRootObservation",
            "providedModelName",
            "latency"
        ])
    );
    assert_eq!(fields["fields"]["input"]["requiresScope"], true);
    let filters = call(&s, "getObservationFilterSchema", json!({})).await;
    assert_eq!(
        filters["columns"]["sessionId"],
        json!({"type": "string", "operators": ["=", "contains", "does not contain", "starts with", "ends with"], "nullable": true, "requiresKey": false})
    );
    assert_eq!(filters["columns"]["metadata"]["requiresKey"], true);
}
