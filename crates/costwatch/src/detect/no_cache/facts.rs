//! The caching facts a model is judged with, as `costwatch check
//! --online` and the status page list them.

use super::{cache_lifetime_from, min_cacheable_from};
use crate::detect::rules::NoCache;
use crate::detect::{CachingEvidence, Catalogue, FactFrom};
use serde::Serialize;

/// The caching facts no_cache judges a model with, each with its origin,
/// and the value of the table or models file the traffic contradicted
/// where an observed fact outranked it: what `costwatch check --online`
/// and the status page show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CachingFacts {
    /// The model.
    pub model: String,
    /// Its smallest cacheable prefix, in tokens.
    pub min_cacheable_tokens: u64,
    /// Where that came from.
    pub min_cacheable_from: FactFrom,
    /// How long its cached prefix lives after its last use, in seconds.
    pub cache_lifetime_seconds: u64,
    /// Where that came from.
    pub cache_lifetime_from: FactFrom,
    /// The minimum the table or models file states (and which), where the
    /// traffic showed a smaller prompt read.
    pub contradicted_min: Option<(u64, FactFrom)>,
    /// The lifetime the table or models file states (and which), where
    /// the traffic showed a read after a longer pause.
    pub contradicted_lifetime: Option<(u64, FactFrom)>,
}

impl CachingFacts {
    /// The facts of `model` as `rule` judges it with `cat`.
    pub fn of(model: &str, cat: &Catalogue, rule: &NoCache) -> CachingFacts {
        let (min, min_from) = min_cacheable_from(model, cat, rule);
        let (lifetime, lifetime_from) = cache_lifetime_from(model, cat, rule);
        let overruled = |prior: Option<(u64, FactFrom)>, from: FactFrom| {
            prior.filter(|(_, p)| {
                from == FactFrom::Observed && matches!(p, FactFrom::Table | FactFrom::ModelsFile)
            })
        };
        CachingFacts {
            model: model.to_owned(),
            min_cacheable_tokens: min,
            min_cacheable_from: min_from,
            cache_lifetime_seconds: lifetime.as_secs(),
            cache_lifetime_from: lifetime_from,
            contradicted_min: overruled(cat.min_cacheable(model), min_from),
            contradicted_lifetime: overruled(
                cat.cache_lifetime(model).map(|(d, f)| (d.as_secs(), f)),
                lifetime_from,
            ),
        }
    }

    /// The facts of every model `evidence` holds, as the rules' defaults
    /// judge them with the shipped table (models the table does not know
    /// taken as cache-capable, since the traffic showed their cache), in
    /// name order.
    pub fn of_evidence(evidence: &CachingEvidence) -> Vec<CachingFacts> {
        let rows = evidence
            .iter()
            .map(|(model, _)| crate::source::ModelPrice {
                id: model.clone(),
                input_usd_per_mtok: 0.0,
                cached_input_usd_per_mtok: Some(0.0),
                cache_write_usd_per_mtok: None,
                output_usd_per_mtok: 0.0,
                supports_prompt_cache: true,
                min_cacheable_prompt_tokens: None,
                cache_lifetime_seconds: None,
            })
            .collect();
        let (rows, tabled) = crate::pricing::caching::fill(rows);
        let mut cat = Catalogue::new(rows, std::iter::empty()).with_tabled(tabled);
        cat.learn(evidence);
        let rule = NoCache::default();
        let mut models: Vec<&String> = evidence.iter().map(|(m, _)| m).collect();
        models.sort();
        models
            .into_iter()
            .map(|m| CachingFacts::of(m, &cat, &rule))
            .collect()
    }

    /// One line: "caching facts: M: minimum N tokens (origin; the shipped
    /// table says X tokens), lifetime S s (origin)".
    pub fn line(&self) -> String {
        let said = |prior: Option<(u64, FactFrom)>, unit: &str| match prior {
            Some((v, FactFrom::Table)) => format!("; the shipped table says {v} {unit}"),
            Some((v, _)) => format!("; the models file says {v} {unit}"),
            None => String::new(),
        };
        format!(
            "caching facts: {}: minimum {} tokens ({}{}), lifetime {} s ({}{})",
            self.model,
            self.min_cacheable_tokens,
            self.min_cacheable_from.as_str(),
            said(self.contradicted_min, "tokens"),
            self.cache_lifetime_seconds,
            self.cache_lifetime_from.as_str(),
            said(self.contradicted_lifetime, "s"),
        )
    }
}
