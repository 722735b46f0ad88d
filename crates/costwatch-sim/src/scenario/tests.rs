//! Tests of the generated scenarios: determinism, the truth, labels, costs,
//! consistency of the rows, volumes.

use super::generator::Generator;
use super::plan::{ModelMove, Plan};
use super::*;
use crate::dataset::{KINDS, NO_CACHE, OVERSIZED_MODEL, RETRY_LOOP, SimRequest, SimSession};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::OnceLock;

fn default_dataset() -> &'static Dataset {
    static D: OnceLock<Dataset> = OnceLock::new();
    D.get_or_init(|| generate(&ScenarioParams::default()))
}

fn small(seed: u64) -> Dataset {
    generate(&ScenarioParams {
        seed,
        days: 4,
        sessions_per_day: 300,
        ..ScenarioParams::default()
    })
}

fn first_100_json(d: &Dataset) -> String {
    serde_json::to_string(&d.sessions[..100]).unwrap()
}

#[test]
fn generation_is_deterministic() {
    assert_eq!(first_100_json(&small(11)), first_100_json(&small(11)));
    assert_ne!(first_100_json(&small(11)), first_100_json(&small(12)));
    let d = default_dataset();
    assert_eq!(
        first_100_json(d),
        first_100_json(&generate(&ScenarioParams::default()))
    );
}

#[test]
fn truth_covers_every_kind_and_every_id_exists() {
    let d = default_dataset();
    for kind in KINDS {
        let ids: Vec<_> = d.truth.of(kind).collect();
        assert!(!ids.is_empty(), "no {kind} sessions");
        for id in ids {
            assert!(d.session(id).is_some(), "{kind}: {id} missing");
        }
    }
}

#[test]
fn labels_do_not_leak_the_truth() {
    let d = default_dataset();
    let words = [
        "cache",
        "oversized",
        "retry",
        "loop",
        "incident",
        "truth",
        "anomal",
        "waste",
        "case",
    ];
    for s in &d.sessions {
        let keys: Vec<_> = s.labels.keys().map(String::as_str).collect();
        assert_eq!(keys, ["env", "feature"]);
        for text in s.labels.values().chain([&s.session_id]) {
            for w in words {
                assert!(!text.contains(w), "{text} contains {w}");
            }
        }
        assert!(s.requests.iter().all(|r| r.labels == s.labels));
    }
}

#[test]
fn costs_follow_the_catalogue_prices() {
    let d = default_dataset();
    let prices: BTreeMap<&str, (f64, f64, f64)> = [
        (LUNA, (0.10, 0.01, 0.40)),
        (SOL, (2.50, 0.25, 10.0)),
        (SONNET, (3.00, 0.30, 15.0)),
        (NOVA, (0.20, 0.20, 0.80)),
        (GEMINI, (0.15, 0.0375, 0.60)),
    ]
    .into_iter()
    .collect();
    for s in d.sessions.iter().step_by(7) {
        let mut sum = 0.0;
        for r in &s.requests {
            let (i, c, o) = prices[r.model.as_str()];
            let want = ((r.input_tokens - r.cached_tokens) as f64 * i
                + r.cached_tokens as f64 * c
                + r.output_tokens as f64 * o)
                / 1e6;
            assert!(
                (r.cost_usd - want).abs() < 1e-8,
                "{}: {} != {want}",
                r.request_id,
                r.cost_usd
            );
            assert!(r.cached_tokens <= r.input_tokens && r.cache_write_tokens <= r.input_tokens);
            sum += r.cost_usd;
        }
        let row = s.row(None).unwrap();
        assert!((row["cost_usd"].as_f64().unwrap() - sum).abs() < 1e-7);
    }
}

#[test]
fn requests_are_consistent() {
    let d = default_dataset();
    let mut ids = HashSet::new();
    for s in &d.sessions {
        assert!(
            s.requests
                .windows(2)
                .all(|w| w[0].created_at < w[1].created_at)
        );
        for r in &s.requests {
            assert!(ids.insert(r.request_id.clone()));
            assert_eq!(r.request_id.len(), 20);
            match (r.status.as_str(), r.http_status, r.error_type.as_deref()) {
                ("success", 200, None) => {}
                ("error", 429, Some("RateLimitError")) | ("error", 504, Some("Timeout")) => {
                    assert_eq!(r.output_tokens, 0)
                }
                other => panic!("inconsistent status {other:?}"),
            }
            if r.model == NOVA {
                assert_eq!(r.cached_tokens, 0);
            }
        }
    }
}

