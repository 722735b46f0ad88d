//! Model prices, what counts as a premium model, and what is known of each
//! model's prompt cache: the prior (the model's own row or the shipped
//! table) and what the traffic showed ([`super::caching`]).

use super::FastMap;
use super::caching::{CachingEvidence, FactFrom, ModelCaching};
use crate::pricing::caching::Filled;
use crate::source::ModelPrice;
use std::time::Duration;

/// Prices of the models the gateway serves, and which of them are in use.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    prices: FastMap<String, ModelPrice>,
    cheapest_in_use: Option<(f64, String)>,
    /// The lowest positive blended price listed, in use or not.
    cheapest_listed: Option<f64>,
    /// Which caching facts of each model the shipped table filled in.
    tabled: FastMap<String, Filled>,
    /// What the traffic showed of each model's cache.
    evidence: CachingEvidence,
    /// Its figures per model, worked out once.
    observed: FastMap<String, Observed>,
}

/// What the traffic showed of one model's cache, as the checks use it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observed {
    /// The observed minimum cacheable prefix ([`ModelCaching::min_cacheable`]).
    pub min_cacheable: Option<u64>,
    /// The observed cache lifetime ([`ModelCaching::lifetime`]).
    pub lifetime: Option<Duration>,
    /// Sessions that say how the model caches, and their median cached
    /// share ([`ModelCaching::peers`]).
    pub peers: (usize, Option<f64>),
}

impl Observed {
    fn of(m: &ModelCaching) -> Observed {
        Observed {
            min_cacheable: m.min_cacheable(),
            lifetime: m.lifetime().map(Duration::from_secs),
            peers: m.peers(),
        }
    }
}

/// A price that weighs prompt and completion tokens 3:1, the usual mix of
/// agent traffic, so one number can compare two models.
pub fn blended_price(p: &ModelPrice) -> f64 {
    0.75 * p.input_usd_per_mtok + 0.25 * p.output_usd_per_mtok
}

