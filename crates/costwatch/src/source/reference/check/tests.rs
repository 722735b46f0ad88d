//! The limits, one test per limit: a value at the limit passes, one past it
//! fails the page with its path.

use super::*;
use crate::limits::{MAX_COUNT, MAX_MODELS_PER_SESSION};
use crate::source::reference::wire::Page;
use serde_json::{Value, json};

/// A session row that passes every check.
fn session(id: &str) -> Value {
    json!({
        "session_id": id,
        "first_request_at": "2026-10-11T11:24:03.120Z",
        "last_request_at": "2026-10-11T11:24:41.907Z",
        "requests": 6, "errors": 1,
        "input_tokens": 800, "cached_tokens": 300, "cache_write_tokens": 500,
        "output_tokens": 90, "cost_usd": 0.0038,
        "models": ["m"],
        "by_model": {"m": {"requests": 6, "input_tokens": 800, "cached_tokens": 300,
                           "output_tokens": 90, "cost_usd": 0.0038}},
        "labels": {"feature": "support-agent"}
    })
}

/// A number as messages show it: `1.7e308` rather than 309 digits.
fn shown(v: f64) -> String {
    match v {
        v if v.abs() >= 1e15 => format!("{v:e}"),
        v => v.to_string(),
    }
}

fn body(rows: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({"data": rows, "next_cursor": null})).unwrap()
}

/// The first page of a listing read 50 rows at a time.
fn first_page<T: Row>(rows: &[Value]) -> Result<Page<T>, String> {
    Pages::new(50).parse::<T>(&body(rows))
}

/// The error of a page holding `row` alone.
fn session_error(row: Value) -> String {
    first_page::<WireSession>(&[row]).err().unwrap_or_default()
}

fn with(mut row: Value, pointer: &str, value: Value) -> Value {
    *row.pointer_mut(pointer).unwrap() = value;
    row
}

#[test]
fn a_valid_page_passes() {
    let page = first_page::<WireSession>(&[session("a"), session("b")]).unwrap();
    assert_eq!(page.data.len(), 2);
}

#[test]
fn counts_are_held_within_u32() {
    let max = json!(MAX_COUNT);
    let mut ok = session("a");
    for field in ["/requests", "/input_tokens", "/output_tokens"] {
        ok = with(ok, field, max.clone());
    }
    ok = with(ok, "/by_model/m/requests", max.clone());
    assert!(first_page::<WireSession>(&[ok]).is_ok());
    for field in [
        "requests",
        "errors",
        "input_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "output_tokens",
    ] {
        let err = session_error(with(session("a"), &format!("/{field}"), json!(u64::MAX)));
        assert_eq!(
            err,
            format!("data[0].{field}: 18446744073709551615 is above the limit of 4294967295")
        );
        let err = session_error(with(
            session("a"),
            &format!("/{field}"),
            json!(MAX_COUNT + 1),
        ));
        assert!(
            err.starts_with(&format!("data[0].{field}: 4294967296 ")),
            "{err}"
        );
    }
}

#[test]
fn cached_tokens_above_input_fail_with_the_row_and_field() {
    let mut rows: Vec<Value> = (0..8).map(|i| session(&format!("s{i}"))).collect();
    rows[7] = with(rows[7].clone(), "/cached_tokens", json!(900));
    let err = first_page::<WireSession>(&rows).err().unwrap_or_default();
    assert_eq!(err, "data[7].cached_tokens: 900 is above input_tokens 800");
}

