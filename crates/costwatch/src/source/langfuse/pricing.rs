//! Langfuse's model definitions as prices: which definition prices a call
//! and at which of its tiers.
//!
//! Followed from `langfuse/langfuse`:
//! - `packages/shared/src/server/ingestion/modelMatch.ts`
//!   (`findModelInPostgres`): a definition matches when the call's model
//!   name matches its `matchPattern` (PostgreSQL's `~`: a regular
//!   expression searched anywhere in the name, case-sensitive unless the
//!   pattern starts with `(?i)`); of those that match, the project's own
//!   definitions come before Langfuse's managed ones, then the newest
//!   `startDate`, a definition without one last;
//! - `fern/apis/server/definition/models.yml` (`modelName`): a definition
//!   applies only to calls after its `startDate` ("newest according to
//!   startTime where model.startTime < observation.startTime"). The
//!   matching query above does not filter on the date; costwatch follows
//!   the documented rule, so that a price that starts later never prices
//!   an earlier call;
//! - `packages/shared/src/server/pricing-tiers/matcher.ts`
//!   (`matchPricingTier`): the tiers that are not the default, by
//!   ascending `priority`, the first whose conditions all hold, else the
//!   default tier; a usage condition sums the usage details whose keys
//!   match `usageDetailPattern` (case-insensitive unless `caseSensitive`)
//!   and compares the sum with `value` (`gt`, `gte`, `lt`, `lte`, `eq`,
//!   `neq`);
//! - `packages/shared/src/features/model-pricing/validation.ts` (the
//!   conditions: usage conditions, and attribute conditions on a call's
//!   model parameters or metadata).
//!
//! What costwatch does not follow: a call's usage details are rebuilt from
//! its tokens as `input` (uncached), `input_cached_tokens`,
//! `input_cache_creation`, `output` and `total`, whatever keys the call
//! was traced with; an attribute condition (model parameters, metadata)
//! never holds, since a call row does not carry them, so its tier is never
//! picked; a tier is picked only for a call costwatch prices itself (one
//! Langfuse did not price), and a model's price in the detectors'
//! catalogue is its default tier's.

use super::usage::{is_cache_read, is_cache_write};
use crate::pricing::table::{Billed, PriceRules};
use crate::source::ModelPrice;
use chrono::{DateTime, Utc};
use regex::Regex;
use std::collections::BTreeMap;

/// One model definition, ready to match calls.
#[derive(Debug, Clone)]
pub(super) struct Definition {
    /// `modelName`.
    pub name: String,
    /// `matchPattern`.
    pub pattern: Regex,
    /// `startDate`: the definition prices calls from then on.
    pub start: Option<DateTime<Utc>>,
    /// The project's own definition (`isLangfuseManaged: false`).
    pub custom: bool,
    /// The tiers other than the default, by ascending priority.
    pub tiers: Vec<Tier>,
    /// The default tier's prices (the id left empty).
    pub default: ModelPrice,
}

/// A tier other than the default.
#[derive(Debug, Clone)]
pub(super) struct Tier {
    /// What must all hold for the tier to price a call (never empty).
    pub conditions: Vec<Condition>,
    /// Its prices (the id left empty).
    pub price: ModelPrice,
}

/// A tier's condition.
#[derive(Debug, Clone)]
pub(super) enum Condition {
    /// The usage details whose keys match `pattern`, summed, compared with
    /// `value`.
    Usage {
        pattern: Regex,
        operator: Operator,
        value: f64,
    },
    /// A condition costwatch cannot evaluate (on model parameters or
    /// metadata): it never holds.
    Unsupported,
}

/// A usage condition's comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operator {
    Gt,
    Gte,
    Lt,
    Lte,
    Eq,
    Neq,
}

impl Operator {
    /// Langfuse's spelling (`gt`, ...).
    pub fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "gt" => Operator::Gt,
            "gte" => Operator::Gte,
            "lt" => Operator::Lt,
            "lte" => Operator::Lte,
            "eq" => Operator::Eq,
            "neq" => Operator::Neq,
            _ => return None,
        })
    }

    fn holds(self, sum: f64, value: f64) -> bool {
        match self {
            Operator::Gt => sum > value,
            Operator::Gte => sum >= value,
            Operator::Lt => sum < value,
            Operator::Lte => sum <= value,
            Operator::Eq => sum == value,
            Operator::Neq => sum != value,
        }
    }
}

impl Condition {
    fn holds(&self, usage: &[(&str, u64)]) -> bool {
        match self {
            Condition::Usage {
                pattern,
                operator,
                value,
            } => {
                let sum: u64 = usage
                    .iter()
                    .filter(|(k, _)| pattern.is_match(k))
                    .map(|(_, v)| v)
                    .sum();
                operator.holds(sum as f64, *value)
            }
            Condition::Unsupported => false,
        }
    }
}

