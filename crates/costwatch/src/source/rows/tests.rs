//! `RowSource` over an in-memory reader: sessions across windows, the
//! carry, calls without a session, pricing, limits and drill-downs.

use super::*;
use crate::detect::group_key;
use crate::pricing::table::PriceTable;
use crate::source::{SessionRecord, Source, Window};
use chrono::{TimeDelta, TimeZone};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Calls in memory; records every range asked for.
#[derive(Default)]
struct Memory {
    calls: Vec<CallRow>,
    asked: Mutex<Vec<(DateTime<Utc>, DateTime<Utc>)>>,
    session_asks: Mutex<Vec<String>>,
    fail: Mutex<bool>,
}

impl RowReader for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        Ok(Vec::new())
    }

    async fn calls<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        mut sink: F,
    ) -> Result<ReadStats, SourceError>
    where
        F: FnMut(CallRow) -> Result<(), SourceError> + Send,
    {
        self.asked.lock().unwrap().push((start, end));
        if *self.fail.lock().unwrap() {
            return Err(SourceError::Transient("down".into()));
        }
        let mut stats = ReadStats {
            pages: 1,
            ..ReadStats::default()
        };
        for c in self
            .calls
            .iter()
            .filter(|c| start <= c.created_at && c.created_at < end)
        {
            stats.rows += 1;
            sink(c.clone())?;
        }
        Ok(stats)
    }

    async fn session_calls(
        &self,
        session_id: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<CallRow>, SourceError> {
        self.session_asks
            .lock()
            .unwrap()
            .push(session_id.to_owned());
        Ok(self
            .calls
            .iter()
            .filter(|c| c.session_id.as_deref() == Some(session_id))
            .filter(|c| start <= c.created_at && c.created_at < end)
            .cloned()
            .collect())
    }
}

fn t(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, 11, h, m, 0).unwrap()
}

fn window(h: u32, m: u32) -> Window {
    Window {
        start: t(h, m),
        end: t(h, m) + TimeDelta::minutes(15),
    }
}

fn call(id: &str, session: Option<&str>, at: DateTime<Utc>) -> CallRow {
    CallRow {
        request_id: id.to_owned(),
        session_id: session.map(str::to_owned),
        created_at: at,
        model: "gpt-4o-mini".to_owned(),
        status: RequestStatus::Success,
        http_status: Some(200),
        error_type: None,
        input_tokens: 2000,
        cached_tokens: 1500,
        cache_reported: true,
        instrumentation: None,
        cache_write_tokens: 0,
        output_tokens: 100,
        cost_usd: Some(0.001),
        labels: Labels::from([("feature".to_owned(), "chat".to_owned())]),
        provider: None,
    }
}

fn settings() -> RowSettings {
    RowSettings {
        session_key: SessionKey::Session,
        labels: BTreeMap::new(),
        filter: BTreeMap::new(),
        page_limit: 100,
        max_pages: 100,
        session_lookback: Duration::from_secs(3600),
        max_open_sessions: 1000,
        max_kept_rows: 1000,
    }
}

fn source(calls: Vec<CallRow>, settings: RowSettings) -> RowSource<Memory> {
    let table = PriceTable::new(crate::pricing::table::default_table());
    RowSource::new(
        Memory {
            calls,
            ..Memory::default()
        },
        settings,
        table,
    )
}

async fn read(src: &RowSource<Memory>, w: Window) -> (Vec<SessionRecord>, ReadStats) {
    let mut out = Vec::new();
    let stats = src.sessions(w, |s| out.push(s)).await.unwrap();
    (out, stats)
}

