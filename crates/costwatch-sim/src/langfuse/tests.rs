//! The observations route against a running simulator: keys, queries and
//! their 400s, field groups, usage spellings, paging, the horizon and the
//! faults, checked against the shapes of Langfuse's sources.

use super::paging::{decode_cursor, encode_cursor};
use super::*;
use crate::scenario::{ScenarioParams, generate};
use crate::server::{FaultKind, SimOptions, SimServer};
use serde_json::Value;
use std::collections::BTreeSet;

const START: &str = "2026-11-02T13:00:00Z";
const END: &str = "2026-11-02T15:00:00Z";

fn ts(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

async fn server() -> SimServer {
    let d = generate(&ScenarioParams {
        days: 1,
        sessions_per_day: 300,
        ..Default::default()
    });
    SimServer::start(Arc::new(d), SimOptions::default())
        .await
        .unwrap()
}

fn url(s: &SimServer) -> String {
    format!("{}/api/public/v2/observations", s.langfuse_url())
}

async fn get(s: &SimServer, query: &[(&str, &str)]) -> reqwest::Response {
    reqwest::Client::new()
        .get(url(s))
        .basic_auth(s.langfuse().public_key(), Some(s.langfuse().secret_key()))
        .query(query)
        .send()
        .await
        .unwrap()
}

async fn get_json(s: &SimServer, query: &[(&str, &str)]) -> Value {
    let res = get(s, query).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// The window's query with every field group costwatch reads.
fn window(limit: &str) -> Vec<(&'static str, String)> {
    vec![
        ("type", "GENERATION".into()),
        ("fromStartTime", START.into()),
        ("toStartTime", END.into()),
        (
            "fields",
            "core,basic,metadata,model,usage,trace_context".into(),
        ),
        ("limit", limit.into()),
    ]
}

/// Walks every page of `query`; the rows and the number of pages.
async fn walk(s: &SimServer, query: &[(&'static str, String)]) -> (Vec<Value>, usize) {
    let (mut rows, mut pages) = (Vec::new(), 0);
    let mut cursor: Option<String> = None;
    loop {
        let mut q: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if let Some(c) = &cursor {
            q.push(("cursor", c));
        }
        let body = get_json(s, &q).await;
        pages += 1;
        rows.extend(body["data"].as_array().unwrap().iter().cloned());
        match body["meta"]["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert_eq!(body["meta"], json!({}));
                return (rows, pages);
            }
        }
    }
}

fn ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn xxhash32_matches_the_reference_vectors() {
    assert_eq!(xxhash32(b""), 0x02CC_5D05);
    assert_eq!(xxhash32(b"a"), 0x550D_7456);
    assert_eq!(xxhash32(b"abc"), 0x32D1_53FF);
    assert_eq!(
        xxhash32(b"Nobody inspects the spammish repetition"),
        0xE229_3B2F
    );
}

#[test]
fn cursors_are_base64_json_of_the_last_row() {
    let at = ts("2026-11-02T13:00:00.123Z");
    let c = encode_cursor(at, "trace-1", "obs-1");
    let text = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &c).unwrap(),
    )
    .unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json,
        json!({"lastStartTimeTo": "2026-11-02T13:00:00.123Z", "lastTraceId": "trace-1", "lastId": "obs-1"})
    );
    let back = decode_cursor(&c).unwrap();
    assert_eq!(
        (back.millis, back.id.as_str()),
        (at.timestamp_millis(), "obs-1")
    );
    assert_eq!(decode_cursor("not base64!"), Err(None));
    let shape = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "{\"x\":1}");
    assert!(matches!(decode_cursor(&shape), Err(Some(_))));
}

