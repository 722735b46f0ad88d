//! Tests of the dataset: the fixture, windows, label filters, the horizon,
//! aggregation and paging.

use super::*;
use serde_json::json;

pub(crate) const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seed-window.json");

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn fixture() -> Dataset {
    Dataset::from_fixture(FIXTURE).unwrap()
}

fn fixture_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap()
}

#[test]
fn fixture_loads_sessions_and_truth() {
    let d = fixture();
    assert_eq!(d.sessions.len(), 26);
    assert_eq!(d.request_count(), 84);
    assert_eq!(d.models.len(), 2);
    let ids = |k: &str| d.truth.of(k).collect::<Vec<_>>();
    assert_eq!(ids("no_cache"), ["replay-mismatch-a14896679e70"]);
    assert_eq!(ids("oversized_model"), ["subagent-sol-9b31c0e4d2aa"]);
    assert_eq!(ids("retry_loop"), ["retry-loop-7f2e81c09ab5"]);
    assert_eq!(
        d.requests_of("retry-loop-7f2e81c09ab5").map(<[_]>::len),
        Some(10)
    );
}

#[test]
fn fixture_window_is_served_verbatim() {
    let d = fixture();
    let rows = d.sessions_in(
        t("2026-10-11T11:24:00Z"),
        t("2026-10-11T11:32:00Z"),
        &[],
        None,
    );
    let expected = fixture_json()["data"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 26);
    assert_eq!(rows, expected);
}

#[test]
fn fixture_requests_round_trip() {
    let d = fixture();
    let rows: Vec<Value> = d
        .requests_in(
            t("2026-10-11T11:00:00Z"),
            t("2026-10-11T12:00:00Z"),
            &[],
            None,
        )
        .into_iter()
        .map(SimRequest::to_row)
        .collect();
    assert_eq!(rows.len(), 84);
    let mut expected = fixture_json()["requests"].as_array().unwrap().clone();
    expected.sort_by(|a, b| {
        (a["created_at"].as_str(), a["request_id"].as_str())
            .cmp(&(b["created_at"].as_str(), b["request_id"].as_str()))
    });
    assert_eq!(rows, expected);
    let typed =
        serde_json::to_value(d.requests_of("demo-9d2ca13ffe79").unwrap()[0].clone()).unwrap();
    assert_eq!(
        typed,
        d.requests_of("demo-9d2ca13ffe79").unwrap()[0].to_row()
    );
}

#[test]
fn window_selects_overlapping_sessions_only() {
    let d = fixture();
    // 11:28:20-11:28:40 catches the retry loop (11:28:10-11:29:02) mid-life.
    let rows = d.sessions_in(
        t("2026-10-11T11:28:20Z"),
        t("2026-10-11T11:28:40Z"),
        &[],
        None,
    );
    let ids: Vec<_> = rows
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["retry-loop-7f2e81c09ab5"]);
    let empty = d.sessions_in(
        t("2026-10-11T12:00:00Z"),
        t("2026-10-11T13:00:00Z"),
        &[],
        None,
    );
    assert!(empty.is_empty());
}

