//! The simulated proxy against its contract, over loopback: row shape,
//! paging, errors, the key, sessions without an id, the horizon, the
//! catalogue and the faults.

use super::*;
use crate::server::{SimOptions, SimServer};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seed-window.json");
const KEY: &str = crate::server::DEFAULT_ADMIN_KEY;
/// The seed window's calls run from 11:24:03 to about 11:31.
const WINDOW: [(&str, &str); 2] = [
    ("start_date", "2026-10-11 11:00:00"),
    ("end_date", "2026-10-11 12:00:00"),
];

async fn server() -> SimServer {
    let d = Dataset::from_fixture(FIXTURE).unwrap();
    SimServer::start(Arc::new(d), SimOptions::default())
        .await
        .unwrap()
}

async fn get_with(
    s: &SimServer,
    path: &str,
    key: Option<&str>,
    query: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .get(format!("{}{path}", s.litellm_url()))
        .query(query);
    if let Some(key) = key {
        req = req.header("Authorization", format!("Bearer {key}"));
    }
    req.send().await.unwrap()
}

async fn page(s: &SimServer, query: &[(&str, &str)]) -> Value {
    let res = get_with(s, "/spend/logs/v2", Some(KEY), query).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

fn with<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut q = WINDOW.to_vec();
    q.extend_from_slice(extra);
    q
}

fn data(body: &Value) -> &Vec<Value> {
    body["data"].as_array().unwrap()
}

