//! `LiteLlmReader` against the simulated LiteLLM proxy over loopback: the
//! same labelled traffic as the reference routes, read as call rows, with
//! LiteLLM's paging, errors and the hazards of a spend log that grows
//! while it is read.

use crate::support::{limits, seed_dataset, start_sim, ts};
use chrono::{DateTime, TimeDelta, Utc};
use costwatch::clock::RecordingSleeper;
use costwatch::secret::Secret;
use costwatch::source::litellm::LiteLlmReader;
use costwatch::source::rows::{CallRow, LabelField, RowReader, RowSettings, SessionKey};
use costwatch::source::{HttpLimits, ReadStats, RequestStatus, SourceError};
use costwatch_sim::litellm::{
    LiteLlmFault, LiteLlmFaultKind, LiteLlmOptions, MissingSessionId, UsageSpelling,
};
use costwatch_sim::{Dataset, SimRequest, SimServer};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

const SPEND_LOGS: &str = "/spend/logs/v2";

/// The seed window, which holds all 84 of its calls.
fn window() -> (DateTime<Utc>, DateTime<Utc>) {
    (ts("2026-10-11T11:00:00Z"), ts("2026-10-11T12:00:00Z"))
}

fn settings(page_limit: u32) -> RowSettings {
    RowSettings {
        session_key: SessionKey::Session,
        labels: BTreeMap::new(),
        filter: BTreeMap::new(),
        page_limit,
        max_pages: 10_000,
        session_lookback: Duration::from_secs(3600),
        max_open_sessions: 100_000,
        max_kept_rows: 100_000,
    }
}

fn reader_with(
    url: &str,
    key: &str,
    settings: &RowSettings,
    limits: HttpLimits,
) -> (LiteLlmReader, RecordingSleeper) {
    let sleeper = RecordingSleeper::default();
    let reader = LiteLlmReader::new(
        url::Url::parse(url).unwrap(),
        &Secret::new(key),
        settings,
        limits,
    )
    .unwrap()
    .with_sleeper(Arc::new(sleeper.clone()));
    (reader, sleeper)
}

fn reader(sim: &SimServer, settings: &RowSettings) -> (LiteLlmReader, RecordingSleeper) {
    reader_with(&sim.litellm_url(), sim.admin_key(), settings, limits())
}

