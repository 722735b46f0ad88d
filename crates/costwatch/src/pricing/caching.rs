//! The providers' prompt-caching facts per model family, dated and with
//! their sources (`pricing/caching.json`, shipped inside the binary): the
//! smallest cacheable prefix, how long a cached prefix lives after its last
//! use, and what a cache write costs as a multiple of the input price.
//! Providers changed these during 2026, so they live in a table, never in
//! code.
//!
//! They fill what a price table leaves out: a model's own row (the
//! gateway's catalogue, `source.models_file`, the shipped prices) wins
//! where it gives a field. Both are only the prior: what the traffic shows
//! (`detect::caching`) outranks them, and a rule's
//! `model_min_cacheable_tokens` and `model_cache_lifetime_seconds` win over
//! everything.

use super::ModelPrice;
use serde::Deserialize;

/// The table shipped inside the binary.
const TABLE: &str = include_str!("caching.json");

/// One row of the table: the facts of the models whose id starts with
/// `match`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachingFact {
    /// The id prefix the row covers (`claude-opus-4-5`); the longest
    /// matching prefix wins.
    #[serde(rename = "match")]
    pub prefix: String,
    /// Smallest cacheable prefix, in tokens.
    pub min_cacheable_prompt_tokens: Option<u64>,
    /// How long a cached prefix lives after its last use, in seconds.
    pub cache_lifetime_seconds: Option<u64>,
    /// A cache write's price as a multiple of the input price.
    #[serde(default)]
    pub cache_write_multiplier: Option<f64>,
    /// Where the facts were read.
    pub source: String,
    /// When (`YYYY-MM`).
    pub date: String,
}

#[derive(Debug, Deserialize)]
struct Table {
    collected: String,
    rows: Vec<CachingFact>,
}

/// The shipped facts (empty if the table were broken, which a test rules
/// out), and the day they were collected.
fn table() -> (Vec<CachingFact>, String) {
    serde_json::from_str::<Table>(TABLE)
        .map(|t| (t.rows, t.collected))
        .unwrap_or_default()
}

/// When the shipped facts were collected.
pub fn collected() -> String {
    table().1
}

/// The facts that cover `model` (its id without a `provider/` prefix).
pub fn fact_for<'a>(facts: &'a [CachingFact], model: &str) -> Option<&'a CachingFact> {
    let bare = model.rsplit_once('/').map_or(model, |(_, bare)| bare);
    facts
        .iter()
        .filter(|f| bare.starts_with(&f.prefix))
        .max_by_key(|f| f.prefix.len())
}

/// `models` with what the shipped facts know filled in where a model's own
/// row says nothing: its minimum, its lifetime, and, for a model with a
/// prompt cache, its write price.
pub fn with_caching_facts(models: Vec<ModelPrice>) -> Vec<ModelPrice> {
    fill(models).0
}

/// Which of a model's caching facts the shipped table filled in; the
/// others, where it has them, came with its own row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filled {
    /// Its minimum cacheable prefix.
    pub min: bool,
    /// Its cache lifetime.
    pub lifetime: bool,
}

/// [`with_caching_facts`], and which facts of each model the table filled
/// in (models it filled nothing of are left out).
pub fn fill(mut models: Vec<ModelPrice>) -> (Vec<ModelPrice>, Vec<(String, Filled)>) {
    let (facts, _) = table();
    let mut filled = Vec::new();
    for m in &mut models {
        let Some(f) = fact_for(&facts, &m.id) else {
            continue;
        };
        let marks = Filled {
            min: m.min_cacheable_prompt_tokens.is_none() && f.min_cacheable_prompt_tokens.is_some(),
            lifetime: m.cache_lifetime_seconds.is_none() && f.cache_lifetime_seconds.is_some(),
        };
        m.min_cacheable_prompt_tokens = m
            .min_cacheable_prompt_tokens
            .or(f.min_cacheable_prompt_tokens);
        m.cache_lifetime_seconds = m.cache_lifetime_seconds.or(f.cache_lifetime_seconds);
        if m.supports_prompt_cache && m.cache_write_usd_per_mtok.is_none() {
            m.cache_write_usd_per_mtok = f.cache_write_multiplier.map(|x| x * m.input_usd_per_mtok);
        }
        if marks != Filled::default() {
            filled.push((m.id.clone(), marks));
        }
    }
    (models, filled)
}

/// Whether the facts leave `m`'s caching unknown: a cache-capable model
/// whose minimum or lifetime neither its row nor the shipped facts give
/// (the rules' defaults then stand in).
pub fn lacks_facts(m: &ModelPrice) -> bool {
    m.supports_prompt_cache
        && (m.min_cacheable_prompt_tokens.is_none() || m.cache_lifetime_seconds.is_none())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn price(id: &str) -> ModelPrice {
        ModelPrice {
            id: id.into(),
            input_usd_per_mtok: 3.0,
            cached_input_usd_per_mtok: Some(0.3),
            cache_write_usd_per_mtok: None,
            output_usd_per_mtok: 15.0,
            supports_prompt_cache: true,
            min_cacheable_prompt_tokens: None,
            cache_lifetime_seconds: None,
        }
    }

    #[test]
    fn the_shipped_table_reads_and_every_row_is_dated_and_sourced() {
        let (facts, collected) = table();
        assert!(facts.len() >= 10, "{}", facts.len());
        assert_eq!(collected, "2026-12-01");
        for f in &facts {
            assert!(!f.source.is_empty() && f.date.len() == 7, "{f:?}");
            assert!(f.min_cacheable_prompt_tokens.is_some(), "{f:?}");
        }
    }

    #[test]
    fn the_longest_prefix_wins_and_a_models_own_row_wins_over_the_facts() {
        let filled = with_caching_facts(vec![
            price("anthropic/claude-opus-4-5-20251101"),
            price("claude-sonnet-4-5"),
            price("gpt-5.6-mini"),
            price("unknown-model"),
            ModelPrice {
                min_cacheable_prompt_tokens: Some(2_000),
                cache_write_usd_per_mtok: Some(9.0),
                ..price("claude-haiku-4-5")
            },
        ]);
        assert_eq!(filled[0].min_cacheable_prompt_tokens, Some(4_096));
        assert_eq!(filled[0].cache_lifetime_seconds, Some(300));
        assert_eq!(filled[0].cache_write_usd_per_mtok, Some(3.75));
        assert_eq!(filled[1].min_cacheable_prompt_tokens, Some(1_024));
        assert_eq!(filled[2].cache_lifetime_seconds, Some(1_800));
        assert_eq!(filled[3], price("unknown-model"));
        assert!(lacks_facts(&filled[3]) && !lacks_facts(&filled[1]));
        // Its own minimum and write price stand; the lifetime is filled.
        assert_eq!(filled[4].min_cacheable_prompt_tokens, Some(2_000));
        assert_eq!(filled[4].cache_write_usd_per_mtok, Some(9.0));
        assert_eq!(filled[4].cache_lifetime_seconds, Some(300));
    }
}
