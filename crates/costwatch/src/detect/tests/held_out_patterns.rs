//! Table rows for the patterns traffic the detectors were not tuned on
//! showed (BENCHMARKS.md, "Held-out seeds"), built from the issue's
//! numbers: loops in groups whose call counts spread widely, bounded
//! retries, pauses longer than the cache lives, caching that starts
//! partway, and thin or moving groups on a premium model.

use super::*;

/// The calls of one session at the given offsets (seconds from the start of
/// window 0): `(seconds, model, prompt tokens, cached tokens, failed)`.
pub(super) fn timed(id: &str, calls: &[(i64, &str, u64, u64, bool)]) -> Vec<RequestRecord> {
    calls
        .iter()
        .enumerate()
        .map(|(t, &(at, model, input, cached, failed))| {
            let status = if failed {
                RequestStatus::Error
            } else {
                RequestStatus::Success
            };
            let mut r = request(id, t as u64, model, input, status);
            r.created_at = window(0).start + Duration::seconds(at);
            r.cached_tokens = cached;
            r
        })
        .collect()
}

/// The session the rows `calls` add up to, in `feature`, first judged in
/// the window after `windows` windows of history.
pub(super) fn from_rows(id: &str, feature: &str, calls: &[RequestRecord]) -> SessionRecord {
    let mut by_model: Vec<(&str, u64, u64, u64, u64)> = Vec::new();
    for r in calls {
        match by_model.iter_mut().find(|m| m.0 == r.model) {
            Some(m) => {
                m.1 += 1;
                m.2 += r.input_tokens;
                m.3 += r.cached_tokens;
                m.4 += r.output_tokens;
            }
            None => by_model.push((
                r.model.as_str(),
                1,
                r.input_tokens,
                r.cached_tokens,
                r.output_tokens,
            )),
        }
    }
    let mut s = session(id, feature, 0, &by_model);
    s.errors = calls
        .iter()
        .filter(|r| r.status == RequestStatus::Error)
        .count() as u64;
    s
}

/// Places `s` in the last window of `history` and keeps the span of its
/// rows (`with_history` makes every session instant).
fn last_with_span(
    history: Vec<Vec<SessionRecord>>,
    sessions: Vec<(SessionRecord, i64)>,
) -> Vec<Vec<SessionRecord>> {
    let spans: HashMap<String, i64> = sessions
        .iter()
        .map(|(s, span)| (s.session_id.clone(), *span))
        .collect();
    let mut windows = with_history(history, sessions.into_iter().map(|(s, _)| s).collect());
    if let Some(last) = windows.last_mut() {
        for s in last {
            s.last_request_at = s.first_request_at + Duration::seconds(spans[&s.session_id]);
        }
    }
    windows
}

/// `windows` followed by a window without a call of their sessions: what
/// the last one held for its sessions still going stands there.
fn then_nothing(mut windows: Vec<Vec<SessionRecord>>) -> Vec<Vec<SessionRecord>> {
    windows.push(Vec::new());
    windows
}

/// Healthy history plus a wide `agent` group: tool loops whose call counts
/// spread from 2 to 60 around a median of 7 (a robust spread of ln(calls)
/// near 1), eight sessions a window, none reading the prompt cache.
fn wide_history(windows: i64) -> Vec<Vec<SessionRecord>> {
    let mut h = healthy_history(windows, 6);
    for (w, sessions) in h.iter_mut().enumerate() {
        for (k, calls) in [2u64, 3, 4, 7, 7, 12, 25, 60].into_iter().enumerate() {
            let input: u64 = (0..calls).map(|t| 1_500 + 400 * t).sum();
            sessions.push(session(
                &format!("ag-{w}-{k}"),
                "agent",
                w as i64,
                &[(LUNA, calls, input, 0, 120 * calls)],
            ));
        }
    }
    h
}

