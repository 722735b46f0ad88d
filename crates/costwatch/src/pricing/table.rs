//! Prices for calls a source does not price: the source's own catalogue,
//! then `source.models_file`, then the table shipped inside the binary
//! (`pricing/default.json`, generated from LiteLLM's bundled cost map by
//! `pricing/regenerate.py`; its `source` field names the version), then
//! what the source's reported costs teach (`super::learned`).
//!
//! Every table has the shape of the reference API's `GET /models` answer,
//! so one parser and one set of checks serve them all. A source's own
//! catalogue may match calls by more than a model's name (Langfuse's model
//! definitions: a pattern, a start date, tiers by usage): it is then a
//! [`PriceRules`], asked before any table.

use super::ModelPrice;
use super::list::parse;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The table shipped inside the binary.
const DEFAULT_TABLE: &str = include_str!("default.json");

/// A call's tokens by how they are billed: uncached prompt, cache reads,
/// cache writes, completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Billed {
    /// Prompt tokens neither read from nor written to the cache.
    pub uncached: u64,
    /// Prompt tokens read from the cache.
    pub cached: u64,
    /// Prompt tokens written to the cache.
    pub write: u64,
    /// Completion tokens.
    pub output: u64,
}

impl Billed {
    /// The parts of a call whose whole prompt is `input` tokens, `cached`
    /// of them read from and `write` written to the cache.
    pub fn of(input: u64, cached: u64, write: u64, output: u64) -> Billed {
        Billed {
            uncached: input.saturating_sub(cached).saturating_sub(write),
            cached,
            write,
            output,
        }
    }
}

/// A source's catalogue whose entries match calls by more than a model's
/// exact name (a pattern on the name, the date a price starts, tiers by
/// usage), such as Langfuse's model definitions.
pub trait PriceRules: Send + Sync + std::fmt::Debug {
    /// The prices, under the id `model`, of a call to `model` that started
    /// at `at`; `billed`, where given, picks the tier its usage falls in
    /// (the default tier without it). `None` when no entry matches.
    fn price(&self, model: &str, at: DateTime<Utc>, billed: Option<&Billed>) -> Option<ModelPrice>;

    /// One entry per model the catalogue names, as its newest entry
    /// prices it (default tier), for listings.
    fn listed(&self) -> Vec<ModelPrice>;

    /// [`PriceRules::listed`] as of `at`: each model the catalogue names
    /// at its newest entry not after `at`; a model none of whose entries
    /// has started yet is left out.
    fn listed_at(&self, at: DateTime<Utc>) -> Vec<ModelPrice>;
}

/// Model prices by id; the first table listing a model wins, and a
/// source's [`PriceRules`], where it has some, come before every table.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    models: Vec<ModelPrice>,
    by_id: HashMap<String, usize>,
    rules: Option<Arc<dyn PriceRules>>,
    /// How many of `models`, at the front, the rules listed.
    ruled: usize,
}

impl PriceTable {
    /// A table of `models`; a model listed twice keeps its first entry.
    pub fn new(models: Vec<ModelPrice>) -> PriceTable {
        let mut table = PriceTable::default();
        table.extend(models);
        table
    }

    /// A table of what `rules` lists, asked first for every call.
    pub fn with_rules(rules: Arc<dyn PriceRules>) -> PriceTable {
        let mut table = PriceTable::new(rules.listed());
        table.rules = Some(rules);
        table.ruled = table.models.len();
        table
    }

    /// What one call cost at the prices that held for it: the rules' entry
    /// for its model, date and usage, else the tables' price of its model.
    pub fn call_cost(&self, model: &str, at: DateTime<Utc>, billed: &Billed) -> Option<f64> {
        let cost = |p: &ModelPrice| p.cost_of(billed);
        match self
            .rules
            .as_ref()
            .and_then(|r| r.price(model, at, Some(billed)))
        {
            Some(p) => Some(cost(&p)),
            None => self.tabled(model).map(cost),
        }
    }

    /// The prices of `model`, under that id, as they stood at `at`: the
    /// rules' entry (default tier), else the tables'.
    pub fn price_at(&self, model: &str, at: DateTime<Utc>) -> Option<ModelPrice> {
        if let Some(p) = self.rules.as_ref().and_then(|r| r.price(model, at, None)) {
            return Some(p);
        }
        let mut p = self.tabled(model)?.clone();
        model.clone_into(&mut p.id);
        Some(p)
    }