#[tokio::test]
async fn a_row_has_litellms_columns_types_and_formats() {
    let s = server().await;
    let body = page(&s, &with(&[("sort_order", "asc"), ("page_size", "1")])).await;
    assert_eq!(body["total"], 84);
    assert_eq!(
        (body["page"].clone(), body["page_size"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(body["total_pages"], 84);
    assert_eq!(body["total_is_capped"], false);
    let row = &data(&body)[0];
    let first = &s.dataset().sessions[0].requests[0];
    assert!(row["request_id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(row["startTime"], "2026-10-11T11:24:03.120+00:00");
    assert_eq!(row["endTime"], "2026-10-11T11:24:04.154+00:00");
    assert_eq!(row["spend"], json!(first.cost_usd));
    assert_eq!(row["prompt_tokens"], json!(first.input_tokens));
    assert_eq!(row["completion_tokens"], json!(first.output_tokens));
    assert_eq!(row["model_group"], "gpt-6-luna");
    assert_eq!(row["model"], "gpt-6-luna-2026-08-01");
    assert_eq!(row["session_id"], json!(first.session_id));
    assert_eq!(row["status"], "success");
    assert_eq!(row["cache_hit"], "False");
    // The JSONB tags come as text, the metadata as an object.
    assert_eq!(
        row["request_tags"],
        "[\"case:cache-miss\", \"feature:support-agent\"]"
    );
    let m = &row["metadata"];
    assert_eq!(
        m["spend_logs_metadata"],
        json!({"case": "cache-miss", "feature": "support-agent"})
    );
    assert_eq!(m["status"], "success");
    assert!(m["additional_usage_values"]["prompt_tokens_details"].is_object());
    assert_eq!(
        m["usage_object"]["prompt_tokens"],
        json!(first.input_tokens)
    );
    for absent in ["messages", "response", "proxy_server_request"] {
        assert!(row.get(absent).is_none(), "{absent}");
    }
}

#[tokio::test]
async fn a_failure_carries_its_error_information() {
    let s = server().await;
    let body = page(
        &s,
        &with(&[("status_filter", "failure"), ("page_size", "1000")]),
    )
    .await;
    assert_eq!(data(&body).len(), 8);
    let row = &data(&body)[0];
    assert_eq!(row["status"], "failure");
    let info = &row["metadata"]["error_information"];
    assert_eq!(info["error_class"], "RateLimitError");
    assert_eq!(info["error_code"], "429");
}

#[tokio::test]
async fn offset_pages_run_past_the_end_into_empty_pages() {
    let s = server().await;
    let mut seen = Vec::new();
    for p in 1..=9 {
        let p = p.to_string();
        let body = page(
            &s,
            &with(&[("sort_order", "asc"), ("page_size", "10"), ("page", &p)]),
        )
        .await;
        assert_eq!(body["total"], 84);
        seen.extend(
            data(&body)
                .iter()
                .map(|r| r["request_id"].as_str().unwrap().to_owned()),
        );
    }
    assert_eq!(seen.len(), 84);
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), 84);
    let past = page(&s, &with(&[("page_size", "10"), ("page", "10")])).await;
    assert!(data(&past).is_empty());
    assert_eq!(
        (past["total"].clone(), past["total_pages"].clone()),
        (json!(84), json!(9))
    );
    // Ascending and the default (descending) are mirror images.
    let asc = page(&s, &with(&[("sort_order", "asc"), ("page_size", "1000")])).await;
    let desc = page(&s, &with(&[("page_size", "1000")])).await;
    let mut reversed = data(&desc).clone();
    reversed.reverse();
    assert_eq!(&reversed, data(&asc));
    let times: Vec<&str> = data(&asc)
        .iter()
        .map(|r| r["startTime"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

#[tokio::test]
async fn both_ends_of_the_date_range_are_included_to_the_second() {
    let s = server().await;
    let exact = [
        ("start_date", "2026-10-11 11:24:03"),
        ("end_date", "2026-10-11 11:24:03"),
    ];
    assert!(data(&page(&s, &exact).await).is_empty());
    let around = [
        ("start_date", "2026-10-11 11:24:03"),
        ("end_date", "2026-10-11 11:24:04"),
    ];
    let body = page(&s, &around).await;
    assert_eq!(data(&body).len(), 1);
    assert_eq!(data(&body)[0]["startTime"], "2026-10-11T11:24:03.120+00:00");
    let day = [("start_date", "2026-10-11"), ("end_date", "2026-10-12")];
    assert_eq!(page(&s, &day).await["total"], 84);
    let backwards = [("start_date", "2026-10-12"), ("end_date", "2026-10-11")];
    assert_eq!(page(&s, &backwards).await["total"], 0);
}

#[tokio::test]
async fn bad_queries_and_keys_get_the_proxys_answers() {
    let s = server().await;
    let res = get_with(
        &s,
        "/spend/logs/v2",
        Some(KEY),
        &with(&[("page_size", "1001")]),
    )
    .await;
    assert_eq!(res.status(), 422);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["detail"][0]["loc"], json!(["query", "page_size"]));
    let res = get_with(
        &s,
        "/spend/logs/v2",
        Some(KEY),
        &[("start_date", "2026-10-11")],
    )
    .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "Start date and end date are required"
    );
    assert_eq!(body["error"]["code"], "400");
    for (key, message, kind) in [
        (
            None,
            "Authentication Error, No api key passed in.",
            "auth_error",
        ),
        (
            Some("sk-wrong"),
            "Authentication Error, Invalid API key provided.",
            "token_not_found_in_db",
        ),
    ] {
        for path in ["/spend/logs/v2", "/model/info"] {
            let res = get_with(&s, path, key, &WINDOW).await;
            assert_eq!(res.status(), 401);
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["error"]["message"], message);
            assert_eq!(body["error"]["type"], kind);
            assert_eq!(body["error"]["code"], "401");
        }
    }
    // The reference routes keep their own contract beside these.
    let res = reqwest::Client::new()
        .get(format!("{}/models", s.base_url()))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(s.stats().hits("/spend/logs/v2"), 4);
}

#[tokio::test]
async fn sessions_are_filtered_by_substring_and_can_be_sent_without_an_id() {
    let s = server().await;
    let body = page(
        &s,
        &with(&[("session_id", "context-growth"), ("page_size", "1000")]),
    )
    .await;
    let sessions: BTreeSet<&str> = data(&body)
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert!(sessions.iter().all(|id| id.starts_with("context-growth-")));
    let id = s.dataset().sessions[0].session_id.clone();
    let mine: BTreeSet<String> = s.dataset().sessions[0]
        .requests
        .iter()
        .map(rows::request_id)
        .collect();
    let served = |body: &Value, ours: bool| -> Vec<Value> {
        data(body)
            .iter()
            .filter(|r| mine.contains(r["request_id"].as_str().unwrap()) == ours)
            .map(|r| r["session_id"].clone())
            .collect()
    };
    s.litellm().set_options(LiteLlmOptions {
        without_session_id: BTreeSet::from([id.clone()]),
        ..LiteLlmOptions::default()
    });
    let body = page(&s, &with(&[("session_id", &id)])).await;
    assert!(data(&body).is_empty());
    let all = page(&s, &with(&[("page_size", "1000")])).await;
    let traces = served(&all, true);
    assert_eq!(traces.len(), mine.len());
    let distinct: BTreeSet<&str> = traces.iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(distinct.len(), mine.len(), "one trace id per call");
    assert!(
        distinct
            .iter()
            .all(|t| t.len() == 36 && t.as_bytes()[14] == b'4')
    );
    s.litellm().set_options(LiteLlmOptions {
        without_session_id: BTreeSet::from([id]),
        missing_session_id: MissingSessionId::Omit,
        ..LiteLlmOptions::default()
    });
    let all = page(&s, &with(&[("page_size", "1000")])).await;
    assert!(served(&all, true).iter().all(Value::is_null));
    assert!(served(&all, false).iter().all(Value::is_string));
}

#[tokio::test]
async fn calls_after_the_horizon_do_not_exist_yet() {
    let s = server().await;
    let now = "2026-10-11T11:24:41.907Z".parse::<DateTime<Utc>>().unwrap();
    s.set_now(Some(now));
    let body = page(&s, &with(&[("page_size", "1000")])).await;
    let n = s
        .dataset()
        .requests_in(now - chrono::TimeDelta::hours(1), now, &[], None)
        .len()
        + 1;
    assert_eq!(body["total"], json!(n));
}

#[tokio::test]
async fn the_catalogue_lists_prices_per_token() {
    let s = server().await;
    let res = get_with(&s, "/model/info", Some(KEY), &[]).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    let luna = &data(&body)[0];
    assert_eq!(luna["model_name"], "gpt-6-luna");
    assert_eq!(
        luna["litellm_params"]["model"],
        "openai/gpt-6-luna-2026-08-01"
    );
    let info = &luna["model_info"];
    assert!((info["input_cost_per_token"].as_f64().unwrap() - 1e-7).abs() < 1e-18);
    assert!((info["cache_read_input_token_cost"].as_f64().unwrap() - 1e-8).abs() < 1e-18);
    assert_eq!(info["supports_prompt_caching"], true);
    let v1 = get_with(&s, "/v1/model/info", Some(KEY), &[]).await;
    assert_eq!(v1.json::<Value>().await.unwrap(), body);
}

#[tokio::test]
async fn paging_faults_move_repeat_or_reverse_a_page() {
    let s = server().await;
    let q = with(&[("sort_order", "asc"), ("page_size", "10"), ("page", "2")]);
    let clean = page(&s, &q).await;
    let first = page(&s, &with(&[("sort_order", "asc"), ("page_size", "10")])).await;
    let f = s.litellm().faults();
    f.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::RowsWrittenBehind { rows: 3 }).on_page(2));
    let moved = page(&s, &q).await;
    assert_eq!(data(&moved)[..3], data(&first)[7..]);
    assert_eq!(data(&moved)[3..], data(&clean)[..7]);
    f.push(LiteLlmFault::spend_logs(
        LiteLlmFaultKind::RepeatPreviousPage,
    ));
    let repeated = page(&s, &q).await;
    assert_eq!(repeated, first);
    f.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::IgnoreSortOrder));
    let reversed = page(&s, &with(&[("sort_order", "asc"), ("page_size", "1")])).await;
    assert_eq!(
        reversed["data"][0]["startTime"],
        data(&page(&s, &with(&[("page_size", "1")])).await)[0]["startTime"]
    );
    f.push(LiteLlmFault::spend_logs(
        LiteLlmFaultKind::DropEnvelopeField {
            field: "data".into(),
        },
    ));
    assert!(page(&s, &q).await.get("data").is_none());
    f.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::RateLimit {
        retry_after_secs: 7,
    }));
    let res = get_with(&s, "/spend/logs/v2", Some(KEY), &q).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "7");
    f.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::Truncated));
    let res = get_with(&s, "/spend/logs/v2", Some(KEY), &q).await;
    assert!(serde_json::from_slice::<Value>(&res.bytes().await.unwrap()).is_err());
    assert_eq!(f.served(), 6);
}