/// An agent run: `steps` growing prompts, then `then` (3 s apart), each
/// step answered with a tool call of its own size.
fn agent_rows(id: &str, steps: u64, then: &[u64]) -> Vec<RequestRecord> {
    let mut at = 0;
    let mut calls = Vec::new();
    for t in 0..steps {
        calls.push((at, LUNA, 1_500 + 400 * t, 0, false));
        at += 3;
    }
    for &input in then {
        calls.push((at, LUNA, input, 0, false));
        at += 3;
    }
    let mut rows = timed(id, &calls);
    for (t, r) in rows.iter_mut().enumerate() {
        r.output_tokens = answer_tokens(t as u64);
    }
    rows
}

/// An agent whose tool call is refused, from the adversarial family's
/// blocked-tool sessions: two healthy steps, then a step answered with the
/// tool call (`answer` tokens) and `resends` calls 2 s apart, each carrying
/// the last answer and the refusal (`growth` tokens more than the call
/// before), answered with the same tool call, each reading the whole
/// previous prompt from the cache. `jitter` makes every other growth that
/// many tokens larger.
pub(super) fn refused_rows(
    id: &str,
    resends: u64,
    growth: u64,
    answer: u64,
    jitter: u64,
) -> Vec<RequestRecord> {
    let mut rows = agent_rows(id, 2, &[]);
    let mut at = 6;
    let mut input = 3_095;
    for k in 0..=resends {
        let mut r = request(id, rows.len() as u64, LUNA, input, RequestStatus::Success);
        r.created_at = window(0).start + Duration::seconds(at);
        r.output_tokens = answer;
        r.cached_tokens = rows.last().map_or(0, |p| p.input_tokens / 128 * 128);
        rows.push(r);
        at += 2;
        input += growth + if k % 2 == 0 { jitter } else { 0 };
    }
    rows
}