    /// [`PriceTable::get`] from the tables only: what the rules list is
    /// theirs to price, as of a call's date.
    fn tabled(&self, model: &str) -> Option<&ModelPrice> {
        let tabled = |i: &&usize| **i >= self.ruled;
        let exact = self.by_id.get(model).filter(tabled);
        let bare = || {
            model
                .rsplit_once('/')
                .and_then(|(_, bare)| self.by_id.get(bare))
                .filter(tabled)
        };
        exact.or_else(bare).and_then(|&i| self.models.get(i))
    }

    /// Adds the models not listed yet.
    pub fn extend(&mut self, models: impl IntoIterator<Item = ModelPrice>) {
        for m in models {
            if !self.by_id.contains_key(&m.id) {
                self.by_id.insert(m.id.clone(), self.models.len());
                self.models.push(m);
            }
        }
    }

    /// The prices of `model`, if known: by its exact id, else without a
    /// `provider/` prefix (`openai/gpt-4o` is priced as `gpt-4o`).
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        let exact = self.by_id.get(model);
        let bare = || {
            model
                .rsplit_once('/')
                .and_then(|(_, bare)| self.by_id.get(bare))
        };
        exact.or_else(bare).and_then(|&i| self.models.get(i))
    }

    /// The models the rules list (their prices depend on the date).
    pub fn ruled(&self) -> &[ModelPrice] {
        self.models.get(..self.ruled).unwrap_or_default()
    }

    /// The models the rules list, as of `at` ([`PriceRules::listed_at`]).
    pub fn ruled_at(&self, at: DateTime<Utc>) -> Vec<ModelPrice> {
        self.rules
            .as_ref()
            .map_or_else(Vec::new, |r| r.listed_at(at))
    }

    /// Every model, in the order tables were added.
    pub fn models(&self) -> &[ModelPrice] {
        &self.models
    }

    /// How many models the table prices.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether the table prices nothing.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

/// The table shipped inside the binary.
pub fn default_table() -> Vec<ModelPrice> {
    // Checked by a test; a broken table would be a build defect, so it
    // degrades to no table rather than failing a daemon.
    parse(DEFAULT_TABLE.as_bytes()).unwrap_or_default()
}

/// Where the shipped table's prices come from, and when it was made.
pub fn default_table_source() -> String {
    #[derive(serde::Deserialize)]
    struct Head {
        source: String,
        generated: String,
    }
    crate::decode::json::<Head>(DEFAULT_TABLE.as_bytes())
        .map(|h| format!("{}, generated {}", h.source, h.generated))
        .unwrap_or_default()
}

/// Reads `source.models_file`.
pub fn load_file(path: &Path) -> Result<Vec<ModelPrice>, String> {
    let body = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&body).map_err(|e| format!("{}: {e}", path.display()))
}

/// `base` with `over` laid on it: an entry of `over` replaces the entry of
/// `base` with its id. What a window's calls taught about prices
/// ([`crate::source::Source::window_models`]) is laid on a source's catalogue so.
pub fn overlay(base: &[ModelPrice], over: Vec<ModelPrice>) -> Vec<ModelPrice> {
    if over.is_empty() {
        return base.to_vec();
    }
    let named: std::collections::HashSet<&str> = over.iter().map(|m| m.id.as_str()).collect();
    let mut out: Vec<ModelPrice> = base
        .iter()
        .filter(|m| !named.contains(m.id.as_str()))
        .cloned()
        .collect();
    out.extend(over);
    out
}

impl ModelPrice {
    /// What one call costs at these prices: uncached input, cache reads,
    /// cache writes (at the input price where no write price is set) and
    /// output.
    pub fn cost(&self, input: u64, cached: u64, cache_write: u64, output: u64) -> f64 {
        self.cost_of(&Billed::of(input, cached, cache_write, output))
    }

