use super::*;
use crate::clock::FakeClock;
use crate::source::{ModelPrice, ReadStats, RequestStatus, SessionRecord};
use chrono::{DateTime, TimeZone, Utc};
use std::sync::atomic::{AtomicUsize, Ordering};

fn at(minute: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 2, 10, 0, 0).unwrap() + TimeDelta::minutes(minute)
}

fn call(id: &str, session: &str, minute: i64, model: &str, status: RequestStatus) -> RequestRecord {
    RequestRecord {
        request_id: id.into(),
        session_id: session.into(),
        created_at: at(minute),
        model: model.into(),
        status,
        http_status: None,
        error_type: None,
        input_tokens: 100,
        cached_tokens: 0,
        cache_write_tokens: 0,
        output_tokens: 10,
        cost_usd: 0.001,
        provider: None,
    }
}

/// A source over fixed calls: sessions are built from them; the default
/// `requests` reads them through `session_requests`.
#[derive(Clone, Default)]
struct Calls {
    calls: Vec<RequestRecord>,
    labels: Labels,
    /// Reads of `session_requests`.
    reads: Arc<AtomicUsize>,
    /// Whether `session_requests` fails (a window that did not hold it).
    forgets: bool,
}

impl Source for Calls {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        Ok(Vec::new())
    }

    async fn sessions<F>(&self, window: Window, mut sink: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        let mut ids: Vec<&str> = self
            .calls
            .iter()
            .filter(|c| window.contains(c.created_at))
            .map(|c| c.session_id.as_str())
            .collect();
        ids.dedup();
        for id in ids {
            let mine: Vec<&RequestRecord> =
                self.calls.iter().filter(|c| c.session_id == id).collect();
            sink(SessionRecord {
                session_id: id.into(),
                first_request_at: mine[0].created_at,
                last_request_at: mine[mine.len() - 1].created_at,
                requests: mine.len() as u64,
                errors: 0,
                input_tokens: 0,
                cached_tokens: 0,
                cache_write_tokens: 0,
                output_tokens: 0,
                cost_usd: 0.0,
                by_model: Vec::new(),
                labels: self.labels.clone(),
                cost_computed: false,
                cache_unreported: false,
            });
        }
        Ok(ReadStats::default())
    }

    async fn session_requests(&self, session_id: &str) -> Result<Vec<RequestRecord>, SourceError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.forgets {
            return Err(SourceError::Invalid("not in the last window".into()));
        }
        Ok(self
            .calls
            .iter()
            .filter(|c| c.session_id == session_id)
            .cloned()
            .collect())
    }
}

fn source() -> Calls {
    let mut calls = Vec::new();
    for i in 0..5 {
        let status = if i < 3 {
            RequestStatus::Error
        } else {
            RequestStatus::Success
        };
        calls.push(call(&format!("r{i}"), "s-1", i, "gpt-6-luna", status));
    }
    calls.push(call("r9", "s-2", 30, "gpt-6.1-sol", RequestStatus::Success));
    Calls {
        calls,
        labels: [("feature".to_owned(), "triage".to_owned())].into(),
        ..Calls::default()
    }
}

fn tools(own: Calls) -> LogTools<Calls> {
    LogTools::new(own, Arc::new(FakeClock::new(at(60))))
}

async fn done(t: &LogTools<Calls>, name: &str, args: Value) -> Value {
    match t.call(name, &args).await.unwrap() {
        Answer::Done(v) => v,
        Answer::Refused(why) => panic!("{name} {args}: refused: {why}"),
    }
}

