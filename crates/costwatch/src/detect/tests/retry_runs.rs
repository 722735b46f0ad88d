//! Request rows the retry_loop check reads for runs: what the cache
//! reads say of prompts of one size, and prompts that grow by the same
//! amount on every call (a refused tool call asked for again).

use super::held_out_patterns::{from_rows, refused_rows, timed};
use super::*;

/// The calls of `agent-4ac9147498dc` (adversarial family, seed 101), an
/// agent run whose context was cut to a fixed budget: five steps reading
/// the whole previous prompt from the cache, then new steps within 40
/// tokens of 6,940 that share only the system prompt (2,304 tokens read).
/// `(seconds, prompt tokens, cached tokens)`.
const BUDGETED_RUN: [(i64, u64, u64); 14] = [
    (0, 2_685, 0),
    (5, 4_128, 2_560),
    (7, 4_533, 4_096),
    (10, 5_404, 4_480),
    (12, 6_673, 5_376),
    (18, 6_938, 2_304),
    (23, 6_941, 2_304),
    (28, 6_924, 2_304),
    (32, 6_924, 2_304),
    (37, 6_931, 2_304),
    (42, 6_941, 2_304),
    (45, 6_949, 0),
    (47, 6_953, 0),
    (51, 6_937, 2_304),
];

fn luna_rows(id: &str, calls: &[(i64, u64, u64)]) -> Vec<RequestRecord> {
    let calls: Vec<(i64, &str, u64, u64, bool)> = calls
        .iter()
        .map(|&(at, input, cached)| (at, LUNA, input, cached, false))
        .collect();
    timed(id, &calls)
}

#[test]
fn the_cache_tells_a_budgeted_context_from_a_resent_prompt() {
    let rules = shipped_rules();
    let rule = &rules.retry_loop[0];
    let run = |rows: &[RequestRecord]| retry_loop::analyse(rows, rule, false).longest_run;
    // Six steps in a row within 32 tokens of the one before (6,924 to
    // 6,953), each reading a third of the prompt it would repeat: new
    // steps, not resends. The two unread calls say nothing either way.
    let budgeted = luna_rows("budgeted", &BUDGETED_RUN);
    assert!(
        run(&budgeted) < rule.min_identical_run,
        "{}",
        run(&budgeted)
    );
    // The same sizes failing, from a source that reports no cache reads:
    // requests repeated or extended by their errors, a run.
    let failing: Vec<(i64, &str, u64, u64, bool)> = BUDGETED_RUN
        .iter()
        .map(|&(t, i, _)| (t, LUNA, i, 0, true))
        .collect();
    assert!(run(&timed("failing", &failing)) >= rule.min_identical_run);

    // A validation loop in the same session: one step resent eight times,
    // each resend reading the whole prompt back.
    let mut looping = BUDGETED_RUN[..5].to_vec();
    looping.extend((0..8).map(|k| (14 + 2 * k, 6_938, if k == 0 { 2_304 } else { 6_912 })));
    assert_eq!(run(&luna_rows("looping", &looping)), 8);
    // An app that marks only its system prompt for caching: every call,
    // resends too, reads the same 2,304 tokens, so the reads tell nothing
    // and the loop is still found.
    let system_only: Vec<(i64, u64, u64)> = (0..10)
        .map(|k| {
            let input = if k < 2 {
                4_000 + 1_000 * k as u64
            } else {
                6_938
            };
            (3 * k, input, if k == 0 { 0 } else { 2_304 })
        })
        .collect();
    assert_eq!(run(&luna_rows("system-only", &system_only)), 8);
}

#[test]
fn steady_growth_takes_the_same_addition_and_the_same_answer() {
    let rules = shipped_rules();
    let rule = &rules.retry_loop[0];
    let analyse = |rows: &[RequestRecord], exact: bool| retry_loop::analyse(rows, rule, exact);
    // Twelve resends of a refused call, 74 tokens more each time: a run of
    // thirteen calls, for a suspect (exactly) as for an outlier.
    let refused = refused_rows("refused", 12, 74, 56, 0);
    for exact in [true, false] {
        let ev = analyse(&refused, exact);
        assert_eq!((ev.longest_run, ev.run_growth_tokens), (13, 74));
        assert_eq!(ev.run_input_tokens, 3_095);
    }
    // The refusal carries a counter: every other growth is 2 tokens longer.
    // Within the tolerance for an outlier, not for a suspect.
    let counted = refused_rows("counted", 12, 74, 56, 2);
    assert_eq!(analyse(&counted, false).longest_run, 13);
    assert!(analyse(&counted, true).longest_run < rule.suspect_min_identical_run);
    // A fan-out of short calls: prompts growing by 82, 90, 75, 100 and 88
    // tokens, answers of 29 to 51. Within 32 tokens of each other, so a
    // tolerance of 32 would call it a loop; not within 4.
    let sizes = [
        (984, 45),
        (1_066, 32),
        (1_156, 51),
        (1_231, 44),
        (1_331, 29),
        (1_419, 37),
    ];
    let fan: Vec<RequestRecord> = sizes
        .iter()
        .enumerate()
        .map(|(t, &(input, answer))| {
            let mut r = request("fan", t as u64, LUNA, input, RequestStatus::Success);
            r.output_tokens = answer;
            r
        })
        .collect();
    assert!(analyse(&fan, false).longest_run < rule.min_identical_run);
    let loose = rules_from("retry_loop:\n  - name: r\n    growth_tolerance_tokens: 32\n");
    let ev = retry_loop::analyse(&fan, &loose.retry_loop[0], false);
    assert_eq!(ev.longest_run, 6);
    // A healthy agent: the same growth, answers of their own sizes.
    let mut healthy = refused_rows("healthy", 12, 74, 56, 0);
    for (t, r) in healthy.iter_mut().enumerate() {
        r.output_tokens = answer_tokens(t as u64);
    }
    assert!(analyse(&healthy, false).longest_run < rule.min_identical_run);
}