impl Catalogue {
    /// A catalogue of `models`; `in_use` names the models seen in traffic,
    /// against the cheapest of which "premium" is measured.
    pub fn new<'a>(models: Vec<ModelPrice>, in_use: impl IntoIterator<Item = &'a str>) -> Self {
        let prices: FastMap<String, ModelPrice> =
            models.into_iter().map(|m| (m.id.clone(), m)).collect();
        let cheapest_listed = prices
            .values()
            .map(blended_price)
            .filter(|b| *b > 0.0)
            .min_by(f64::total_cmp);
        let mut cat = Catalogue {
            prices,
            cheapest_in_use: None,
            cheapest_listed,
            tabled: FastMap::default(),
            evidence: CachingEvidence::default(),
            observed: FastMap::default(),
        };
        for m in in_use {
            cat.note_in_use(m);
        }
        cat
    }

    /// Records that `model` carries traffic.
    pub fn note_in_use(&mut self, model: &str) {
        if let Some(p) = self.prices.get(model) {
            let b = blended_price(p);
            if b > 0.0 && self.cheapest_in_use.as_ref().is_none_or(|(c, _)| b < *c) {
                self.cheapest_in_use = Some((b, model.to_owned()));
            }
        }
    }

    /// Prices of one model.
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        self.prices.get(model)
    }

    /// Whether the model has a prompt cache. Unknown models are assumed not
    /// to, so they are never blamed for missing it.
    pub fn supports_cache(&self, model: &str) -> bool {
        self.prices
            .get(model)
            .is_some_and(|p| p.supports_prompt_cache && p.cached_input_usd_per_mtok.is_some())
    }

    /// Notes which caching facts of the models the shipped table filled in
    /// (`source::caching::fill`): those are the table's, the others the
    /// models' own rows'.
    pub fn with_tabled(mut self, tabled: impl IntoIterator<Item = (String, Filled)>) -> Self {
        self.tabled.extend(tabled);
        self
    }

    /// Takes in what the traffic showed of the models' caches.
    pub fn learn(&mut self, evidence: &CachingEvidence) {
        if evidence.is_empty() {
            return;
        }
        self.evidence.merge(evidence);
        self.observed = self
            .evidence
            .iter()
            .map(|(m, e)| (m.clone(), Observed::of(e)))
            .collect();
    }

    /// Everything the traffic showed so far.
    pub fn evidence(&self) -> &CachingEvidence {
        &self.evidence
    }

    /// What the traffic showed of `model`'s cache.
    pub fn observed(&self, model: &str) -> Observed {
        self.observed.get(model).copied().unwrap_or_default()
    }

    /// The smallest prompt prefix the model caches, where its row or the
    /// shipped table gives it, and which of the two did.
    pub fn min_cacheable(&self, model: &str) -> Option<(u64, FactFrom)> {
        let v = self.prices.get(model)?.min_cacheable_prompt_tokens?;
        let tabled = self.tabled.get(model).is_some_and(|f| f.min);
        Some((v, origin(tabled)))
    }

    /// How long the model's cached prefix lives after its last use, where
    /// its row or the shipped table gives it, and which of the two did.
    pub fn cache_lifetime(&self, model: &str) -> Option<(Duration, FactFrom)> {
        let v = self.prices.get(model)?.cache_lifetime_seconds?;
        let tabled = self.tabled.get(model).is_some_and(|f| f.lifetime);
        Some((Duration::from_secs(v), origin(tabled)))
    }

    /// How many times the cheapest model in use this model costs; `None` for
    /// unknown models or before any model is known to be in use.
    pub fn price_ratio(&self, model: &str) -> Option<f64> {
        let (cheapest, _) = self.cheapest_in_use.as_ref()?;
        self.prices.get(model).map(|p| blended_price(p) / cheapest)
    }

    /// Blended price of one model.
    pub fn blended(&self, model: &str) -> Option<f64> {
        self.prices.get(model).map(blended_price)
    }

    /// The price from which a model counts as premium: `ratio` times the
    /// cheapest model in use.
    pub fn premium_floor(&self, ratio: f64) -> Option<f64> {
        self.cheapest_in_use.as_ref().map(|(c, _)| c * ratio)
    }

    /// The lowest premium floor possible: `ratio` times the cheapest model
    /// listed at all (in use or not). Used to nominate candidates before the
    /// models in use are all known.
    pub fn lowest_premium_floor(&self, ratio: f64) -> Option<f64> {
        self.cheapest_listed.map(|c| c * ratio)
    }

    /// The cheapest model known to carry traffic.
    pub fn cheapest_in_use(&self) -> Option<&str> {
        self.cheapest_in_use.as_ref().map(|(_, m)| m.as_str())
    }

    /// The most `input` prompt and `output` completion tokens can cost on
    /// any one model priced below `floor` (blended): every prompt token
    /// billed at the dearer of its input and cache-write prices, none read
    /// from the cache. A session that cost more called at least one model at
    /// or above the floor. `None` when no listed model is below the floor.
    pub fn dearest_cost_below(&self, floor: f64, input: u64, output: u64) -> Option<f64> {
        self.prices
            .values()
            .filter(|p| blended_price(p) < floor)
            .map(|p| {
                let prompt = p
                    .cache_write_usd_per_mtok
                    .unwrap_or(0.0)
                    .max(p.input_usd_per_mtok);
                (input as f64 * prompt + output as f64 * p.output_usd_per_mtok) / 1e6
            })
            .max_by(f64::total_cmp)
    }

    /// What `input`/`cached`/`output` tokens cost on `model`.
    pub fn cost(&self, model: &str, input: u64, cached: u64, output: u64) -> Option<f64> {
        let p = self.prices.get(model)?;
        let cached = cached.min(input);
        let cached_price = p.cached_input_usd_per_mtok.unwrap_or(p.input_usd_per_mtok);
        Some(
            ((input - cached) as f64 * p.input_usd_per_mtok
                + cached as f64 * cached_price
                + output as f64 * p.output_usd_per_mtok)
                / 1e6,
        )
    }
}

fn origin(tabled: bool) -> FactFrom {
    if tabled {
        FactFrom::Table
    } else {
        FactFrom::ModelsFile
    }
}
