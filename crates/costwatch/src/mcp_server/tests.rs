use super::*;
use crate::clock::FakeClock;
use crate::logtools::LogTools;
use crate::logtools::state::StateTools;
use crate::source::{ModelPrice, ReadStats, RequestRecord, SessionRecord, SourceError, Window};
use crate::store::SqlStore;
use chrono::{TimeZone, Utc};
use std::sync::Arc;

/// A source with no traffic: the protocol is what is tested here.
struct Quiet;

impl Source for Quiet {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        Ok(Vec::new())
    }

    async fn sessions<F>(&self, _: Window, _: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        Ok(ReadStats::default())
    }

    async fn session_requests(&self, _: &str) -> Result<Vec<RequestRecord>, SourceError> {
        Err(SourceError::Transient("the gateway is down".into()))
    }
}

async fn server() -> McpServer<Quiet, SqlStore> {
    let clock = Arc::new(FakeClock::new(
        Utc.with_ymd_and_hms(2026, 11, 2, 12, 0, 0).unwrap(),
    ));
    let store = SqlStore::open("sqlite::memory:").await.unwrap();
    McpServer::new(
        LogTools::new(Quiet, clock.clone()),
        Some(StateTools::new(store, clock)),
    )
}

fn request(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

fn modern(method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        PROTOCOL_VERSION_META: MODERN_VERSION,
        CLIENT_CAPABILITIES_META: {},
    });
    request(method, params)
}

fn headers(method: &str, name: Option<&str>) -> RoutingHeaders {
    RoutingHeaders {
        protocol_version: Some(MODERN_VERSION.into()),
        method: Some(method.into()),
        name: name.map(str::to_owned),
    }
}

#[tokio::test]
async fn initialize_answers_a_served_revision_and_keeps_no_session() {
    let s = server().await;
    for (asked, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
    ] {
        let init = request(
            "initialize",
            json!({"protocolVersion": asked, "capabilities": {}}),
        );
        let reply = s.handle(&init, Era::Handshake, None).await.unwrap();
        assert_eq!(reply["result"]["protocolVersion"], answered);
        assert_eq!(reply["result"]["serverInfo"]["name"], "costwatch");
    }
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert!(s.handle(&note, Era::Handshake, None).await.is_none());
    let ping = s
        .handle(&request("ping", json!({})), Era::Handshake, None)
        .await
        .unwrap();
    assert_eq!(ping["result"], json!({}));
    // Discovery belongs to 2026-07-28: a handshake-era server does not know it.
    let discover = s
        .handle(&request("server/discover", json!({})), Era::Handshake, None)
        .await
        .unwrap();
    assert_eq!(discover["error"]["code"], METHOD_NOT_FOUND);
}

#[tokio::test]
async fn every_tool_is_listed_read_only_with_an_output_schema() {
    let s = server().await;
    let reply = s
        .handle(&request("tools/list", json!({})), Era::Handshake, None)
        .await
        .unwrap();
    let tools = reply["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "list_sessions",
            "search_requests",
            "get_request",
            "list_traces",
            "list_findings",
            "list_incidents",
            "get_incident",
            "get_baseline"
        ]
    );
    for t in tools {
        let a = &t["annotations"];
        assert_eq!(a["readOnlyHint"], true, "{t}");
        assert_eq!(a["destructiveHint"], false, "{t}");
        assert_eq!(a["openWorldHint"], false, "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
}

#[tokio::test]
async fn a_result_carries_the_same_json_as_structured_content_and_text() {
    let s = server().await;
    let call = request(
        "tools/call",
        json!({"name": "list_incidents", "arguments": {}}),
    );
    let reply = s.handle(&call, Era::Handshake, None).await.unwrap();
    let result = &reply["result"];
    assert_eq!(result["isError"], false);
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"]);
    assert_eq!(text, json!({"data": [], "more": false}));
}

#[tokio::test]
async fn bad_arguments_and_failures_are_error_results_unknown_tools_protocol_errors() {
    let s = server().await;
    let bad = request(
        "tools/call",
        json!({"name": "list_findings", "arguments": {"start": "x", "end": "y"}}),
    );
    let reply = s.handle(&bad, Era::Handshake, None).await.unwrap();
    assert_eq!(reply["result"]["isError"], true);
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("start: expected an RFC 3339 time"), "{text}");
    assert!(reply["result"].get("structuredContent").is_none());
    // The source failing is the tool's failure, said as such.
    let down = request(
        "tools/call",
        json!({"name": "search_requests", "arguments": {"session_id": "s-1", "start": "2026-11-02T10:00:00Z", "end": "2026-11-02T11:00:00Z"}}),
    );
    let reply = s.handle(&down, Era::Handshake, None).await.unwrap();
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("the source could not be read")
    );
    let unknown = request("tools/call", json!({"name": "drop_table", "arguments": {}}));
    let reply = s.handle(&unknown, Era::Handshake, None).await.unwrap();
    assert_eq!(reply["error"]["code"], INVALID_PARAMS);
}

