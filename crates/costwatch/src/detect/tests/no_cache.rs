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

#[test]
fn a_session_averaging_below_the_minimum_is_judged_by_its_calls() {
    // 895, 1,058 and 1,109 tokens average 1,021, below Luna's 1,024; yet
    // the third call could have read the prefix the second wrote.
    let sizes = [895, 1_058, 1_109];
    let rows = prompts("growing", LUNA, &sizes);
    let windows = |rules: Rules| {
        let mut windows = with_history(
            healthy_history(4, 6),
            vec![uncached("growing", "support-agent", LUNA, &sizes)],
        );
        let last = windows.last_mut().unwrap();
        last[0].last_request_at = last[0].first_request_at + Duration::seconds(10);
        let det = detector(rules, 10_000);
        last_window_findings(&det, windows, &rows)
            .into_iter()
            .find(|f| f.kind == Kind::NoCache)
    };
    let f = windows(shipped_rules()).expect("its one cacheable call missed");
    assert_eq!(f.evidence["judged_from"], "requests");
    assert_eq!(f.evidence["cacheable_calls"], 1);
    assert_eq!(f.evidence["cacheable_input_tokens"], 1_109);
    // An average floor, if a rule sets one, still leaves it out.
    let floor = rules_from("no_cache:\n  - name: floor\n    min_avg_input_tokens: 1024\n");
    assert!(windows(floor).is_none());
}

#[test]
fn failed_calls_are_not_missed_reads() {
    // One successful call of 3,177 tokens, then nine failed resends of
    // 4,449: the aggregates average far above twice the minimum, but no
    // successful call came after one that could have written the prefix.
    let mut rows = prompts("resends", LUNA, &[3_177]);
    rows.extend((1..10).map(|t| request("resends", t, LUNA, 4_449, RequestStatus::Error)));
    let resends = |rows: &[RequestRecord]| {
        let mut s = session(
            "resends",
            "support-agent",
            0,
            &[(LUNA, 10, 3_177 + 9 * 4_449, 0, 286)],
        );
        s.errors = rows
            .iter()
            .filter(|r| r.status == RequestStatus::Error)
            .count() as u64;
        s.last_request_at = s.first_request_at + Duration::seconds(50);
        s
    };
    let found = |rows: Vec<RequestRecord>| {
        no_cache_finding(
            with_history(healthy_history(4, 6), vec![resends(&rows)]),
            &rows,
        )
    };
    assert!(found(rows.clone()).is_none());
    // Successful calls after the first, one failure among them: its rows
    // show the misses.
    let mut rows = prompts("resends", LUNA, &[3_177, 4_449, 4_449, 4_449, 4_449]);
    rows[2].status = RequestStatus::Error;
    let f = found(rows).expect("three successful calls missed the cache");
    assert_eq!(f.evidence["judged_from"], "requests");
    assert_eq!(f.evidence["cacheable_calls"], 3);
}

/// The no_cache findings of a window in which `broken` sessions of
/// support-agent never cached (four calls each, enough alone) beside two
/// with a single missed read: `two-calls` (1,205 and 1,278 tokens, too few
/// calls to count alone) and `still-going` (900, 1,100 and 1,200 tokens,
/// its last call 140 s before the window's end).
fn beside_broken_sessions(broken: usize, rules: Rules) -> Vec<Finding> {
    let four = [1_300, 1_350, 1_400, 1_450];
    let mut last: Vec<SessionRecord> = (0..broken)
        .map(|k| uncached(&format!("broken-{k}"), "support-agent", LUNA, &four))
        .collect();
    last.push(uncached(
        "two-calls",
        "support-agent",
        LUNA,
        &[1_205, 1_278],
    ));
    last.push(uncached(
        "still-going",
        "support-agent",
        LUNA,
        &[900, 1_100, 1_200],
    ));
    let mut windows = with_history(healthy_history(4, 6), last);
    let going = windows.last_mut().unwrap().last_mut().unwrap();
    going.last_request_at = going.first_request_at + Duration::seconds(720);
    let mut rows: HashMap<String, Vec<RequestRecord>> = (0..broken)
        .map(|k| {
            let id = format!("broken-{k}");
            let r = prompts(&id, LUNA, &four);
            (id, r)
        })
        .collect();
    rows.insert(
        "two-calls".into(),
        prompts("two-calls", LUNA, &[1_205, 1_278]),
    );
    rows.insert(
        "still-going".into(),
        prompts("still-going", LUNA, &[900, 1_100, 1_200]),
    );
    let mut found: Vec<Finding> = run_findings(rules, windows, &rows)
        .into_iter()
        .filter(|f| f.kind == Kind::NoCache)
        .collect();
    found.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    found
}

