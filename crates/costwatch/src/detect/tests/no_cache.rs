//! What a no_cache finding counts: only the calls that could have read the
//! prompt cache.

use super::*;

/// The no_cache finding of the last window of `windows`, judged with the
/// shipped rules and `requests` for its drill-downs.
fn no_cache_finding(
    windows: Vec<Vec<SessionRecord>>,
    requests: &[RequestRecord],
) -> Option<Finding> {
    let det = detector(shipped_rules(), 10_000);
    last_window_findings(&det, windows, requests)
        .into_iter()
        .find(|f| f.kind == Kind::NoCache)
}

#[test]
fn no_cache_saving_counts_only_the_calls_that_could_read_the_cache() {
    // The first call (1,300 tokens) writes the prefix; the three after it
    // (4,200 tokens) could have read it.
    let sizes = [1_300, 1_350, 1_400, 1_450];
    let windows = with_history(
        healthy_history(4, 6),
        vec![uncached("repeats", "support-agent", LUNA, &sizes)],
    );
    let f = no_cache_finding(windows, &prompts("repeats", LUNA, &sizes)).unwrap();
    assert_eq!(f.evidence["cacheable_calls"], 3);
    assert_eq!(f.evidence["cacheable_input_tokens"], 4_200);
    let share = f.evidence["peer_median_cached_share"].as_f64().unwrap();
    // Luna saves $0.09 per million cached prompt tokens.
    let expected = share * 4_200.0 * 0.09 / 1e6;
    assert!(
        (f.impact_usd - expected).abs() < 1e-7,
        "{} != {expected}",
        f.impact_usd
    );
}

#[test]
fn no_cache_far_above_the_minimum_is_judged_without_request_rows() {
    let windows = with_history(
        healthy_history(4, 6),
        vec![session(
            "nc",
            "support-agent",
            0,
            &[(LUNA, 6, 24_557, 0, 1_290)],
        )],
    );
    let f = no_cache_finding(windows, &[]).unwrap();
    assert_eq!(f.evidence["judged_from"], "aggregates");
    // Every call but one call's worth of prompt.
    assert_eq!(f.evidence["cacheable_input_tokens"], 24_557 - 24_557 / 6);
}

#[test]
fn one_missed_read_is_enough_once_the_session_has_ended() {
    // 900, 1,100 and 1,200 tokens: the first is below the minimum, so only
    // the third call could have read the cache (from the second): one miss.
    let sizes = [900, 1_100, 1_200];
    let rows = prompts("one-miss", LUNA, &sizes);
    // The session starts 40 s into the window; `span` is its first to last
    // call.
    let judged = |span: i64| {
        let mut windows = with_history(
            healthy_history(4, 6),
            vec![uncached("one-miss", "support-agent", LUNA, &sizes)],
        );
        let last = windows.last_mut().unwrap();
        last[0].last_request_at = last[0].first_request_at + Duration::seconds(span);
        no_cache_finding(windows, &rows)
    };
    // Quiet for the rest of the window, longer than the cache lives: the
    // miss is final.
    let f = judged(10).expect("an ended session with one missed read is no_cache");
    assert_eq!(f.evidence["missed_calls"], 1);
    assert_eq!(f.evidence["cacheable_calls"], 1);
    // Its last call 140 s before the window's end: it may be caching late,
    // seen before its first read.
    assert!(judged(720).is_none());
}