impl Definition {
    /// The prices of a call with `billed` tokens: the first tier whose
    /// conditions all hold, else the default.
    fn tier(&self, billed: &Billed) -> &ModelPrice {
        let usage = [
            ("input", billed.uncached),
            ("input_cached_tokens", billed.cached),
            ("input_cache_creation", billed.write),
            ("output", billed.output),
            (
                "total",
                billed.uncached + billed.cached + billed.write + billed.output,
            ),
        ];
        self.tiers
            .iter()
            .find(|t| !t.conditions.is_empty() && t.conditions.iter().all(|c| c.holds(&usage)))
            .map_or(&self.default, |t| &t.price)
    }

    /// Whether it ranks before `other` when both match: the project's own
    /// first, then the newest start date, one without a date last.
    fn before(&self, other: &Definition) -> bool {
        (self.custom, self.start) > (other.custom, other.start)
    }
}

/// A project's model definitions, managed and its own.
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    defs: Vec<Definition>,
}

impl Definitions {
    /// Definitions in the order Langfuse listed them (which breaks ties).
    pub(super) fn new(defs: Vec<Definition>) -> Definitions {
        Definitions { defs }
    }

    /// How many definitions there are.
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// The definition that prices a call to `model` at `at`, if any.
    fn matching(&self, model: &str, at: DateTime<Utc>) -> Option<&Definition> {
        let mut best: Option<&Definition> = None;
        for d in &self.defs {
            if d.start.is_some_and(|s| s > at) || !d.pattern.is_match(model) {
                continue;
            }
            if best.is_none_or(|b| d.before(b)) {
                best = Some(d);
            }
        }
        best
    }
}

impl PriceRules for Definitions {
    fn price(&self, model: &str, at: DateTime<Utc>, billed: Option<&Billed>) -> Option<ModelPrice> {
        let d = self.matching(model, at)?;
        let mut p = billed.map_or(&d.default, |b| d.tier(b)).clone();
        model.clone_into(&mut p.id);
        Some(p)
    }

    fn listed(&self) -> Vec<ModelPrice> {
        self.newest(None)
    }

    fn listed_at(&self, at: DateTime<Utc>) -> Vec<ModelPrice> {
        self.newest(Some(at))
    }
}

impl Definitions {
    /// Each model name at its own newest definition (not after `at`, where
    /// given), default tier.
    fn newest(&self, at: Option<DateTime<Utc>>) -> Vec<ModelPrice> {
        let mut newest: BTreeMap<&str, &Definition> = BTreeMap::new();
        for d in &self.defs {
            if at.is_some_and(|at| d.start.is_some_and(|s| s > at)) {
                continue;
            }
            let keep = newest.get(d.name.as_str()).is_none_or(|b| d.before(b));
            if keep {
                newest.insert(&d.name, d);
            }
        }
        newest
            .into_iter()
            .map(|(name, d)| ModelPrice {
                id: name.to_owned(),
                ..d.default.clone()
            })
            .collect()
    }
}

/// The prices of a tier (usage type to dollars per unit) per million
/// tokens, with an empty id; `None` when it prices neither the input nor
/// the total. `input` (else `input_tokens`, `prompt_tokens`, else `total`)
/// is the uncached prompt; `output` (else `output_tokens`,
/// `completion_tokens`, else `total`) the completion, 0 where the tier has
/// no price for it (Langfuse bills a usage type without a price nothing);
/// the first usage type that names a cache read (`input_cached_tokens`,
/// `input_cache_read`, `cache_read_input_tokens`) the cache reads, and the
/// first that names a cache write (`input_cache_creation`,
/// `cache_creation_input_tokens`, ..., a one-hour write last) the cache
/// writes. `per_mtok` converts a price per token, naming the usage type
/// in its error.
pub(super) fn tier_price(
    prices: &BTreeMap<String, f64>,
    per_mtok: impl Fn(&str, f64) -> Result<f64, String>,
) -> Result<Option<ModelPrice>, String> {
    let get = |keys: &[&str]| -> Result<Option<f64>, String> {
        keys.iter()
            .find_map(|k| prices.get(*k).map(|v| per_mtok(k, *v)))
            .transpose()
    };
    let total = get(&["total"])?;
    let Some(input) = get(&["input", "input_tokens", "prompt_tokens"])?.or(total) else {
        return Ok(None);
    };
    let output = get(&["output", "output_tokens", "completion_tokens"])?
        .or(total)
        .unwrap_or(0.0);
    let first = |pick: &dyn Fn(&str) -> bool| -> Result<Option<f64>, String> {
        prices
            .iter()
            .find(|(k, _)| pick(k))
            .map(|(k, v)| per_mtok(k, *v))
            .transpose()
    };
    let cached = first(&|k| is_cache_read(k))?;
    let write = match first(&|k| is_cache_write(k) && !k.ends_with("_1h"))? {
        Some(w) => Some(w),
        None => first(&|k| is_cache_write(k))?,
    };
    Ok(Some(ModelPrice {
        id: String::new(),
        input_usd_per_mtok: input,
        cached_input_usd_per_mtok: cached,
        cache_write_usd_per_mtok: write,
        output_usd_per_mtok: output,
        supports_prompt_cache: cached.is_some(),
        min_cacheable_prompt_tokens: None,
        cache_lifetime_seconds: None,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