async fn refused(t: &LogTools<Calls>, name: &str, args: Value) -> String {
    match t.call(name, &args).await.unwrap() {
        Answer::Refused(why) => why,
        Answer::Done(v) => panic!("{name} {args}: answered {v}"),
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn one_sessions_calls_come_from_the_window_first_then_from_the_source() {
    // The pipeline's source holds the session: its rows are used, and the
    // tools' own source is not read.
    let window = source();
    let own = Calls {
        calls: Vec::new(),
        ..source()
    };
    let reads = own.reads.clone();
    let t = tools(own).with_window_source(Arc::new(window));
    let page = done(&t, "search_requests", json!({"session_id": "s-1"})).await;
    assert_eq!(ids(&page), ["r0", "r1", "r2", "r3", "r4"]);
    assert_eq!(reads.load(Ordering::SeqCst), 0);

    // A window that no longer holds it, and no finding on it: the source
    // is read, over the last 7 days.
    let forgot = Calls {
        forgets: true,
        ..source()
    };
    let t = tools(source()).with_window_source(Arc::new(forgot));
    let page = done(&t, "search_requests", json!({"session_id": "s-1"})).await;
    assert_eq!(ids(&page).len(), 5);
    // A call older than the default range is not read.
    let mut old = source();
    old.calls.push(call(
        "r-old",
        "s-1",
        -7 * 24 * 60 - 1,
        "gpt-6-luna",
        RequestStatus::Success,
    ));
    // Two days back is within them.
    old.calls.push(call(
        "r-2d",
        "s-1",
        -2 * 24 * 60,
        "gpt-6-luna",
        RequestStatus::Success,
    ));
    let t = tools(old.clone());
    let page = done(&t, "search_requests", json!({"session_id": "s-1"})).await;
    assert!(!ids(&page).contains(&"r-old".to_owned()));
    assert!(ids(&page).contains(&"r-2d".to_owned()));

    // A session costwatch found something on is read around those windows,
    // however long ago.
    struct Found(Window);
    impl KnownSessions for Found {
        fn span_of<'a>(&'a self, _: &'a str) -> SpanFuture<'a> {
            let w = self.0;
            Box::pin(async move { Ok(Some(w)) })
        }
    }
    let flagged = Window {
        start: at(-7 * 24 * 60 - 60),
        end: at(-7 * 24 * 60),
    };
    let t = tools(old).with_known_sessions(Arc::new(Found(flagged)));
    let page = done(&t, "search_requests", json!({"session_id": "s-1"})).await;
    assert!(ids(&page).contains(&"r-old".to_owned()), "{page}");
}

#[tokio::test]
async fn filters_pages_and_cursors_follow_the_reference_gateway() {
    let t = tools(source());
    let args = json!({"start": at(0).to_rfc3339(), "end": at(60).to_rfc3339(), "status": "error", "limit": 2});
    let first = done(&t, "search_requests", args.clone()).await;
    assert_eq!(ids(&first), ["r0", "r1"]);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let mut next_args = args.clone();
    next_args["cursor"] = json!(cursor);
    let second = done(&t, "search_requests", next_args).await;
    assert_eq!(ids(&second), ["r2"]);
    assert!(second["next_cursor"].is_null());
    // The cursor belongs to its query.
    let other = json!({"start": at(0).to_rfc3339(), "end": at(60).to_rfc3339(), "cursor": cursor});
    assert!(
        refused(&t, "search_requests", other)
            .await
            .starts_with("cursor:")
    );
    // By model, and by labels.
    let sol = done(
        &t,
        "search_requests",
        json!({"start": at(0).to_rfc3339(), "end": at(60).to_rfc3339(), "model": "gpt-6.1-sol"}),
    )
    .await;
    assert_eq!(ids(&sol), ["r9"]);
    let none = done(&t, "search_requests", json!({"start": at(0).to_rfc3339(), "end": at(60).to_rfc3339(), "labels": {"feature": "other"}})).await;
    assert!(ids(&none).is_empty());
    // Sessions, with their labels.
    let sessions = done(&t, "list_sessions", json!({"start": at(0).to_rfc3339(), "end": at(60).to_rfc3339(), "labels": {"feature": "triage"}})).await;
    let names: Vec<&str> = sessions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["s-1", "s-2"]);
}

#[tokio::test]
async fn bad_arguments_are_refused_naming_the_argument() {
    let t = tools(source());
    let start = at(0).to_rfc3339();
    let cases = [
        (
            "list_sessions",
            json!({"start": start}),
            "start and end go together",
        ),
        (
            "list_sessions",
            json!({"start": "x", "end": start}),
            "start: expected an RFC 3339 time",
        ),
        (
            "list_sessions",
            json!({"start": start, "end": at(25 * 60).to_rfc3339()}),
            "end: the range is at most 24 hours",
        ),
        (
            "list_sessions",
            json!({"start": start, "end": at(0).to_rfc3339()}),
            "end: must be after start",
        ),
        (
            "search_requests",
            json!({}),
            "give session_id, or start and end",
        ),
        (
            "search_requests",
            json!({"session_id": "s-1", "limit": 0}),
            "limit: expected an integer from 1 to 50",
        ),
        (
            "search_requests",
            json!({"session_id": "s-1", "status": "failed"}),
            "status: expected one of success, error",
        ),
        (
            "search_requests",
            json!({"session_id": "s-1", "prompt": "x"}),
            "unknown argument `prompt`",
        ),
        (
            "search_requests",
            json!({"session_id": "s-1", "labels": {"a": 1}}),
            "labels.a: expected a string",
        ),
        ("get_request", json!({}), "request_id is required"),
        (
            "get_request",
            json!({"request_id": "r0"}),
            "request_id: `r0` is not among the calls read recently",
        ),
        ("nope", json!({}), "unknown tool `nope`"),
    ];
    for (tool, args, want) in cases {
        let why = refused(&t, tool, args.clone()).await;
        assert!(why.contains(want), "{tool} {args}: {why}");
    }
    // A session's range may be a week long, not more.
    let week = json!({"session_id": "s-1", "start": start, "end": at(7 * 24 * 60).to_rfc3339()});
    done(&t, "search_requests", week).await;
    let longer =
        json!({"session_id": "s-1", "start": start, "end": at(7 * 24 * 60 + 1).to_rfc3339()});
    assert!(
        refused(&t, "search_requests", longer)
            .await
            .contains("at most 7 days")
    );
}

#[tokio::test]
async fn get_request_answers_from_the_calls_just_returned() {
    let t = tools(source());
    done(
        &t,
        "search_requests",
        json!({"session_id": "s-1", "limit": 2}),
    )
    .await;
    let row = done(&t, "get_request", json!({"request_id": "r1"})).await;
    assert_eq!(row["session_id"], "s-1");
    assert_eq!(row["status"], "error");
    // Only what was shown: r4 was on a later page.
    assert!(
        refused(&t, "get_request", json!({"request_id": "r4"}))
            .await
            .contains("not among")
    );
}

#[tokio::test]
async fn the_investigation_sees_only_its_allowlist_in_its_order() {
    let t = tools(source()).allowlisted(vec!["get_request".into(), "search_requests".into()]);
    let listed: Vec<String> = t
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(listed, ["get_request", "search_requests"]);
    let err = t.call_tool("list_sessions", json!({})).await.unwrap_err();
    assert!(matches!(err, InvestigateError::Rejected(m) if m.contains("not allowed")));
    let out = t
        .call_tool("search_requests", json!({"session_id": "s-1"}))
        .await
        .unwrap();
    assert!(!out.is_error);
    let rows: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(rows["data"].as_array().unwrap().len(), 5);
    let bad = t
        .call_tool("search_requests", json!({"limit": 99}))
        .await
        .unwrap();
    assert!(
        bad.is_error && bad.text.starts_with("error: "),
        "{}",
        bad.text
    );
}

#[test]
fn every_tool_has_schemas_and_no_prompt_text_field() {
    for def in log_tool_defs()
        .iter()
        .chain(state::state_tool_defs().iter())
    {
        assert_eq!(def.input_schema["type"], "object", "{}", def.name);
        assert_eq!(def.output_schema["type"], "object", "{}", def.name);
        assert!(!def.title.is_empty() && !def.description.is_empty());
        let text = def.output_schema.to_string();
        assert!(
            !text.contains("prompt") && !text.contains("messages"),
            "{}",
            def.name
        );
    }
}