#[test]
fn parts_cannot_exceed_their_whole() {
    let row = with(session("a"), "/cache_write_tokens", json!(501));
    assert_eq!(
        session_error(row),
        "data[0].cache_write_tokens: 501 and cached_tokens 300 add up to more than input_tokens 800"
    );
    let row = with(session("a"), "/errors", json!(7));
    assert_eq!(session_error(row), "data[0].errors: 7 is above requests 6");
    let row = with(session("a"), "/by_model/m/requests", json!(7));
    assert_eq!(
        session_error(row),
        "data[0].by_model.m.requests: 7 is above the session's requests 6"
    );
    let row = with(session("a"), "/by_model/m/input_tokens", json!(801));
    assert!(session_error(row).starts_with("data[0].by_model.m.input_tokens: 801 is above"));
    let row = with(session("a"), "/by_model/m/output_tokens", json!(91));
    assert!(session_error(row).starts_with("data[0].by_model.m.output_tokens: 91 is above"));
    let row = with(session("a"), "/by_model/m/input_tokens", json!(200));
    assert_eq!(
        session_error(row),
        "data[0].by_model.m.cached_tokens: 300 is above its input_tokens 200"
    );
}

#[test]
fn costs_are_finite_non_negative_and_bounded() {
    for (cost, ok) in [
        (json!(0.0), true),
        (json!(MAX_COST_USD), true),
        (json!(1.7e308), false),
        (json!(-0.01), false),
        (json!(MAX_COST_USD + 1.0), false),
    ] {
        let err = session_error(with(session("a"), "/cost_usd", cost.clone()));
        assert_eq!(err.is_empty(), ok, "{cost}: {err}");
        if !ok {
            assert_eq!(
                err,
                format!(
                    "data[0].cost_usd: {} is not between 0 and 1000000",
                    shown(cost.as_f64().unwrap())
                )
            );
        }
        let err = session_error(with(session("a"), "/by_model/m/cost_usd", cost.clone()));
        assert_eq!(err.is_empty(), ok, "{cost}: {err}");
        if !ok {
            assert!(err.starts_with("data[0].by_model.m.cost_usd: "), "{err}");
        }
    }
}

#[test]
fn the_last_request_cannot_come_before_the_first() {
    let row = with(
        session("a"),
        "/last_request_at",
        json!("2026-10-11T11:24:03.119Z"),
    );
    assert_eq!(
        session_error(row),
        "data[0].last_request_at: 2026-10-11T11:24:03.119Z is before first_request_at 2026-10-11T11:24:03.120Z"
    );
}

#[test]
fn ids_are_not_empty_and_at_most_256_bytes() {
    let ok = "x".repeat(MAX_ID_BYTES);
    assert_eq!(session_error(session(&ok)), "");
    let long = "x".repeat(MAX_ID_BYTES + 1);
    assert_eq!(
        session_error(session(&long)),
        "data[0].session_id: 257 bytes, above the limit of 256"
    );
    assert_eq!(session_error(session("")), "data[0].session_id: empty");
    let row = with(session("a"), "/models", json!([long]));
    assert_eq!(
        session_error(row),
        "data[0].models[0]: 257 bytes, above the limit of 256"
    );
    let mut row = session("a");
    row["by_model"] = json!({"": {"requests": 1}});
    assert_eq!(session_error(row), "data[0].by_model: empty");
}

#[test]
fn labels_are_bounded_in_number_and_size() {
    let ok = "v".repeat(MAX_LABEL_VALUE_BYTES);
    assert_eq!(
        session_error(with(session("a"), "/labels/feature", json!(ok))),
        ""
    );
    let huge = "v".repeat(7 << 20);
    assert_eq!(
        session_error(with(session("a"), "/labels/feature", json!(huge))),
        "data[0].labels.feature: 7340032 bytes, above the limit of 1024"
    );
    let over = "v".repeat(MAX_LABEL_VALUE_BYTES + 1);
    assert!(!session_error(with(session("a"), "/labels/feature", json!(over))).is_empty());
    let many: serde_json::Map<String, Value> = (0..=MAX_LABELS)
        .map(|i| (format!("k{i}"), json!("v")))
        .collect();
    assert_eq!(
        session_error(with(session("a"), "/labels", Value::Object(many))),
        "data[0].labels: 65 labels, above the limit of 64"
    );
    let long_key = "k".repeat(MAX_LABEL_KEY_BYTES + 1);
    assert_eq!(
        session_error(with(session("a"), "/labels", json!({ long_key: "v" }))),
        "data[0].labels: a key of 257 bytes, above the limit of 256"
    );
    assert_eq!(
        session_error(with(session("a"), "/labels", json!({"": "v"}))),
        "data[0].labels: an empty key"
    );
}

