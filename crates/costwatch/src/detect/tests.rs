//! Table-driven checks of the detectors: rules (YAML) and session rows in,
//! findings out, with every look-alike the detectors must leave alone.

use super::*;
use crate::config::{Rules, load_rules};
use crate::source::{ModelPrice, ModelUsage, RequestRecord, RequestStatus};
use chrono::{Duration, TimeZone, Utc};
use std::collections::{BTreeSet, HashMap};

mod big_windows;
mod held_out_patterns;
mod hidden_premium;
mod model_moves;
mod no_cache;
mod retry_runs;

const LUNA: &str = "gpt-6-luna";
const SOL: &str = "gpt-6.1-sol";
const NOVA: &str = "nova-lite";
/// A model whose catalogue entry gives a 4,096-token cacheable minimum.
const OPUS: &str = "claude-opus-5";
/// A model the shipped caching table says caches from 2,048 tokens (its
/// family's entry), with no row of its own saying otherwise.
const GEMINI: &str = "gemini-3.6-flash";

fn models() -> Vec<ModelPrice> {
    let m = |id: &str, i: f64, c: Option<f64>, o: f64| ModelPrice {
        id: id.into(),
        input_usd_per_mtok: i,
        cached_input_usd_per_mtok: c,
        cache_write_usd_per_mtok: c.map(|c| c * 12.5),
        output_usd_per_mtok: o,
        supports_prompt_cache: c.is_some(),
        min_cacheable_prompt_tokens: None,
        cache_lifetime_seconds: None,
    };
    let mut opus = m(OPUS, 15.0, Some(1.50), 75.0);
    opus.min_cacheable_prompt_tokens = Some(4_096);
    vec![
        m(LUNA, 0.10, Some(0.01), 0.40),
        m(SOL, 2.50, Some(0.25), 10.0),
        m(NOVA, 0.20, None, 0.80),
        opus,
        ModelPrice {
            cache_write_usd_per_mtok: None,
            ..m(GEMINI, 0.15, Some(0.0375), 0.60)
        },
    ]
}

/// Request rows of one session on `model`, one call per prompt size, 5 s apart.
fn prompts(id: &str, model: &str, sizes: &[u64]) -> Vec<RequestRecord> {
    sizes
        .iter()
        .enumerate()
        .map(|(t, &input)| request(id, t as u64, model, input, RequestStatus::Success))
        .collect()
}

/// One uncached session on `model` with these prompt sizes.
fn uncached(id: &str, feature: &str, model: &str, sizes: &[u64]) -> SessionRecord {
    let n = sizes.len() as u64;
    let input = sizes.iter().sum();
    session(id, feature, 0, &[(model, n, input, 0, 40 * n)])
}

