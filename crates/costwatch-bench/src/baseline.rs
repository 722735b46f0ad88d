//! The static-threshold baseline: the three rules a user writes first, before
//! any peer baseline, read through the same REST API as costwatch.
//!
//! - `no_cache`: two or more calls and not one cached prompt token;
//! - `oversized_model`: calls to a premium model (input price at least five
//!   times the cheapest model in the catalogue) averaging under 1,000 prompt
//!   tokens;
//! - `retry_loop`: ten or more calls.
//!
//! `crates/costwatch-bench/reference.py` is the same three rules as the short Python script a
//! user would write; the benchmark checks both flag the same sessions.

use chrono::{DateTime, Utc};
use costwatch::config::Severity;
use costwatch::detect::{Finding, Kind, group_key};
use costwatch::source::{ModelPrice, SessionRecord, Source, SourceError, Window};
use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

/// `no_cache`: fewest calls.
pub const NO_CACHE_MIN_REQUESTS: u64 = 2;
/// `oversized_model`: a premium model's input price over the cheapest one's.
pub const PREMIUM_PRICE_RATIO: f64 = 5.0;
/// `oversized_model`: average prompt per premium call below which it is tiny.
pub const TINY_INPUT_TOKENS: f64 = 1_000.0;
/// `retry_loop`: fewest calls.
pub const RETRY_MIN_REQUESTS: u64 = 10;

/// The rule names the baseline's findings carry.
pub fn rule_name(kind: Kind) -> &'static str {
    match kind {
        Kind::NoCache => "static-no-cache",
        Kind::OversizedModel => "static-premium-small-prompt",
        Kind::RetryLoop => "static-many-calls",
    }
}

/// The static rules, with the premium models of a catalogue.
#[derive(Debug, Clone, Default)]
pub struct StaticRules {
    premium: BTreeSet<String>,
}

impl StaticRules {
    /// Premium models are those whose input price is at least
    /// [`PREMIUM_PRICE_RATIO`] times the cheapest positive input price.
    pub fn new(models: &[ModelPrice]) -> Self {
        let cheapest = models
            .iter()
            .map(|m| m.input_usd_per_mtok)
            .filter(|p| *p > 0.0)
            .min_by(f64::total_cmp);
        let premium = match cheapest {
            Some(c) => models
                .iter()
                .filter(|m| m.input_usd_per_mtok >= PREMIUM_PRICE_RATIO * c)
                .map(|m| m.id.clone())
                .collect(),
            None => BTreeSet::new(),
        };
        StaticRules { premium }
    }

    /// The premium models.
    pub fn premium(&self) -> &BTreeSet<String> {
        &self.premium
    }

    /// The kinds a session is flagged for, in [`Kind::ALL`] order.
    pub fn check(&self, s: &SessionRecord) -> Vec<Kind> {
        let mut out = Vec::new();
        if s.requests >= NO_CACHE_MIN_REQUESTS && s.cached_tokens == 0 {
            out.push(Kind::NoCache);
        }
        let tiny_premium = s.by_model.iter().any(|m| {
            m.requests > 0
                && self.premium.contains(&m.model)
                && (m.input_tokens as f64 / m.requests as f64) < TINY_INPUT_TOKENS
        });
        if tiny_premium {
            out.push(Kind::OversizedModel);
        }
        if s.requests >= RETRY_MIN_REQUESTS {
            out.push(Kind::RetryLoop);
        }
        out
    }
}

/// Reads `[from, to)` window by window, like costwatch, and flags every
/// session the static rules match, once per kind (in the first window it is
/// flagged in). Findings carry the group `feature=...` so the same alert
/// grouping can be applied to them.
pub async fn run<S: Source>(
    source: &S,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
) -> Result<Vec<Finding>, SourceError> {
    run_with(source, from, to, window, |_| {}).await
}

/// Like [`run`], calling `before` with each window before it is read (to
/// move a live simulator's clock, for instance).
pub async fn run_with<S: Source>(
    source: &S,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
    mut before: impl FnMut(&Window),
) -> Result<Vec<Finding>, SourceError> {
    let rules = StaticRules::new(&source.models().await?);
    let group_by = ["feature".to_owned()];
    let step = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::minutes(15));
    let mut seen: HashSet<(Kind, String)> = HashSet::new();
    let mut findings = Vec::new();
    let mut start = from;
    while start < to {
        let w = Window {
            start,
            end: (start + step).min(to),
        };
        before(&w);
        source
            .sessions(w, |s| {
                for kind in rules.check(&s) {
                    if seen.insert((kind, s.session_id.clone())) {
                        findings.push(static_finding(kind, &s, w, &group_by));
                    }
                }
            })
            .await?;
        start = w.end;
    }
    Ok(findings)
}