#[test]
fn a_session_with_too_many_models_fails_while_parsing() {
    let by_model: serde_json::Map<String, Value> = (0..=MAX_MODELS_PER_SESSION)
        .map(|i| (format!("m{i}"), json!({"requests": 0})))
        .collect();
    let err = session_error(with(session("a"), "/by_model", Value::Object(by_model)));
    assert!(
        err.starts_with("data[0].by_model: more than 256 models, the limit"),
        "{err}"
    );
}

#[test]
fn a_page_holds_no_more_rows_than_asked_for() {
    let rows: Vec<Value> = (0..51).map(|i| session(&format!("s{i:02}"))).collect();
    assert_eq!(
        first_page::<WireSession>(&rows).err().unwrap_or_default(),
        "data: 51 rows, more than the 50 asked for"
    );
    assert!(first_page::<WireSession>(&rows[..50]).is_ok());
    let err = Pages::new(10)
        .parse::<WireSession>(&body(&rows[..11]))
        .err()
        .unwrap_or_default();
    assert_eq!(err, "data: 11 rows, more than the 10 asked for");
}

#[test]
fn an_id_twice_on_a_page_fails_it() {
    let rows = [session("a"), session("b"), session("a")];
    assert_eq!(
        first_page::<WireSession>(&rows).err().unwrap_or_default(),
        "data[2].session_id: \"a\" is listed before, at data[0]"
    );
}

#[test]
fn a_session_repeated_on_a_later_page_fails_that_page() {
    let at = |id: &str, t: &str| with(session(id), "/first_request_at", json!(t));
    let t1 = "2026-10-11T11:00:00.000Z";
    let t2 = "2026-10-11T11:00:00.001Z";
    let mut pages = Pages::new(2);
    // Ties in first_request_at are allowed, and their ids remembered.
    pages
        .parse::<WireSession>(&body(&[at("b", t1), at("a", t1)]))
        .unwrap();
    let err = pages
        .parse::<WireSession>(&body(&[at("c", t1), at("b", t1)]))
        .err()
        .unwrap_or_default();
    assert_eq!(
        err,
        "data[1].session_id: \"b\" is listed before, on an earlier page"
    );

    // A repeat of a row with an earlier first_request_at breaks the order.
    let mut pages = Pages::new(2);
    pages
        .parse::<WireSession>(&body(&[at("a", t1), at("b", t2)]))
        .unwrap();
    let err = pages
        .parse::<WireSession>(&body(&[at("a", t1)]))
        .err()
        .unwrap_or_default();
    assert_eq!(
        err,
        "data[0].first_request_at: 2026-10-11T11:00:00Z is before 2026-10-11T11:00:00.001Z of an earlier row; rows come in first_request_at order"
    );

    // Once the time moves on, the same ids at a later time are other rows'
    // business only if they repeat; distinct ones pass.
    let mut pages = Pages::new(2);
    pages
        .parse::<WireSession>(&body(&[at("a", t1), at("b", t1)]))
        .unwrap();
    pages
        .parse::<WireSession>(&body(&[at("c", t2), at("d", t2)]))
        .unwrap();
    let err = pages
        .parse::<WireSession>(&body(&[at("c", t2)]))
        .err()
        .unwrap_or_default();
    assert!(err.contains("\"c\" is listed before"), "{err}");
}

#[test]
fn rows_without_a_first_request_are_checked_on_their_page_only() {
    let mut bare = session("a");
    bare.as_object_mut().unwrap().remove("first_request_at");
    let mut pages = Pages::new(5);
    pages
        .parse::<WireSession>(&body(&[session("x"), bare.clone()]))
        .unwrap();
    pages.parse::<WireSession>(&body(&[bare])).unwrap();
}