async fn read(
    reader: &LiteLlmReader,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
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

fn hits(sim: &SimServer) -> u64 {
    sim.stats().hits(SPEND_LOGS)
}

/// Every call of the dataset by the id LiteLLM logs it under.
fn by_litellm_id(sim: &SimServer) -> BTreeMap<String, SimRequest> {
    sim.dataset()
        .sessions
        .iter()
        .flat_map(|s| &s.requests)
        .map(|r| {
            let id = sim.litellm().row(r)["request_id"]
                .as_str()
                .unwrap()
                .to_owned();
            (id, r.clone())
        })
        .collect()
}

fn calls_in(sim: &SimServer, start: DateTime<Utc>, end: DateTime<Utc>) -> usize {
    sim.dataset().requests_in(start, end, &[], None).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_a_window_is_read_once_as_the_reference_routes_serve_it() {
    let sim = start_sim(seed_dataset()).await;
    let (reader, sleeper) = reader(&sim, &settings(1000));
    let (result, rows) = read(&reader, window()).await;
    let stats = result.unwrap();
    assert_eq!(
        stats,
        ReadStats {
            pages: 1,
            rows: 84,
            retries: 0,
            ..ReadStats::default()
        }
    );
    assert!(sleeper.delays().is_empty());
    let want = by_litellm_id(&sim);
    assert_eq!(rows.len(), 84);
    let got: BTreeSet<&str> = rows.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(got.len(), 84);
    for row in &rows {
        let r = &want[&row.request_id];
        assert_eq!(row.session_id.as_deref(), Some(r.session_id.as_str()));
        assert_eq!(row.created_at, r.created_at);
        assert_eq!(row.model, r.model);
        assert_eq!(
            (
                row.input_tokens,
                row.cached_tokens,
                row.cache_write_tokens,
                row.output_tokens
            ),
            (
                r.input_tokens,
                r.cached_tokens,
                r.cache_write_tokens,
                r.output_tokens
            )
        );
        assert_eq!(row.cost_usd, Some(r.cost_usd));
        assert_eq!(row.labels, r.labels);
        if r.is_error() {
            assert_eq!(row.status, RequestStatus::Error);
            assert_eq!(row.error_type, r.error_type);
            assert_eq!(row.http_status, Some(r.http_status));
        } else {
            assert_eq!(row.status, RequestStatus::Success);
            assert_eq!((row.error_type.clone(), row.http_status), (None, None));
        }
    }
    // Handed over in startTime order.
    assert!(rows.windows(2).all(|w| w[0].created_at <= w[1].created_at));
    assert_eq!(
        rows.iter()
            .filter(|r| r.status == RequestStatus::Error)
            .count(),
        8
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_ends_on_a_short_page_whatever_the_count() {
    let sim = start_sim(seed_dataset()).await;
    // 84 calls in pages of 12: seven full pages, then an empty one.
    let (reader12, _) = reader(&sim, &settings(12));
    let (result, rows) = read(&reader12, window()).await;
    assert_eq!(result.unwrap().pages, 8);
    assert_eq!(rows.len(), 84);
    assert_eq!(hits(&sim), 8);
    // Pages of 10: eight full, one of four.
    let (reader10, _) = reader(&sim, &settings(10));
    let (result, rows) = read(&reader10, window()).await;
    assert_eq!((result.unwrap().pages, rows.len()), (9, 84));
    // A range with nothing in it is one empty page.
    let empty = (ts("2026-10-11T09:00:00Z"), ts("2026-10-11T10:00:00Z"));
    let (result, rows) = read(&reader10, empty).await;
    assert_eq!((result.unwrap().pages, rows.len()), (1, 0));
    // One call, kept to the millisecond inside the second asked for.
    let one = (
        ts("2026-10-11T11:24:03.120Z"),
        ts("2026-10-11T11:24:03.121Z"),
    );
    let (result, rows) = read(&reader10, one).await;
    assert_eq!((result.unwrap().rows, rows.len()), (1, 1));
    assert_eq!(rows[0].created_at, ts("2026-10-11T11:24:03.120Z"));
    let after = (ts("2026-10-11T11:24:03.121Z"), ts("2026-10-11T11:24:04Z"));
    let (result, rows) = read(&reader10, after).await;
    assert_eq!((result.unwrap().rows, rows.len()), (1, 0));
    // An empty range asks nothing.
    let before = hits(&sim);
    let (result, _) = read(&reader10, (window().0, window().0)).await;
    assert_eq!(result.unwrap(), ReadStats::default());
    assert_eq!(hits(&sim), before);
    // A page limit above LiteLLM's 1000 is asked as 1000 (more is a 422).
    let (big, _) = reader(&sim, &settings(5000));
    let (result, rows) = read(&big, window()).await;
    assert_eq!((result.unwrap().pages, rows.len()), (1, 84));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_cap_fails_a_listing_that_goes_on() {
    let sim = start_sim(seed_dataset()).await;
    let mut s = settings(10);
    s.max_pages = 3;
    let (reader, _) = reader(&sim, &s);
    let (result, rows) = read(&reader, window()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("source.max_pages"), "{err}");
    assert_eq!(rows.len(), 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_names_the_settings_to_change() {
    let sim = start_sim(seed_dataset()).await;
    let (reader, sleeper) = reader_with(
        &sim.litellm_url(),
        "sk-not-the-master-key",
        &settings(100),
        limits(),
    );
    let (result, rows) = read(&reader, window()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, SourceError::Rejected(_)), "{err:?}");
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(text.contains("401"), "{text}");
    assert!(text.contains("COSTWATCH_ADMIN_KEY"), "{text}");
    assert!(text.contains("source.admin_key_file"), "{text}");
    assert!(!text.contains("sk-not-the-master-key"), "{text}");
    assert!(rows.is_empty());
    assert!(sleeper.delays().is_empty());
    assert_eq!(hits(&sim), 1);
    let err = reader.models().await.unwrap_err();
    assert!(err.to_string().contains("COSTWATCH_ADMIN_KEY"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_url_names_api_url_and_the_version() {
    let sim = start_sim(seed_dataset()).await;
    let url = format!("{}/v1", sim.litellm_url());
    let (reader, _) = reader_with(&url, sim.admin_key(), &settings(100), limits());
    let err = read(&reader, window()).await.0.unwrap_err();
    assert!(matches!(err, SourceError::Rejected(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("404"), "{text}");
    assert!(text.contains("source.api_url"), "{text}");
    assert!(text.contains("1.95.0"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_pages_are_retried_then_fail_never_an_empty_success() {
    for kind in [LiteLlmFaultKind::Truncated, LiteLlmFaultKind::Malformed] {
        let sim = start_sim(seed_dataset()).await;
        // Once: read again, whole.
        sim.litellm()
            .faults()
            .push(LiteLlmFault::spend_logs(kind.clone()));
        let (reader, sleeper) = reader(&sim, &settings(1000));
        let (result, rows) = read(&reader, window()).await;
        assert_eq!(result.unwrap().retries, 1, "{kind:?}");
        assert_eq!(rows.len(), 84);
        assert_eq!(sleeper.delays(), [limits().retry_base]);
        // Always: an error after the retries, and nothing handed over.
        sim.litellm()
            .faults()
            .set_persistent(Some(LiteLlmFault::spend_logs(kind.clone())));
        let before = hits(&sim);
        let (result, rows) = read(&reader, window()).await;
        let err = result.unwrap_err();
        assert!(matches!(err, SourceError::Invalid(_)), "{kind:?}: {err:?}");
        assert!(err.to_string().contains("(read 4 times)"), "{err}");
        assert!(rows.is_empty());
        assert_eq!(hits(&sim) - before, u64::from(limits().max_retries) + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_server_errors_are_waited_out() {
    let sim = start_sim(seed_dataset()).await;
    let faults = sim.litellm().faults();
    faults.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::RateLimit {
        retry_after_secs: 7,
    }));
    faults.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::ServerError {
        status: 503,
    }));
    let (reader, sleeper) = reader(&sim, &settings(1000));
    let (result, rows) = read(&reader, window()).await;
    assert_eq!(result.unwrap().retries, 2);
    assert_eq!(rows.len(), 84);
    assert_eq!(
        sleeper.delays(),
        [Duration::from_secs(7), limits().retry_base * 2]
    );
    faults.set_persistent(Some(LiteLlmFault::spend_logs(
        LiteLlmFaultKind::ServerError { status: 500 },
    )));
    let err = read(&reader, window()).await.0.unwrap_err();
    assert!(matches!(err, SourceError::Transient(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_shape_is_one_clear_error_not_zero_rows() {
    let sim = start_sim(seed_dataset()).await;
    let faults = sim.litellm().faults();
    let (reader, sleeper) = reader(&sim, &settings(1000));
    faults.push(LiteLlmFault::spend_logs(
        LiteLlmFaultKind::DropEnvelopeField {
            field: "data".into(),
        },
    ));
    let err = read(&reader, window()).await.0.unwrap_err();
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("page 1: missing field `data`"), "{text}");
    assert!(text.contains("format changed"), "{text}");
    faults.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::DropRowField {
        field: "startTime".into(),
    }));
    let text = read(&reader, window()).await.0.unwrap_err().to_string();
    assert!(
        text.contains("data[0]: missing field `startTime`"),
        "{text}"
    );
    faults.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::SetRowField {
        row: 2,
        path: "prompt_tokens".into(),
        value: serde_json::json!("many"),
    }));
    let text = read(&reader, window()).await.0.unwrap_err().to_string();
    assert!(
        text.contains("data[2].prompt_tokens: invalid type"),
        "{text}"
    );
    // Contract breaks are not retried.
    assert!(sleeper.delays().is_empty());
    assert_eq!(hits(&sim), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impossible_values_fail_the_page_with_their_path() {
    let sim = start_sim(seed_dataset()).await;
    let (reader, _) = reader(&sim, &settings(1000));
    let cases = [
        (
            "prompt_tokens",
            serde_json::json!(-5),
            "data[3].prompt_tokens: -5 is negative",
        ),
        (
            "completion_tokens",
            serde_json::json!(9_000_000_000_u64),
            "data[3].completion_tokens: 9000000000 is above the limit of 4294967295",
        ),
        (
            "metadata.additional_usage_values.cache_read_input_tokens",
            serde_json::json!(1_000_000),
            "data[3].metadata.additional_usage_values.cache_read_input_tokens: 1000000 is above prompt_tokens",
        ),
        (
            "spend",
            serde_json::json!(1.7e308),
            "data[3].spend: 1.7e308 is not between 0 and 1000000",
        ),
        (
            "startTime",
            serde_json::json!("2026-10-11T13:00:00+00:00"),
            "data[3].startTime: 2026-10-11T13:00:00Z is outside the range asked for",
        ),
    ];
    for (path, value, want) in cases {
        sim.litellm()
            .faults()
            .push(LiteLlmFault::spend_logs(LiteLlmFaultKind::SetRowField {
                row: 3,
                path: path.into(),
                value,
            }));
        let (result, rows) = read(&reader, window()).await;
        let err = result.unwrap_err();
        assert!(matches!(err, SourceError::Invalid(_)), "{path}: {err:?}");
        assert!(err.to_string().contains(want), "{path}: {err}");
        assert!(
            rows.is_empty(),
            "{path}: nothing of a failed page is handed over"
        );
    }
}

/// The seed window with prompt-cache reads and writes on every third call,
/// and every fifth call made to a Claude model (whose usage LiteLLM spells
/// apart from OpenAI's).
fn cached_traffic() -> (Dataset, (DateTime<Utc>, DateTime<Utc>)) {
    let seed = seed_dataset();
    let mut models = seed.models.clone();
    let mut claude = models[0].clone();
    claude.id = "claude-sonnet-5.5".into();
    models.push(claude);
    let mut sessions = seed.sessions.clone();
    for (i, r) in sessions
        .iter_mut()
        .flat_map(|s| s.requests.iter_mut())
        .enumerate()
    {
        if i % 3 == 0 {
            r.cached_tokens = r.input_tokens / 2;
            r.cache_write_tokens = r.input_tokens / 10;
        }
        if i % 5 == 0 {
            r.model = "claude-sonnet-5.5".into();
        }
    }
    for s in &mut sessions {
        s.fixed_row = None;
    }
    (Dataset::new(models, sessions, seed.truth.clone()), window())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_tokens_are_read_in_every_spelling_litellm_wrote() {
    let (dataset, range) = cached_traffic();
    let sim = start_sim(dataset).await;
    let want = by_litellm_id(&sim);
    let in_range: Vec<&SimRequest> = want
        .values()
        .filter(|r| range.0 <= r.created_at && r.created_at < range.1)
        .collect();
    assert!(
        in_range
            .iter()
            .any(|r| r.cached_tokens > 0 && r.model.starts_with("claude"))
    );
    assert!(in_range.iter().any(|r| r.cache_write_tokens > 0));
    assert!(
        in_range
            .iter()
            .any(|r| r.cached_tokens > 0 && !r.model.starts_with("claude"))
    );
    let (reader, _) = reader(&sim, &settings(1000));
    for spelling in [
        UsageSpelling::Normalised,
        UsageSpelling::DetailsOnly,
        UsageSpelling::UsageObject,
        UsageSpelling::UsageObjectDetails,
    ] {
        sim.litellm().set_options(LiteLlmOptions {
            usage: spelling,
            ..LiteLlmOptions::default()
        });
        let (result, rows) = read(&reader, range).await;
        result.unwrap();
        assert_eq!(rows.len(), in_range.len(), "{spelling:?}");
        for row in &rows {
            let r = &want[&row.request_id];
            assert_eq!(
                (row.input_tokens, row.cached_tokens, row.cache_write_tokens),
                (r.input_tokens, r.cached_tokens, r.cache_write_tokens),
                "{spelling:?} {}",
                r.request_id
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_sent_without_a_session_id_are_never_joined_to_a_session() {
    let sim = start_sim(seed_dataset()).await;
    let session = sim.dataset().sessions[0].clone();
    let (reader, _) = reader(&sim, &settings(1000));
    // `missing_session_id: omit`: no session at all.
    sim.litellm().set_options(LiteLlmOptions {
        without_session_id: BTreeSet::from([session.session_id.clone()]),
        missing_session_id: MissingSessionId::Omit,
        ..LiteLlmOptions::default()
    });
    let (result, rows) = read(&reader, window()).await;
    result.unwrap();
    let want = by_litellm_id(&sim);
    let (theirs, others): (Vec<&CallRow>, Vec<&CallRow>) = rows
        .iter()
        .partition(|r| want[&r.request_id].session_id == session.session_id);
    assert_eq!(theirs.len(), session.requests.len());
    assert!(theirs.iter().all(|r| r.session_id.is_none()));
    assert!(others.iter().all(|r| r.session_id.is_some()));
    // The default: LiteLLM writes each call's own trace id, so each call
    // stands alone.
    sim.litellm().set_options(LiteLlmOptions {
        without_session_id: BTreeSet::from([session.session_id.clone()]),
        ..LiteLlmOptions::default()
    });
    let (result, rows) = read(&reader, window()).await;
    result.unwrap();
    let alone: BTreeSet<Option<String>> = rows
        .iter()
        .filter(|r| want[&r.request_id].session_id == session.session_id)
        .map(|r| r.session_id.clone())
        .collect();
    assert_eq!(alone.len(), session.requests.len());
    assert!(!alone.contains(&Some(session.session_id.clone())));
    for id in &alone {
        let joined = rows.iter().filter(|r| &r.session_id == id).count();
        assert_eq!(joined, 1, "{id:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_crossing_windows_is_read_in_parts() {
    let sim = start_sim(seed_dataset()).await;
    let session = sim
        .dataset()
        .sessions
        .iter()
        .find(|s| s.requests.len() >= 4)
        .unwrap()
        .clone();
    let cut = session.requests[2].created_at;
    let (reader, _) = reader(&sim, &settings(7));
    let ours = |rows: &[CallRow]| -> Vec<DateTime<Utc>> {
        rows.iter()
            .filter(|r| r.session_id.as_deref() == Some(session.session_id.as_str()))
            .map(|r| r.created_at)
            .collect()
    };
    let (result, earlier) = read(&reader, (window().0, cut)).await;
    result.unwrap();
    let (result, later) = read(&reader, (cut, window().1)).await;
    result.unwrap();
    let times: Vec<DateTime<Utc>> = session.requests.iter().map(|r| r.created_at).collect();
    assert_eq!(ours(&earlier), times[..2]);
    assert_eq!(ours(&later), times[2..]);
    assert_eq!(earlier.len(), calls_in(&sim, window().0, cut));
    assert_eq!(earlier.len() + later.len(), 84);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_behind_the_read_position_are_handed_over_once() {
    let sim = start_sim(seed_dataset()).await;
    let faults = sim.litellm().faults();
    // Three rows are written behind the read position before the second
    // page, five more before the fifth: each later page starts that many
    // rows further back.
    for (page, shift) in [
        (2, 3),
        (3, 3),
        (4, 3),
        (5, 8),
        (6, 8),
        (7, 8),
        (8, 8),
        (9, 8),
        (10, 8),
    ] {
        faults.push(
            LiteLlmFault::spend_logs(LiteLlmFaultKind::RowsWrittenBehind { rows: shift })
                .on_page(page),
        );
    }
    let (reader, _) = reader(&sim, &settings(10));
    let (result, rows) = read(&reader, window()).await;
    let stats = result.unwrap();
    assert_eq!(rows.len(), 84);
    let ids: BTreeSet<&str> = rows.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(ids.len(), 84);
    // Eight more rows came over the wire than were handed over (and the
    // seconds of the two boundaries that pages read again were read whole).
    assert_eq!(stats.rows - 84 - 8, stats.pages - 10);
    assert_eq!(faults.pending(), 0);
}

/// The seed data with the 9th to 14th calls (in time order) moved to the
/// 9th's millisecond: six rows that tie across the boundary of pages of 10.
fn tied_calls() -> (Dataset, Vec<String>) {
    let seed = seed_dataset();
    let (start, end) = window();
    let order: Vec<SimRequest> = seed
        .requests_in(start, end, &[], None)
        .into_iter()
        .cloned()
        .collect();
    let at = order[8].created_at;
    let tied: Vec<String> = order[8..14].iter().map(|r| r.request_id.clone()).collect();
    let mut sessions = seed.sessions.clone();
    for s in &mut sessions {
        s.fixed_row = None;
        for r in &mut s.requests {
            if tied.contains(&r.request_id) {
                r.created_at = at;
            }
        }
    }
    (
        Dataset::new(seed.models.clone(), sessions, seed.truth.clone()),
        tied,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_one_millisecond_across_a_page_boundary_are_all_read() {
    let (dataset, tied) = tied_calls();
    let sim = start_sim(dataset).await;
    let faults = sim.litellm().faults();
    // The second page orders the six tied rows the other way round: it
    // repeats two of the first page's and would skip two.
    faults.push(LiteLlmFault::spend_logs(
        LiteLlmFaultKind::RowsWrittenBehind { rows: 0 },
    ));
    faults.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::TiesReversed));
    let (reader, _) = reader(&sim, &settings(10));
    let (result, rows) = read(&reader, window()).await;
    let stats = result.unwrap();
    assert_eq!(faults.pending(), 0);
    let ids: BTreeSet<&str> = rows.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!((rows.len(), ids.len()), (84, 84));
    let want = by_litellm_id(&sim);
    let read_tied = rows
        .iter()
        .filter(|r| tied.contains(&want[&r.request_id].request_id))
        .count();
    assert_eq!(read_tied, 6);
    // Nine pages of the listing and one of the tied rows' second.
    assert_eq!(stats.pages, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_answered_twice_or_out_of_order_fails_the_read() {
    let sim = start_sim(seed_dataset()).await;
    let faults = sim.litellm().faults();
    let (reader, _) = reader(&sim, &settings(10));
    faults.push(LiteLlmFault::spend_logs(
        LiteLlmFaultKind::RowsWrittenBehind { rows: 0 },
    ));
    faults.push(LiteLlmFault::spend_logs(
        LiteLlmFaultKind::RepeatPreviousPage,
    ));
    let err = read(&reader, window()).await.0.unwrap_err();
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("page: page 2 was asked for, the answer is page 1"),
        "{err}"
    );
    faults.push(LiteLlmFault::spend_logs(LiteLlmFaultKind::IgnoreSortOrder));
    let err = read(&reader, window()).await.0.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("sort_order=asc"), "{text}");
    assert!(text.contains("1.95.0"), "{text}");
}

/// The seed data with `retry-fixed-0d93a1e6c7b2` renamed `retry-loop`, a
/// substring of the session `retry-loop-7f2e81c09ab5`.
fn overlapping_ids() -> Dataset {
    let seed = seed_dataset();
    let mut sessions = seed.sessions.clone();
    for s in &mut sessions {
        if s.session_id == "retry-fixed-0d93a1e6c7b2" {
            s.session_id = "retry-loop".into();
            s.fixed_row = None;
            for r in &mut s.requests {
                r.session_id = "retry-loop".into();
            }
        }
    }
    Dataset::new(seed.models.clone(), sessions, seed.truth.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_calls_keep_exact_matches_of_litellms_substring_filter() {
    let sim = start_sim(overlapping_ids()).await;
    let (lite, _) = reader(&sim, &settings(1000));
    let (start, end) = window();
    let short = lite.session_calls("retry-loop", start, end).await.unwrap();
    let want = sim.dataset().requests_of("retry-loop").unwrap().len();
    assert_eq!(short.len(), want);
    assert!(
        short
            .iter()
            .all(|r| r.session_id.as_deref() == Some("retry-loop"))
    );
    let long = lite
        .session_calls("retry-loop-7f2e81c09ab5", start, end)
        .await
        .unwrap();
    assert_eq!(
        long.len(),
        sim.dataset()
            .requests_of("retry-loop-7f2e81c09ab5")
            .unwrap()
            .len()
    );
    assert_eq!(hits(&sim), 2);
    // Over part of the range only.
    let first = sim.dataset().requests_of("retry-loop").unwrap()[0].created_at;
    let part = lite
        .session_calls("retry-loop", first + TimeDelta::milliseconds(1), end)
        .await
        .unwrap();
    assert_eq!(part.len(), want - 1);
    // Under another session key the range is read and filtered here.
    let mut s = settings(1000);
    s.session_key = SessionKey::Metadata("case".into());
    s.labels = BTreeMap::from([("f".into(), LabelField::Field("model_group".into()))]);
    let (by_case, _) = reader(&sim, &s);
    let rows = by_case
        .session_calls("retry-loop", start, end)
        .await
        .unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|r| r.session_id.as_deref() == Some("retry-loop"))
    );
    assert!(rows.iter().all(|r| r.labels.get("f") == Some(&r.model)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalogue_gives_prices_per_million_and_leaves_unpriced_models_out() {
    let sim = start_sim(seed_dataset()).await;
    let (reader, _) = reader(&sim, &settings(1000));
    let models = reader.models().await.unwrap();
    assert_eq!(models.len(), sim.dataset().models.len());
    for (got, want) in models.iter().zip(&sim.dataset().models) {
        assert_eq!(got.id, want.id);
        assert_eq!(got.input_usd_per_mtok, want.input_usd_per_mtok);
        assert_eq!(got.output_usd_per_mtok, want.output_usd_per_mtok);
        assert_eq!(
            got.cached_input_usd_per_mtok,
            want.cached_input_usd_per_mtok
        );
        assert_eq!(got.cache_write_usd_per_mtok, want.cache_write_usd_per_mtok);
        assert_eq!(got.supports_prompt_cache, want.supports_prompt_cache);
        assert_eq!(got.min_cacheable_prompt_tokens, None);
    }
    sim.litellm()
        .faults()
        .push(LiteLlmFault::model_info(LiteLlmFaultKind::SetRowField {
            row: 0,
            path: "model_info.input_cost_per_token".into(),
            value: serde_json::Value::Null,
        }));
    let models = reader.models().await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["gpt-6.1-sol"]);
    sim.litellm()
        .faults()
        .push(LiteLlmFault::model_info(LiteLlmFaultKind::SetRowField {
            row: 1,
            path: "model_info.output_cost_per_token".into(),
            value: serde_json::json!(1.0),
        }));
    let err = reader.models().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("data[1].model_info.output_cost_per_token"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_the_horizon_are_not_read_yet() {
    let sim = start_sim(seed_dataset()).await;
    let now = ts("2026-10-11T11:28:00Z");
    sim.set_now(Some(now));
    let (reader, _) = reader(&sim, &settings(20));
    let (result, rows) = read(&reader, window()).await;
    result.unwrap();
    assert_eq!(rows.len(), calls_in(&sim, window().0, now));
    assert!(rows.len() < 84);
    assert!(rows.iter().all(|r| r.created_at <= now));
}
