//! Tiny premium calls the aggregates hide, built from sessions of the
//! adversarial family: a router whose premium model also takes one big
//! planning call (the model's calls average above tiny), a feature the
//! gateway serves without a per-model breakdown, and a session of that
//! feature that called nothing but the premium model (its one model is
//! all the gateway's `models` list tells). All are judged from their
//! request rows; their look-alikes are not flagged, and sessions the
//! aggregates clear are not read at all.

use super::*;

/// Rows of one session, 5 s apart, priced by the test catalogue:
/// `(model, prompt tokens, completion tokens)`.
fn priced(id: &str, calls: &[(&str, u64, u64)]) -> Vec<RequestRecord> {
    let cat = Catalogue::new(models(), [LUNA]);
    calls
        .iter()
        .enumerate()
        .map(|(t, &(model, input, output))| {
            let mut r = request(id, t as u64, model, input, RequestStatus::Success);
            r.output_tokens = output;
            r.cost_usd = cat.cost(model, input, 0, output).unwrap();
            r
        })
        .collect()
}

/// The session `rows` add up to, in `feature` and window `w`, with a
/// per-model breakdown or without one.
fn total(feature: &str, w: i64, rows: &[RequestRecord], breakdown: bool) -> SessionRecord {
    let mut by_model: Vec<(&str, u64, u64, u64, u64)> = Vec::new();
    for r in rows {
        match by_model.iter_mut().find(|m| m.0 == r.model) {
            Some(m) => {
                m.1 += 1;
                m.2 += r.input_tokens;
                m.4 += r.output_tokens;
            }
            None => by_model.push((r.model.as_str(), 1, r.input_tokens, 0, r.output_tokens)),
        }
    }
    let mut s = session(&rows[0].session_id, feature, w, &by_model);
    if !breakdown {
        s.by_model.clear();
    }
    s
}

/// `fieldops-1d075f1566f3`: four tiny steps on Sol, one on Luna.
fn fieldops_misrouted() -> Vec<RequestRecord> {
    priced(
        "fo-misrouted",
        &[
            (SOL, 346, 131),
            (SOL, 222, 70),
            (SOL, 542, 61),
            (SOL, 558, 123),
            (LUNA, 333, 38),
        ],
    )
}

/// `fieldops-371b18a901d1`: a Sol planning call, four tiny steps on Sol
/// (39% of the cost), one on Luna.
fn fieldops_planning_and_misrouted() -> Vec<RequestRecord> {
    priced(
        "fo-plan-misrouted",
        &[
            (SOL, 2_661, 592),
            (SOL, 265, 30),
            (SOL, 256, 101),
            (SOL, 584, 106),
            (SOL, 465, 186),
            (LUNA, 541, 74),
        ],
    )
}

/// A healthy `fieldops` session: a Sol planning call and Luna steps.
fn fieldops_planning() -> Vec<RequestRecord> {
    priced(
        "fo-plan",
        &[
            (SOL, 2_456, 423),
            (LUNA, 366, 134),
            (LUNA, 590, 105),
            (LUNA, 447, 31),
        ],
    )
}

/// `router-1dcf27266d6b`: a Luna conversation, a Sol planning call on a big
/// prompt, one classification on Sol, extraction on Nova.
fn router_misrouted() -> Vec<RequestRecord> {
    priced(
        "rt-misrouted",
        &[
            (LUNA, 2_751, 273),
            (SOL, 7_995, 458),
            (LUNA, 2_922, 351),
            (SOL, 437, 14),
            (LUNA, 3_338, 239),
            (NOVA, 3_970, 575),
        ],
    )
}

/// A healthy `router` session: the same without the classification on Sol.
fn router_planning(id: &str) -> Vec<RequestRecord> {
    priced(
        id,
        &[
            (LUNA, 2_751, 273),
            (SOL, 7_995, 458),
            (LUNA, 2_922, 351),
            (LUNA, 3_338, 239),
            (NOVA, 3_970, 575),
        ],
    )
}

/// `fieldops-42dfaa002fe2` (adversarial tuning seed 2026): a Sol planning
/// call and three tiny steps, all on Sol. Served without a breakdown, its
/// one model in `models` is the whole session's breakdown.
fn fieldops_sol_only() -> Vec<RequestRecord> {
    priced(
        "fo-sol-only",
        &[
            (SOL, 5_387, 277),
            (SOL, 455, 94),
            (SOL, 268, 136),
            (SOL, 438, 101),
        ],
    )
}

/// Four windows of `fieldops` (no breakdown: Luna steps, every other
/// session with a Sol planning call) and `router` history, then `last`.
/// No `fieldops` session shows its models, as when the gateway's `models`
/// list is missing.
fn history_then(last: Vec<SessionRecord>) -> Vec<Vec<SessionRecord>> {
    history_showing_models(last, false)
}