#[tokio::test]
async fn a_session_that_began_before_the_window_counts_its_earlier_calls() {
    let src = source(
        vec![
            call("r1", Some("s1"), t(9, 50)),
            call("r2", Some("s1"), t(10, 5)),
            call("r3", Some("s2"), t(9, 40)),
        ],
        settings(),
    );
    let (sessions, stats) = read(&src, window(10, 0)).await;
    assert_eq!(sessions.len(), 1, "s2 had no call in the window");
    let s = &sessions[0];
    assert_eq!(s.session_id, "s1");
    assert_eq!(
        (s.requests, s.input_tokens, s.cached_tokens),
        (2, 4000, 3000)
    );
    assert_eq!(s.first_request_at, t(9, 50));
    assert_eq!(s.cost_usd, 0.002);
    assert!(!s.cost_computed);
    assert_eq!(stats.rows, 3);
    assert_eq!(src.reader().asked.lock().unwrap()[0], (t(9, 0), t(10, 15)));
}

#[tokio::test]
async fn the_next_window_reads_only_itself_and_extends_carried_sessions() {
    let src = source(
        vec![
            call("r1", Some("s1"), t(9, 50)),
            call("r2", Some("s1"), t(10, 5)),
            call("r3", Some("s1"), t(10, 20)),
        ],
        settings(),
    );
    read(&src, window(10, 0)).await;
    let (sessions, _) = read(&src, window(10, 15)).await;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].requests, 3);
    let asked = src.reader().asked.lock().unwrap().clone();
    assert_eq!(asked[1], (t(10, 15), t(10, 30)), "only the new window");
    // A window that does not follow on is read with its whole lookback,
    // and finds the same session the same size.
    let fresh = source(src.reader().calls.clone(), settings());
    let (again, _) = read(&fresh, window(10, 15)).await;
    assert_eq!(again, sessions);
}

#[tokio::test]
async fn a_failed_read_leaves_no_carry_behind() {
    let src = source(
        vec![
            call("r1", Some("s1"), t(9, 50)),
            call("r2", Some("s1"), t(10, 20)),
        ],
        settings(),
    );
    read(&src, window(10, 0)).await;
    *src.reader().fail.lock().unwrap() = true;
    let mut n = 0;
    let err = src.sessions(window(10, 15), |_| n += 1).await.unwrap_err();
    assert!(err.is_retryable());
    assert_eq!(n, 0);
    *src.reader().fail.lock().unwrap() = false;
    let (sessions, _) = read(&src, window(10, 15)).await;
    assert_eq!(sessions[0].requests, 2);
    let asked = src.reader().asked.lock().unwrap().clone();
    assert_eq!(
        asked.last(),
        Some(&(t(9, 15), t(10, 30))),
        "full lookback again"
    );
}

#[tokio::test]
async fn calls_without_a_session_are_sessions_of_one_in_a_group_of_their_own() {
    let src = source(
        vec![
            call("r1", None, t(10, 1)),
            call("r2", None, t(10, 2)),
            call("r3", Some("s1"), t(10, 3)),
        ],
        settings(),
    );
    let (sessions, stats) = read(&src, window(10, 0)).await;
    assert_eq!(stats.calls_without_session, 2);
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["per-call:r1", "per-call:r2", "s1"]);
    let group_by = vec!["feature".to_owned()];
    assert_eq!(
        group_key(&sessions[0].labels, &group_by),
        "feature=chat,costwatch.session=per-call"
    );
    assert_eq!(group_key(&sessions[2].labels, &group_by), "feature=chat");
    let rows = src.session_requests("per-call:r1").await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].session_id, "per-call:r1");
}

#[tokio::test]
async fn calls_without_a_cost_are_priced_from_the_table_and_say_so() {
    let mut priced = call("r1", Some("s1"), t(10, 1));
    priced.cost_usd = None;
    let mut unknown = call("r2", Some("s2"), t(10, 2));
    unknown.cost_usd = None;
    unknown.model = "no-such-model".to_owned();
    let src = source(vec![priced, unknown], settings());
    let (sessions, stats) = read(&src, window(10, 0)).await;
    assert_eq!((stats.priced_calls, stats.unpriced_calls), (1, 1));
    // gpt-4o-mini: 500 plain at $0.15, 1500 read at $0.075, 100 out at $0.60 per Mtok.
    let want = (500.0 * 0.15 + 1500.0 * 0.075 + 100.0 * 0.6) / 1e6;
    assert!(
        (sessions[0].cost_usd - want).abs() < 1e-8,
        "{}",
        sessions[0].cost_usd
    );
    assert!(sessions[0].cost_computed);
    assert_eq!(sessions[1].cost_usd, 0.0);
    assert!(sessions[1].cost_computed);
}

