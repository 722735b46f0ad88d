//! Tests of the REST routes against a running simulator: paging, bad
//! queries, the admin key, label filters, the horizon and every fault.

use super::query::parse_time;
use super::*;
use crate::scenario::{ScenarioParams, generate};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seed-window.json");
const START: &str = "2026-10-11T11:24:00Z";
const END: &str = "2026-10-11T11:32:00Z";

async fn fixture_server() -> SimServer {
    let d = Dataset::from_fixture(FIXTURE).unwrap();
    SimServer::start(Arc::new(d), SimOptions::default())
        .await
        .unwrap()
}

async fn get(s: &SimServer, path: &str, query: &[(&str, &str)]) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{}{path}", s.base_url()))
        .bearer_auth(DEFAULT_ADMIN_KEY)
        .query(query)
        .send()
        .await
        .unwrap()
}

async fn get_json(s: &SimServer, path: &str, query: &[(&str, &str)]) -> Value {
    let res = get(s, path, query).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// Walks every page; returns the rows and the number of pages.
async fn walk(s: &SimServer, path: &str, query: &[(&str, &str)]) -> (Vec<Value>, usize) {
    let (mut rows, mut pages) = (Vec::new(), 0);
    let mut cursor: Option<String> = None;
    loop {
        let mut q = query.to_vec();
        if let Some(c) = &cursor {
            q.push(("cursor", c));
        }
        let body = get_json(s, path, &q).await;
        pages += 1;
        rows.extend(body["data"].as_array().unwrap().iter().cloned());
        match body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => {
                assert!(body["next_cursor"].is_null());
                return (rows, pages);
            }
        }
    }
}

fn ids(rows: &[Value], key: &str) -> Vec<String> {
    rows.iter()
        .map(|r| r[key].as_str().unwrap().to_string())
        .collect()
}

async fn assert_error(res: reqwest::Response, status: u16, code: &str) -> Value {
    assert_eq!(res.status(), status);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    body
}