/// [`history_then`]; with `single_model`, a `fieldops` session that called
/// one model shows it, as the gateway's `models` list does without a
/// breakdown, so the group's usual model (Luna) is known.
fn history_showing_models(last: Vec<SessionRecord>, single_model: bool) -> Vec<Vec<SessionRecord>> {
    let mut windows: Vec<Vec<SessionRecord>> = (0..4)
        .map(|w| {
            (0..6)
                .flat_map(|k| {
                    let steps = priced(
                        &format!("fo-{w}-{k}"),
                        &[(LUNA, 400, 90), (LUNA, 520, 60), (LUNA, 380, 120)],
                    );
                    let mut plan = fieldops_planning();
                    for r in &mut plan {
                        r.session_id = format!("fo-plan-{w}-{k}");
                    }
                    let router = router_planning(&format!("rt-{w}-{k}"));
                    let (fo, shown) = if k % 2 == 0 {
                        (steps, single_model)
                    } else {
                        (plan, false)
                    };
                    [
                        total("fieldops", w, &fo, shown),
                        total("router", w, &router, true),
                    ]
                })
                .collect()
        })
        .collect();
    windows.push(
        last.into_iter()
            .map(|mut s| {
                s.first_request_at = window(4).start + Duration::seconds(40);
                s.last_request_at = s.first_request_at;
                s
            })
            .collect(),
    );
    windows
}

pub(super) fn cases() -> Vec<Case> {
    let misrouted = fieldops_misrouted();
    let plan_misrouted = fieldops_planning_and_misrouted();
    let plan = fieldops_planning();
    let router = router_misrouted();
    let router_ok = router_planning("rt-ok");
    let premium_only = priced(
        "fo-premium-only",
        &[(SOL, 346, 131), (SOL, 222, 70), (SOL, 542, 61)],
    );
    let sol_only = fieldops_sol_only();
    let sol_big = priced("fo-sol-big", &[(SOL, 5_387, 277), (SOL, 3_120, 410)]);
    vec![
        Case {
            name: "tiny premium steps in a session served without a per-model breakdown are found in its rows",
            rules: None,
            windows: history_then(vec![total("fieldops", 4, &misrouted, false)]),
            requests: vec![("fo-misrouted", misrouted.clone())],
            expect: vec![(Kind::OversizedModel, "fo-misrouted")],
        },
        Case {
            name: "tiny premium steps beside a premium planning call, without a breakdown, are found in its rows",
            rules: None,
            windows: history_then(vec![total("fieldops", 4, &plan_misrouted, false)]),
            requests: vec![("fo-plan-misrouted", plan_misrouted.clone())],
            expect: vec![(Kind::OversizedModel, "fo-plan-misrouted")],
        },
        Case {
            name: "a premium planning call beside small-model steps, without a breakdown, is not oversized",
            rules: None,
            windows: history_then(vec![total("fieldops", 4, &plan, false)]),
            requests: vec![("fo-plan", plan.clone())],
            expect: vec![],
        },
        Case {
            // Without a breakdown the group's usual model is unknown, and a
            // group whose design is the premium model looks the same: only
            // a session that also called a model below the premium floor
            // shows the sub-tasks had a smaller home.
            name: "only premium calls in a session without a breakdown are not judged",
            rules: None,
            windows: history_then(vec![total("fieldops", 4, &premium_only, false)]),
            requests: vec![("fo-premium-only", premium_only.clone())],
            expect: vec![],
        },
        Case {
            // The pattern of a group whose habits say premium is
            // not its design: its sessions' models show Luna as usual.
            name: "a premium planning call and tiny steps all on the premium model are found in the rows where the group's usual model is small",
            rules: None,
            windows: history_showing_models(vec![total("fieldops", 4, &sol_only, true)], true),
            requests: vec![("fo-sol-only", sol_only.clone())],
            expect: vec![(Kind::OversizedModel, "fo-sol-only")],
        },
        Case {
            name: "the same premium-only session is not judged where the group's sessions never showed a small model",
            rules: None,
            windows: history_then(vec![total("fieldops", 4, &sol_only, true)]),
            requests: vec![("fo-sol-only", sol_only.clone())],
            expect: vec![],
        },
        Case {
            name: "big calls only on the premium model, in a group whose usual model is small, are not oversized",
            rules: None,
            windows: history_showing_models(vec![total("fieldops", 4, &sol_big, true)], true),
            requests: vec![("fo-sol-big", sol_big.clone())],
            expect: vec![],
        },
        Case {
            name: "one tiny premium call beside a big one on the same model is found in the rows",
            rules: None,
            windows: history_then(vec![total("router", 4, &router, true)]),
            requests: vec![("rt-misrouted", router.clone())],
            expect: vec![(Kind::OversizedModel, "rt-misrouted")],
        },
        Case {
            name: "a router's one big premium planning call is not oversized",
            rules: None,
            windows: history_then(vec![total("router", 4, &router_ok, true)]),
            requests: vec![("rt-ok", router_ok.clone())],
            expect: vec![],
        },
    ]
}