    /// [`ModelPrice::cost`] of a call's billed parts.
    pub fn cost_of(&self, b: &Billed) -> f64 {
        let read_price = self
            .cached_input_usd_per_mtok
            .unwrap_or(self.input_usd_per_mtok);
        let write_price = self
            .cache_write_usd_per_mtok
            .unwrap_or(self.input_usd_per_mtok);
        (b.uncached as f64 * self.input_usd_per_mtok
            + b.cached as f64 * read_price
            + b.write as f64 * write_price
            + b.output as f64 * self.output_usd_per_mtok)
            / 1e6
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_and_prices_common_models() {
        let table = PriceTable::new(default_table());
        assert!(table.len() > 50, "{} models", table.len());
        let m = table.get("gpt-4o-mini").expect("gpt-4o-mini");
        assert_eq!(m.input_usd_per_mtok, 0.15);
        assert_eq!(m.cached_input_usd_per_mtok, Some(0.075));
        assert!(m.supports_prompt_cache);
        let c = table.get("claude-sonnet-4-5").expect("claude-sonnet-4-5");
        assert_eq!(c.cache_write_usd_per_mtok, Some(3.75));
        let source = default_table_source();
        assert!(source.starts_with("LiteLLM "), "{source}");
        assert!(source.contains(", generated 20"), "{source}");
    }

    #[test]
    fn a_provider_prefix_is_looked_through_and_the_first_table_wins() {
        let mut table = PriceTable::new(vec![price("gpt-4o", 9.0)]);
        table.extend(default_table());
        assert_eq!(table.get("openai/gpt-4o").unwrap().input_usd_per_mtok, 9.0);
        assert!(table.get("no-such-model").is_none());
    }

    #[test]
    fn cost_counts_each_part_of_the_prompt_at_its_price() {
        let m = ModelPrice {
            cached_input_usd_per_mtok: Some(0.1),
            cache_write_usd_per_mtok: Some(1.25),
            output_usd_per_mtok: 5.0,
            ..price("m", 1.0)
        };
        // 1M prompt: 500k read, 100k written, 400k plain; 200k out.
        let usd = m.cost(1_000_000, 500_000, 100_000, 200_000);
        assert!((usd - (0.4 + 0.05 + 0.125 + 1.0)).abs() < 1e-12, "{usd}");
    }

    /// Prices `m` at 1.0 from 2026 on.
    #[derive(Debug)]
    struct From2026;

    impl PriceRules for From2026 {
        fn price(&self, model: &str, at: DateTime<Utc>, _: Option<&Billed>) -> Option<ModelPrice> {
            let start = "2026-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap();
            (model.ends_with('m') && at >= start).then(|| price(model, 1.0))
        }

        fn listed(&self) -> Vec<ModelPrice> {
            vec![price("m", 1.0)]
        }

        fn listed_at(&self, at: DateTime<Utc>) -> Vec<ModelPrice> {
            self.price("m", at, None).into_iter().collect()
        }
    }

    #[test]
    fn rules_come_first_and_alone_price_what_they_list() {
        let mut table = PriceTable::with_rules(Arc::new(From2026));
        table.extend(vec![price("m", 9.0), price("t", 2.0)]);
        let ids: Vec<&str> = table.ruled().iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m"]);
        let (before, after) = (
            "2025-06-01T00:00:00Z".parse().unwrap(),
            "2026-06-01T00:00:00Z".parse().unwrap(),
        );
        let p = table.price_at("openai/m", after).unwrap();
        assert_eq!((p.id.as_str(), p.input_usd_per_mtok), ("openai/m", 1.0));
        // Before its date, not at the price the rules list for later.
        assert_eq!(table.price_at("m", before), None);
        let t = table.price_at("vendor/t", before).unwrap();
        assert_eq!((t.id.as_str(), t.input_usd_per_mtok), ("vendor/t", 2.0));
        let b = Billed::of(1_000_000, 0, 0, 0);
        assert_eq!(table.call_cost("m", after, &b), Some(1.0));
        assert_eq!(table.call_cost("t", after, &b), Some(2.0));
        assert_eq!(table.call_cost("m", before, &b), None);
    }

    #[test]
    fn a_broken_table_names_the_field() {
        let err = parse(br#"{"data":[{"id":"m","input_usd_per_mtok":"x"}]}"#).unwrap_err();
        assert!(err.contains("data[0].input_usd_per_mtok"), "{err}");
    }

    fn price(id: &str, input: f64) -> ModelPrice {
        ModelPrice {
            id: id.to_owned(),
            input_usd_per_mtok: input,
            cached_input_usd_per_mtok: None,
            cache_write_usd_per_mtok: None,
            output_usd_per_mtok: input * 4.0,
            supports_prompt_cache: false,
            min_cacheable_prompt_tokens: None,
            cache_lifetime_seconds: None,
        }
    }
}