#[tokio::test]
async fn pages_of_seven_return_every_session_once_in_order() {
    let s = fixture_server().await;
    let (rows, pages) = walk(
        &s,
        "/sessions",
        &[("start", START), ("end", END), ("limit", "7")],
    )
    .await;
    assert_eq!(pages, 4);
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    assert_eq!(Value::Array(rows), expected["data"]);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn pagination_over_generated_traffic_matches_the_dataset() {
    let d = generate(&ScenarioParams {
        sessions_per_day: 400,
        days: 1,
        ..ScenarioParams::default()
    });
    let s = SimServer::start(Arc::new(d), SimOptions::default())
        .await
        .unwrap();
    let (start, end) = ("2026-11-02T12:00:00Z", "2026-11-02T16:00:00Z");
    let (rows, pages) = walk(
        &s,
        "/sessions",
        &[("start", start), ("end", end), ("limit", "7")],
    )
    .await;
    let got = ids(&rows, "session_id");
    let want = s.dataset().sessions_in(
        parse_time("s", start).unwrap(),
        parse_time("e", end).unwrap(),
        &[],
        None,
    );
    assert_eq!(got, ids(&want, "session_id"));
    assert!(got.len() > 50 && pages == got.len().div_ceil(7));
    let mut unique = got.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), got.len());
    let keys: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r["first_request_at"].as_str().unwrap(),
                r["session_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]));

    let (reqs, _) = walk(
        &s,
        "/requests",
        &[("start", start), ("end", "2026-11-02T13:00:00Z")],
    )
    .await;
    let times: Vec<_> = reqs
        .iter()
        .map(|r| {
            (
                r["created_at"].as_str().unwrap(),
                r["request_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(times.len() > 50 && times.windows(2).all(|w| w[0] < w[1]));
    assert!(
        times
            .iter()
            .all(|(t, _)| *t >= start && *t < "2026-11-02T13:00:00Z")
    );
}

#[tokio::test]
async fn bad_queries_are_400() {
    let s = fixture_server().await;
    let window = [("start", START), ("end", END)];
    for limit in ["51", "0", "abc", "-1", ""] {
        let q = [window[0], window[1], ("limit", limit)];
        assert_error(get(&s, "/sessions", &q).await, 400, "bad_request").await;
    }
    assert_error(
        get(&s, "/sessions", &[("start", START)]).await,
        400,
        "bad_request",
    )
    .await;
    assert_error(
        get(&s, "/sessions", &[("start", "yesterday"), ("end", END)]).await,
        400,
        "bad_request",
    )
    .await;
    assert_error(
        get(&s, "/sessions", &[("start", END), ("end", START)]).await,
        400,
        "bad_request",
    )
    .await;
    assert_error(
        get(&s, "/sessions", &[window[0], window[1], ("cursor", "xyz")]).await,
        400,
        "bad_request",
    )
    .await;
    assert_error(
        get(&s, "/sessions", &[window[0], window[1], ("colour", "red")]).await,
        400,
        "bad_request",
    )
    .await;
    assert_error(get(&s, "/requests", &[]).await, 400, "bad_request").await;
    // A cursor only works for the query it came from.
    let first = get_json(&s, "/sessions", &[window[0], window[1], ("limit", "5")]).await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let other = [
        ("start", START),
        ("end", "2026-10-11T11:31:00Z"),
        ("cursor", cursor),
    ];
    assert_error(get(&s, "/sessions", &other).await, 400, "bad_request").await;
    let label = [
        window[0],
        window[1],
        ("metadata.feature", "search"),
        ("cursor", cursor),
    ];
    assert_error(get(&s, "/sessions", &label).await, 400, "bad_request").await;
    let same = get_json(
        &s,
        "/sessions",
        &[window[0], window[1], ("limit", "50"), ("cursor", cursor)],
    )
    .await;
    assert_eq!(same["data"].as_array().unwrap().len(), 21);
    assert!(
        get_json(&s, "/sessions", &[("start", START), ("end", START)]).await["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn every_route_needs_the_admin_key() {
    let s = fixture_server().await;
    let client = reqwest::Client::new();
    for path in ["/sessions", "/requests", "/models"] {
        let url = format!("{}{path}", s.base_url());
        assert_error(client.get(&url).send().await.unwrap(), 401, "unauthorized").await;
        let wrong = client
            .get(&url)
            .bearer_auth("not-the-key")
            .send()
            .await
            .unwrap();
        assert_error(wrong, 401, "unauthorized").await;
    }
    assert_error(get(&s, "/nothing-here", &[]).await, 404, "not_found").await;
    assert_eq!(s.stats().hits("/v1/models"), 2);
}

#[tokio::test]
async fn models_and_requests_follow_the_contract() {
    let s = fixture_server().await;
    let models = get_json(&s, "/models", &[]).await;
    assert_eq!(models["data"][0]["id"], "gpt-6-luna");
    assert_eq!(models["data"][1]["cached_input_usd_per_mtok"], 0.25);
    let (rows, pages) = walk(
        &s,
        "/requests",
        &[("session_id", "retry-loop-7f2e81c09ab5"), ("limit", "3")],
    )
    .await;
    assert_eq!((rows.len(), pages), (10, 4));
    assert_eq!(rows[0]["error_type"], "RateLimitError");
    assert_eq!(rows[9]["status"], "success");
    let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 14);
    let (window, _) = walk(
        &s,
        "/requests",
        &[
            ("start", START),
            ("end", END),
            ("metadata.feature", "triage"),
        ],
    )
    .await;
    assert_eq!(window.len(), 10);
    let unknown = get_json(&s, "/requests", &[("session_id", "nope")]).await;
    assert_eq!(unknown, json!({"data": [], "next_cursor": null}));
}

#[tokio::test]
async fn metadata_filters_are_exact_and_combined() {
    let s = fixture_server().await;
    let w = [("start", START), ("end", END)];
    let rows = |v: Value| v["data"].as_array().unwrap().clone();
    let latency = rows(
        get_json(
            &s,
            "/sessions",
            &[w[0], w[1], ("metadata.feature", "latency-test")],
        )
        .await,
    );
    assert_eq!(latency.len(), 4);
    let both = [
        w[0],
        w[1],
        ("metadata.feature", "checkout"),
        ("metadata.case", "retry-loop"),
    ];
    assert_eq!(
        ids(&rows(get_json(&s, "/sessions", &both).await), "session_id"),
        ["retry-loop-7f2e81c09ab5"]
    );
    let none = [
        w[0],
        w[1],
        ("metadata.feature", "search"),
        ("metadata.case", "retry-loop"),
    ];
    assert!(rows(get_json(&s, "/sessions", &none).await).is_empty());
}

#[tokio::test]
async fn set_now_changes_a_session_spanning_the_horizon() {
    let s = fixture_server().await;
    let q = [
        ("start", START),
        ("end", END),
        ("metadata.case", "retry-loop"),
    ];
    let full = get_json(&s, "/sessions", &q).await;
    assert_eq!(full["data"][0]["requests"], 10);
    s.set_now(Some(parse_time("now", "2026-10-11T11:28:30Z").unwrap()));
    let early = get_json(&s, "/sessions", &q).await;
    assert_eq!(early["data"][0]["requests"], 4);
    assert_eq!(early["data"][0]["errors"], 4);
    let reqs = get_json(
        &s,
        "/requests",
        &[("session_id", "retry-loop-7f2e81c09ab5")],
    )
    .await;
    assert_eq!(reqs["data"].as_array().unwrap().len(), 4);
    s.set_now(None);
    assert_eq!(get_json(&s, "/sessions", &q).await, full);
}

#[tokio::test]
async fn queued_faults_are_served_once_in_order() {
    let s = fixture_server().await;
    let f = s.faults();
    let w = [("start", START), ("end", END)];
    f.push(Fault::on(
        FaultPath::Models,
        FaultKind::ServerError { status: 503 },
    ));
    f.push(Fault::any(FaultKind::RateLimit {
        retry_after_secs: 7,
    }));
    f.push(Fault::on(
        FaultPath::Sessions,
        FaultKind::ServerError { status: 502 },
    ));

    let res = get(&s, "/sessions", &w).await;
    assert_eq!(res.headers()["retry-after"], "7");
    assert_error(res, 429, "rate_limited").await;
    assert_error(get(&s, "/sessions", &w).await, 502, "bad_gateway").await;
    assert_eq!(get(&s, "/sessions", &w).await.status(), 200);
    assert_eq!(f.pending(), 1);
    assert_error(get(&s, "/models", &[]).await, 503, "unavailable").await;
    assert_eq!(get(&s, "/models", &[]).await.status(), 200);
    assert_eq!(
        (f.pending(), f.served(), s.stats().faults_served),
        (0, 3, 3)
    );
    assert_eq!(s.stats().hits("/v1/sessions"), 3);
}

#[tokio::test]
async fn damaged_bodies() {
    let s = fixture_server().await;
    let f = s.faults();
    let w = [("start", START), ("end", END)];
    f.push(Fault::on(FaultPath::Sessions, FaultKind::Truncated));
    let res = get(&s, "/sessions", &w).await;
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    assert!(text.starts_with("{\"data\":[{") && text.len() > 1000);
    assert!(serde_json::from_str::<Value>(&text).is_err());

    f.push(Fault::on(FaultPath::Sessions, FaultKind::Malformed));
    let res = get(&s, "/sessions", &w).await;
    assert_eq!(res.status(), 200);
    assert!(serde_json::from_str::<Value>(&res.text().await.unwrap()).is_err());

    f.push(Fault::on(
        FaultPath::Sessions,
        FaultKind::DropField {
            field: "cost_usd".into(),
        },
    ));
    let body = get_json(&s, "/sessions", &w).await;
    let rows = body["data"].as_array().unwrap();
    assert_eq!(rows.len(), 26);
    assert!(
        rows.iter()
            .all(|r| r.get("cost_usd").is_none() && r.get("input_tokens").is_some())
    );
    assert!(
        get_json(&s, "/sessions", &w).await["data"][0]
            .get("cost_usd")
            .is_some()
    );
}

#[tokio::test]
async fn pages_with_impossible_values() {
    let s = fixture_server().await;
    let f = s.faults();
    let w = [("start", START), ("end", END), ("limit", "10")];
    let clean = get_json(&s, "/sessions", &w).await["data"].clone();
    assert_eq!(clean.as_array().unwrap().len(), 10);

    f.push(Fault::on(
        FaultPath::Sessions,
        FaultKind::SetField {
            row: 7,
            field: "cached_tokens".into(),
            value: Value::from(u64::MAX),
        },
    ));
    let rows = get_json(&s, "/sessions", &w).await["data"].clone();
    assert_eq!(rows[7]["cached_tokens"], Value::from(u64::MAX));
    assert_eq!(rows[6], clean[6]);
    assert_eq!(rows[7]["session_id"], clean[7]["session_id"]);

    f.push(Fault::on(
        FaultPath::Sessions,
        FaultKind::CopyRow { from: 1, to: 4 },
    ));
    let rows = get_json(&s, "/sessions", &w).await["data"].clone();
    assert_eq!(rows.as_array().unwrap().len(), 10);
    assert_eq!(rows[4], clean[1]);

    f.push(Fault::on(FaultPath::Sessions, FaultKind::ExtraRow));
    let rows = get_json(&s, "/sessions", &w).await["data"].clone();
    assert_eq!(rows.as_array().unwrap().len(), 11);
    assert_eq!(rows[10], clean[9]);
}

#[tokio::test]
async fn delay_then_serve_normally() {
    let s = fixture_server().await;
    s.faults().push(Fault::on(
        FaultPath::Models,
        FaultKind::Delay { millis: 150 },
    ));
    let t = Instant::now();
    assert_eq!(
        get_json(&s, "/models", &[]).await["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(t.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn persistent_fault_is_an_outage_until_cleared() {
    let s = fixture_server().await;
    let f = s.faults();
    f.set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::ServerError { status: 503 },
    )));
    let w = [("start", START), ("end", END)];
    for _ in 0..3 {
        assert_eq!(get(&s, "/sessions", &w).await.status(), 503);
    }
    assert_eq!(get(&s, "/models", &[]).await.status(), 200);
    f.set_persistent(None);
    assert_eq!(get(&s, "/sessions", &w).await.status(), 200);
    assert_eq!(f.served(), 3);
}

#[tokio::test]
async fn shutdown_stops_listening() {
    let s = fixture_server().await;
    let url = format!("{}/models", s.base_url());
    s.shutdown().await.unwrap();
    assert!(reqwest::Client::new().get(&url).send().await.is_err());
}

/// The `next_cursor`s of the first `n` pages of the seed window's sessions
/// in pages of `limit`, following them wherever they lead.
async fn cursors(s: &SimServer, limit: &str, n: usize) -> Vec<Option<String>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..n {
        let mut q = vec![("start", START), ("end", END), ("limit", limit)];
        if let Some(c) = &cursor {
            q.push(("cursor", c));
        }
        let body = get_json(s, "/sessions", &q).await;
        cursor = body["next_cursor"].as_str().map(str::to_owned);
        out.push(cursor.clone());
        if cursor.is_none() {
            break;
        }
    }
    out
}

#[tokio::test]
async fn a_cursor_cycle_leads_from_the_last_page_back_to_the_second() {
    let s = fixture_server().await;
    let clean = cursors(&s, "10", 10).await;
    assert_eq!(clean.len(), 3, "26 sessions in pages of 10: {clean:?}");
    assert_eq!(clean[2], None);

    s.faults().set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::CursorCycle { pages: 3 },
    )));
    let got = cursors(&s, "10", 6).await;
    let (a, b) = (clean[0].clone(), clean[1].clone());
    assert_eq!(
        got,
        [a.clone(), b.clone(), a.clone(), b.clone(), a.clone(), b]
    );
    // Past the last row the cycle goes on through empty pages.
    let got = cursors(&s, "50", 5).await;
    assert_eq!(got.len(), 5);
    assert_eq!(got[0], got[2], "{got:?}");
    assert_eq!(got[1], got[3], "{got:?}");
    assert_ne!(got[0], got[1]);
    // Two pages: the second leads to itself.
    s.faults().set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::CursorCycle { pages: 2 },
    )));
    let got = cursors(&s, "10", 3).await;
    assert_eq!(got, [a.clone(), a.clone(), a]);
    // The fault stays on its route.
    assert_eq!(get(&s, "/models", &[]).await.status(), 200);
}

