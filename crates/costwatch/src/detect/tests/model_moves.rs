//! A group's tiny calls moving to a premium model over days of 15-minute
//! windows: an incident for as long as it lasts, until a person declares
//! it (`design_model`) or it has gone on without a pause for
//! `accept_after`.

use super::*;

/// Windows a day.
const DAY: i64 = 96;

/// A `digest` session of window `w`: a Luna step and, when `on_sol`, two
/// tiny calls to Sol from the same sub-step (the rest stays on Luna).
fn digest(w: i64, k: usize, on_sol: bool) -> SessionRecord {
    let id = format!("digest-{w}-{k}");
    if on_sol {
        session(
            &id,
            "digest",
            w,
            &[(LUNA, 2, 1_800, 0, 300), (SOL, 2, 400, 0, 60)],
        )
    } else {
        session(&id, "digest", w, &[(LUNA, 4, 2_200, 0, 360)])
    }
}

/// `before` windows of the group on Luna, then `moved` windows in which
/// every session's sub-step calls Sol; three sessions a window.
fn moving(before: i64, moved: i64) -> Vec<Vec<SessionRecord>> {
    (0..before + moved)
        .map(|w| (0..3).map(|k| digest(w, k, w >= before)).collect())
        .collect()
}

/// The sessions of windows `from..to` (three a window).
fn sessions_of(from: i64, to: i64) -> BTreeSet<(Kind, String)> {
    (from..to)
        .flat_map(|w| (0..3).map(move |k| (Kind::OversizedModel, format!("digest-{w}-{k}"))))
        .collect()
}

#[test]
fn a_move_that_lasts_two_days_is_flagged_in_every_session_of_it() {
    // 8 windows of history, then two days of every session on Sol: the
    // whole move is flagged, nothing before it.
    let found = run(shipped_rules(), moving(8, 2 * DAY), &HashMap::new());
    assert_eq!(found, sessions_of(8, 8 + 2 * DAY));
}

#[test]
fn a_move_that_lasts_two_days_keeps_one_start_in_its_evidence() {
    let findings = run_findings(shipped_rules(), moving(8, 2 * DAY), &HashMap::new());
    let since = "2026-11-02T02:00:30Z";
    let last = findings.last().unwrap();
    assert_eq!(last.evidence["premium_since"], since);
    assert_eq!(last.evidence["usual_model"], LUNA);
    // Said from the move's second window on; its first says it itself.
    let (first, later): (Vec<&Finding>, Vec<&Finding>) =
        findings.iter().partition(|f| f.window == window(8));
    assert_eq!(first.len(), 3);
    assert!(
        first
            .iter()
            .all(|f| f.evidence.get("premium_since").is_none())
    );
    assert!(later.iter().all(|f| f.evidence["premium_since"] == since));
}

#[test]
fn after_accept_after_without_a_pause_the_move_is_the_group_s_normal() {
    let rules = rules_from(
        "oversized_model:\n  - name: premium-model-on-tiny-calls\n    accept_after: 1d\n",
    );
    let found = run(rules, moving(8, 2 * DAY), &HashMap::new());
    // Flagged for the first day of the move, never in its second.
    assert!(sessions_of(8, 8 + DAY - 1).is_subset(&found), "{found:?}");
    assert!(found.is_disjoint(&sessions_of(8 + DAY + 1, 8 + 2 * DAY)));
}

#[test]
fn a_pause_in_the_move_starts_its_stretch_again() {
    // Accepted after a day, but a window of the group's sessions back on
    // Luna halfway through the first day: the stretch starts again after
    // it, so the move is still flagged a day after it began.
    let rules = rules_from(
        "oversized_model:\n  - name: premium-model-on-tiny-calls\n    accept_after: 1d\n",
    );
    let mut windows = moving(8, 2 * DAY);
    let pause = 8 + DAY / 2;
    windows[pause as usize] = (0..3).map(|k| digest(pause, k, false)).collect();
    let found = run(rules, windows, &HashMap::new());
    let late = sessions_of(8 + DAY + 4, pause + DAY);
    assert!(late.is_subset(&found), "{:?}", late.difference(&found));
    assert!(found.is_disjoint(&sessions_of(pause + DAY + 1, 8 + 2 * DAY)));
}

#[test]
fn a_design_model_still_flags_a_move_to_a_dearer_model() {
    // The group is declared to be on Sol; its tiny calls moving to Opus
    // (6x Sol) are still an incident, priced against Sol.
    let rules = rules_from(&format!(
        "oversized_model:\n  - name: premium-model-on-tiny-calls\n  - name: digest-on-sol\n    match: {{feature: digest}}\n    design_model: {SOL}\n"
    ));
    let windows: Vec<Vec<SessionRecord>> = (0..12)
        .map(|w| {
            (0..3)
                .map(|k| {
                    let id = format!("digest-{w}-{k}");
                    let sub = if w >= 8 { OPUS } else { SOL };
                    session(
                        &id,
                        "digest",
                        w,
                        &[(LUNA, 2, 1_800, 0, 300), (sub, 2, 400, 0, 60)],
                    )
                })
                .collect()
        })
        .collect();
    let findings = run_findings(rules, windows, &HashMap::new());
    let found: BTreeSet<(Kind, String)> = findings
        .iter()
        .map(|f| (f.kind, f.session_id.clone()))
        .collect();
    assert_eq!(found, sessions_of(8, 12));
    assert!(findings.iter().all(|f| f.rule == "digest-on-sol"
        && f.evidence["usual_model"] == SOL
        && f.evidence["design_model"] == SOL));
}

#[test]
fn a_group_premium_from_its_first_session_is_still_judged_as_before() {
    // A new feature built on Sol for its tiny calls: nothing to move from,
    // its history takes its sessions in, and it is its design.
    let windows: Vec<Vec<SessionRecord>> = (0..12)
        .map(|w| (0..3).map(|k| digest(w, k, true)).collect())
        .collect();
    assert_eq!(
        run(shipped_rules(), windows, &HashMap::new()),
        BTreeSet::new()
    );
}