fn feature(s: &SimSession) -> &str {
    s.labels["feature"].as_str()
}

#[test]
fn truth_sessions_carry_their_waste() {
    let d = default_dataset();
    for id in d.truth.of(NO_CACHE) {
        let s = d.session(id).unwrap();
        assert!(s.requests.len() >= 3);
        // Above the true minimum: Gemini's 1,024 tokens, Luna's prompts
        // 1,500 and more.
        let least = |m: &str| if m == GEMINI { 1_024 } else { 1_500 };
        assert!(
            s.requests
                .iter()
                .all(|r| r.cached_tokens == 0 && r.input_tokens >= least(&r.model))
        );
    }
    for id in d.truth.of(OVERSIZED_MODEL) {
        let s = d.session(id).unwrap();
        let premium: f64 = s
            .requests
            .iter()
            .filter(|r| is_premium(r))
            .map(|r| r.cost_usd)
            .sum();
        let all: f64 = s.requests.iter().map(|r| r.cost_usd).sum();
        assert!(premium / all > 0.5, "{id}: premium share {}", premium / all);
        assert!(matches!(feature(s), "triage" | "checkout"), "{id}");
    }
    for id in d.truth.of(RETRY_LOOP) {
        let s = d.session(id).unwrap();
        let errors = s.requests.iter().filter(|r| r.is_error()).count();
        assert!(s.requests.len() >= 8, "{id}: {} calls", s.requests.len());
        assert!(errors >= 5, "{id}: {errors} errors");
    }
}

#[test]
fn look_alikes_stay_out_of_the_truth() {
    let d = default_dataset();
    let in_truth = |id: &str| !d.truth.kinds_of(id).is_empty();
    let mut long_support = 0;
    let mut healthy_retries = 0;
    for s in &d.sessions {
        let n = s.requests.len();
        match feature(s) {
            "triage" if !in_truth(&s.session_id) => {
                assert!(s.requests.iter().all(|r| r.model == LUNA))
            }
            "checkout" if !in_truth(&s.session_id) => {
                assert!(n <= 7);
                healthy_retries += usize::from(s.requests.iter().any(SimRequest::is_error));
            }
            "support-agent" | "onboarding" if !in_truth(&s.session_id) => {
                assert!(s.requests.iter().all(|r| !r.is_error()));
                long_support += usize::from(n >= 25);
                if n >= 3 {
                    assert!(s.requests.iter().any(|r| r.cached_tokens > 0));
                }
            }
            "research" | "legal-review" | "long-chat" | "batch-extract" => {
                assert!(!in_truth(&s.session_id))
            }
            _ => {}
        }
    }
    assert!(long_support > 50, "{long_support} long support sessions");
    assert!(
        healthy_retries > 30,
        "{healthy_retries} healthy checkout retries"
    );
}

/// The default scenario's schedule.
fn default_plan() -> Plan {
    Generator::new(&ScenarioParams::default()).plan().clone()
}

/// The default scenario's model move of `f`.
fn default_move(f: Feature) -> ModelMove {
    *default_plan()
        .model_moves
        .iter()
        .find(|m| m.feature == f)
        .unwrap()
}

fn is_premium(r: &SimRequest) -> bool {
    r.model == SOL || r.model == SONNET
}

fn is_tiny(r: &SimRequest) -> bool {
    r.input_tokens <= 1_000 && r.output_tokens <= 500
}

fn starts_in(s: &SimSession, m: &ModelMove) -> bool {
    m.span.contains(s.first_request_at().unwrap())
}