#[test]
fn every_usage_spelling_carries_the_same_figures() {
    let d = Dataset::from_fixture(FIXTURE).unwrap();
    let sim = LiteLlmSim::new(Arc::new(d.clone()), KEY.into(), Arc::new(|| None));
    let mut call = d.sessions[0].requests[0].clone();
    (call.cached_tokens, call.cache_write_tokens) = (1000, 200);
    let call = &call;
    let (c, w) = (json!(call.cached_tokens), json!(call.cache_write_tokens));
    let metadata = |u: UsageSpelling| {
        sim.set_options(LiteLlmOptions {
            usage: u,
            ..LiteLlmOptions::default()
        });
        sim.row(call)["metadata"].clone()
    };
    let m = metadata(UsageSpelling::Normalised);
    assert_eq!(m["additional_usage_values"]["cache_read_input_tokens"], c);
    assert_eq!(
        m["additional_usage_values"]["cache_creation_input_tokens"],
        w
    );
    let m = metadata(UsageSpelling::DetailsOnly);
    assert!(
        m["additional_usage_values"]
            .get("cache_read_input_tokens")
            .is_none()
    );
    assert_eq!(
        m["additional_usage_values"]["prompt_tokens_details"]["cached_tokens"],
        c
    );
    assert!(m["usage_object"].is_null());
    let m = metadata(UsageSpelling::UsageObject);
    assert_eq!(m["additional_usage_values"], json!({}));
    assert_eq!(m["usage_object"]["cache_read_input_tokens"], c);
    assert_eq!(m["usage_object"]["cache_creation_input_tokens"], w);
    let m = metadata(UsageSpelling::UsageObjectDetails);
    assert_eq!(
        m["usage_object"]["prompt_tokens_details"]["cached_tokens"],
        c
    );
    assert_eq!(
        m["usage_object"]["prompt_tokens_details"]["cache_creation_tokens"],
        w
    );
}
