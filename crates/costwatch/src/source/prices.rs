//! Prices for calls a source does not price: the source's own catalogue,
//! then `source.models_file`, then the table shipped inside the binary
//! (`prices/default.json`, generated from LiteLLM's bundled cost map by
//! `prices/regenerate.py`; its `source` field names the version).
//!
//! Every table has the shape of the reference API's `GET /models` answer,
//! so one parser and one set of checks serve them all.

use super::{ModelPrice, wire};
use std::collections::HashMap;
use std::path::Path;

/// The table shipped inside the binary.
const DEFAULT_TABLE: &str = include_str!("prices/default.json");

/// Model prices by id; the first table listing a model wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    models: Vec<ModelPrice>,
    by_id: HashMap<String, usize>,
}

impl PriceTable {
    /// A table of `models`; a model listed twice keeps its first entry.
    pub fn new(models: Vec<ModelPrice>) -> PriceTable {
        let mut table = PriceTable::default();
        table.extend(models);
        table
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
    wire::parse::<Head>(DEFAULT_TABLE.as_bytes())
        .map(|h| format!("{}, generated {}", h.source, h.generated))
        .unwrap_or_default()
}

/// Parses a price table in the `GET /models` shape; the message names the
/// failing field (`data[3].input_usd_per_mtok: ...`).
pub fn parse(body: &[u8]) -> Result<Vec<ModelPrice>, String> {
    let list: wire::ModelList = wire::parse(body)?;
    wire::models(list)
}

/// Reads `source.models_file`.
pub fn load_file(path: &Path) -> Result<Vec<ModelPrice>, String> {
    let body = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&body).map_err(|e| format!("{}: {e}", path.display()))
}

impl ModelPrice {
    /// What one call costs at these prices: uncached input, cache reads,
    /// cache writes (at the input price where no write price is set) and
    /// output.
    pub fn cost(&self, input: u64, cached: u64, cache_write: u64, output: u64) -> f64 {
        let read_price = self
            .cached_input_usd_per_mtok
            .unwrap_or(self.input_usd_per_mtok);
        let write_price = self
            .cache_write_usd_per_mtok
            .unwrap_or(self.input_usd_per_mtok);
        let uncached = input.saturating_sub(cached).saturating_sub(cache_write);
        (uncached as f64 * self.input_usd_per_mtok
            + cached as f64 * read_price
            + cache_write as f64 * write_price
            + output as f64 * self.output_usd_per_mtok)
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