/// The drill-downs the last window of `windows` asks for.
fn drilled(windows: Vec<Vec<SessionRecord>>) -> Vec<String> {
    let det = detector(shipped_rules(), 10_000);
    let mut baselines: HashMap<String, GroupBaseline> = HashMap::new();
    let n = windows.len();
    let mut out = Vec::new();
    for (i, sessions) in windows.into_iter().enumerate() {
        let mut a = det.begin(window(i as i64), Catalogue::new(models(), [LUNA]));
        for s in sessions {
            a.observe(s);
        }
        let history = a
            .groups()
            .into_iter()
            .filter_map(|g| baselines.remove(&g).map(|b| (g, b)))
            .collect();
        let j = a.judge(history);
        if i + 1 == n {
            out = j
                .drilldowns
                .iter()
                .map(|d| d.session.session_id.clone())
                .collect();
        }
        baselines.extend(j.baselines);
    }
    out.sort();
    out
}

#[test]
fn only_sessions_whose_aggregates_could_hide_tiny_premium_calls_are_read() {
    let steps = priced(
        "fo-luna",
        &[(LUNA, 400, 90), (LUNA, 520, 60), (LUNA, 380, 120)],
    );
    let one_big = priced("rt-one", &[(LUNA, 2_751, 273), (SOL, 7_995, 458)]);
    let sol_only = priced("rt-sol-only", &[(SOL, 7_995, 458), (SOL, 437, 14)]);
    let sol_tiny = priced("rt-sol-tiny", &[(SOL, 437, 14), (SOL, 512, 30)]);
    let luna_chat = priced("rt-luna", &[(LUNA, 2_751, 273), (LUNA, 2_922, 351)]);
    let last = vec![
        // Cost no model below the premium floor could reach: read.
        total("fieldops", 4, &fieldops_misrouted(), false),
        total("fieldops", 4, &fieldops_planning(), false),
        // Luna prices only: nothing to read.
        total("fieldops", 4, &steps, false),
        // Two Sol calls averaging above tiny: read.
        total("router", 4, &router_misrouted(), true),
        // One big Sol call cannot hide a tiny one: not read.
        total("router", 4, &one_big, true),
        // Only the premium model, two calls averaging above tiny, in a
        // group whose usual model (Luna) is below the floor: read.
        total("router", 4, &sol_only, true),
        // Only the premium model, tiny on average: the aggregates judge
        // it, nothing to read.
        total("router", 4, &sol_tiny, true),
        // Only Luna, above tiny: no premium model to hide anything.
        total("router", 4, &luna_chat, true),
    ];
    assert_eq!(
        drilled(history_then(last)),
        ["fo-misrouted", "fo-plan", "rt-misrouted", "rt-sol-only"]
    );
}

#[test]
fn a_finding_from_rows_says_so_and_prices_only_the_tiny_calls() {
    let rows = router_misrouted();
    let windows = history_then(vec![total("router", 4, &rows, true)]);
    let det = detector(shipped_rules(), 10_000);
    let found = last_window_findings(&det, windows, &rows);
    let f = found
        .iter()
        .find(|f| f.kind == Kind::OversizedModel)
        .unwrap_or_else(|| panic!("no finding: {found:?}"));
    assert_eq!(f.evidence["from_request_rows"], true);
    assert_eq!(f.evidence["usual_model"], LUNA);
    let calls = f.evidence["premium_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["requests"], 1);
    assert_eq!(calls[0]["input_tokens"], 437);
    // The tiny call on Sol against the same call on Luna.
    let cat = Catalogue::new(models(), [LUNA]);
    let sol = cat.cost(SOL, 437, 0, 14).unwrap();
    let luna = cat.cost(LUNA, 437, 0, 14).unwrap();
    assert!(
        (f.impact_usd - (sol - luna)).abs() < 1e-6,
        "{}",
        f.impact_usd
    );
}

#[test]
fn a_group_whose_design_is_a_premium_model_fills_no_candidate_list() {
    // Ten sessions of big prompts on Sol (a premium model by design, as a
    // document-review feature; the second call reads the first's prompt
    // from the cache) in one window, at most two candidates: only the
    // first, before the group showed its model, is kept, so the window
    // need not be read twice.
    let det = detector(shipped_rules(), 2);
    let mut a = det.begin(window(0), Catalogue::new(models(), [LUNA]));
    for k in 0..10 {
        let rows = priced(
            &format!("review-{k}"),
            &[(SOL, 6_000, 400), (SOL, 7_500, 300)],
        );
        let mut s = total("review", 0, &rows, true);
        s.cached_tokens = 6_000;
        s.by_model[0].cached_tokens = 6_000;
        a.observe(s);
    }
    assert!(!a.overflowed());
    // In a group whose sessions so far called Luna most, the same shape
    // may hide a tiny step beside a big one: kept.
    let mut a = det.begin(window(0), Catalogue::new(models(), [LUNA]));
    for k in 0..3 {
        let rows = priced(&format!("fo-{k}"), &[(LUNA, 400, 90), (LUNA, 520, 60)]);
        a.observe(total("fieldops", 0, &rows, true));
    }
    for k in 0..3 {
        let rows = priced(&format!("fo-sol-{k}"), &[(SOL, 6_000, 400), (SOL, 450, 90)]);
        a.observe(total("fieldops", 0, &rows, true));
    }
    assert!(a.overflowed());
}