#[tokio::test]
async fn the_modern_era_checks_meta_headers_and_revision() {
    let s = server().await;
    // Discovery, then a call, each standing alone.
    let discover = modern("server/discover", json!({}));
    let reply = s
        .handle(
            &discover,
            Era::Modern,
            Some(&headers("server/discover", None)),
        )
        .await
        .unwrap();
    assert_eq!(
        reply["result"]["supportedVersions"],
        json!([MODERN_VERSION])
    );
    assert_eq!(reply["result"]["resultType"], "complete");
    assert_eq!(
        reply["result"]["_meta"][SERVER_INFO_META]["name"],
        "costwatch"
    );
    let list = modern("tools/list", json!({}));
    let reply = s
        .handle(&list, Era::Modern, Some(&headers("tools/list", None)))
        .await
        .unwrap();
    assert!(reply["result"]["ttlMs"].as_u64().unwrap() > 0);
    assert_eq!(reply["result"]["cacheScope"], "private");
    let call = modern(
        "tools/call",
        json!({"name": "list_findings", "arguments": {}}),
    );
    let reply = s
        .handle(
            &call,
            Era::Modern,
            Some(&headers("tools/call", Some("list_findings"))),
        )
        .await
        .unwrap();
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert_eq!(reply["result"]["resultType"], "complete");

    // No envelope.
    let bare = request("tools/list", json!({}));
    let reply = s
        .handle(&bare, Era::Modern, Some(&headers("tools/list", None)))
        .await
        .unwrap();
    assert_eq!(reply["error"]["code"], INVALID_PARAMS);
    // Headers that disagree with the body.
    let reply = s
        .handle(&list, Era::Modern, Some(&headers("tools/call", None)))
        .await
        .unwrap();
    assert_eq!(reply["error"]["code"], HEADER_MISMATCH);
    let reply = s
        .handle(
            &call,
            Era::Modern,
            Some(&headers("tools/call", Some("list_incidents"))),
        )
        .await
        .unwrap();
    assert_eq!(reply["error"]["code"], HEADER_MISMATCH);
    // A revision not served: the ones that are, and the one asked.
    let mut future = modern("tools/list", json!({}));
    future["params"]["_meta"][PROTOCOL_VERSION_META] = json!("2027-01-01");
    let mut h = headers("tools/list", None);
    h.protocol_version = Some("2027-01-01".into());
    let reply = s.handle(&future, Era::Modern, Some(&h)).await.unwrap();
    assert_eq!(reply["error"]["code"], UNSUPPORTED_PROTOCOL_VERSION);
    assert_eq!(
        reply["error"]["data"],
        json!({"supported": [MODERN_VERSION], "requested": "2027-01-01"})
    );
    // Over stdio there are no headers: the envelope alone decides.
    let reply = s.handle(&list, Era::Modern, None).await.unwrap();
    assert!(reply["result"]["tools"].is_array());
    // `initialize` is not a 2026-07-28 method.
    let init = modern("initialize", json!({"protocolVersion": "2025-11-25"}));
    let reply = s
        .handle(&init, Era::Modern, Some(&headers("initialize", None)))
        .await
        .unwrap();
    assert_eq!(reply["error"]["code"], METHOD_NOT_FOUND);
}

#[tokio::test]
async fn stdio_answers_line_by_line_and_says_what_is_not_json() {
    let s = server().await;
    let input = format!(
        "{}\n\n{}\nnot json\n{}\n",
        request("initialize", json!({"protocolVersion": "2025-11-25"})),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        modern("tools/list", json!({})),
    );
    let mut out = Vec::new();
    stdio::serve(&s, input.as_bytes(), &mut out).await.unwrap();
    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(lines[1]["error"]["code"], PARSE_ERROR);
    assert_eq!(lines[2]["result"]["resultType"], "complete");
}

#[test]
fn a_result_over_the_byte_bound_is_refused_saying_to_ask_for_fewer_rows() {
    let small = Answer::Done(json!({"data": ["x"]}));
    assert_eq!(bounded(small.clone()), small);
    let big = Answer::Done(json!({"data": ["x".repeat(MAX_RESULT_BYTES)]}));
    match bounded(big) {
        Answer::Refused(why) => assert!(why.starts_with("limit:"), "{why}"),
        Answer::Done(_) => panic!("sent a result over the bound"),
    }
}