#[test]
fn gateway_text_in_a_message_is_escaped() {
    let id = "a\u{1b}[2J\r\nforged";
    let err = first_page::<WireSession>(&[session(id), session(id)])
        .err()
        .unwrap_or_default();
    assert_eq!(
        err,
        "data[1].session_id: \"a\\x1b[2J\\r\\nforged\" is listed before, at data[0]"
    );
    let row = with(session("a"), "/by_model", json!({"m\n": {"requests": 9}}));
    assert_eq!(
        session_error(row),
        "data[0].by_model.m\\n.requests: 9 is above the session's requests 6"
    );
    let row = with(
        session("a"),
        "/labels",
        json!({"k\u{202e}": "v".repeat(2000)}),
    );
    assert_eq!(
        session_error(row),
        "data[0].labels.k\\u{202e}: 2000 bytes, above the limit of 1024"
    );
    let request = with(request("r1", "s"), "/status", json!("nope\n\u{1b}[31m"));
    let err = first_page::<WireRequest>(&[request])
        .err()
        .unwrap_or_default();
    assert!(err.starts_with("data[0].status: unknown variant"), "{err}");
    assert!(!err.contains(crate::printable::is_unsafe), "{err:?}");
}

/// A request row that passes every check.
fn request(id: &str, session: &str) -> Value {
    json!({"request_id": id, "session_id": session,
        "created_at": "2026-11-02T00:01:49.677Z", "model": "m",
        "status": "error", "http_status": 429, "error_type": "RateLimitError",
        "input_tokens": 217, "cached_tokens": 0, "output_tokens": 40,
        "cost_usd": 0.00098, "latency_ms": 812})
}

fn request_error(row: Value) -> String {
    first_page::<WireRequest>(&[row]).err().unwrap_or_default()
}

#[test]
fn request_rows_are_held_to_the_same_limits() {
    assert_eq!(request_error(request("r", "s")), "");
    assert_eq!(
        request_error(with(request("r", "s"), "/cached_tokens", json!(218))),
        "data[0].cached_tokens: 218 is above input_tokens 217"
    );
    assert_eq!(
        request_error(with(request("r", "s"), "/output_tokens", json!(u64::MAX))),
        "data[0].output_tokens: 18446744073709551615 is above the limit of 4294967295"
    );
    assert!(
        request_error(with(request("r", "s"), "/cost_usd", json!(1.7e308)))
            .starts_with("data[0].cost_usd: ")
    );
    assert_eq!(
        request_error(with(request("r", "s"), "/http_status", json!(700))),
        "data[0].http_status: 700 is not an HTTP status"
    );
    assert_eq!(
        request_error(with(
            request("r", "s"),
            "/error_type",
            json!("E".repeat(300))
        )),
        "data[0].error_type: 300 bytes, above the limit of 256"
    );
    assert_eq!(request_error(request("", "s")), "data[0].request_id: empty");
    assert_eq!(
        request_error(with(request("r", "s"), "/model", json!(""))),
        "data[0].model: empty"
    );
    let rows = [request("r1", "s"), request("r1", "s")];
    assert_eq!(
        first_page::<WireRequest>(&rows).err().unwrap_or_default(),
        "data[1].request_id: \"r1\" is listed before, at data[0]"
    );
}

#[test]
fn a_drill_down_holds_only_its_session_and_each_request_once() {
    let rec = |id: &str, session: &str| {
        serde_json::from_value::<WireRequest>(request(id, session))
            .unwrap()
            .into_record()
    };
    assert!(drill_down("s", &[rec("r1", "s"), rec("r2", "s")]).is_ok());
    assert_eq!(
        drill_down("s", &[rec("r1", "s"), rec("r1", "s")]).err(),
        Some("request \"r1\" is listed twice".to_owned())
    );
    assert_eq!(
        drill_down("s", &[rec("r1", "s"), rec("r2", "t\n")]).err(),
        Some("request \"r2\" belongs to session \"t\\n\", not to \"s\"".to_owned())
    );
}
