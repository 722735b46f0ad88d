//! `LangfuseReader` against the simulator's Langfuse observations API over
//! loopback: paging edges, keys, damaged and impossible pages, every usage
//! spelling, session keys, costs, and the drill-down; and its model
//! definitions (`/api/public/models`) as prices.

use crate::support::{limits, ts};
use chrono::{DateTime, Duration, Utc};
use costwatch::clock::RecordingSleeper;
use costwatch::pricing::table::Billed;
use costwatch::secret::Secret;
use costwatch::source::langfuse::LangfuseReader;
use costwatch::source::rows::{CallRow, Published, RowReader, RowSettings, SessionKey};
use costwatch::source::{ReadStats, RequestStatus, SourceError};
use costwatch_sim::langfuse::{UsageSpelling, trace_id_of, user_id_of};
use costwatch_sim::{
    Dataset, FaultKind, ScenarioParams, SimOptions, SimRequest, SimServer, generate,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const OBSERVATIONS: &str = "/api/public/v2/observations";

/// Four busy hours of the generated day, with failures of both kinds.
fn start() -> DateTime<Utc> {
    ts("2026-11-02T11:00:00Z")
}

fn end() -> DateTime<Utc> {
    ts("2026-11-02T15:00:00Z")
}

fn dataset() -> Dataset {
    generate(&ScenarioParams {
        days: 1,
        sessions_per_day: 300,
        ..Default::default()
    })
}

async fn sim() -> SimServer {
    SimServer::start(Arc::new(dataset()), SimOptions::default())
        .await
        .expect("the simulator starts")
}

fn settings(session_key: SessionKey, page_limit: u32) -> RowSettings {
    RowSettings {
        session_key,
        labels: BTreeMap::new(),
        filter: BTreeMap::new(),
        page_limit,
        max_pages: 1000,
        session_lookback: std::time::Duration::from_secs(3600),
        max_open_sessions: 100_000,
        max_kept_rows: 100_000,
    }
}

/// A reader of `sim` with these settings and keys, and its sleeper.
fn reader_with(
    sim: &SimServer,
    settings: &RowSettings,
    public_key: &str,
    secret: &str,
) -> (LangfuseReader, RecordingSleeper) {
    let url = url::Url::parse(&sim.langfuse_url()).unwrap();
    let sleeper = RecordingSleeper::default();
    let reader = LangfuseReader::new(url, public_key, &Secret::new(secret), settings, limits())
        .unwrap()
        .with_sleeper(Arc::new(sleeper.clone()));
    (reader, sleeper)
}

fn reader(sim: &SimServer, settings: &RowSettings) -> (LangfuseReader, RecordingSleeper) {
    let lf = sim.langfuse();
    reader_with(sim, settings, lf.public_key(), lf.secret_key())
}

async fn read(
    reader: &LangfuseReader,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> (Result<ReadStats, SourceError>, Vec<CallRow>) {
    let mut rows = Vec::new();
    let result = reader
        .calls(start, end, |row| {
            rows.push(row);
            Ok(())
        })
        .await;
    (result, rows)
}

/// The calls of `[start, end)` in the dataset, by id.
fn calls_in(
    sim: &SimServer,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> BTreeMap<String, SimRequest> {
    sim.dataset()
        .requests_in(start, end, &[], None)
        .into_iter()
        .map(|r| (r.request_id.clone(), r.clone()))
        .collect()
}

fn hits(sim: &SimServer) -> u64 {
    sim.stats().hits(OBSERVATIONS)
}

/// Asserts that `row` is `want` as Langfuse would have recorded it.
fn assert_mapped(sim: &SimServer, row: &CallRow, want: &SimRequest) {
    let id = &want.request_id;
    assert_eq!(row.created_at, want.created_at, "{id}");
    assert_eq!(row.model, want.model, "{id}");
    let writes = sim
        .langfuse()
        .reports_cache_writes(sim.dataset(), &want.model);
    let write = if writes { want.cache_write_tokens } else { 0 };
    assert_eq!(
        (
            row.input_tokens,
            row.cached_tokens,
            row.cache_write_tokens,
            row.output_tokens
        ),
        (
            want.input_tokens,
            want.cached_tokens,
            write,
            want.output_tokens
        ),
        "{id} on {}",
        want.model
    );
    assert_eq!(row.cost_usd, Some(want.cost_usd), "{id}");
    assert_eq!(row.labels, want.labels, "{id}");
    if want.is_error() {
        assert_eq!(row.status, RequestStatus::Error, "{id}");
        assert_eq!(row.error_type, want.error_type, "{id}");
        let status = (want.error_type.as_deref() != Some("Timeout")).then_some(want.http_status);
        assert_eq!(row.http_status, status, "{id}");
    } else {
        assert_eq!(row.status, RequestStatus::Success, "{id}");
        assert_eq!(
            (row.http_status, row.error_type.as_deref()),
            (None, None),
            "{id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_is_read_whole_once_and_mapped() {
    let sim = sim().await;
    let want = calls_in(&sim, start(), end());
    assert!(want.len() > 100, "a busy window: {}", want.len());
    let (reader, sleeper) = reader(&sim, &settings(SessionKey::Session, 37));
    let (result, rows) = read(&reader, start(), end()).await;
    let stats = result.unwrap();
    let n = want.len() as u64;
    assert_eq!(
        stats,
        ReadStats {
            pages: n.div_ceil(37),
            rows: n,
            retries: 0,
            ..ReadStats::default()
        }
    );
    assert_eq!(hits(&sim), n.div_ceil(37));
    assert!(sleeper.delays().is_empty());
    let ids: BTreeSet<&str> = rows.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(ids.len(), rows.len(), "each call once");
    assert_eq!(ids, want.keys().map(String::as_str).collect());
    for row in &rows {
        let call = &want[&row.request_id];
        assert_eq!(row.session_id.as_deref(), Some(call.session_id.as_str()));
        assert_mapped(&sim, row, call);
    }
    // The window holds failures of both kinds, so their mapping was checked.
    let kinds: BTreeSet<_> = rows.iter().filter_map(|r| r.error_type.clone()).collect();
    assert_eq!(
        kinds,
        ["RateLimitError", "Timeout"].map(String::from).into()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_edges_end_where_the_rows_end() {
    let sim = sim().await;
    let all = calls_in(&sim, start(), end());
    let n = all.len() as u32;
    // An empty range: one page, no rows.
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 10));
    let (result, rows) = read(&r, ts("2026-06-01T00:00:00Z"), ts("2026-06-01T01:00:00Z")).await;
    assert_eq!(
        result.unwrap(),
        ReadStats {
            pages: 1,
            rows: 0,
            retries: 0,
            ..ReadStats::default()
        }
    );
    assert!(rows.is_empty());
    // Exactly a multiple of the page size: no empty page at the end.
    let d = (2..n)
        .find(|d| n.is_multiple_of(*d))
        .expect("the window's call count is not prime");
    let (r, _) = reader(&sim, &settings(SessionKey::Session, d));
    let (result, rows) = read(&r, start(), end()).await;
    assert_eq!(result.unwrap().pages, u64::from(n / d));
    assert_eq!(rows.len() as u32, n);
    // One row: the range of a single millisecond, start included.
    let one = all
        .values()
        .find(|c| {
            all.values()
                .filter(|o| o.created_at == c.created_at)
                .count()
                == 1
        })
        .unwrap();
    let (result, rows) = read(
        &r,
        one.created_at,
        one.created_at + Duration::milliseconds(1),
    )
    .await;
    assert_eq!(result.unwrap().rows, 1);
    assert_eq!(rows[0].request_id, one.request_id);
    // The end is left out.
    let (_, rows) = read(
        &r,
        one.created_at - Duration::milliseconds(1),
        one.created_at,
    )
    .await;
    assert!(rows.iter().all(|row| row.request_id != one.request_id));
    // A page size beyond Langfuse's limit is clamped to it, not refused.
    let before = hits(&sim);
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 50_000));
    let (result, rows) = read(&r, start(), end()).await;
    assert_eq!(result.unwrap().pages, u64::from(n.div_ceil(1000)));
    assert_eq!(rows.len() as u32, n);
    assert_eq!(hits(&sim) - before, u64::from(n.div_ceil(1000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_keys_name_the_settings_and_never_the_secret() {
    let sim = sim().await;
    let (r, sleeper) = reader_with(
        &sim,
        &settings(SessionKey::Session, 50),
        sim.langfuse().public_key(),
        "sk-lf-not-this-one",
    );
    let err = read(&r, start(), end()).await.0.unwrap_err();
    assert!(matches!(err, SourceError::Rejected(_)), "{err}");
    let text = err.to_string();
    for needle in [
        "status 401",
        "source.public_key",
        "COSTWATCH_SOURCE__PUBLIC_KEY",
        "COSTWATCH_ADMIN_KEY",
        "source.admin_key_file",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    assert!(!text.contains("sk-lf-not-this-one"), "{text}");
    assert!(!format!("{r:?}").contains("sk-lf-not-this-one"));
    // Not retried: the keys will not change by themselves.
    assert!(sleeper.delays().is_empty());
    assert_eq!(hits(&sim), 1);
    // The wrong base URL is a 404 that says what source.api_url must be.
    let url = url::Url::parse(&sim.base_url()).unwrap();
    let lf = sim.langfuse();
    let r = LangfuseReader::new(
        url,
        lf.public_key(),
        &Secret::new(lf.secret_key()),
        &settings(SessionKey::Session, 50),
        limits(),
    )
    .unwrap();
    let err = read(&r, start(), end()).await.0.unwrap_err().to_string();
    assert!(
        err.contains("status 404") && err.contains("source.api_url"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_outages_are_retried_and_the_read_completes() {
    let sim = sim().await;
    let want = calls_in(&sim, start(), end()).len();
    let (r, sleeper) = reader(&sim, &settings(SessionKey::Session, 100));
    sim.langfuse().faults().push(FaultKind::RateLimit {
        retry_after_secs: 3,
    });
    sim.langfuse()
        .faults()
        .push(FaultKind::ServerError { status: 503 });
    sim.langfuse().faults().push(FaultKind::Malformed);
    let (result, rows) = read(&r, start(), end()).await;
    let stats = result.unwrap();
    assert_eq!(stats.retries, 3);
    assert_eq!(rows.len(), want);
    assert_eq!(sleeper.delays()[0], std::time::Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_pages_fail_the_read_after_the_retries_never_as_empty() {
    for kind in [FaultKind::Truncated, FaultKind::Malformed] {
        let sim = sim().await;
        let (r, sleeper) = reader(&sim, &settings(SessionKey::Session, 50));
        // Once the first page is in, every later answer is damaged.
        let faults = sim.langfuse().faults().clone();
        let mut delivered = 0;
        let result = r
            .calls(start(), end(), |_| {
                delivered += 1;
                if delivered == 1 {
                    faults.set_persistent(Some(kind.clone()));
                }
                Ok(())
            })
            .await;
        assert_eq!(
            delivered, 50,
            "the first page was handed on, nothing after it"
        );
        let err = result.unwrap_err();
        assert!(matches!(err, SourceError::Invalid(_)), "{kind:?}: {err}");
        let text = err.to_string();
        assert!(text.contains("observations page 2"), "{text}");
        assert!(text.contains("read 4 times"), "{text}");
        assert_eq!(sleeper.delays().len(), 3, "{kind:?}");
        assert_eq!(hits(&sim), 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_fields_and_impossible_values_name_their_path() {
    let cases = [
        (
            FaultKind::DropField {
                field: "startTime".into(),
            },
            "observations page 1: data[0].startTime: missing; not the shape of Langfuse's v2 observations (has the API changed?)",
        ),
        (
            FaultKind::DropField {
                field: "usageDetails".into(),
            },
            "observations page 1: data[0].usageDetails: missing (field group usage)",
        ),
        (
            FaultKind::SetField {
                row: 2,
                field: "usageDetails".into(),
                value: json!({"input": -5, "output": 3}),
            },
            "observations page 1: data[2].usageDetails.input: -5 is negative",
        ),
        (
            FaultKind::SetField {
                row: 1,
                field: "usageDetails".into(),
                value: json!({"input": 1u64 << 40}),
            },
            "observations page 1: data[1].usageDetails.input: 1099511627776 is above the limit of 4294967295",
        ),
        (
            FaultKind::SetField {
                row: 3,
                field: "totalCost".into(),
                value: json!(-1.5),
            },
            "observations page 1: data[3].totalCost: -1.5 is not between 0 and 1000000",
        ),
        (
            FaultKind::CopyRow { from: 3, to: 4 },
            "observations page 1: data[4].id: ",
        ),
        (
            FaultKind::ExtraRow,
            "observations page 1: data: 11 rows, more than the 10 asked for",
        ),
    ];
    for (fault, want) in cases {
        let sim = sim().await;
        let (r, sleeper) = reader(&sim, &settings(SessionKey::Session, 10));
        sim.langfuse().faults().push(fault.clone());
        let (result, rows) = read(&r, start(), end()).await;
        let err = result.unwrap_err();
        assert!(matches!(err, SourceError::Invalid(_)), "{fault:?}: {err}");
        let text = err.to_string();
        assert!(text.contains(want), "{fault:?}: {text}");
        // Nothing of the failed page was handed on, and it was not read again.
        assert!(rows.is_empty(), "{fault:?}");
        assert!(sleeper.delays().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_that_cycle_and_listings_that_never_end_fail_the_read() {
    let sim = sim().await;
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 5));
    sim.langfuse()
        .faults()
        .set_persistent(Some(FaultKind::CursorCycle { pages: 3 }));
    let err = read(&r, start(), end()).await.0.unwrap_err().to_string();
    assert!(
        err.contains("page 3 leads back to the cursor page 1 gave"),
        "{err}"
    );
    assert_eq!(hits(&sim), 3);
    let mut s = settings(SessionKey::Session, 5);
    s.max_pages = 4;
    let (r, _) = reader(&sim, &s);
    sim.langfuse()
        .faults()
        .set_persistent(Some(FaultKind::EndlessPages));
    let quiet = ts("2026-06-01T00:00:00Z");
    let err = read(&r, quiet, quiet + Duration::hours(1))
        .await
        .0
        .unwrap_err()
        .to_string();
    assert!(err.contains("past 4 pages (source.max_pages)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_tokens_are_read_in_every_spelling() {
    let sim = sim().await;
    let want = calls_in(&sim, start(), end());
    // The window reads from the cache and writes to it (on `gpt-*` models,
    // which every fixed spelling below writes in its own keys).
    assert!(
        want.values()
            .any(|c| c.cached_tokens > 0 && c.model.starts_with("gpt"))
    );
    assert!(
        want.values()
            .any(|c| c.cache_write_tokens > 0 && c.model.starts_with("gpt"))
    );
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 1000));
    for spelling in [
        UsageSpelling::ByFamily,
        UsageSpelling::OpenAi,
        UsageSpelling::LangChain,
        UsageSpelling::Otel,
        UsageSpelling::AnthropicRaw,
    ] {
        sim.langfuse().set_usage_spelling(spelling);
        let (result, rows) = read(&r, start(), end()).await;
        result.unwrap();
        assert_eq!(rows.len(), want.len(), "{spelling:?}");
        for row in &rows {
            assert_mapped(&sim, row, &want[&row.request_id]);
        }
        let cached: u64 = rows.iter().map(|r| r.cached_tokens).sum();
        let written: u64 = rows.iter().map(|r| r.cache_write_tokens).sum();
        assert!(cached > 0, "{spelling:?}");
        // `gpt-6-*` bill cache writes, and report them in every spelling.
        assert!(written > 0, "{spelling:?}");
        assert!(spelling.resolve("gpt-6-luna").reports_cache_writes(true));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_session_or_cost_map_to_none() {
    let sim = sim().await;
    let want = calls_in(&sim, start(), end());
    let sessions: BTreeSet<String> = want.values().map(|c| c.session_id.clone()).collect();
    let chosen: Vec<String> = sessions.iter().step_by(3).cloned().collect();
    sim.langfuse()
        .serve_without_session_id(chosen.iter().cloned());
    sim.langfuse()
        .serve_without_cost(chosen.iter().skip(1).cloned());
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 200));
    let (result, rows) = read(&r, start(), end()).await;
    result.unwrap();
    let (mut without_session, mut without_cost) = (0, 0);
    for row in &rows {
        let call = &want[&row.request_id];
        let hidden = chosen.contains(&call.session_id);
        assert_eq!(row.session_id.is_none(), hidden, "{}", row.request_id);
        let unpriced = hidden && chosen[0] != call.session_id;
        assert_eq!(
            row.cost_usd,
            (!unpriced).then_some(call.cost_usd),
            "{}",
            row.request_id
        );
        without_session += usize::from(hidden);
        without_cost += usize::from(unpriced);
    }
    assert!(without_session > without_cost && without_cost > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_crossing_windows_is_read_window_by_window() {
    let sim = sim().await;
    let split = ts("2026-11-02T14:00:00Z");
    let all = calls_in(&sim, start(), end());
    let mut by_session: BTreeMap<&str, Vec<&SimRequest>> = BTreeMap::new();
    for c in all.values() {
        by_session.entry(&c.session_id).or_default().push(c);
    }
    let (session, calls) = by_session
        .iter()
        .find(|(_, calls)| {
            calls.iter().any(|c| c.created_at < split)
                && calls.iter().any(|c| c.created_at >= split)
        })
        .expect("a session that crosses 14:00");
    let earlier: BTreeSet<&str> = calls
        .iter()
        .filter(|c| c.created_at < split)
        .map(|c| c.request_id.as_str())
        .collect();
    // Read at 14:00: the later calls do not exist yet.
    sim.set_now(Some(split));
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 100));
    let (result, rows) = read(&r, start(), split).await;
    result.unwrap();
    let got: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.session_id.as_deref() == Some(*session))
        .map(|r| r.request_id.as_str())
        .collect();
    assert_eq!(got, earlier);
    // Later, the earlier range still returns its earlier calls only, and the
    // next window the rest.
    sim.set_now(None);
    let (_, rows) = read(&r, start(), split).await;
    let again: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.session_id.as_deref() == Some(*session))
        .map(|r| r.request_id.as_str())
        .collect();
    assert_eq!(again, earlier);
    let (_, rows) = read(&r, split, end()).await;
    let later = rows
        .iter()
        .filter(|r| r.session_id.as_deref() == Some(*session))
        .count();
    assert_eq!(later + earlier.len(), calls.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_keys_group_by_the_field_they_name() {
    let sim = sim().await;
    let want = calls_in(&sim, start(), end());
    type Expected = fn(&SimRequest) -> String;
    let cases: [(SessionKey, Expected); 5] = [
        (SessionKey::Session, |c| c.session_id.clone()),
        (SessionKey::User, |c| user_id_of(&c.session_id)),
        (SessionKey::Trace, |c| trace_id_of(&c.session_id)),
        (SessionKey::Metadata("feature".into()), |c| {
            c.labels["feature"].clone()
        }),
        (SessionKey::Tag("feature".into()), |c| {
            c.labels["feature"].clone()
        }),
    ];
    for (key, expected) in cases {
        let (r, _) = reader(&sim, &settings(key.clone(), 500));
        let (result, rows) = read(&r, start(), end()).await;
        result.unwrap();
        assert_eq!(rows.len(), want.len());
        for row in &rows {
            let call = &want[&row.request_id];
            assert_eq!(row.session_id, Some(expected(call)), "{key}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_down_asks_the_server_for_the_session_where_it_can() {
    let sim = sim().await;
    let all = calls_in(&sim, start(), end());
    let session = all.values().next().unwrap().session_id.clone();
    let want: BTreeSet<String> = all
        .values()
        .filter(|c| c.session_id == session)
        .map(|c| c.request_id.clone())
        .collect();
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 20));
    let rows = r.session_calls(&session, start(), end()).await.unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r.request_id.clone())
            .collect::<BTreeSet<_>>(),
        want
    );
    // One page: the server filtered on sessionId.
    assert_eq!(hits(&sim), 1);
    // By a metadata key there is no server filter: the range is read.
    let (r, _) = reader(&sim, &settings(SessionKey::Metadata("feature".into()), 20));
    let feature = all.values().next().unwrap().labels["feature"].clone();
    let rows = r.session_calls(&feature, start(), end()).await.unwrap();
    let n = all
        .values()
        .filter(|c| c.labels["feature"] == feature)
        .count();
    assert_eq!(rows.len(), n);
    assert_eq!(hits(&sim) - 1, (all.len() as u64).div_ceil(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_definitions_price_calls_by_name_date_and_tier() {
    use costwatch_sim::scenario::{GEMINI, LUNA, NOVA, SOL, SONNET};
    let sim = sim().await;
    let (r, _) = reader(&sim, &settings(SessionKey::Session, 200));
    let Published::Rules(rules) = r.published().await.unwrap() else {
        panic!("Langfuse's definitions are rules")
    };
    let now = start();
    for m in &sim.dataset().models {
        let got = rules.price(&m.id, now, None);
        if m.id == NOVA {
            assert_eq!(got, None, "served without a definition");
            continue;
        }
        let got = got.unwrap_or_else(|| panic!("{}", m.id));
        assert_eq!(got.id, m.id);
        assert_eq!(
            (
                got.input_usd_per_mtok,
                got.cached_input_usd_per_mtok,
                got.cache_write_usd_per_mtok,
                got.output_usd_per_mtok,
                got.supports_prompt_cache
            ),
            (
                m.input_usd_per_mtok,
                m.cached_input_usd_per_mtok,
                m.cache_write_usd_per_mtok,
                m.output_usd_per_mtok,
                m.supports_prompt_cache
            ),
            "{}",
            m.id
        );
    }
    // The pattern's provider prefix and case; the definition it replaced
    // before its start; the announced cut from its own.
    let sol =
        |name: &str, at: DateTime<Utc>| rules.price(name, at, None).map(|p| p.input_usd_per_mtok);
    assert_eq!(sol("OpenAI/GPT-6.1-SOL", now), Some(2.5));
    assert_eq!(sol("azure/gpt-6.1-sol", now), None);
    assert_eq!(sol(SOL, ts("2025-06-01T00:00:00Z")), Some(5.0));
    assert_eq!(sol(SOL, ts("2030-01-01T00:00:00Z")), Some(1.25));
    // Anthropic's large context tier, on the whole prompt.
    let big = Billed::of(250_000, 50_000, 0, 1_000);
    let tiered = rules.price(SONNET, now, Some(&big)).unwrap();
    assert_eq!(tiered.input_usd_per_mtok, 6.0);
    let listed: Vec<String> = r
        .models()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(listed, [SONNET, GEMINI, LUNA, SOL], "by name");

    let (refused, _) = reader_with(
        &sim,
        &settings(SessionKey::Session, 200),
        "pk-lf-other",
        "sk",
    );
    let err = refused.published().await.unwrap_err();
    assert!(matches!(err, SourceError::Rejected(_)), "{err}");
}