fn ids(found: &[Finding]) -> Vec<&str> {
    found.iter().map(|f| f.session_id.as_str()).collect()
}

/// The shipped no_cache rule, leaving sessions of fewer than
/// `min_requests` calls out of corroboration.
fn without_two_call_sessions() -> Rules {
    rules_from("no_cache:\n  - name: nc\n    corroborated_min_requests: 3\n")
}

/// The shipped rules (which count sessions of two calls beside their
/// group's uncached sessions).
fn with_two_call_sessions() -> Rules {
    shipped_rules()
}

#[test]
fn a_single_missed_read_counts_beside_its_groups_uncached_sessions() {
    // Two sessions of the group never cached: the cache is broken for it,
    // and a single miss of a session still going is that fault too. Left
    // out of corroboration, the session of two calls is not judged.
    let found = beside_broken_sessions(2, without_two_call_sessions());
    assert_eq!(ids(&found), ["broken-0", "broken-1", "still-going"]);
    let going = &found[2];
    assert_eq!(going.evidence["corroborated_by"], 2);
    assert_eq!(going.evidence["missed_calls"], 1);
    // The shipped rules count its one missed read too.
    let found = beside_broken_sessions(2, with_two_call_sessions());
    assert_eq!(
        ids(&found),
        ["broken-0", "broken-1", "still-going", "two-calls"]
    );
    let two = &found[3];
    assert_eq!(two.evidence["corroborated_by"], 2);
    assert_eq!(two.evidence["missed_calls"], 1);
    assert_eq!(two.evidence["judged_from"], "requests");
    assert!(
        two.explanation.contains("2 other sessions of"),
        "{}",
        two.explanation
    );
    // Findings that stand alone say nothing of corroboration.
    assert!(found[0].evidence.get("corroborated_by").is_none());

    // One uncached session is not enough (corroborating_sessions: 2), and
    // alone a single miss is a cache's rare miss or late caching.
    let one = beside_broken_sessions(1, with_two_call_sessions());
    assert_eq!(ids(&one), ["broken-0"]);
    assert!(beside_broken_sessions(0, with_two_call_sessions()).is_empty());
    // 0 turns it off, whatever the other setting: a single miss counts
    // only once its session ended.
    let off = rules_from(
        "no_cache:\n  - name: nc\n    corroborating_sessions: 0\n    corroborated_min_requests: 2\n",
    );
    assert_eq!(
        ids(&beside_broken_sessions(3, off)),
        ["broken-0", "broken-1", "broken-2"]
    );
}

#[test]
fn a_session_of_too_few_calls_is_read_only_for_a_corroborated_group() {
    let det = detector(with_two_call_sessions(), 10_000);
    let windows = with_history(
        healthy_history(4, 6),
        vec![uncached(
            "two-calls",
            "support-agent",
            LUNA,
            &[1_205, 1_278],
        )],
    );
    let mut baselines = HashMap::new();
    let mut last = None;
    for (i, sessions) in windows.into_iter().enumerate() {
        let mut a = det.begin(window(i as i64), Catalogue::new(models(), [LUNA]));
        sessions.into_iter().for_each(|s| a.observe(s));
        let j = a.judge(std::mem::take(&mut baselines));
        baselines = j.baselines.clone();
        last = Some(j);
    }
    let j = last.unwrap();
    assert!(j.drilldowns.is_empty(), "read at once: {:?}", j.drilldowns);
    let held: Vec<&str> = j
        .weak_drilldowns
        .iter()
        .map(|d| d.session.session_id.as_str())
        .collect();
    assert_eq!(held, ["two-calls"]);
    // No uncached session of its group in the window: never read.
    assert!(
        Corroboration::of(&j.findings, &j.weak)
            .wanted(j.weak_drilldowns)
            .is_empty()
    );
}