#[test]
fn default_volumes_are_as_designed() {
    let d = default_dataset();
    let count = |k: &str| d.truth.of(k).count();
    let by_feature = |f: &str| d.sessions.iter().filter(|s| feature(s) == f).count();
    let oversized_in = |f: Feature| {
        let m = default_move(f);
        d.truth
            .of(OVERSIZED_MODEL)
            .filter(|id| {
                let s = d.session(id).unwrap();
                feature(s) == f.name() && starts_in(s, &m)
            })
            .count()
    };
    let (triage_move, checkout_move) = (
        oversized_in(Feature::Triage),
        oversized_in(Feature::Checkout),
    );
    let n = d.sessions.len();
    eprintln!(
        "sessions {n}, requests {}, no_cache {}, oversized_model {} (triage move {triage_move}, \
         checkout move {checkout_move}), retry_loop {}, onboarding {}",
        d.request_count(),
        count(NO_CACHE),
        count(OVERSIZED_MODEL),
        count(RETRY_LOOP),
        by_feature("onboarding"),
    );
    assert!((9_000..=11_500).contains(&n), "{n} sessions");
    assert!((30..=150).contains(&count(NO_CACHE)));
    let incidents = count(OVERSIZED_MODEL) - triage_move - checkout_move;
    assert!((8..=40).contains(&incidents), "{incidents}");
    assert!((350..=650).contains(&triage_move), "{triage_move}");
    assert!((20..=150).contains(&checkout_move), "{checkout_move}");
    assert!((8..=40).contains(&count(RETRY_LOOP)));
    assert!(by_feature("onboarding") > 50);
    let (first, last) = d.time_range().unwrap();
    assert!(first >= ScenarioParams::default().start);
    assert!(last - first < Duration::days(4) + Duration::hours(2));
    // Onboarding only exists from noon of day 2.
    let noon = ScenarioParams::default().start + Duration::hours(60);
    assert!(
        d.sessions
            .iter()
            .filter(|s| feature(s) == "onboarding")
            .all(|s| s.first_request_at().unwrap() >= noon)
    );
}

#[test]
fn night_is_quieter_than_afternoon() {
    let d = default_dataset();
    let start = ScenarioParams::default().start;
    let count = |h: i64| {
        let (s, e) = (start + Duration::hours(h), start + Duration::hours(h + 1));
        d.sessions
            .iter()
            .filter(|x| x.first_request_at().is_some_and(|f| s <= f && f < e))
            .count()
    };
    assert!(
        count(3) * 3 < count(15),
        "03h {} vs 15h {}",
        count(3),
        count(15)
    );
}

#[test]
fn every_triage_session_sends_its_sub_step_to_sol_for_about_two_days() {
    let d = default_dataset();
    let plan = default_plan();
    let m = default_move(Feature::Triage);
    let start = ScenarioParams::default().start;
    assert_eq!((m.share, m.model), (1.0, SOL));
    let len = m.span.end - m.span.start;
    assert!(
        (Duration::hours(46)..=Duration::hours(50)).contains(&len),
        "{len}"
    );
    // From the evening of day 0, clear of both incidents of the group.
    assert!(m.span.start >= start + Duration::hours(19));
    assert!(m.span.end < start + Duration::days(3) + Duration::hours(7));
    let incident = |at| plan.oversized.iter().any(|s| s.contains(at));
    let mut moved = Vec::new();
    for s in d.sessions.iter().filter(|s| feature(s) == "triage") {
        let at = s.first_request_at().unwrap();
        let sol = s.requests.iter().filter(|r| r.model == SOL).count();
        let luna = s.requests.iter().filter(|r| r.model == LUNA).count();
        let labelled = d.truth.kinds_of(&s.session_id) == [OVERSIZED_MODEL];
        if m.span.contains(at) {
            assert!(labelled, "{}", s.session_id);
            assert!(
                (2..=4).contains(&sol),
                "{}: {sol} calls on sol",
                s.session_id
            );
            assert!(luna >= 1 && sol + luna == s.requests.len());
            assert!(s.requests.iter().filter(|r| r.model == SOL).all(is_tiny));
            moved.push(at);
        } else if !incident(at) {
            assert!(!labelled && sol == 0, "{}", s.session_id);
        }
    }
    assert!(moved.len() > 300, "{}", moved.len());
    // The move spans many windows: sessions from its first hours to its last.
    let spread = *moved.iter().max().unwrap() - *moved.iter().min().unwrap();
    assert!(spread > Duration::hours(45), "{spread}");
}

