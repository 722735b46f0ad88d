//! The same labelled traffic, served as the reference gateway's session
//! rows, the LiteLLM proxy's spend logs and Langfuse's observations, read
//! through each source kind: the same findings with the same figures (but
//! for the premium of cache writes where Langfuse's prices are learned from
//! costs, which do not show it); over several days of both scenario
//! families, the same money to 1%; and
//! as OpenTelemetry GenAI spans, posted over OTLP/HTTP to the receiver and
//! written as the Collector's files: the same findings.
//!
//! Each window is served as a live daemon would see it at the window's end
//! (calls after it do not exist yet), where the reference API's "whole
//! life so far" and a row source's "every call up to the window's end"
//! are the same thing.
//!
//! Pricing: Langfuse read with only the price table shipped in the binary
//! (which knows neither `claude-sonnet-5.5` nor the simulator's prices of
//! the others) finds the same, whether a premium model is known only to
//! Langfuse's model definitions or, without a definition and unknown to
//! the table, only through the costs its calls report.

use crate::support::{detector, seed_dataset, start_sim};
use chrono::{DateTime, Duration as ChronoDuration, TimeDelta, Utc};
use costwatch::app;
use costwatch::app::any::AnySource;
use costwatch::backtest::{self, WindowRetries};
use costwatch::clock::SystemClock;
use costwatch::detect::Finding;
use costwatch::pricing::table::{PriceTable, default_table};
use costwatch::secret::Secret;
use costwatch::source::SourceKind;
use costwatch::source::langfuse::LangfuseReader;
use costwatch::source::rows::{RowSettings, RowSource};
use costwatch_sim::scenario::{self, ScenarioParams};
use costwatch_sim::server::SimServer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const WINDOW: Duration = Duration::from_secs(900);