#[test]
fn a_new_group_that_caches_nothing_is_not_flagged_while_its_baseline_is_thin() {
    // The first burst of a new `batch` feature (adversarial family, seed
    // 17, `batch-d3c20ae33636` and two more): fan-outs of independent items
    // whose shared template is below the cache minimum. Their prompts are
    // over it, so each session has calls that look cacheable, and none of
    // the group's three sessions so far read anything.
    let bursts: [&[u64]; 3] = [
        &[1_338, 1_116, 1_241, 1_211],
        &[1_283, 1_200, 1_516, 1_478],
        &[1_139, 1_153, 1_317, 1_273],
    ];
    let judged = |feature: &str, uncached_sessions: usize, cached_peers: usize| {
        let mut last = Vec::new();
        let mut rows = HashMap::new();
        for (k, sizes) in bursts.iter().enumerate().take(uncached_sessions) {
            let id = format!("{feature}-{k}");
            last.push(uncached(&id, feature, LUNA, sizes));
            rows.insert(id.clone(), prompts(&id, LUNA, sizes));
        }
        // Peers that cache: conversations of the same group.
        for k in 0..cached_peers {
            last.push(chat(&format!("{feature}-chat-{k}"), feature, 0, 4));
        }
        let windows = with_history(healthy_history(4, 6), last);
        run_findings(shipped_rules(), windows, &rows)
            .into_iter()
            .filter(|f| f.kind == Kind::NoCache)
            .collect::<Vec<_>>()
    };
    // Three peers (fewer than min_peers), none caching: nothing unusual.
    assert!(judged("batch", 3, 0).is_empty());
    // Beside three peers that cache, one such session stands out; the thin
    // baseline is said.
    let found = judged("fresh", 1, 3);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].evidence["cold_start"], true);
    assert_eq!(found[0].evidence["peers"], 4);
}

/// The no_cache findings of every window when the uncached session `id`
/// of prompts `sizes` is still going at its window's end (its last call
/// 140 s before it), followed by `next` in the next window if any, judged
/// with `rules`.
fn going_then(
    id: &str,
    sizes: &[u64],
    rules: Rules,
    next: Option<Vec<SessionRecord>>,
) -> Vec<Finding> {
    let mut windows = with_history(
        healthy_history(4, 6),
        vec![uncached(id, "support-agent", LUNA, sizes)],
    );
    let going = windows.last_mut().unwrap().last_mut().unwrap();
    going.last_request_at = going.first_request_at + Duration::seconds(720);
    windows.extend(next);
    let mut rows = HashMap::new();
    rows.insert(id.to_owned(), prompts(id, LUNA, sizes));
    run_findings(rules, windows, &rows)
        .into_iter()
        .filter(|f| f.kind == Kind::NoCache)
        .collect()
}

/// [`going_then`] for `still-going` (900, 1,100 and 1,200 tokens: one
/// missed read).
fn still_going_then(rules: Rules, next: Vec<SessionRecord>) -> Vec<Finding> {
    going_then("still-going", &[900, 1_100, 1_200], rules, Some(next))
}