/// A group whose sessions make a median of `median` calls.
fn peers_calling(median: f64) -> GroupStats {
    GroupStats {
        peers: 50,
        log_req_median: median.ln(),
        log_req_sigma: 0.3,
        cache_peers: 0,
        cache_median: None,
        premium_peers: 0,
        premium_tiny_share: 0.0,
        premium_accepted: false,
        premium_since: None,
        usual_model: None,
    }
}

/// `rows` confirmed as an outlier among peers making a median of 8 calls;
/// the session costs what its rows cost.
fn loop_impact(id: &str, rows: &[RequestRecord]) -> f64 {
    let rules = shipped_rules();
    let mut s = from_rows(id, "agent", rows);
    s.cost_usd = rows.iter().map(|r| r.cost_usd).sum();
    let trigger = retry_loop::Trigger::Outlier {
        z: 5.0,
        ratio_to_median: s.requests as f64 / 8.0,
    };
    let f = retry_loop::confirm(
        &s,
        rows,
        trigger,
        "feature=agent",
        &peers_calling(8.0),
        &rules.retry_loop[0],
        window(0),
    )
    .expect("a loop");
    assert!(
        f.impact_usd <= s.cost_usd,
        "{} > {}",
        f.impact_usd,
        s.cost_usd
    );
    f.impact_usd
}

#[test]
fn a_loop_costs_its_last_resends_at_their_own_price() {
    // Two steps, then a refused tool call asked for again 20 times, each
    // resend 1,000 tokens longer: 23 calls where peers make 8. The 15
    // extra calls are the last 15 resends (prompts of 9,095 to 23,095
    // tokens), the dearest of the session, not 15 calls at its average.
    let rows = refused_rows("dear", 20, 1_000, 56, 0);
    assert_eq!(rows.len(), 23);
    let last_15: f64 = rows[8..].iter().map(|r| r.cost_usd).sum();
    let average_15 = 15.0 * rows.iter().map(|r| r.cost_usd).sum::<f64>() / 23.0;
    let impact = loop_impact("dear", &rows);
    assert!((impact - last_15).abs() < 1e-6, "{impact} vs {last_15}");
    assert!(impact > average_15 * 1.3, "{impact} vs {average_15}");

    // Two steps and twelve failures in a row that the gateway did not
    // charge for: the eleven resends cost nothing, and neither do the
    // extra calls beyond them.
    let mut failing = refused_rows("free", 11, 0, 0, 0);
    for r in failing.iter_mut().skip(2) {
        r.status = RequestStatus::Error;
        r.error_type = Some("RateLimitError".into());
        r.cost_usd = 0.0;
    }
    assert_eq!(loop_impact("free", &failing), 0.0);

    // More extra calls than resends: past the resends, the other calls at
    // their own average. Ten steps of 1,000 tokens, then a prompt sent
    // eight times in a row (seven resends of 500 tokens): 18 calls, 10
    // extra, 7 of them resends and 3 at the steps' average.
    let mut calls: Vec<(i64, &str, u64, u64, bool)> =
        (0..10).map(|t| (3 * t, LUNA, 1_000, 0, false)).collect();
    calls.extend((0..8).map(|t| (40 + t, LUNA, 500, 0, false)));
    let mut mixed = timed("mixed", &calls);
    for (t, r) in mixed.iter_mut().enumerate().take(10) {
        r.output_tokens = answer_tokens(t as u64);
        r.input_tokens += t as u64 * 37;
        r.cost_usd = r.input_tokens as f64 * 0.1 / 1e6;
    }
    let steps: f64 = mixed[..11].iter().map(|r| r.cost_usd).sum::<f64>() / 11.0;
    let expected = 7.0 * 500.0 * 0.1 / 1e6 + 3.0 * steps;
    let impact = loop_impact("mixed", &mixed);
    // (impacts are rounded to the hundred-millionth of a dollar)
    assert!((impact - expected).abs() < 1e-8, "{impact} vs {expected}");
}

#[test]
fn two_bounded_retries_back_to_back_are_not_one_loop() {
    let rules = shipped_rules();
    let rule = &rules.retry_loop[0];
    let run = |calls: &[(i64, &str, u64, u64, bool)]| {
        retry_loop::analyse(&timed("pair", calls), rule, false).longest_run
    };
    // A call rate-limited twice and then answered, and the next request, 3
    // tokens longer, retried three times through an outage: seven calls
    // within 32 tokens of each other, but two requests, each retried.
    let pair = [
        (0, LUNA, 492, 0, true),
        (2, LUNA, 492, 0, true),
        (4, LUNA, 492, 0, false),
        (8, LUNA, 495, 0, true),
        (9, LUNA, 495, 0, true),
        (12, LUNA, 495, 0, true),
        (16, LUNA, 495, 0, true),
    ];
    assert_eq!(run(&pair), 4);
    // The same calls, each failed resend extending the last by its error:
    // one request, a loop.
    let mut appending = pair;
    for (k, c) in appending.iter_mut().enumerate() {
        c.2 = 492 + 3 * k as u64;
        c.4 = true;
    }
    assert_eq!(run(&appending), 7);
    // A loop that appends, answered on the way, keeps growing: one run.
    let mut answered = appending;
    answered[2].4 = false;
    answered[4].4 = false;
    assert_eq!(run(&answered), 7);
}
