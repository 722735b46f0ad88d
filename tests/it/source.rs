//! `ReferenceSource` against the simulator: pagination, retries and damaged pages.

use crate::support::{gateway, gateway_with, limits, seed_dataset, start_sim, ts};
use costwatch::source::reference::ReferenceSource;
use costwatch::source::{ReadStats, SessionRecord, Source, SourceError, Window};
use costwatch_sim::{Fault, FaultKind, FaultPath, ScenarioParams, SimServer, generate};
use std::time::Duration;

const SESSIONS: &str = "/v1/sessions";

/// The seed fixture's window.
fn seed_window() -> Window {
    Window {
        start: ts("2026-10-11T11:00:00Z"),
        end: ts("2026-10-11T12:00:00Z"),
    }
}

/// Reads `window`, returning the result and every row the sink received.
async fn read(
    source: &ReferenceSource,
    window: Window,
) -> (Result<ReadStats, SourceError>, Vec<SessionRecord>) {
    let mut rows = Vec::new();
    let result = source.sessions(window, |s| rows.push(s)).await;
    (result, rows)
}

fn hits(sim: &SimServer, path: &str) -> u64 {
    sim.stats().hits(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_delivers_every_active_session_once_in_order() {
    let dataset = generate(&ScenarioParams {
        days: 1,
        sessions_per_day: 600,
        ..Default::default()
    });
    let window = Window {
        start: ts("2026-11-02T13:00:00Z"),
        end: ts("2026-11-02T17:00:00Z"),
    };
    let want: Vec<String> = dataset
        .sessions_in(window.start, window.end, &[], None)
        .iter()
        .map(|row| row["session_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(want.len() > 60, "a busy window: {} sessions", want.len());
    let sim = start_sim(dataset).await;
    let (source, sleeper) = gateway(&sim, 3);

    let (result, rows) = read(&source, window).await;
    let stats = result.unwrap();
    let got: Vec<String> = rows.iter().map(|s| s.session_id.clone()).collect();
    assert_eq!(got, want);
    let n = want.len() as u64;
    assert_eq!(
        stats,
        ReadStats {
            pages: n.div_ceil(3),
            rows: n,
            retries: 0,
            ..ReadStats::default()
        }
    );
    assert_eq!(hits(&sim, SESSIONS), n.div_ceil(3));
    assert!(sleeper.delays().is_empty());
    // Every row is a session that was active in the window.
    assert!(
        rows.iter()
            .all(|s| s.first_request_at < window.end && s.last_request_at >= window.start)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_honour_retry_after_up_to_retry_max() {
    let sim = start_sim(seed_dataset()).await;
    let rate_limit = || {
        Fault::on(
            FaultPath::Sessions,
            FaultKind::RateLimit {
                retry_after_secs: 7,
            },
        )
    };

    // Retry-After below retry_max is honoured as given.
    sim.faults().push(rate_limit());
    sim.faults().push(rate_limit());
    let (source, sleeper) = gateway(&sim, 50);
    let (result, rows) = read(&source, seed_window()).await;
    let stats = result.unwrap();
    assert_eq!(rows.len(), 26);
    assert_eq!((stats.pages, stats.rows, stats.retries), (1, 26, 2));
    assert_eq!(
        sleeper.delays(),
        [Duration::from_secs(7), Duration::from_secs(7)]
    );
    assert_eq!(hits(&sim, SESSIONS), 3);

    // Above retry_max it is capped.
    sim.faults().push(rate_limit());
    let capped = costwatch::source::HttpLimits {
        retry_max: Duration::from_secs(3),
        ..limits()
    };
    let (source, sleeper) = gateway_with(&sim, sim.admin_key(), 50, capped);
    let (result, rows) = read(&source, seed_window()).await;
    assert_eq!(result.unwrap().retries, 1);
    assert_eq!(rows.len(), 26);
    assert_eq!(sleeper.delays(), [Duration::from_secs(3)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_back_off_exponentially() {
    let sim = start_sim(seed_dataset()).await;
    for _ in 0..2 {
        sim.faults().push(Fault::on(
            FaultPath::Sessions,
            FaultKind::ServerError { status: 500 },
        ));
    }
    let (source, sleeper) = gateway(&sim, 50);
    let (result, rows) = read(&source, seed_window()).await;
    assert_eq!(result.unwrap().retries, 2);
    assert_eq!(rows.len(), 26);
    let base = limits().retry_base;
    assert_eq!(sleeper.delays(), [base, base * 2]);
    assert_eq!(hits(&sim, SESSIONS), 3);
    assert_eq!(sim.faults().pending(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_the_read_as_transient_after_max_retries() {
    let sim = start_sim(seed_dataset()).await;
    sim.faults().set_persistent(Some(Fault::on(
        FaultPath::Sessions,
        FaultKind::ServerError { status: 503 },
    )));
    let l = limits();
    let (source, sleeper) = gateway(&sim, 50);
    let (result, rows) = read(&source, seed_window()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, SourceError::Transient(_)), "{err:?}");
    assert!(err.is_retryable());
    assert!(err.to_string().contains("503"), "{err}");
    assert!(rows.is_empty());
    assert_eq!(hits(&sim, SESSIONS), u64::from(l.max_retries) + 1);
    let base = l.retry_base;
    assert_eq!(sleeper.delays(), [base, base * 2, base * 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_is_rejected_without_retrying() {
    let sim = start_sim(seed_dataset()).await;
    let (source, sleeper) = gateway_with(&sim, "not-the-key", 50, limits());
    let (result, rows) = read(&source, seed_window()).await;
    let err = result.unwrap_err();
    assert!(matches!(err, SourceError::Rejected(_)), "{err:?}");
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("401"), "{err}");
    assert!(rows.is_empty());
    assert_eq!(hits(&sim, SESSIONS), 1);
    assert!(sleeper.delays().is_empty());
    // The drill-down and the catalogue are refused the same way.
    assert!(matches!(
        source.models().await,
        Err(SourceError::Rejected(_))
    ));
    assert!(matches!(
        source.session_requests("retry-loop-7f2e81c09ab5").await,
        Err(SourceError::Rejected(_))
    ));
}

/// Reads the seed window in pages of 10 with `faults` on the second page
/// (the first fault on its first read, the next on its re-read, ...).
async fn read_with_damaged_second_page(
    faults: &[FaultKind],
) -> (
    Result<ReadStats, SourceError>,
    Vec<SessionRecord>,
    SimServer,
    Vec<Duration>,
) {
    let sim = start_sim(seed_dataset()).await;
    // A zero delay is a fault that changes nothing: it lets page 1 through.
    sim.faults().push(Fault::on(
        FaultPath::Sessions,
        FaultKind::Delay { millis: 0 },
    ));
    for fault in faults {
        sim.faults()
            .push(Fault::on(FaultPath::Sessions, fault.clone()));
    }
    let (source, sleeper) = gateway(&sim, 10);
    let (result, rows) = read(&source, seed_window()).await;
    assert_eq!(sim.faults().pending(), 0);
    (result, rows, sim, sleeper.delays())
}

/// The error of a read that must fail.
fn failed(result: Result<ReadStats, SourceError>, rows: &[SessionRecord]) -> SourceError {
    match result {
        Ok(stats) => panic!(
            "a damaged page was taken as read: {stats:?}, {} rows",
            rows.len()
        ),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_page_is_read_again_and_the_read_completes() {
    let (result, rows, sim, delays) = read_with_damaged_second_page(&[FaultKind::Truncated]).await;
    let stats = result.expect("the page read whole the second time");
    assert_eq!((stats.pages, stats.rows, stats.retries), (3, 26, 1));
    let ids: std::collections::BTreeSet<&str> =
        rows.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids.len(), 26, "every session once, none twice");
    assert_eq!(delays, [limits().retry_base], "after the policy's backoff");
    assert_eq!(hits(&sim, SESSIONS), 4, "page 2 was read twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_page_is_read_again_and_the_read_completes() {
    let (result, rows, sim, _) =
        read_with_damaged_second_page(&[FaultKind::Malformed, FaultKind::Truncated]).await;
    let stats = result.expect("the page read whole the third time");
    assert_eq!((stats.rows, stats.retries), (26, 2));
    assert_eq!(rows.len(), 26);
    assert_eq!(hits(&sim, SESSIONS), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_still_truncated_after_the_retries_fails_the_read() {
    let l = limits();
    let attempts = l.max_retries as usize + 1;
    let (result, rows, sim, delays) =
        read_with_damaged_second_page(&vec![FaultKind::Truncated; attempts]).await;
    let err = failed(result, &rows);
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    assert!(err.is_retryable());
    let message = err.to_string();
    assert!(message.contains("sessions page 2"), "{message}");
    assert!(
        message.contains(&format!("read {attempts} times")),
        "{message}"
    );
    assert_eq!(rows.len(), 10, "only the first page reached the sink");
    let base = l.retry_base;
    assert_eq!(delays, [base, base * 2, base * 4]);
    assert_eq!(
        hits(&sim, SESSIONS),
        1 + attempts as u64,
        "no page after the damaged one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_without_cost_fails_the_read_without_reading_again() {
    let (result, rows, sim, delays) = read_with_damaged_second_page(&[FaultKind::DropField {
        field: "cost_usd".into(),
    }])
    .await;
    let err = failed(result, &rows);
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("cost_usd"), "{message}");
    assert!(message.contains("page 2"), "{message}");
    assert_eq!(rows.len(), 10);
    assert!(
        delays.is_empty(),
        "whole JSON that breaks the contract is final"
    );
    assert_eq!(hits(&sim, SESSIONS), 2, "no page after the damaged one");
}

/// Reads the seed window in pages of 10 while `fault` is persistent on the
/// sessions route. A read that never ends fails the test after a minute
/// instead of hanging it.
async fn read_under(
    fault: FaultKind,
    max_pages: Option<u64>,
) -> (Result<ReadStats, SourceError>, Vec<SessionRecord>, u64) {
    let sim = start_sim(seed_dataset()).await;
    sim.faults()
        .set_persistent(Some(Fault::on(FaultPath::Sessions, fault)));
    let (mut source, _) = gateway(&sim, 10);
    if let Some(n) = max_pages {
        source = source.with_max_pages(n);
    }
    let (result, rows) =
        tokio::time::timeout(Duration::from_secs(60), read(&source, seed_window()))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the listing is still being read after {} pages",
                    hits(&sim, SESSIONS)
                )
            });
    (result, rows, hits(&sim, SESSIONS))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_cycle_fails_the_read_instead_of_paging_forever() {
    // Cursors A, B, A, B, ...: page 3 leads back to page 2.
    let (result, rows, pages) = read_under(FaultKind::CursorCycle { pages: 3 }, None).await;
    let err = failed(result, &rows);
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    assert!(err.is_retryable(), "the window stays due");
    let message = err.to_string();
    assert!(
        message.contains("page 3 leads back to the cursor page 1 gave"),
        "{message}"
    );
    assert_eq!(pages, 3, "no page is read twice");
    assert_eq!(rows.len(), 26);

    // The same cursor twice in a row, as before.
    let (result, rows, pages) = read_under(FaultKind::CursorCycle { pages: 2 }, None).await;
    let message = failed(result, &rows).to_string();
    assert!(
        message.contains("page 2 leads back to the cursor page 1 gave"),
        "{message}"
    );
    assert_eq!(pages, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_never_ends_fails_at_the_page_cap() {
    let (result, rows, pages) = read_under(FaultKind::EndlessPages, Some(5)).await;
    let err = failed(result, &rows);
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("past 5 pages (source.max_pages)"),
        "{message}"
    );
    assert_eq!(pages, 5);
    assert_eq!(
        rows.len(),
        26,
        "every row once: the rest of the pages were empty"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_down_whose_cursors_cycle_fails() {
    let sim = start_sim(seed_dataset()).await;
    sim.faults().set_persistent(Some(Fault::on(
        FaultPath::Requests,
        FaultKind::CursorCycle { pages: 3 },
    )));
    let (source, _) = gateway(&sim, 3);
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        source.session_requests("retry-loop-7f2e81c09ab5"),
    )
    .await
    .expect("the drill-down ends");
    let err = result.unwrap_err();
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    assert!(
        err.to_string().contains("requests: page 3 leads back"),
        "{err}"
    );
    assert_eq!(hits(&sim, "/v1/requests"), 3);
}

/// The message of a read whose second page is damaged by `fault`; nothing
/// of that page reached the sink.
async fn invalid_second_page(fault: FaultKind) -> String {
    let (result, rows, _sim, _) = read_with_damaged_second_page(&[fault]).await;
    let err = failed(result, &rows);
    assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(rows.len(), 10, "only the first page reached the sink");
    err.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_value_fails_the_read_with_its_path() {
    let message = invalid_second_page(FaultKind::SetField {
        row: 7,
        field: "input_tokens".into(),
        value: u64::MAX.into(),
    })
    .await;
    assert!(
        message.ends_with(
            "sessions page 2: data[7].input_tokens: 18446744073709551615 is above the limit of 4294967295"
        ),
        "{message}"
    );
    let message = invalid_second_page(FaultKind::SetField {
        row: 3,
        field: "cost_usd".into(),
        value: 1.7e308.into(),
    })
    .await;
    assert!(
        message
            .ends_with("sessions page 2: data[3].cost_usd: 1.7e308 is not between 0 and 1000000"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_with_a_session_twice_or_a_row_too_many_fails_the_read() {
    let message = invalid_second_page(FaultKind::CopyRow { from: 1, to: 4 }).await;
    assert!(
        message.contains("sessions page 2: data[4].session_id: \""),
        "{message}"
    );
    assert!(
        message.ends_with("\" is listed before, at data[1]"),
        "{message}"
    );
    let message = invalid_second_page(FaultKind::ExtraRow).await;
    assert!(
        message.ends_with("sessions page 2: data: 11 rows, more than the 10 asked for"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_down_pages_through_a_session_in_time_order() {
    let dataset = seed_dataset();
    let id = "retry-loop-7f2e81c09ab5";
    let want: Vec<String> = dataset
        .requests_of(id)
        .unwrap()
        .iter()
        .map(|r| r.request_id.clone())
        .collect();
    assert_eq!(want.len(), 10);
    let sim = start_sim(dataset).await;
    let (source, sleeper) = gateway(&sim, 3);
    let requests = source.session_requests(id).await.unwrap();
    let got: Vec<String> = requests.iter().map(|r| r.request_id.clone()).collect();
    assert_eq!(got, want);
    assert!(requests.iter().all(|r| r.session_id == id));
    assert!(
        requests
            .windows(2)
            .all(|w| w[0].created_at <= w[1].created_at)
    );
    assert_eq!(hits(&sim, "/v1/requests"), 4, "10 requests in pages of 3");
    assert!(sleeper.delays().is_empty());

    // A rate limit in the middle of the drill-down is retried, not a short list.
    sim.faults().push(Fault::on(
        FaultPath::Requests,
        FaultKind::Delay { millis: 0 },
    ));
    sim.faults().push(Fault::on(
        FaultPath::Requests,
        FaultKind::RateLimit {
            retry_after_secs: 2,
        },
    ));
    let again = source.session_requests(id).await.unwrap();
    assert_eq!(again, requests);
    assert_eq!(sleeper.delays(), [Duration::from_secs(2)]);

    // A truncated page is read again: the whole list, not a shorter one.
    sim.faults().push(Fault::on(
        FaultPath::Requests,
        FaultKind::Delay { millis: 0 },
    ));
    sim.faults()
        .push(Fault::on(FaultPath::Requests, FaultKind::Truncated));
    assert_eq!(source.session_requests(id).await.unwrap(), requests);

    // A page that breaks the contract fails the drill-down rather than
    // returning fewer calls.
    sim.faults().push(Fault::on(
        FaultPath::Requests,
        FaultKind::Delay { millis: 0 },
    ));
    sim.faults().push(Fault::on(
        FaultPath::Requests,
        FaultKind::DropField {
            field: "cost_usd".into(),
        },
    ));
    assert!(matches!(
        source.session_requests(id).await,
        Err(SourceError::Invalid(_))
    ));
}