#[test]
fn label_filter_is_exact_and_conjunctive() {
    let d = fixture();
    let (s, e) = (t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z"));
    let f = |pairs: &[(&str, &str)]| {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        d.sessions_in(s, e, &v, None).len()
    };
    assert_eq!(f(&[("feature", "latency-test")]), 4);
    assert_eq!(f(&[("feature", "checkout"), ("case", "retry-loop")]), 1);
    assert_eq!(f(&[("feature", "search"), ("case", "retry-loop")]), 0);
    assert_eq!(f(&[("feature", "latency")]), 0);
}

#[test]
fn horizon_cuts_a_session_short() {
    let d = fixture();
    let (s, e) = (t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z"));
    let now = t("2026-10-11T11:28:30Z");
    let rows = d.sessions_in(s, e, &[], Some(now));
    let row = rows
        .iter()
        .find(|r| r["session_id"] == "retry-loop-7f2e81c09ab5")
        .unwrap();
    assert_eq!(row["requests"], 4);
    assert_eq!(row["errors"], 4);
    assert_eq!(row["last_request_at"], "2026-10-11T11:28:27.333Z");
    // Sessions that had not started yet do not exist.
    assert!(
        rows.iter()
            .all(|r| r["first_request_at"].as_str().unwrap() <= "2026-10-11T11:28:30Z")
    );
    assert_eq!(rows.len(), 17);
}

#[test]
fn aggregate_sums_calls_and_splits_by_model() {
    let d = fixture();
    let mut s = d.session("subagent-sol-9b31c0e4d2aa").unwrap().clone();
    s.fixed_row = None;
    let row = s.row(None).unwrap();
    assert_eq!(row["requests"], 5);
    assert_eq!(row["input_tokens"], 507);
    assert_eq!(row["models"], json!(["gpt-6.1-sol", "gpt-6-luna"]));
    assert_eq!(row["by_model"]["gpt-6.1-sol"]["requests"], 3);
    assert_eq!(row["by_model"]["gpt-6.1-sol"]["input_tokens"], 217);
    assert_eq!(row["first_request_at"], "2026-10-11T11:27:30.000Z");
    assert!((row["cost_usd"].as_f64().unwrap() - 0.0012).abs() < 1e-9);
}

#[test]
fn sessions_without_breakdown_keep_models_and_lose_by_model() {
    let mut d = fixture();
    for s in &mut d.sessions {
        s.fixed_row = None;
    }
    let d = Dataset::new(d.models, d.sessions, d.truth)
        .without_breakdown(["subagent-sol-9b31c0e4d2aa".to_string()]);
    assert!(!d.has_breakdown("subagent-sol-9b31c0e4d2aa"));
    assert!(d.has_breakdown("replay-mismatch-a14896679e70"));
    let rows = d.sessions_in(
        t("2026-10-11T11:00:00Z"),
        t("2026-10-11T12:00:00Z"),
        &[],
        None,
    );
    let row = |id: &str| rows.iter().find(|r| r["session_id"] == id).unwrap();
    let summary = row("subagent-sol-9b31c0e4d2aa");
    assert!(summary.get("by_model").is_none());
    assert_eq!(summary["models"], json!(["gpt-6.1-sol", "gpt-6-luna"]));
    assert_eq!(summary["requests"], 5);
    assert!(row("replay-mismatch-a14896679e70")["by_model"].is_object());
}

#[test]
fn pages_resume_where_they_stopped() {
    let d = fixture();
    let w = Window {
        start: t("2026-10-11T11:00:00Z"),
        end: t("2026-10-11T12:00:00Z"),
        labels: &[],
        now: None,
    };
    let mut from = 0;
    let mut ids = Vec::new();
    loop {
        let page = d.sessions_page(&w, from, 5);
        assert!(page.rows.len() <= 5);
        ids.extend(
            page.rows
                .iter()
                .map(|r| r["session_id"].as_str().unwrap().to_string()),
        );
        match page.next {
            Some(n) => from = n,
            None => break,
        }
    }
    let all: Vec<_> = d.sessions.iter().map(|s| s.session_id.clone()).collect();
    assert_eq!(ids, all);
}

#[test]
fn bad_fixtures_are_errors() {
    assert!(matches!(
        Dataset::from_fixture("/nonexistent/x.json"),
        Err(DatasetError::Read { .. })
    ));
    assert!(matches!(
        Dataset::from_fixture_str("{"),
        Err(DatasetError::Parse { .. })
    ));
    let unknown = r#"{"data": [], "requests": [], "models": [], "expect": {"no_cache": ["x"]}}"#;
    assert!(matches!(
        Dataset::from_fixture_str(unknown),
        Err(DatasetError::Invalid(_))
    ));
}