#[tokio::test]
async fn endless_pages_never_repeat_a_cursor_and_carry_each_row_once() {
    let s = fixture_server().await;
    s.faults().set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::EndlessPages,
    )));
    let got = cursors(&s, "10", 8).await;
    assert_eq!(got.len(), 8);
    assert!(got.iter().all(Option::is_some));
    let unique: std::collections::BTreeSet<_> = got.iter().collect();
    assert_eq!(unique.len(), 8, "{got:?}");
    let mut q = vec![("start", START), ("end", END), ("limit", "10")];
    let last = got[7].clone().unwrap();
    q.push(("cursor", &last));
    let body = get_json(&s, "/sessions", &q).await;
    assert_eq!(body["data"], json!([]), "the rows were used up on page 3");
}

#[tokio::test]
async fn random_faults_hit_about_their_rate_and_repeat_with_their_seed() {
    let s = fixture_server().await;
    // One client for the few hundred requests (building one is slow).
    let client = reqwest::Client::new();
    let sessions = format!("{}/sessions", s.base_url());
    let random = RandomFaults {
        path: FaultPath::Sessions,
        rate: 0.2,
        kinds: vec![FaultKind::ServerError { status: 500 }, FaultKind::Truncated],
        seed: 7,
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        s.faults().set_random(Some(random.clone()));
        let mut answers = Vec::new();
        for _ in 0..200 {
            let res = client
                .get(&sessions)
                .bearer_auth(DEFAULT_ADMIN_KEY)
                .query(&[("start", START), ("end", END)])
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            let whole = serde_json::from_str::<Value>(&res.text().await.unwrap()).is_ok();
            answers.push((status, whole));
        }
        runs.push(answers);
    }
    assert_eq!(runs[0], runs[1], "the same seed draws the same faults");
    let failed = runs[0]
        .iter()
        .filter(|(status, whole)| *status != 200 || !whole)
        .count();
    assert!((20..=60).contains(&failed), "{failed} of 200");
    assert!(runs[0].contains(&(500, true)) && runs[0].contains(&(200, false)));
    assert_eq!(s.faults().served(), 2 * failed as u64);
    // Other routes are left alone, and clear stops the draws.
    for _ in 0..10 {
        assert_eq!(get(&s, "/models", &[]).await.status(), 200);
    }
    s.faults().clear();
    let w = [("start", START), ("end", END)];
    for _ in 0..10 {
        let body = get_json(&s, "/sessions", &w).await;
        assert_eq!(body["data"].as_array().unwrap().len(), 26);
    }
}