/// Findings of `[from, to)` read through `kind`, each window served as of
/// its end.
async fn findings(
    sim: &SimServer,
    kind: SourceKind,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<Finding> {
    let source = app::simulator_source(sim, kind).await.unwrap();
    findings_through(sim, source, kind, from, to).await
}

/// Findings of `[from, to)` read through `source`, each window served as
/// of its end.
async fn findings_through(
    sim: &SimServer,
    source: AnySource,
    kind: SourceKind,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<Finding> {
    let step = ChronoDuration::from_std(WINDOW).unwrap();
    let until = |end: DateTime<Utc>| sim.set_now(Some(end - TimeDelta::nanoseconds(1)));
    until(from + step);
    let replay = backtest::replay(
        source,
        detector(),
        "sqlite::memory:",
        from,
        to,
        WINDOW,
        4,
        Arc::new(SystemClock),
        &WindowRetries::none(),
        |r| until(r.window.end + step),
    )
    .await
    .unwrap_or_else(|e| panic!("{kind}: {e}"));
    replay.findings
}

/// `(session, kind)` -> (cost, impact, the part of the impact paid for
/// cache writes no later call read).
fn figures(findings: &[Finding]) -> BTreeMap<(String, String), (f64, f64, f64)> {
    findings
        .iter()
        .map(|f| {
            let unread = f.evidence["cache_miss_causes"]["written_never_read"]["usd"]
                .as_f64()
                .unwrap_or(0.0);
            (
                (f.session_id.clone(), f.kind.as_str().to_owned()),
                (f.cost_usd, f.impact_usd, unread),
            )
        })
        .collect()
}

type Figures = BTreeMap<(String, String), (f64, f64, f64)>;

/// `got` has the findings of `reference`, with the same figures; with
/// `learned`, Langfuse's prices were learned from the costs its calls
/// report.
fn assert_same_figures(
    kind: SourceKind,
    what: &str,
    reference: &Figures,
    got: &Figures,
    learned: bool,
) {
    let want_keys: Vec<_> = reference.keys().collect();
    let got_keys: Vec<_> = got.keys().collect();
    assert_eq!(got_keys, want_keys, "{kind}{what}: the same findings");
    for (key, (cost, impact, unread)) in reference {
        let (c, i, u) = got[key];
        // What a write costs above the input is unknown where prices are
        // learned from costs (the simulated bill charges writes at the
        // input price): only that part of the impact may differ.
        let hidden = if learned { unread - u } else { 0.0 };
        assert!(
            (c - cost).abs() <= 1e-6 && (i + hidden - impact).abs() <= 1e-6,
            "{kind}{what} {key:?}: cost {c} impact {i} (unread writes {u}), reference {cost} {impact} ({unread})"
        );
        assert!(u <= unread + 1e-9, "{kind}{what} {key:?}: {u} > {unread}");
    }
}

/// The evidence of the facts a source did not report, by finding.
fn missing_facts(findings: &[Finding]) -> BTreeMap<(String, String), serde_json::Value> {
    findings
        .iter()
        .map(|f| {
            (
                (f.session_id.clone(), f.kind.as_str().to_owned()),
                f.evidence["missing_facts"].clone(),
            )
        })
        .collect()
}

async fn assert_same_findings(sim: &SimServer, from: DateTime<Utc>, to: DateTime<Utc>) -> usize {
    let reference_findings = findings(sim, SourceKind::Reference, from, to).await;
    let reference = figures(&reference_findings);
    assert!(!reference.is_empty(), "the traffic has waste to find");
    let want_keys: Vec<_> = reference.keys().collect();
    // Every call's cost and usage reported: nothing is missing.
    let gaps = missing_facts(&reference_findings);
    assert!(gaps.values().all(|v| v.is_null()), "{gaps:?}");
    for kind in [SourceKind::Litellm, SourceKind::Langfuse] {
        let got = findings(sim, kind, from, to).await;
        let gaps = missing_facts(&got);
        assert!(gaps.values().all(|v| v.is_null()), "{kind}: {gaps:?}");
        assert_same_figures(kind, "", &reference, &figures(&got), false);
    }
    // Spans carry no cost, and a failed call no usage: costwatch prices
    // them from the table, so the figures are the table's, not the
    // gateway's, and a retry loop's evidence says so. The findings are the
    // same.
    let failed_runs: BTreeMap<_, _> = reference_findings
        .iter()
        .filter(|f| f.kind.as_str() == "retry_loop")
        .map(|f| (f.session_id.clone(), f.evidence["errors"].as_u64().unwrap()))
        .collect();
    for kind in [SourceKind::Otlp, SourceKind::OtlpFiles] {
        let got_findings = findings(sim, kind, from, to).await;
        let got = figures(&got_findings);
        let got_keys: Vec<_> = got.keys().collect();
        assert_eq!(got_keys, want_keys, "{kind}: the same findings");
        for f in got_findings
            .iter()
            .filter(|f| f.kind.as_str() == "retry_loop")
        {
            let gaps = &f.evidence["missing_facts"];
            let priced = gaps["priced_from_table"].as_array();
            assert!(
                priced.is_some_and(|p| p.iter().any(|v| v == "impact_usd")),
                "{kind} {}: {gaps}",
                f.session_id
            );
            let failed = failed_runs[&f.session_id];
            let without = gaps["failed_calls_without_usage"].as_u64().unwrap_or(0);
            assert_eq!(without, failed, "{kind} {}: {gaps}", f.session_id);
        }
    }
    reference.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_window_reads_the_same_through_every_source() {
    let sim = start_sim(seed_dataset()).await;
    let from = crate::support::ts("2026-10-11T11:00:00Z");
    let to = crate::support::ts("2026-10-11T12:00:00Z");
    let n = assert_same_findings(&sim, from, to).await;
    assert!(n >= 3, "one of each kind at least: {n}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_traffic_reads_the_same_through_every_source() {
    let params = ScenarioParams {
        seed: 7,
        days: 1,
        ..ScenarioParams::default()
    };
    let from = params.start;
    let to = from + ChronoDuration::days(1);
    let sim = start_sim(scenario::generate(&params)).await;
    let n = assert_same_findings(&sim, from, to).await;
    assert!(n >= 5, "{n} findings");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_out_day_of_the_adversarial_family_reads_the_same_through_every_source() {
    // Seed 1234 is held out (CONTRIBUTING.md): only ever reported.
    let params = ScenarioParams {
        seed: 1234,
        days: 1,
        ..ScenarioParams::default()
    };
    let from = params.start;
    let to = from + ChronoDuration::days(1);
    let sim = start_sim(scenario::adversarial::generate(&params)).await;
    let n = assert_same_findings(&sim, from, to).await;
    assert!(n >= 5, "{n} findings");
}

/// Langfuse priced as a deployment is: by its own model definitions, the
/// shipped table and what its calls' costs teach; not the simulator's
/// catalogue.
async fn langfuse_on_its_own(sim: &SimServer) -> AnySource {
    let settings = RowSettings::defaults(SourceKind::Langfuse);
    let reader = LangfuseReader::new(
        url::Url::parse(&sim.langfuse_url()).unwrap(),
        sim.langfuse().public_key(),
        &Secret::new(sim.admin_key()),
        &settings,
        app::simulator_limits(),
    )
    .unwrap();
    AnySource::Langfuse(RowSource::new(
        reader,
        settings,
        PriceTable::new(default_table()),
    ))
}

/// The reference's findings, and Langfuse's on its own prices: with every
/// definition the simulator serves, then, with `learned`, with `premium`
/// (which the shipped table must not know) served without one. Returns
/// how many findings involve `premium`.
async fn assert_priced_by_langfuse(
    sim: &SimServer,
    premium: &str,
    learned: bool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> usize {
    let reference_findings = findings(sim, SourceKind::Reference, from, to).await;
    let on_premium = reference_findings
        .iter()
        .filter(|f| f.evidence.to_string().contains(premium))
        .count();
    let reference = figures(&reference_findings);
    assert!(!reference.is_empty(), "the traffic has waste to find");
    let kind = SourceKind::Langfuse;
    let source = langfuse_on_its_own(sim).await;
    let got = figures(&findings_through(sim, source, kind, from, to).await);
    assert_same_figures(kind, " (its own definitions)", &reference, &got, false);
    if !learned {
        return on_premium;
    }
    assert!(
        default_table().iter().all(|m| m.id != premium),
        "{premium} is not in the shipped table"
    );
    sim.langfuse()
        .serve_without_definition([premium.to_owned()]);
    let source = langfuse_on_its_own(sim).await;
    let got = figures(&findings_through(sim, source, kind, from, to).await);
    assert_same_figures(kind, " (prices learned from costs)", &reference, &got, true);
    on_premium
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langfuse_finds_the_same_on_its_own_prices_in_the_seed_window() {
    let sim = start_sim(seed_dataset()).await;
    let from = crate::support::ts("2026-10-11T11:00:00Z");
    let to = crate::support::ts("2026-10-11T12:00:00Z");
    // The shipped table prices it, at other prices than the gateway's.
    let premium = costwatch_sim::scenario::SOL;
    let n = assert_priced_by_langfuse(&sim, premium, false, from, to).await;
    assert!(n >= 1, "a finding on {premium}: {n}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langfuse_finds_the_same_on_its_own_prices_over_a_day() {
    let params = ScenarioParams {
        seed: 7,
        days: 1,
        ..ScenarioParams::default()
    };
    let from = params.start;
    let to = from + ChronoDuration::days(1);
    let sim = start_sim(scenario::generate(&params)).await;
    let premium = costwatch_sim::scenario::SONNET;
    let n = assert_priced_by_langfuse(&sim, premium, true, from, to).await;
    assert!(n >= 1, "a finding on {premium}: {n}");
}

/// `(session, kind)` -> the money of the finding: its impact, then each
/// cache-miss cause's dollars by name.
type Money = BTreeMap<(String, String), (f64, BTreeMap<String, f64>)>;

fn money(findings: &[Finding]) -> Money {
    findings
        .iter()
        .map(|f| {
            let causes = f.evidence["cache_miss_causes"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v["usd"].as_f64().unwrap_or(f64::NAN)))
                        .collect()
                })
                .unwrap_or_default();
            (
                (f.session_id.clone(), f.kind.as_str().to_owned()),
                (f.impact_usd, causes),
            )
        })
        .collect()
}

/// Whether two amounts agree within 1% (and the 1e-8 dollars figures are
/// rounded to).
fn agree(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.01 * a.abs().max(b.abs()) + 1e-8
}

/// What differs between the money of `reference` and `got`, one line each.
fn money_differences(kind: SourceKind, what: &str, reference: &Money, got: &Money) -> Vec<String> {
    let mut out = Vec::new();
    for key in reference.keys().filter(|k| !got.contains_key(*k)) {
        out.push(format!("{kind}{what} {key:?}: not found"));
    }
    for key in got.keys().filter(|k| !reference.contains_key(*k)) {
        out.push(format!("{kind}{what} {key:?}: found, not by the reference"));
    }
    for (key, (impact, causes)) in reference {
        let Some((i, c)) = got.get(key) else {
            continue;
        };
        if !agree(*i, *impact) {
            out.push(format!(
                "{kind}{what} {key:?}: impact_usd {i} against {impact}"
            ));
        }
        let names: std::collections::BTreeSet<&String> = causes.keys().chain(c.keys()).collect();
        for name in names {
            let want = causes.get(name).copied().unwrap_or(0.0);
            let have = c.get(name).copied().unwrap_or(0.0);
            if !agree(have, want) {
                out.push(format!(
                    "{kind}{what} {key:?}: cache_miss_causes.{name}.usd {have} against {want}"
                ));
            }
        }
    }
    out
}

/// The traffic of `days` days, served through the reference API, LiteLLM
/// and Langfuse: the money of every finding of each row source against the
/// reference's. Returns how many findings the reference made, and the
/// differences.
async fn money_through_row_sources(
    sim: &SimServer,
    from: DateTime<Utc>,
    days: i64,
    what: &str,
) -> (usize, Vec<String>) {
    let to = from + ChronoDuration::days(days);
    let reference = money(&findings(sim, SourceKind::Reference, from, to).await);
    let mut differences = Vec::new();
    for kind in [SourceKind::Litellm, SourceKind::Langfuse] {
        let got = money(&findings(sim, kind, from, to).await);
        differences.extend(money_differences(kind, what, &reference, &got));
    }
    (reference.len(), differences)
}

/// Several days of both scenario families, each served through the
/// reference API, LiteLLM and Langfuse: every finding's `impact_usd` and
/// every cache-miss cause's dollars agree within 1%, because the three
/// carry the same facts (each call's cost, tokens and status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn days_of_both_families_give_the_same_money_through_the_row_sources() {
    const DAYS: u32 = 2;
    let mut total = 0;
    let mut differences = Vec::new();
    for (family, seed) in [
        ("scenario", 7),
        ("scenario", 11),
        ("scenario", 23),
        ("adversarial", 1234),
    ] {
        let params = ScenarioParams {
            seed,
            days: DAYS,
            ..ScenarioParams::default()
        };
        let dataset = if family == "adversarial" {
            // The adversarial family serves some sessions' rows without a
            // per-model breakdown, a fact the row sources' calls always
            // carry; indexed again, every session row has it, so the three
            // sources carry the same facts.
            let d = scenario::adversarial::generate(&params);
            costwatch_sim::Dataset::new(d.models, d.sessions, d.truth)
        } else {
            scenario::generate(&params)
        };
        let sim = start_sim(dataset).await;
        let what = format!(" ({family} seed {seed})");
        let (n, d) = money_through_row_sources(&sim, params.start, i64::from(DAYS), &what).await;
        assert!(n >= 5, "{family} seed {seed}: {n} findings");
        total += n;
        differences.extend(d);
    }
    assert!(
        differences.is_empty(),
        "{} of {total} findings' money differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