fn static_finding(kind: Kind, s: &SessionRecord, window: Window, group_by: &[String]) -> Finding {
    Finding {
        kind,
        session_id: s.session_id.clone(),
        window,
        severity: Severity::Warning,
        rule: rule_name(kind).to_owned(),
        group: group_key(&s.labels, group_by),
        labels: s.labels.clone(),
        cost_usd: s.cost_usd,
        impact_usd: 0.0,
        evidence: serde_json::Value::Null,
        explanation: String::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use costwatch::source::ModelUsage;

    fn price(id: &str, input: f64) -> ModelPrice {
        ModelPrice {
            id: id.into(),
            input_usd_per_mtok: input,
            cached_input_usd_per_mtok: Some(input / 10.0),
            cache_write_usd_per_mtok: None,
            output_usd_per_mtok: input * 4.0,
            supports_prompt_cache: true,
            min_cacheable_prompt_tokens: None,
            cache_lifetime_seconds: None,
        }
    }

    fn catalogue() -> Vec<ModelPrice> {
        vec![
            price("cheap", 0.10),
            price("mid", 0.49),
            price("edge", 0.50),
            price("premium", 2.50),
            price("free", 0.0),
        ]
    }

    fn usage(model: &str, requests: u64, input: u64) -> ModelUsage {
        ModelUsage {
            model: model.into(),
            requests,
            input_tokens: input,
            cached_tokens: 0,
            output_tokens: 10,
            cost_usd: 0.001,
        }
    }

    fn session(requests: u64, cached: u64, by_model: Vec<ModelUsage>) -> SessionRecord {
        SessionRecord {
            session_id: "s".into(),
            first_request_at: DateTime::<Utc>::UNIX_EPOCH,
            last_request_at: DateTime::<Utc>::UNIX_EPOCH,
            requests,
            errors: 0,
            input_tokens: by_model.iter().map(|m| m.input_tokens).sum(),
            cached_tokens: cached,
            cache_write_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.01,
            by_model,
            labels: Default::default(),
            cost_computed: false,
            cache_unreported: false,
        }
    }

    #[test]
    fn premium_means_five_times_the_cheapest_positive_input_price() {
        let r = StaticRules::new(&catalogue());
        let premium: Vec<&str> = r.premium().iter().map(String::as_str).collect();
        assert_eq!(premium, ["edge", "premium"]);
        assert!(StaticRules::new(&[]).premium().is_empty());
    }

    #[test]
    fn no_cache_needs_two_calls_and_zero_cached_tokens() {
        let r = StaticRules::new(&catalogue());
        let one = session(1, 0, vec![usage("cheap", 1, 3_000)]);
        let two = session(2, 0, vec![usage("cheap", 2, 3_000)]);
        let cached = session(2, 1, vec![usage("cheap", 2, 3_000)]);
        assert!(r.check(&one).is_empty());
        assert_eq!(r.check(&two), [Kind::NoCache]);
        assert!(r.check(&cached).is_empty());
    }

    #[test]
    fn oversized_needs_a_premium_model_under_1000_tokens_per_call() {
        let r = StaticRules::new(&catalogue());
        let tiny = session(3, 5, vec![usage("premium", 3, 2_997)]);
        let exactly = session(2, 5, vec![usage("premium", 2, 2_000)]);
        let cheap = session(3, 5, vec![usage("mid", 3, 300)]);
        let mixed = session(4, 5, vec![usage("cheap", 2, 100), usage("edge", 2, 1_998)]);
        let zero_calls = session(1, 5, vec![usage("premium", 0, 0)]);
        assert_eq!(r.check(&tiny), [Kind::OversizedModel]);
        assert!(r.check(&exactly).is_empty(), "1,000 is not under 1,000");
        assert!(r.check(&cheap).is_empty());
        assert_eq!(r.check(&mixed), [Kind::OversizedModel]);
        assert!(r.check(&zero_calls).is_empty());
    }

    #[tokio::test]
    async fn run_reads_the_simulator_window_by_window_and_flags_each_session_once() {
        use costwatch_sim::{Dataset, SimOptions, SimServer};
        let d = Dataset::from_fixture(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../costwatch-sim/data/seed-window.json"
        ))
        .unwrap();
        let (first, last) = d.time_range().unwrap();
        let sim = SimServer::start(std::sync::Arc::new(d), SimOptions::default())
            .await
            .unwrap();
        let source = crate::quality::sim_source(&sim.base_url(), sim.admin_key()).unwrap();
        // One-minute windows: sessions spanning several are flagged once.
        let from = first - chrono::Duration::minutes(1);
        let found = run(
            &source,
            from,
            last + chrono::Duration::minutes(1),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        let of = |k: Kind| -> Vec<&str> {
            found
                .iter()
                .filter(|f| f.kind == k)
                .map(|f| f.session_id.as_str())
                .collect()
        };
        let mut unique: Vec<(Kind, &str)> = found
            .iter()
            .map(|f| (f.kind, f.session_id.as_str()))
            .collect();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            found.len(),
            "a session flagged twice for one kind"
        );
        assert!(of(Kind::NoCache).contains(&"replay-mismatch-a14896679e70"));
        assert_eq!(of(Kind::OversizedModel), ["subagent-sol-9b31c0e4d2aa"]);
        assert_eq!(of(Kind::RetryLoop), ["retry-loop-7f2e81c09ab5"]);
        assert!(
            found
                .iter()
                .all(|f| f.group.starts_with("feature=") && f.rule.starts_with("static-"))
        );
        // The hook sees every window once, in order, before it is read.
        let mut seen = Vec::new();
        let again = run_with(
            &source,
            from,
            last + chrono::Duration::minutes(1),
            Duration::from_secs(60),
            |w| seen.push(*w),
        )
        .await
        .unwrap();
        assert_eq!(again, found);
        assert_eq!(seen.first().map(|w| w.start), Some(from));
        assert!(seen.windows(2).all(|p| p[0].end == p[1].start));
        assert!(seen.last().is_some_and(|w| w.end > last));
        sim.shutdown().await.unwrap();
    }

    #[test]
    fn retry_loop_needs_ten_calls_and_kinds_combine() {
        let r = StaticRules::new(&catalogue());
        let nine = session(9, 5, vec![usage("cheap", 9, 900)]);
        let ten = session(10, 0, vec![usage("premium", 10, 900)]);
        assert!(r.check(&nine).is_empty());
        assert_eq!(
            r.check(&ten),
            [Kind::NoCache, Kind::OversizedModel, Kind::RetryLoop]
        );
    }
}