#[test]
fn a_share_of_checkout_sessions_sends_its_sub_step_to_sonnet_for_a_few_hours() {
    let d = default_dataset();
    let m = default_move(Feature::Checkout);
    assert_eq!(m.model, SONNET);
    assert!((0.40..=0.60).contains(&m.share), "{}", m.share);
    let len = m.span.end - m.span.start;
    assert!(
        (Duration::hours(3)..=Duration::hours(5)).contains(&len),
        "{len}"
    );
    let (mut candidates, mut moved) = (0, 0);
    for s in d.sessions.iter().filter(|s| feature(s) == "checkout") {
        let sonnet = s.requests.iter().filter(|r| r.model == SONNET).count();
        let kinds = d.truth.kinds_of(&s.session_id);
        if !starts_in(s, &m) {
            assert_eq!(sonnet, 0, "{}", s.session_id);
            assert!(!kinds.contains(&OVERSIZED_MODEL));
            continue;
        }
        if kinds.contains(&RETRY_LOOP) {
            assert_eq!(sonnet, 0, "a loop is left as it is");
            continue;
        }
        candidates += 1;
        if sonnet == 0 {
            assert!(kinds.is_empty() && s.requests.iter().all(|r| r.model == LUNA));
            continue;
        }
        moved += 1;
        assert_eq!(kinds, [OVERSIZED_MODEL], "{}", s.session_id);
        assert!((1..=4).contains(&sonnet));
        let sent = s.requests.iter().filter(|r| r.model == SONNET);
        assert!(sent.clone().all(|r| is_tiny(r) && !r.is_error()));
        assert!(s.requests.iter().any(|r| r.model == LUNA));
        assert!(
            s.requests
                .iter()
                .all(|r| r.model == SONNET || r.model == LUNA)
        );
    }
    let share = moved as f64 / candidates as f64;
    assert!(candidates > 60, "{candidates}");
    assert!(
        (m.share - 0.15..=m.share + 0.10).contains(&share),
        "{moved} of {candidates}, drawn {}",
        m.share
    );
}

#[test]
fn a_model_move_changes_only_its_own_sessions() {
    let p = ScenarioParams {
        seed: 11,
        days: 4,
        sessions_per_day: 300,
        ..ScenarioParams::default()
    };
    let with = generate(&p);
    let mut g = Generator::new(&p);
    g.plan_mut().model_moves.clear();
    let without = run(g, &p);
    assert_eq!(with.sessions.len(), without.sessions.len());
    let mut changed = 0;
    for (a, b) in with.sessions.iter().zip(&without.sessions) {
        assert_eq!(a.session_id, b.session_id);
        if a == b {
            assert_eq!(
                with.truth.kinds_of(&a.session_id),
                without.truth.kinds_of(&b.session_id)
            );
            continue;
        }
        changed += 1;
        assert!(matches!(feature(a), "triage" | "checkout"));
        assert_eq!(with.truth.kinds_of(&a.session_id), [OVERSIZED_MODEL]);
        assert!(without.truth.kinds_of(&b.session_id).is_empty());
        // The same calls, some of them on a premium model.
        for (x, y) in a.requests.iter().zip(&b.requests) {
            assert_eq!(x.request_id, y.request_id);
            assert_eq!(
                (x.input_tokens, x.output_tokens),
                (y.input_tokens, y.output_tokens)
            );
            assert_eq!(y.model, LUNA);
            assert!(x.model == y.model || is_premium(x));
        }
    }
    assert!(changed > 30, "{changed}");
}

#[test]
fn the_situations_only_the_traffic_can_judge_are_there() {
    let d = default_dataset();
    let of = |name: &str| -> Vec<&SimSession> {
        d.sessions.iter().filter(|s| feature(s) == name).collect()
    };
    let truth: BTreeSet<&str> = d.truth.of(NO_CACHE).collect();
    // Each new service is its group's only session.
    let (notes, tagging) = (of("release-notes"), of("bulk-tagging"));
    assert_eq!((notes.len(), tagging.len()), (1, 1));
    let notes = notes[0];
    assert!(truth.contains(notes.session_id.as_str()));
    assert!(notes.requests.len() >= 8);
    // Each prompt holds the last one, its answer and a new turn.
    for w in notes.requests.windows(2) {
        assert!(w[1].input_tokens > w[0].input_tokens + w[0].output_tokens);
    }
    assert!(!truth.contains(tagging[0].session_id.as_str()));
    // Gemini reads prefixes below the 2,048 the shipped table states.
    let quotes = of("quotes");
    assert!(quotes.len() > 600, "{}", quotes.len());
    let smallest_read = quotes
        .iter()
        .flat_map(|s| &s.requests)
        .filter(|r| r.cached_tokens > 0)
        .map(|r| r.cached_tokens)
        .min();
    assert_eq!(smallest_read, Some(1_024));
    let broken: Vec<_> = quotes
        .iter()
        .filter(|s| truth.contains(s.session_id.as_str()))
        .collect();
    assert!(broken.len() >= 10, "{}", broken.len());
    let first = broken
        .iter()
        .filter_map(|s| s.first_request_at())
        .min()
        .unwrap();
    let last = broken
        .iter()
        .filter_map(|s| s.first_request_at())
        .max()
        .unwrap();
    assert!(last - first <= chrono::Duration::minutes(QUOTES_BROKEN_MINUTES));
}