/// A session and its rows for the table.
fn case_session(
    id: &'static str,
    feature: &str,
    rows: Vec<RequestRecord>,
) -> ((SessionRecord, i64), (&'static str, Vec<RequestRecord>)) {
    let s = from_rows(id, feature, &rows);
    let span = match (rows.first(), rows.last()) {
        (Some(a), Some(b)) => (b.created_at - a.created_at).num_seconds(),
        _ => 0,
    };
    ((s, span), (id, rows))
}

/// Windows of a group `feature` on `model`: `per_window` sessions of three
/// tiny calls each, from window `from` to `to` (exclusive).
fn tiny_sessions(
    feature: &str,
    model: &str,
    from: i64,
    to: i64,
    per_window: usize,
) -> Vec<(i64, SessionRecord)> {
    (from..to)
        .flat_map(|w| {
            (0..per_window).map(move |k| {
                let id = format!("{feature}-{w}-{k}");
                (w, session(&id, feature, w, &[(model, 3, 900, 0, 300)]))
            })
        })
        .collect()
}

/// `windows` windows of healthy history and a `digest` group on Luna (four
/// sessions a window, windows 0 to 7), one premium-only session a window
/// in windows `on_sol`: the group's move to Sol.
fn digest_moving(windows: i64, on_sol: std::ops::Range<i64>) -> Vec<Vec<SessionRecord>> {
    add(
        add(
            healthy_history(windows, 2),
            tiny_sessions("digest", LUNA, 0, 8, 4),
        ),
        tiny_sessions("digest", SOL, on_sol.start, on_sol.end, 1),
    )
}

/// `s` for the life of the test run (the table's names are `&'static str`).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// `history` with `extra` sessions added to their windows.
fn add(
    mut history: Vec<Vec<SessionRecord>>,
    extra: Vec<(i64, SessionRecord)>,
) -> Vec<Vec<SessionRecord>> {
    for (w, s) in extra {
        if let Some(v) = history.get_mut(w as usize) {
            v.push(s);
        }
    }
    history
}

pub(super) fn cases() -> Vec<Case> {
    // Pattern 2: eight to thirteen identical successful calls seconds apart
    // in a group whose call counts spread widely (12 calls against a median
    // of 7: a robust z near 0.5 and a ratio of 1.7, far from 3 and 2.5).
    let (validation, validation_rows) = case_session(
        "validation",
        "agent",
        agent_rows("validation", 2, &[2_300; 10]),
    );
    let cycle_calls: Vec<u64> = (0..10)
        .map(|k| if k % 2 == 0 { 2_300 } else { 2_600 })
        .collect();
    let (cycle, cycle_rows) = case_session("cycle", "agent", agent_rows("cycle", 2, &cycle_calls));
    let (healthy, healthy_rows) =
        case_session("long-run", "agent", agent_rows("long-run", 25, &[]));
    // A context cut to a fixed budget: every step a new request whose
    // prompt lands within 40 tokens of the budget, ten steps in a row.
    let (plateau, plateau_rows) = case_session(
        "plateau",
        "agent",
        agent_rows(
            "plateau",
            2,
            &[
                12_000, 11_987, 11_995, 11_961, 11_972, 11_990, 11_999, 11_983, 11_991, 11_964,
            ],
        ),
    );
    // The same context held at a budget in a group with no history: read
    // as a cold start, with the lenient tolerances. Seven of its prompts in
    // a row are within 32 tokens of the one before, but they go down as
    // often as up (11,961 to 11,999, then 11,983).
    // Both read their system prompt from the cache, so no_cache is quiet.
    let cached = |mut rows: Vec<RequestRecord>| {
        rows.iter_mut()
            .skip(1)
            .for_each(|r| r.cached_tokens = 1_024);
        rows
    };
    let (budgeted, budgeted_rows) = case_session(
        "budgeted",
        "budgeted",
        cached(agent_rows(
            "budgeted",
            2,
            &[
                12_000, 11_987, 11_995, 11_961, 11_972, 11_990, 11_999, 11_983, 11_991, 11_964,
            ],
        )),
    );
    // A loop that appends the error it got to each resend: the prompt grows
    // by 20 tokens a call, eight calls in a row, in a group with no history.
    let appending: Vec<u64> = (0..8).map(|k| 5_000 + 20 * k).collect();
    let (appends, appends_rows) = case_session(
        "appends",
        "budgeted",
        cached(agent_rows("appends", 2, &appending)),
    );
    // A refused tool call (Kilo-Org/kilocode#13772; the adversarial
    // family's blocked-tool sessions): the model asks for the same 56-token
    // call twelve times, each prompt 74 tokens longer than the one before.
    // 15 calls in the wide group: a suspect, so the growth must be exact.
    let (refused, refused_requests) =
        case_session("refused", "agent", refused_rows("refused", 12, 74, 56, 0));
    // A long agent run on a large context: each step adds one short tool
    // result (90 tokens, under 0.5% of the prompt); 400 calls make it an
    // outlier of the wide group, so its rows are read with the lenient
    // tolerances.
    let big_steps: Vec<u64> = (0..400).map(|k| 20_000 + 90 * k).collect();
    let (big, big_rows) = case_session(
        "big-context",
        "agent",
        agent_rows("big-context", 0, &big_steps),
    );
    // The seed window's healthy sessions: six calls of one prompt size,
    // seconds apart, none failed. Too short a run for a suspect.
    let (six, six_rows) = case_session("six", "agent", agent_rows("six", 1, &[1_342; 6]));
    // One call and three retries through an outage, then the client gives
    // up: four failures in a row after three short calls.
    let bounded_calls: Vec<(i64, &str, u64, u64, bool)> = vec![
        (0, LUNA, 300, 0, false),
        (3, LUNA, 400, 0, false),
        (6, LUNA, 500, 0, false),
        (9, LUNA, 450, 0, true),
        (11, LUNA, 450, 0, true),
        (14, LUNA, 450, 0, true),
        (19, LUNA, 450, 0, true),
    ];
    let (bounded, bounded_rows) =
        case_session("bounded", "checkout", timed("bounded", &bounded_calls));

    // no_cache: turns six minutes apart outlive a five-minute cache; four
    // minutes apart they do not.
    let turns = |gap: i64| -> Vec<(i64, &str, u64, u64, bool)> {
        [2_400u64, 2_900, 3_400, 3_900, 4_400]
            .iter()
            .enumerate()
            .map(|(t, &input)| (gap * t as i64, LUNA, input, 0, false))
            .collect()
    };
    let (paused, paused_rows) =
        case_session("paused", "support-agent", timed("paused", &turns(360)));
    let (slow, slow_rows) = case_session("slow", "support-agent", timed("slow", &turns(240)));
    // Caching that starts partway, seen before its first read: one call
    // could have read the cache and did not yet.
    let late_calls = [
        (0, LUNA, 900, 0, false),
        (20, LUNA, 1_100, 0, false),
        (40, LUNA, 1_400, 0, false),
    ];
    let (late, late_rows) = case_session("late", "support-agent", timed("late", &late_calls));

    vec![
        Case {
            name: "a validation loop of ten identical successful calls in a wide group is found",
            rules: None,
            windows: last_with_span(wide_history(4), vec![validation]),
            requests: vec![validation_rows],
            expect: vec![(Kind::RetryLoop, "validation")],
        },
        Case {
            name: "a two-call cycle in a wide group is found",
            rules: None,
            windows: last_with_span(wide_history(4), vec![cycle]),
            requests: vec![cycle_rows],
            expect: vec![(Kind::RetryLoop, "cycle")],
        },
        Case {
            name: "a long healthy agent run in a wide group is read and left alone",
            rules: None,
            windows: last_with_span(wide_history(4), vec![healthy]),
            requests: vec![healthy_rows],
            expect: vec![],
        },
        Case {
            name: "a context cut to a fixed budget (prompts a few tokens apart) is not a loop",
            rules: None,
            windows: last_with_span(wide_history(4), vec![plateau]),
            requests: vec![plateau_rows],
            expect: vec![],
        },
        Case {
            name: "a context held at a budget, read with the lenient tolerances, is not a loop: its prompts shrink as often as they grow",
            rules: None,
            windows: last_with_span(healthy_history(4, 6), vec![budgeted]),
            requests: vec![budgeted_rows],
            expect: vec![],
        },
        Case {
            name: "a loop that appends its error to each resend is found",
            rules: None,
            windows: last_with_span(healthy_history(4, 6), vec![appends]),
            requests: vec![appends_rows],
            expect: vec![(Kind::RetryLoop, "appends")],
        },
        Case {
            name: "a refused tool call asked for again, the prompt growing by the same amount each time, is a loop",
            rules: None,
            windows: last_with_span(wide_history(4), vec![refused.clone()]),
            requests: vec![refused_requests.clone()],
            expect: vec![(Kind::RetryLoop, "refused")],
        },
        Case {
            name: "with steady_growth off, a refused tool call growing the prompt is not a loop",
            rules: Some("retry_loop:\n  - name: r\n    steady_growth: false\n"),
            windows: last_with_span(wide_history(4), vec![refused]),
            requests: vec![refused_requests],
            expect: vec![],
        },
        Case {
            name: "a long agent run growing by a short tool result a step on a large context is not a loop",
            rules: None,
            windows: last_with_span(wide_history(4), vec![big]),
            requests: vec![big_rows],
            expect: vec![],
        },
        Case {
            name: "six calls of one prompt size are too short a run for a suspect",
            rules: None,
            windows: last_with_span(wide_history(4), vec![six]),
            requests: vec![six_rows],
            expect: vec![],
        },
        Case {
            name: "three retries that give up are a bounded retry, not a loop",
            rules: None,
            windows: last_with_span(healthy_history(4, 6), vec![bounded]),
            requests: vec![bounded_rows],
            expect: vec![],
        },
        Case {
            name: "an uncached conversation whose turns outlive the cache is not no_cache",
            rules: None,
            windows: last_with_span(healthy_history(4, 6), vec![paused]),
            requests: vec![paused_rows],
            expect: vec![],
        },
        Case {
            // Still going at its window's end: it stands once the next
            // window shows no call of it.
            name: "an uncached conversation with turns inside the cache lifetime is no_cache",
            rules: None,
            windows: then_nothing(last_with_span(healthy_history(4, 6), vec![slow])),
            requests: vec![slow_rows],
            expect: vec![(Kind::NoCache, "slow")],
        },
        Case {
            name: "a rule's per-model cache lifetime overrides the default",
            rules: Some(
                "no_cache:\n  - name: nc\n    model_cache_lifetime_seconds: {gpt-6-luna: 3600}\n",
            ),
            windows: then_nothing(last_with_span(
                healthy_history(4, 6),
                vec![case_session("paused", "support-agent", timed("paused", &turns(360))).0],
            )),
            requests: vec![("paused", timed("paused", &turns(360)))],
            expect: vec![(Kind::NoCache, "paused")],
        },
        Case {
            // A window that ends mid-session: its calls two minutes before
            // the end, the next one (its first read) after it.
            name: "caching that starts partway, seen before its first read, is not no_cache",
            rules: None,
            windows: {
                let mut w = last_with_span(healthy_history(4, 6), vec![late]);
                let end = window(w.len() as i64 - 1).end;
                for s in w.last_mut().into_iter().flatten() {
                    let span = s.last_request_at - s.first_request_at;
                    s.first_request_at = end - Duration::seconds(120);
                    s.last_request_at = s.first_request_at + span;
                }
                w
            },
            requests: vec![late_rows],
            expect: vec![],
        },
        Case {
            name: "a thin new group whose design is a premium model on short prompts is left alone",
            rules: None,
            windows: add(
                healthy_history(6, 4),
                (3..6)
                    .flat_map(|w| {
                        let mut v = vec![(
                            w,
                            session(
                                &format!("cq-doc-{w}"),
                                "contract-qa",
                                w,
                                &[(SOL, 2, 40_000, 0, 1_500)],
                            ),
                        )];
                        if w > 3 {
                            v.push((
                                w,
                                session(
                                    &format!("cq-short-{w}"),
                                    "contract-qa",
                                    w,
                                    &[(SOL, 3, 900, 0, 300)],
                                ),
                            ));
                        }
                        v
                    })
                    .collect(),
            ),
            requests: vec![],
            expect: vec![],
        },
        Case {
            // One session a window after the move, for six windows: nobody
            // declared it, so it is an incident however many sessions in a
            // row call only the premium model.
            name: "a group whose tiny calls move to a premium model is flagged in every session of the move",
            rules: None,
            windows: digest_moving(14, 8..14),
            requests: vec![],
            expect: (8..14)
                .map(|w| (Kind::OversizedModel, leak(format!("digest-{w}-0"))))
                .collect(),
        },
        Case {
            // The same move, declared by the team: the group's design.
            name: "a move the team declared with design_model is not flagged",
            rules: Some(leak(format!(
                "oversized_model:\n  - name: premium-model-on-tiny-calls\n  - name: digest-on-sol\n    match: {{feature: digest}}\n    design_model: {SOL}\n"
            ))),
            windows: digest_moving(14, 8..14),
            requests: vec![],
            expect: vec![],
        },
        Case {
            // Two premium-only sessions; the group's next sessions are back
            // on the small model: both stand, in their own windows.
            name: "premium-only sessions whose group goes back to its small model are flagged",
            rules: None,
            windows: add(
                digest_moving(14, 8..10),
                tiny_sessions("digest", LUNA, 10, 14, 1),
            ),
            requests: vec![],
            expect: vec![
                (Kind::OversizedModel, "digest-8-0"),
                (Kind::OversizedModel, "digest-9-0"),
            ],
        },
        Case {
            // In one window: a premium-only session, one on the small
            // model, then three premium-only ones: every premium-only one
            // is flagged, wherever it falls.
            name: "every premium-only session of a group with small-model habits is flagged, in any order",
            rules: None,
            windows: add(
                add(
                    healthy_history(9, 2),
                    tiny_sessions("digest", LUNA, 0, 8, 4),
                ),
                [
                    ("digest-early", SOL),
                    ("digest-luna", LUNA),
                    ("digest-a", SOL),
                    ("digest-b", SOL),
                    ("digest-c", SOL),
                ]
                .into_iter()
                .map(|(id, model)| (8, session(id, "digest", 8, &[(model, 3, 900, 0, 300)])))
                .collect(),
            ),
            requests: vec![],
            expect: ["digest-early", "digest-a", "digest-b", "digest-c"]
                .into_iter()
                .map(|id| (Kind::OversizedModel, id))
                .collect(),
        },
        Case {
            // A session of the move that began moments before its window's
            // end and whose last calls fell in the next window: seen in
            // both, flagged.
            name: "a session of a group's move seen again in the next window is flagged",
            rules: None,
            windows: add(
                digest_moving(13, 8..11),
                [
                    (11, window(11).end),
                    (12, window(12).start + Duration::seconds(10)),
                ]
                .into_iter()
                .map(|(w, last)| {
                    let mut s = session("digest-late", "digest", 11, &[(SOL, 3, 900, 0, 300)]);
                    s.first_request_at = window(11).end - Duration::seconds(2);
                    s.last_request_at = last;
                    (w, s)
                })
                .collect(),
            ),
            requests: vec![],
            expect: vec![
                (Kind::OversizedModel, "digest-8-0"),
                (Kind::OversizedModel, "digest-9-0"),
                (Kind::OversizedModel, "digest-10-0"),
                (Kind::OversizedModel, "digest-late"),
            ],
        },
        Case {
            // Tiny premium calls beside the small model are sub-tasks sent
            // to the wrong model, however many sessions in a row do it.
            name: "sessions that also call the small model make no run: every one is flagged",
            rules: None,
            windows: add(
                add(
                    healthy_history(10, 2),
                    tiny_sessions("triage", LUNA, 0, 8, 4),
                ),
                (8..10)
                    .flat_map(|w| {
                        (0..4).map(move |k| {
                            let id = format!("triage-{w}-{k}");
                            let calls = [(LUNA, 2, 200, 0, 30), (SOL, 2, 200, 0, 30)];
                            (w, session(&id, "triage", w, &calls))
                        })
                    })
                    .collect(),
            ),
            requests: vec![],
            expect: (8..10)
                .flat_map(|w| (0..4).map(move |k| (w, k)))
                .map(|(w, k)| (Kind::OversizedModel, leak(format!("triage-{w}-{k}"))))
                .collect(),
        },
    ]
}

/// Runs `windows` with the shipped rules and returns the last window's
/// findings, drill-downs confirmed from `requests`.
fn last_findings(windows: Vec<Vec<SessionRecord>>, requests: &[RequestRecord]) -> Vec<Finding> {
    let det = detector(shipped_rules(), 10_000);
    last_window_findings(&det, windows, requests)
}

#[test]
fn findings_of_thin_groups_say_cold_start() {
    // A new group's first window: a loop of ten identical calls, and a tiny
    // premium session among six on the small model.
    let rows = agent_rows("thin-loop", 1, &[2_000; 10]);
    // The premium session comes before the others: a premium-only session
    // newest in its group would wait for the next ones (a possible move).
    let mut last = vec![
        from_rows("thin-loop", "fresh", &rows),
        session("fresh-sol", "fresh", 0, &[(SOL, 3, 600, 0, 60)]),
    ];
    for k in 0..6 {
        last.push(session(
            &format!("fresh-{k}"),
            "fresh",
            0,
            &[(LUNA, 3, 900, 0, 300)],
        ));
    }
    let found = last_findings(with_history(healthy_history(4, 6), last), &rows);
    let cold = |kind: Kind, id: &str| {
        let f = found
            .iter()
            .find(|f| f.kind == kind && f.session_id == id)
            .unwrap_or_else(|| panic!("no {kind:?} finding for {id}: {found:?}"));
        f.evidence["cold_start"].clone()
    };
    assert_eq!(cold(Kind::RetryLoop, "thin-loop"), true);
    assert_eq!(cold(Kind::OversizedModel, "fresh-sol"), true);

    // The same kinds in a group with a full baseline are not cold.
    let windows = with_history(
        healthy_history(6, 6),
        vec![session(
            "os",
            "triage",
            0,
            &[(SOL, 3, 217, 0, 60), (LUNA, 1, 200, 0, 30)],
        )],
    );
    let found = last_findings(windows, &[]);
    let os = found.iter().find(|f| f.session_id == "os").unwrap();
    assert_eq!(os.evidence["cold_start"], false);
}

#[test]
fn suspects_are_read_most_suspicious_first_within_the_budget() {
    // Three suspects in the wide group when suspects are read at any
    // pace: the validation loop (12 calls), a cycle (12 calls, faster) and
    // a healthy long run (25 calls, a minute apart); and an ordinary
    // session (8 calls, a usual count, 70 s apart) below the suspicion
    // floor. With the shipped pace limit (10 s on average) only the first
    // two are suspects.
    let validation = agent_rows("validation", 2, &[2_300; 10]);
    let ordinary: Vec<(i64, &str, u64, u64, bool)> = (0..8)
        .map(|t| (70 * t, LUNA, 1_500 + 400 * t as u64, 0, false))
        .collect();
    let mut sessions = Vec::new();
    for (id, rows, span) in [
        ("validation", &validation, 36),
        ("slow-run", &agent_rows("slow-run", 25, &[]), 24 * 60),
        ("fast", &agent_rows("fast", 12, &[]), 12),
        ("ordinary", &timed("ordinary", &ordinary), 7 * 70),
    ] {
        sessions.push((from_rows(id, "agent", rows), span));
    }
    let windows = last_with_span(wide_history(4), sessions);
    let det = |budget: usize, floor: &str| {
        detector(
            rules_from(&format!(
                "retry_loop:\n  - name: r\n    drilldown_budget: {budget}\n{floor}"
            )),
            10_000,
        )
    };
    let judge_with = |budget: usize, floor: &str| {
        let d = det(budget, floor);
        let mut baselines = HashMap::new();
        let mut last = None;
        for (i, sessions) in windows.clone().into_iter().enumerate() {
            let mut a = d.begin(window(i as i64), Catalogue::new(models(), [LUNA]));
            sessions.into_iter().for_each(|s| a.observe(s));
            let j = a.judge(std::mem::take(&mut baselines));
            baselines = j.baselines.clone();
            last = Some(j);
        }
        last.unwrap()
    };
    let any_pace = "    suspect_max_mean_gap_seconds: 0\n";
    let judge = |budget: usize| judge_with(budget, any_pace);
    let suspects = |j: &Judgement| -> Vec<String> {
        j.drilldowns
            .iter()
            .filter(|d| d.retry_trigger().and_then(|t| t.suspicion()).is_some())
            .map(|d| d.session.session_id.clone())
            .collect()
    };
    let all = judge(100);
    assert_eq!(all.drilldowns_skipped, 0);
    let read = suspects(&all);
    assert_eq!(read.len(), 3, "{read:?}");
    // The most suspicious first: the slow long run has the most calls but
    // no loop's pace.
    assert_eq!(read[2], "slow-run", "{read:?}");

    let one = judge(1);
    assert_eq!(one.drilldowns_skipped, 2);
    assert_eq!(suspects(&one), vec![read[0].clone()]);
    assert!(
        one.diagnostics
            .iter()
            .any(|d| d.message.contains("2 retry-loop suspects")),
        "{:?}",
        one.diagnostics
    );
    let none = judge(0);
    assert_eq!(none.drilldowns_skipped, 3);
    assert!(suspects(&none).is_empty());

    // Without the floor the ordinary session is read too, last.
    let every = judge_with(
        100,
        &format!("    suspect_min_suspicion: -1000\n{any_pace}"),
    );
    let read_every = suspects(&every);
    assert_eq!(read_every.len(), 4, "{read_every:?}");
    assert_eq!(read_every[3], "ordinary", "{read_every:?}");
    assert!(!read.contains(&"ordinary".to_owned()), "{read:?}");

    // The shipped pace limit: the sessions whose calls wait a minute or more
    // are not read, whatever their suspicion, and are not counted skipped.
    let paced = judge_with(100, "    suspect_min_suspicion: -1000\n");
    let mut read_paced = suspects(&paced);
    read_paced.sort();
    assert_eq!(read_paced, vec!["fast", "validation"], "{read_paced:?}");
    assert_eq!(paced.drilldowns_skipped, 0);
}