#[tokio::test]
async fn the_filter_keeps_only_matching_calls() {
    let mut other = call("r2", Some("s2"), t(10, 2));
    other.labels.insert("feature".into(), "batch".into());
    let mut st = settings();
    st.filter.insert("feature".into(), "batch".into());
    let src = source(vec![call("r1", Some("s1"), t(10, 1)), other], st);
    let (sessions, _) = read(&src, window(10, 0)).await;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].session_id, "s2");
}

#[tokio::test]
async fn too_many_open_sessions_fail_the_read_and_say_what_to_change() {
    let mut st = settings();
    st.max_open_sessions = 2;
    let calls = (0..3)
        .map(|i| call(&format!("r{i}"), Some(&format!("s{i}")), t(10, i + 1)))
        .collect();
    let src = source(calls, st);
    let err = src.sessions(window(10, 0), |_| {}).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("source.max_open_sessions"), "{msg}");
    assert!(msg.contains("windows.size"), "{msg}");
}

#[tokio::test]
async fn drill_downs_come_from_kept_calls_else_from_the_sessions_own_span() {
    let calls = vec![
        call("r2", Some("s1"), t(10, 5)),
        call("r1", Some("s1"), t(9, 50)),
        call("r3", Some("s2"), t(10, 6)),
    ];
    let src = source(calls.clone(), settings());
    read(&src, window(10, 0)).await;
    let rows = src.session_requests("s1").await.unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2"], "in time order");
    assert!(src.reader().session_asks.lock().unwrap().is_empty());

    let mut st = settings();
    st.max_kept_rows = 1;
    let src = source(calls, st);
    read(&src, window(10, 0)).await;
    // s1's second call found the budget spent: its calls were let go,
    // which left room for s2's.
    let rows = src.session_requests("s2").await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(src.reader().session_asks.lock().unwrap().is_empty());
    let rows = src.session_requests("s1").await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(*src.reader().session_asks.lock().unwrap(), ["s1"]);
    let err = src.session_requests("nobody").await.unwrap_err();
    assert!(
        err.to_string().contains("not in the last window read"),
        "{err}"
    );
}

#[tokio::test]
async fn sessions_come_out_by_first_call_then_id() {
    let src = source(
        vec![
            call("r1", Some("b"), t(10, 1)),
            call("r2", Some("a"), t(10, 1)),
            call("r3", Some("c"), t(9, 59)),
        ],
        settings(),
    );
    let (sessions, _) = read(&src, window(10, 0)).await;
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
}

/// The instrumentation key of spans from the 1.3b0 OpenAI
/// instrumentation (`new`) or from 2.4b0 (`!new`) calling `model` on
/// OpenAI's endpoint.
fn otel(model: &str, new: bool) -> String {
    let (scope, version) = if new {
        ("opentelemetry.instrumentation.genai.openai", "1.3b0")
    } else {
        ("opentelemetry.instrumentation.openai_v2", "2.4b0")
    };
    serde_json::to_string(&[scope, version, "openai", "api.openai.com", model]).unwrap()
}

/// A call of `instrumentation` that read `cached` tokens, written the way
/// the OpenAI instrumentation writes it: no cache-read count when 0.
fn span_call(
    id: &str,
    session: &str,
    at: DateTime<Utc>,
    instrumentation: &str,
    cached: u64,
) -> CallRow {
    CallRow {
        cached_tokens: cached,
        cache_reported: cached > 0,
        instrumentation: Some(instrumentation.into()),
        cost_usd: None,
        ..call(id, Some(session), at)
    }
}