#[tokio::test]
async fn pages_come_newest_first_without_overlap_and_end_without_a_cursor() {
    let s = server().await;
    let want: BTreeSet<String> = s
        .dataset()
        .requests_in(ts(START), ts(END), &[], None)
        .iter()
        .map(|r| r.request_id.clone())
        .collect();
    assert!(want.len() > 50, "a busy window: {}", want.len());
    let (rows, pages) = walk(&s, &window("7")).await;
    let got = ids(&rows);
    assert_eq!(got.len(), want.len(), "no row twice");
    assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), want);
    assert_eq!(pages, want.len().div_ceil(7));
    let times: Vec<&str> = rows
        .iter()
        .map(|r| r["startTime"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    // Exactly a multiple of the page size: the last full page has no cursor.
    let n = want.len().to_string();
    let (_, pages) = walk(&s, &window(&n)).await;
    assert_eq!(pages, 1);
}

#[tokio::test]
async fn limits_and_bad_queries_are_400s_in_zods_shape() {
    let s = server().await;
    let query = |limit: &str| {
        let mut q = window(limit);
        q.truncate(4);
        q.push(("limit", limit.into()));
        q
    };
    for (limit, code) in [
        ("1001", "too_big"),
        ("-1", "too_small"),
        ("abc", "invalid_type"),
    ] {
        let q = query(limit);
        let q: Vec<(&str, &str)> = q.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let res = get(&s, &q).await;
        assert_eq!(res.status(), 400, "{limit}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["message"], "Invalid request data");
        assert_eq!(body["error"][0]["code"], code, "{limit}");
        assert_eq!(body["error"][0]["path"], json!(["limit"]));
    }
    let body = get_json(&s, &[("limit", "1000")]).await;
    assert!(body["data"].as_array().unwrap().len() <= 1000);
    // A limit of 0 answers nothing, and no cursor.
    assert_eq!(
        get_json(&s, &[("limit", "0")]).await,
        json!({"data": [], "meta": {}})
    );
    let res = get(&s, &[("cursor", "%%%")]).await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body,
        json!({"message": "Invalid cursor format", "error": "InvalidRequestError"})
    );
    for bad in [
        ("type", "MODEL_CALL"),
        ("fromStartTime", "yesterday"),
        ("parseIoAsJson", "true"),
    ] {
        let res = get(&s, &[bad]).await;
        assert_eq!(res.status(), 400, "{bad:?}");
    }
    let res = get(&s, &[("sessionId", "a"), ("sessionId", "b")]).await;
    assert_eq!(res.status(), 400);
    // Parameters the schema does not know are ignored.
    assert_eq!(get(&s, &[("colour", "blue")]).await.status(), 200);
}

#[tokio::test]
async fn the_keys_are_basic_auth_and_failures_say_why() {
    let s = server().await;
    let client = reqwest::Client::new();
    let status_and_body = |res: reqwest::Response| async move {
        (res.status().as_u16(), res.json::<Value>().await.unwrap())
    };
    let none = status_and_body(client.get(url(&s)).send().await.unwrap()).await;
    assert_eq!(none, (401, json!({"message": "No authorization header"})));
    let wrong = client
        .get(url(&s))
        .basic_auth(s.langfuse().public_key(), Some("sk-lf-wrong"))
        .send()
        .await
        .unwrap();
    let wrong = status_and_body(wrong).await;
    assert_eq!(wrong.0, 401);
    assert_eq!(
        wrong.1["message"],
        "Invalid credentials. Confirm that you've configured the correct host."
    );
    let bearer = client
        .get(url(&s))
        .bearer_auth(s.langfuse().public_key())
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 403);
    assert_eq!(s.langfuse().secret_key(), s.admin_key());
    assert_eq!(s.langfuse().public_key(), DEFAULT_PUBLIC_KEY);
    // Anything else below /api/public is the web app's 404.
    let other = client
        .get(format!("{}/api/public/v3/observations", s.langfuse_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
}

#[tokio::test]
async fn field_groups_choose_the_fields_as_the_server_does() {
    let s = server().await;
    let q = [
        ("fromStartTime", START),
        ("toStartTime", END),
        ("limit", "1"),
    ];
    let plain = get_json(&s, &q).await;
    let row = &plain["data"][0];
    for key in [
        "id",
        "traceId",
        "startTime",
        "type",
        "level",
        "sessionId",
        "latency",
        "modelId",
    ] {
        assert!(row.get(key).is_some(), "{key} in {row}");
    }
    for key in [
        "usageDetails",
        "model",
        "metadata",
        "tags",
        "providedModelName",
    ] {
        assert!(row.get(key).is_none(), "{key} in {row}");
    }
    let mut q = q.to_vec();
    q.push(("fields", "usage,model,metadata,trace_context,nonsense"));
    let full = get_json(&s, &q).await;
    let row = &full["data"][0];
    for key in [
        "usageDetails",
        "costDetails",
        "totalCost",
        "model",
        "internalModelId",
        "metadata",
        "tags",
        "traceName",
    ] {
        assert!(row.get(key).is_some(), "{key} in {row}");
    }
    // The provided model name goes out as `model`, and basic was not asked for.
    assert!(row.get("providedModelName").is_none() && row.get("level").is_none());
    let r = s
        .dataset()
        .requests_in(ts(START), ts(END), &[], None)
        .into_iter()
        .find(|r| r.request_id == row["id"].as_str().unwrap())
        .unwrap();
    assert_eq!(row["model"], json!(r.model));
    assert_eq!(row["traceId"], json!(trace_id_of(&r.session_id)));
    assert_eq!(row["metadata"]["feature"], json!(r.labels["feature"]));
    assert_eq!(row["totalCost"], json!(r.cost_usd));
    assert_eq!(row["costDetails"]["total"], json!(r.cost_usd));
}

#[tokio::test]
async fn usage_is_spelt_by_model_family_or_as_chosen() {
    let s = server().await;
    let (rows, _) = walk(&s, &window("1000")).await;
    let keys = |row: &Value| -> BTreeSet<String> {
        row["usageDetails"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let mut seen = BTreeSet::new();
    for row in &rows {
        let model = row["model"].as_str().unwrap();
        let k = keys(row);
        let spelling = s.langfuse().spelling_for(model);
        let marker = match spelling {
            UsageSpelling::OpenAi => "output_reasoning_tokens",
            UsageSpelling::LangChain => "input_cache_read",
            UsageSpelling::Otel => "input_cache_creation",
            other => panic!("{other:?} is not a family default"),
        };
        assert!(k.contains(marker), "{model}: {k:?}");
        seen.insert(format!("{spelling:?}"));
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    s.langfuse().set_usage_spelling(UsageSpelling::AnthropicRaw);
    let body = get_json(&s, &[("fields", "usage"), ("limit", "5")]).await;
    for row in body["data"].as_array().unwrap() {
        assert!(keys(row).contains("cache_read_input_tokens"), "{row}");
        assert!(!keys(row).contains("total"), "{row}");
    }
}

#[tokio::test]
async fn chosen_sessions_lose_their_id_or_their_cost() {
    let s = server().await;
    let calls = s.dataset().requests_in(ts(START), ts(END), &[], None);
    let session = calls[0].session_id.clone();
    s.langfuse().serve_without_session_id([session.clone()]);
    s.langfuse().serve_without_cost([session.clone()]);
    let (rows, _) = walk(&s, &window("50")).await;
    for row in &rows {
        let mine = row["traceId"] == json!(trace_id_of(&session));
        if mine {
            assert_eq!(row["sessionId"], "");
            assert_eq!(row["costDetails"], json!({}));
            assert_eq!(row["totalCost"], json!(0.0));
        } else {
            assert_ne!(row["sessionId"], "");
        }
    }
    // No sessionId filter finds it any more.
    let body = get_json(&s, &[("sessionId", &session)]).await;
    assert_eq!(body["data"], json!([]));
}

#[tokio::test]
async fn filters_and_the_horizon_select_rows() {
    let s = server().await;
    let calls = s.dataset().requests_in(ts(START), ts(END), &[], None);
    let session = calls[0].session_id.clone();
    let mut q = window("1000");
    q.push(("sessionId", session.clone()));
    let (rows, _) = walk(&s, &q).await;
    let want = calls.iter().filter(|r| r.session_id == session).count();
    assert_eq!(rows.len(), want);
    let mut q = window("1000");
    q.push(("level", "ERROR".into()));
    let (rows, _) = walk(&s, &q).await;
    assert!(rows.iter().all(|r| r["level"] == "ERROR"));
    assert_eq!(rows.len(), calls.iter().filter(|r| r.is_error()).count());
    // Calls after the horizon do not exist yet.
    let now = ts("2026-11-02T14:00:00Z");
    s.set_now(Some(now));
    let (rows, _) = walk(&s, &window("1000")).await;
    assert_eq!(
        rows.len(),
        calls.iter().filter(|r| r.created_at <= now).count()
    );
}

#[tokio::test]
async fn faults_come_in_langfuses_shapes() {
    let s = server().await;
    let faults = s.langfuse().faults();
    faults.push(FaultKind::RateLimit {
        retry_after_secs: 7,
    });
    let res = get(&s, &[("limit", "1")]).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "7");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "rate_limited");
    assert_eq!(body["details"]["retryAfterSeconds"], 7);
    faults.push(FaultKind::ServerError { status: 500 });
    let res = get(&s, &[("limit", "1")]).await;
    assert_eq!(res.status(), 500);
    assert_eq!(
        res.json::<Value>().await.unwrap()["message"],
        "Internal Server Error"
    );
    faults.push(FaultKind::Truncated);
    let text = get(&s, &[("limit", "3")]).await.text().await.unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_err());
    // A cycle: page 3 hands out the cursor page 1 gave.
    faults.set_persistent(Some(FaultKind::CursorCycle { pages: 3 }));
    let q = window("5");
    let q: Vec<(&str, &str)> = q.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let first = get_json(&s, &q).await["meta"]["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut q2 = q.clone();
    q2.push(("cursor", &first));
    let second = get_json(&s, &q2).await["meta"]["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut q3 = q.clone();
    q3.push(("cursor", &second));
    let third = get_json(&s, &q3).await["meta"]["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(first, second);
    assert_eq!(third, first);
    // A listing that never ends hands out fresh cursors past the last row.
    faults.set_persistent(Some(FaultKind::EndlessPages));
    let mut q = vec![
        ("fromStartTime", START),
        ("toStartTime", START),
        ("limit", "5"),
    ];
    let a = get_json(&s, &q).await;
    assert_eq!(a["data"], json!([]));
    let ca = a["meta"]["cursor"].as_str().unwrap().to_owned();
    q.push(("cursor", &ca));
    let b = get_json(&s, &q).await;
    assert_ne!(b["meta"]["cursor"].as_str().unwrap(), ca);
    faults.clear();
    assert_eq!(faults.served(), 8);
}