fn shipped_rules() -> Rules {
    load_rules(&[std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../rules")]).unwrap()
}

fn rules_from(yaml: &str) -> Rules {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.yaml");
    std::fs::write(&path, yaml).unwrap();
    load_rules(&[path]).unwrap()
}

fn window(i: i64) -> Window {
    let start = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap() + Duration::minutes(15 * i);
    Window {
        start,
        end: start + Duration::minutes(15),
    }
}

/// One session on the given model calls: `(model, requests, input, cached, output)`.
fn session(id: &str, feature: &str, w: i64, calls: &[(&str, u64, u64, u64, u64)]) -> SessionRecord {
    let cat = Catalogue::new(models(), [LUNA]);
    let by_model: Vec<ModelUsage> = calls
        .iter()
        .map(|&(m, r, i, c, o)| ModelUsage {
            model: m.into(),
            requests: r,
            input_tokens: i,
            cached_tokens: c,
            output_tokens: o,
            cost_usd: cat.cost(m, i, c, o).unwrap(),
        })
        .collect();
    let at = window(w).start + Duration::seconds(30);
    SessionRecord {
        session_id: id.into(),
        first_request_at: at,
        last_request_at: at + Duration::seconds(60),
        requests: by_model.iter().map(|m| m.requests).sum(),
        errors: 0,
        input_tokens: by_model.iter().map(|m| m.input_tokens).sum(),
        cached_tokens: by_model.iter().map(|m| m.cached_tokens).sum(),
        cache_write_tokens: 0,
        output_tokens: by_model.iter().map(|m| m.output_tokens).sum(),
        cost_usd: by_model.iter().map(|m| m.cost_usd).sum(),
        by_model,
        labels: Labels::from([("feature".to_string(), feature.to_string())]),
        cost_computed: false,
        cache_unreported: false,
    }
}

/// A healthy cached conversation of `turns` turns on Luna.
fn chat(id: &str, feature: &str, w: i64, turns: u64) -> SessionRecord {
    let input: u64 = (0..turns).map(|t| 2_000 + 600 * t).sum();
    let cached: u64 = (1..turns).map(|t| 2_000 + 600 * (t - 1)).sum();
    session(id, feature, w, &[(LUNA, turns, input, cached, 150 * turns)])
}

/// Request rows of a conversation whose prompt grows every turn.
fn growing_requests(id: &str, turns: u64) -> Vec<RequestRecord> {
    (0..turns)
        .map(|t| {
            let mut r = request(id, t, LUNA, 2_000 + 600 * t, RequestStatus::Success);
            r.output_tokens = answer_tokens(t);
            r
        })
        .collect()
}

/// The size of a healthy session's `t`-th answer: answers differ in size
/// (a run of answers of one size is a model asking for the same thing
/// again, see `retry_loop::steady_step`).
fn answer_tokens(t: u64) -> u64 {
    20 + (t * 53) % 300
}

/// Request rows of a loop: the same prompt, mostly failing.
fn loop_requests(id: &str, calls: u64, input: u64, failures: u64) -> Vec<RequestRecord> {
    (0..calls)
        .map(|t| {
            let status = if t < failures {
                RequestStatus::Error
            } else {
                RequestStatus::Success
            };
            request(id, t, LUNA, input, status)
        })
        .collect()
}

/// Request rows as a no_cache candidate's aggregates describe them, for a
/// case that gives none: each model's calls evenly spaced from the first
/// call to the last (models one after another), its prompt split evenly
/// but for a growth of 10 tokens a call (a conversation, not a resend),
/// cache reads split evenly with none on a model's first call, answers of
/// differing sizes, every call successful but the last `errors`. Other
/// candidates get no rows, as a case that gives none means.
fn rows_from_aggregates(c: &Drilldown) -> Vec<RequestRecord> {
    if !c.kinds().any(|k| k == Kind::NoCache) {
        return Vec::new();
    }
    let s = &c.session;
    let n = s.by_model.iter().map(|m| m.requests).sum::<u64>().max(1);
    let span = (s.last_request_at - s.first_request_at).num_milliseconds();
    let step = if n > 1 { span / (n as i64 - 1) } else { 0 };
    let mut out = Vec::new();
    let mut k = 0u64;
    for m in &s.by_model {
        for c in 0..m.requests {
            let input =
                (m.input_tokens / m.requests.max(1) + 10 * c).saturating_sub(5 * (m.requests - 1));
            let cached = if c == 0 || m.requests < 2 {
                0
            } else {
                (m.cached_tokens / (m.requests - 1)).min(input)
            };
            let status = if k + s.errors >= n {
                RequestStatus::Error
            } else {
                RequestStatus::Success
            };
            let mut r = request(&s.session_id, k, &m.model, input, status);
            r.created_at = s.first_request_at + Duration::milliseconds(step * k as i64);
            r.cached_tokens = cached;
            r.output_tokens = answer_tokens(k);
            r.cost_usd = m.cost_usd / m.requests.max(1) as f64;
            out.push(r);
            k += 1;
        }
    }
    out
}

fn request(id: &str, t: u64, model: &str, input: u64, status: RequestStatus) -> RequestRecord {
    RequestRecord {
        request_id: format!("req_{id}_{t}"),
        session_id: id.into(),
        created_at: window(0).start + Duration::seconds(5 * t as i64),
        model: model.into(),
        status,
        http_status: Some(if status == RequestStatus::Error {
            429
        } else {
            200
        }),
        error_type: (status == RequestStatus::Error).then(|| "RateLimitError".to_string()),
        input_tokens: input,
        cached_tokens: 0,
        cache_write_tokens: 0,
        output_tokens: if status == RequestStatus::Error {
            0
        } else {
            20
        },
        cost_usd: input as f64 * 0.1 / 1e6,
        provider: None,
    }
}

/// Runs windows in order through the detector, carrying baselines from one
/// window to the next as the pipeline does, and confirming drill-downs from
/// `requests`. Returns `(kind, session)` pairs of all findings.
fn run(
    rules: Rules,
    windows: Vec<Vec<SessionRecord>>,
    requests: &HashMap<String, Vec<RequestRecord>>,
) -> BTreeSet<(Kind, String)> {
    run_findings(rules, windows, requests)
        .into_iter()
        .map(|f| (f.kind, f.session_id))
        .collect()
}

/// [`run`], returning the findings themselves.
fn run_findings(
    rules: Rules,
    windows: Vec<Vec<SessionRecord>>,
    requests: &HashMap<String, Vec<RequestRecord>>,
) -> Vec<Finding> {
    let det = detector(rules, 10_000);
    let mut baselines: HashMap<String, GroupBaseline> = HashMap::new();
    let mut in_use: BTreeSet<String> = BTreeSet::new();
    let mut found = Vec::new();
    let mut held = Vec::new();
    // As the pipeline does: the shipped caching table fills what the
    // models' rows leave out, and what the traffic showed is carried.
    let mut caching = CachingEvidence::default();
    for (i, sessions) in windows.into_iter().enumerate() {
        let w = window(i as i64);
        let (priced, tabled) = crate::pricing::caching::fill(models());
        let mut catalogue =
            Catalogue::new(priced, in_use.iter().map(String::as_str)).with_tabled(tabled);
        catalogue.learn(&caching);
        let mut a = det.begin(w, catalogue);
        let mut before = HeldFindings::new(std::mem::take(&mut held));
        for s in sessions {
            before.saw(&s.session_id);
            a.observe(s);
        }
        let history = a
            .groups()
            .into_iter()
            .filter_map(|g| baselines.remove(&g).map(|b| (g, b)))
            .collect();
        let mut j = a.judge(history);
        let rows_of = |c: &Drilldown| {
            requests
                .get(&c.session.session_id)
                .cloned()
                .unwrap_or_else(|| rows_from_aggregates(c))
        };
        let mut confirmed = Confirmed::default();
        for c in &j.drilldowns {
            confirmed.extend(det.confirm(c, &rows_of(c), w));
        }
        j.confirmed(confirmed);
        caching.merge(&j.caching);
        // As the pipeline does: what was held stands once its session ended.
        let fresh = std::mem::take(&mut j.held);
        let settled = before.settle(w, fresh, &j.baselines);
        held = settled.held;
        found.append(&mut j.findings);
        found.extend(settled.stand);
        in_use.extend(j.models_seen);
        baselines.extend(j.baselines);
    }
    found
}

fn expect(pairs: &[(Kind, &str)]) -> BTreeSet<(Kind, String)> {
    pairs.iter().map(|(k, s)| (*k, s.to_string())).collect()
}

/// A day of healthy history for the usual groups, `n` sessions each per window.
fn healthy_history(windows: i64, n: usize) -> Vec<Vec<SessionRecord>> {
    (0..windows)
        .map(|w| {
            let mut v = Vec::new();
            for k in 0..n {
                v.push(chat(
                    &format!("sa-{w}-{k}"),
                    "support-agent",
                    w,
                    3 + (k as u64 % 5),
                ));
                v.push(session(
                    &format!("tr-{w}-{k}"),
                    "triage",
                    w,
                    &[(LUNA, 4, 700, 0, 100)],
                ));
                v.push(session(
                    &format!("ck-{w}-{k}"),
                    "checkout",
                    w,
                    &[(LUNA, 2 + k as u64 % 3, 1_200, 0, 150)],
                ));
            }
            v
        })
        .collect()
}

mod cases;
use self::cases::cases;

struct Case {
    name: &'static str,
    rules: Option<&'static str>,
    windows: Vec<Vec<SessionRecord>>,
    requests: Vec<(&'static str, Vec<RequestRecord>)>,
    expect: Vec<(Kind, &'static str)>,
}

fn with_history(
    mut history: Vec<Vec<SessionRecord>>,
    last: Vec<SessionRecord>,
) -> Vec<Vec<SessionRecord>> {
    let w = history.len() as i64;
    let last = last
        .into_iter()
        .map(|mut s| {
            let at = window(w).start + Duration::seconds(40);
            s.first_request_at = at;
            s.last_request_at = at;
            s
        })
        .collect();
    history.push(last);
    history
}

#[test]
fn detector_table() {
    let mut failures = Vec::new();
    for case in cases()
        .into_iter()
        .chain(held_out_patterns::cases())
        .chain(hidden_premium::cases())
    {
        let rules = case.rules.map(rules_from).unwrap_or_else(shipped_rules);
        let requests: HashMap<String, Vec<RequestRecord>> = case
            .requests
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let got = run(rules, case.windows, &requests);
        let want = expect(&case.expect);
        if got != want {
            failures.push(format!("{}: expected {want:?}, got {got:?}", case.name));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn odd_data_becomes_a_diagnostic_not_a_failure() {
    let det = Detector {
        rules: shipped_rules(),
        group_by: vec!["feature".into()],
        baseline_samples: 64,
        max_candidates: 1,
    };
    let mut a = det.begin(window(0), Catalogue::new(models(), [LUNA]));
    let mut odd = session("odd", "x", 0, &[(LUNA, 3, 100, 500, 10)]);
    odd.cached_tokens = 500;
    a.observe(odd);
    let mut unknown = session("unknown-model", "x", 0, &[(LUNA, 9, 100, 0, 10)]);
    unknown.by_model[0].model = "mystery".into();
    a.observe(unknown);
    a.observe(session("zero", "x", 0, &[]));
    let j = a.judge(HashMap::new());
    assert!(
        j.diagnostics
            .iter()
            .any(|d| d.message.contains("exceed input_tokens")),
        "{:?}",
        j.diagnostics
    );
    assert_eq!(j.sessions, 3);
}

#[test]
fn findings_carry_impact_and_evidence() {
    let windows = with_history(
        healthy_history(4, 6),
        vec![session(
            "nc",
            "support-agent",
            0,
            &[(LUNA, 6, 24_557, 0, 1_290)],
        )],
    );
    let det = detector(shipped_rules(), 100);
    let last = last_window_findings(&det, windows, &[]);
    let f = last.iter().find(|f| f.session_id == "nc").unwrap();
    assert_eq!(f.group, "feature=support-agent");
    assert!(
        f.impact_usd > 0.0 && f.impact_usd < f.cost_usd,
        "{}",
        f.impact_usd
    );
    assert_eq!(f.evidence["cached_tokens"], 0);
    assert_eq!(f.evidence["cold_start"], false);
    assert!(f.evidence["peer_median_cached_share"].as_f64().unwrap() > 0.3);
    assert!(f.explanation.contains("24557"), "{}", f.explanation);
}

#[test]
fn group_keys_name_every_group_by_label() {
    let labels = Labels::from([("feature".to_string(), "a".to_string())]);
    assert_eq!(
        group_key(&labels, &["feature".into(), "team".into()]),
        "feature=a,team="
    );
    assert_eq!(group_key(&labels, &[]), "all");
}

/// The detector the tests run: `rules`, peer groups by `feature`, 512
/// samples per group and at most `max_candidates` per window.
fn detector(rules: Rules, max_candidates: usize) -> Detector {
    Detector {
        rules,
        group_by: vec!["feature".into()],
        baseline_samples: 512,
        max_candidates,
    }
}

/// Runs `windows` through `det`, carrying baselines, and returns the last
/// window's findings, drill-downs confirmed from `requests`.
fn last_window_findings(
    det: &Detector,
    windows: Vec<Vec<SessionRecord>>,
    requests: &[RequestRecord],
) -> Vec<Finding> {
    let mut baselines = HashMap::new();
    let mut last = Vec::new();
    for (i, sessions) in windows.into_iter().enumerate() {
        let w = window(i as i64);
        let mut a = det.begin(w, Catalogue::new(models(), [LUNA]));
        sessions.into_iter().for_each(|s| a.observe(s));
        let j = a.judge(std::mem::take(&mut baselines));
        last = j.findings;
        for c in &j.drilldowns {
            let own: Vec<RequestRecord> = requests
                .iter()
                .filter(|r| r.session_id == c.session.session_id)
                .cloned()
                .collect();
            let rows = if own.is_empty() {
                rows_from_aggregates(c)
            } else {
                own
            };
            let confirmed = det.confirm(c, &rows, w);
            last.extend(confirmed.findings);
            last.extend(confirmed.held.into_iter().map(|h| h.finding));
        }
        baselines = j.baselines;
    }
    last
}

/// Runs `windows` through `det` and returns the last window's judgement
/// (findings and drill-down sessions) and whether it overflowed; with
/// `reread`, an overflowing window is read a second time, as the pipeline
/// does.
fn last_judgement(
    det: &Detector,
    windows: Vec<Vec<SessionRecord>>,
    reread: bool,
) -> (BTreeSet<(Kind, String)>, Vec<Diagnostic>, bool) {
    let mut baselines = HashMap::new();
    let mut out = (BTreeSet::new(), Vec::new(), false);
    for (i, sessions) in windows.into_iter().enumerate() {
        let mut a = det.begin(window(i as i64), Catalogue::new(models(), [LUNA]));
        sessions.iter().cloned().for_each(|s| a.observe(s));
        let overflowed = a.overflowed();
        let history = std::mem::take(&mut baselines);
        let j = if reread && overflowed {
            let mut again = a.rejudge(history);
            sessions.into_iter().for_each(|s| again.observe(s));
            again.finish()
        } else {
            a.judge(history)
        };
        let mut found: BTreeSet<(Kind, String)> = j
            .findings
            .iter()
            .map(|f| (f.kind, f.session_id.clone()))
            .collect();
        // Suspects are judged from their rows, which this run does not
        // read; every other drill-down counts as found.
        found.extend(j.drilldowns.iter().flat_map(|c| {
            let suspect = c.retry_trigger().and_then(|t| t.suspicion()).is_some();
            c.kinds()
                .filter(move |k| !(suspect && *k == Kind::RetryLoop))
                .map(|k| (k, c.session.session_id.clone()))
        }));
        baselines = j.baselines;
        out = (found, j.diagnostics, overflowed);
    }
    out
}

#[test]
fn a_window_with_too_many_candidates_is_read_again_and_judged_whole() {
    // Many healthy long conversations (nominated for a retry check, never
    // outliers) fill the candidate cap before the waste at the window's end.
    let mut last: Vec<SessionRecord> = (0..40)
        .map(|k| chat(&format!("long-{k}"), "support-agent", 0, 7))
        .collect();
    last.push(session(
        "nc",
        "support-agent",
        0,
        &[(LUNA, 6, 24_557, 0, 1_290)],
    ));
    last.push(session(
        "os",
        "triage",
        0,
        &[(SOL, 3, 217, 0, 60), (LUNA, 1, 200, 0, 30)],
    ));
    last.push(session(
        "loop",
        "checkout",
        0,
        &[(LUNA, 30, 12_000, 0, 300)],
    ));
    let windows = with_history(healthy_history(4, 6), last);
    let det = |max_candidates| detector(shipped_rules(), max_candidates);
    let (whole, _, overflowed) = last_judgement(&det(10_000), windows.clone(), true);
    assert!(!overflowed);
    assert_eq!(
        whole,
        expect(&[
            (Kind::NoCache, "nc"),
            (Kind::OversizedModel, "os"),
            (Kind::RetryLoop, "loop"),
        ])
    );
    let (capped, _, overflowed) = last_judgement(&det(5), windows.clone(), false);
    assert!(overflowed);
    assert!(
        capped.is_empty(),
        "the cap keeps only early look-alikes: {capped:?}"
    );
    let (again, diagnostics, _) = last_judgement(&det(5), windows, true);
    assert_eq!(again, whole);
    assert!(
        diagnostics.iter().any(|d| d.message.contains("read again")),
        "{diagnostics:?}"
    );
}