/// Whether each session handed on for `w` has its cache reads unreported.
async fn unreported(src: &RowSource<Memory>, w: Window) -> BTreeMap<String, bool> {
    let (sessions, _) = read(src, w).await;
    sessions
        .into_iter()
        .map(|s| (s.session_id, s.cache_unreported))
        .collect()
}

#[tokio::test]
async fn a_call_without_a_cache_read_count_read_zero_where_its_instrumentation_reports_them() {
    let new = otel("gpt-4o-mini", true);
    let old = otel("gpt-4o-mini", false);
    let elsewhere = otel("gpt-4o", true);
    let calls = vec![
        // 1.3b0 calling gpt-4o-mini: one conversation reads the cache...
        span_call("a1", "caching", t(10, 1), &new, 0),
        span_call("a2", "caching", t(10, 2), &new, 1500),
        // ...so one that never did, in whichever service, is known to
        // have read 0.
        span_call("b1", "never", t(10, 3), &new, 0),
        span_call("b2", "never", t(10, 4), &new, 0),
        // 2.4b0 never writes the count: unknown, whatever 1.3b0 does.
        span_call("c1", "old", t(10, 5), &old, 0),
        span_call("c2", "old", t(10, 6), &old, 0),
        // The same instrumentation calling a model no call was seen
        // reading says nothing about its reads.
        span_call("d1", "search", t(10, 7), &elsewhere, 0),
        span_call("d2", "search", t(10, 8), &elsewhere, 0),
        // Without an instrumentation (no scope name), unknown.
        CallRow {
            cached_tokens: 0,
            cache_reported: false,
            ..call("e1", Some("unscoped"), t(10, 9))
        },
    ];
    let src = source(calls, settings());
    let got = unreported(&src, window(10, 0)).await;
    let want = BTreeMap::from([
        ("caching".to_owned(), false),
        ("never".to_owned(), false),
        ("old".to_owned(), true),
        ("search".to_owned(), true),
        ("unscoped".to_owned(), true),
    ]);
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_failed_call_does_not_make_a_session_reported_nor_an_instrumentation_a_reporter() {
    let new = otel("gpt-4o-mini", true);
    let mut failed = span_call("a2", "never", t(10, 2), &new, 0);
    failed.status = RequestStatus::Error;
    let calls = vec![span_call("a1", "never", t(10, 1), &new, 0), failed];
    let src = source(calls, settings());
    let got = unreported(&src, window(10, 0)).await;
    assert_eq!(got, BTreeMap::from([("never".to_owned(), true)]));
}

/// Windows of 15 minutes from 10:00 to 13:00, and calls of one
/// instrumentation: a never-caching conversation at 10:05-10:10, another at
/// 12:20-12:25, a third at 12:50; cache reads reported at 10:40 (after the
/// first, in a later window) and 11:20 (within the hour before the second
/// conversation's window, 12:15, but not before the third's, 12:45).
fn learning_calls() -> Vec<CallRow> {
    let new = otel("gpt-4o-mini", true);
    vec![
        span_call("n1", "early", t(10, 5), &new, 0),
        span_call("n2", "early", t(10, 10), &new, 0),
        span_call("r1", "teacher-1", t(10, 40), &new, 900),
        span_call("r2", "teacher-2", t(11, 20), &new, 900),
        span_call("m1", "late", t(12, 20), &new, 0),
        span_call("m2", "late", t(12, 25), &new, 0),
        span_call("z1", "last", t(12, 50), &new, 0),
        span_call("z2", "last", t(12, 55), &new, 0),
    ]
}

#[tokio::test]
async fn an_instrumentation_reports_cache_reads_within_the_window_and_its_lookback() {
    let src = source(learning_calls(), settings());
    // Read whole, the 10:00 window has no report yet: its conversation's
    // reads are unknown, not 0, though a later window will teach otherwise.
    let early = unreported(&src, window(10, 0)).await;
    assert_eq!(early, BTreeMap::from([("early".to_owned(), true)]));
    // The 12:15 window's lookback reaches back to 11:15: the 11:20 report.
    let src = source(learning_calls(), settings());
    let late = unreported(&src, window(12, 15)).await;
    assert_eq!(late.get("late"), Some(&false), "{late:?}");
    // The 12:45 window's lookback starts at 11:45: nothing reported since.
    let src = source(learning_calls(), settings());
    let last = unreported(&src, window(12, 45)).await;
    assert_eq!(last.get("last"), Some(&true), "{last:?}");
}

#[tokio::test]
async fn what_the_carry_learns_is_what_each_window_read_whole_learns() {
    let carried = source(learning_calls(), settings());
    let mut w = window(10, 0);
    while w.start < t(13, 0) {
        let with_carry = unreported(&carried, w).await;
        let whole = unreported(&source(learning_calls(), settings()), w).await;
        assert_eq!(with_carry, whole, "window from {}", w.start);
        w = Window {
            start: w.end,
            end: w.end + TimeDelta::minutes(15),
        };
    }
    // The carry was used: after the first window, only the windows
    // themselves were read.
    let asked = carried.reader().asked.lock().unwrap().clone();
    assert_eq!(asked[0], (t(9, 0), t(10, 15)));
    assert_eq!(asked[1], (t(10, 15), t(10, 30)));
}

#[tokio::test]
async fn a_report_read_later_in_the_same_window_counts_for_the_calls_read_before_it() {
    let new = otel("gpt-4o-mini", true);
    let calls = vec![
        span_call("b1", "never", t(10, 1), &new, 0),
        span_call("b2", "never", t(10, 2), &new, 0),
        span_call("a1", "caching", t(10, 14), &new, 700),
    ];
    let src = source(calls, settings());
    let got = unreported(&src, window(10, 0)).await;
    assert_eq!(got.get("never"), Some(&false), "{got:?}");
}

#[tokio::test]
async fn a_window_prices_every_model_it_names_and_learns_what_no_table_prices() {
    // `house-model` is in no table; its calls report what they cost at
    // 1.0 (input), 0.1 (cache read) and 4.0 (output) per million tokens.
    let house = |id: &str, at, input: u64, cached: u64, output: u64| {
        let uncached = input - cached;
        CallRow {
            model: "house-model".to_owned(),
            input_tokens: input,
            cached_tokens: cached,
            output_tokens: output,
            cost_usd: Some(
                (uncached as f64 * 1.0 + cached as f64 * 0.1 + output as f64 * 4.0) / 1e6,
            ),
            ..call(id, Some("s1"), at)
        }
    };
    let mut calls = vec![
        house("h1", t(10, 1), 3_000, 0, 200),
        house("h2", t(10, 2), 5_000, 2_000, 350),
        house("h3", t(10, 3), 8_000, 4_096, 120),
        house("h4", t(10, 4), 9_500, 6_000, 800),
        // Refused: its prompt counted, nothing billed.
        CallRow {
            status: RequestStatus::Error,
            cost_usd: Some(0.0),
            ..house("h5", t(10, 5), 70_000, 0, 0)
        },
    ];
    calls.push(CallRow {
        model: "openai/gpt-4o-mini".to_owned(),
        ..call("p1", Some("s2"), t(10, 6))
    });
    let src = source(calls, settings());
    assert!(src.window_models().is_empty(), "nothing read yet");
    read(&src, window(10, 0)).await;
    let priced = src.window_models();
    let ids: Vec<&str> = priced.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["openai/gpt-4o-mini", "house-model"]);
    // Under the name its calls use, at the table's price without the prefix.
    assert_eq!(priced[0].input_usd_per_mtok, 0.15);
    let learned = &priced[1];
    assert_eq!(learned.input_usd_per_mtok, 1.0);
    assert_eq!(learned.cached_input_usd_per_mtok, Some(0.1));
    assert_eq!(learned.output_usd_per_mtok, 4.0);
    assert!(learned.supports_prompt_cache);
    // A later window without its calls still offers what was learned.
    read(&src, window(11, 0)).await;
    assert_eq!(src.window_models(), vec![learned.clone()]);
}