#[test]
fn a_single_missed_read_stands_once_its_session_has_ended() {
    // Not seen again in the next window: it ended right after its own, and
    // its one missed read is final. It stands in the window that showed it.
    let found = still_going_then(shipped_rules(), Vec::new());
    assert_eq!(ids(&found), ["still-going"]);
    let f = &found[0];
    assert_eq!(f.window, window(5));
    assert_eq!(f.evidence["judged_once_ended"], true);
    assert_eq!(f.evidence["missed_calls"], 1);
    assert!(
        f.explanation
            .contains("made no call again by 2026-11-02T01:17:40Z"),
        "{}",
        f.explanation
    );
    // Seen again, caching from its fourth call on: judged afresh, it was
    // caching late.
    let mut later = session(
        "still-going",
        "support-agent",
        4,
        &[(LUNA, 4, 4_500, 1_024, 160)],
    );
    later.last_request_at = window(5).start + Duration::seconds(30);
    assert!(still_going_then(shipped_rules(), vec![later]).is_empty());
    // Seen again, still uncached, and now ended: found in that window, on
    // its own.
    let mut again = uncached("still-going", "support-agent", LUNA, &[900, 1_100, 1_200]);
    again.first_request_at = window(4).start + Duration::seconds(40);
    again.last_request_at = window(5).start + Duration::seconds(10);
    let found = still_going_then(shipped_rules(), vec![again]);
    assert_eq!(ids(&found), ["still-going"]);
    assert_eq!(found[0].window, window(5));
    assert!(found[0].evidence.get("judged_once_ended").is_none());
    // Turned off, a session still going is dropped as before, even when
    // nothing else can corroborate it.
    let off = rules_from("no_cache:\n  - name: nc\n    judge_once_ended: false\n");
    assert!(still_going_then(off, Vec::new()).is_empty());
    let off = rules_from(
        "no_cache:\n  - name: nc\n    judge_once_ended: false\n    corroborating_sessions: 0\n",
    );
    assert!(still_going_then(off, Vec::new()).is_empty());
    // On without corroboration: held all the same.
    let alone = rules_from("no_cache:\n  - name: nc\n    corroborating_sessions: 0\n");
    assert_eq!(ids(&still_going_then(alone, Vec::new())), ["still-going"]);
}

#[test]
fn a_session_of_too_few_calls_is_never_held() {
    // Two calls: even ended, one missed read is not enough alone.
    let mut two = uncached("two-calls", "support-agent", LUNA, &[1_205, 1_278]);
    two.last_request_at = two.first_request_at + Duration::seconds(720);
    let mut windows = with_history(healthy_history(4, 6), vec![two]);
    windows.push(Vec::new());
    let mut rows = HashMap::new();
    rows.insert(
        "two-calls".to_owned(),
        prompts("two-calls", LUNA, &[1_205, 1_278]),
    );
    assert!(
        run_findings(shipped_rules(), windows, &rows)
            .iter()
            .all(|f| f.kind != Kind::NoCache)
    );
}

#[test]
fn a_session_still_going_that_never_cached_waits_one_window() {
    // Four calls, three of them missed reads: enough alone, but still
    // going at the window's end (its last call 140 s before it).
    let sizes = [1_300, 1_350, 1_400, 1_450];
    let judged_with = |rules: Rules, next| going_then("going", &sizes, rules, next);
    let judged = |next: Vec<SessionRecord>| judged_with(shipped_rules(), Some(next));
    // The next window shows no call of it: it stands there.
    let found = judged(Vec::new());
    assert_eq!(ids(&found), ["going"]);
    assert_eq!(found[0].window, window(5));
    assert_eq!(found[0].evidence["judged_once_ended"], true);
    assert_eq!(found[0].evidence["missed_calls"], 3);
    // It started reading the cache at its fifth call: caching late, not
    // flagged.
    let mut cached = session("going", "support-agent", 4, &[(LUNA, 5, 6_950, 1_400, 200)]);
    cached.last_request_at = window(5).start + Duration::seconds(30);
    assert!(judged(vec![cached]).is_empty());
    // Still going and still uncached in the next window: it has waited its
    // window and stands there, as that window judged it.
    let mut more = uncached(
        "going",
        "support-agent",
        LUNA,
        &[1_300, 1_350, 1_400, 1_450, 1_500],
    );
    more.first_request_at = window(4).start + Duration::seconds(40);
    more.last_request_at = window(5).end - Duration::seconds(60);
    let found = judged(vec![more]);
    assert_eq!(ids(&found), ["going"]);
    assert_eq!(found[0].window, window(5));
    assert_eq!(found[0].evidence["requests"], 5);
    assert!(found[0].evidence.get("judged_once_ended").is_none());
    // With judge_once_ended off it stands in its own window, as before.
    let off = rules_from("no_cache:\n  - name: nc\n    judge_once_ended: false\n");
    let found = judged_with(off, None);
    assert_eq!(ids(&found), ["going"]);
    assert_eq!(found[0].window, window(4));
}
