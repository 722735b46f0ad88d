//! One window holding more of a group's sessions than its baseline keeps
//! (a busy gateway's first hour, with no history yet): the sessions held
//! apart while the window streams by (those that cached nothing, those
//! whose tiny calls went to a premium model) are let back in where they
//! arrived, so the baseline still says what most of the group does.

use super::*;

/// Sessions of one window: `n` of them, every fifth one made by `odd`
/// (given its index), the rest by `usual`; and the odd ones' ids.
fn one_in_five(
    n: usize,
    usual: impl Fn(usize) -> SessionRecord,
    odd: impl Fn(usize) -> SessionRecord,
) -> (Vec<SessionRecord>, BTreeSet<String>) {
    let mut odd_ids = BTreeSet::new();
    let sessions = (0..n)
        .map(|k| {
            if k % 5 == 4 {
                let s = odd(k);
                odd_ids.insert(s.session_id.clone());
                s
            } else {
                usual(k)
            }
        })
        .collect();
    (sessions, odd_ids)
}

/// Asserts that the sessions of `kind` in `found` are exactly `expected`,
/// saying how many were missed and how many flagged wrongly.
fn assert_found(found: &BTreeSet<(Kind, String)>, kind: Kind, expected: &BTreeSet<String>) {
    let of_kind: BTreeSet<String> = found
        .iter()
        .filter(|(k, _)| *k == kind)
        .map(|(_, s)| s.clone())
        .collect();
    let missed = expected.difference(&of_kind).count();
    let wrong: Vec<&String> = of_kind.difference(expected).take(5).collect();
    assert!(
        missed == 0 && wrong.is_empty(),
        "{kind:?}: {missed} of {} missed; flagged wrongly (first 5): {wrong:?}",
        expected.len()
    );
}

#[test]
fn uncached_sessions_are_found_in_a_first_window_bigger_than_the_baseline() {
    // 3,000 support-agent sessions, 600 of them never reading the cache:
    // more uncached sessions than the baseline's 512, all in one window.
    let (sessions, uncached_ids) = one_in_five(
        3_000,
        |k| chat(&format!("sa-{k}"), "support-agent", 0, 5),
        |k| {
            uncached(
                &format!("nc-{k}"),
                "support-agent",
                LUNA,
                &[2_000, 2_600, 3_200, 3_800, 4_400],
            )
        },
    );
    let found = run(shipped_rules(), vec![sessions], &HashMap::new());
    assert_found(&found, Kind::NoCache, &uncached_ids);
}

#[test]
fn tiny_premium_calls_are_found_in_a_first_window_bigger_than_the_baseline() {
    // 3,000 digest sessions on Luna, 600 of them sending a sub-step's tiny
    // calls to Sol: the group's design is Luna, whatever order they came in.
    let (sessions, premium_ids) = one_in_five(
        3_000,
        |k| session(&format!("dg-{k}"), "digest", 0, &[(LUNA, 4, 2_200, 0, 360)]),
        |k| {
            session(
                &format!("sol-{k}"),
                "digest",
                0,
                &[(LUNA, 2, 1_800, 0, 300), (SOL, 2, 400, 0, 60)],
            )
        },
    );
    let found = run(shipped_rules(), vec![sessions], &HashMap::new());
    assert_found(&found, Kind::OversizedModel, &premium_ids);
}
