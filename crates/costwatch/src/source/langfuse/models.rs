//! `GET /api/public/models`: a project's model definitions, Langfuse's
//! managed ones and its own, read page by page into [`Definitions`].
//!
//! Followed from `langfuse/langfuse`:
//! - `fern/apis/server/definition/models.yml` (the `list` endpoint, `page`
//!   from 1 and `limit`, the `PaginatedModels` answer) and `commons.yml`
//!   (`Model`);
//! - `web/src/pages/api/public/models/index.ts` and
//!   `web/src/features/models/server/publicApiModelService.ts`
//!   (`listModelsForApi`: the project's definitions and the managed ones,
//!   ordered by `modelName`, `unit`, then `startDate` newest first; `meta`
//!   `{page, limit, totalItems, totalPages}`);
//! - `web/src/features/public-api/types/models.ts` (`APIModelDefinition`:
//!   `id`, `modelName`, `matchPattern`, `startDate` (nullable), `unit`,
//!   the legacy `inputPrice`, `outputPrice`, `totalPrice`, `prices` (the
//!   default tier's, `{usageType: {price}}`), `pricingTiers` (`name`,
//!   `isDefault`, `priority`, `conditions`, `prices` as `{usageType:
//!   price}`), `isLangfuseManaged`) and
//!   `packages/shared/src/utils/zod.ts` (`publicApiPaginationZod`: `limit`
//!   at most 100);
//! - `packages/shared/src/features/model-pricing/validation.ts` (a tier's
//!   conditions).
//!
//! Prices are dollars per unit; costwatch reads those of definitions in
//! `TOKENS` (or without a unit) per million tokens. A definition's prices
//! are its `pricingTiers`, else its `prices`, else the legacy fields. What
//! Langfuse accepts and costwatch cannot use is left out with a warning
//! (a pattern the `regex` crate does not read, such as a look-ahead) or
//! silently (another unit); a page of another shape, or a price outside
//! the limits, fails the read, which the row source then reports and
//! prices from its tables meanwhile.

use super::pricing::{Condition, Definition, Definitions, Operator, Tier, tier_price};
use crate::limits::MAX_PRICE_USD_PER_MTOK;
use chrono::{DateTime, NaiveDate, Utc};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The largest `limit` the models API accepts.
pub(super) const PAGE_LIMIT: u32 = 100;

/// The most bytes a compiled pattern may take.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// One page: `{"data": [...], "meta": {...}}`.
#[derive(Debug, Deserialize)]
pub(super) struct Page {
    #[serde(default)]
    pub data: Option<Vec<WireDefinition>>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

/// The `meta` of a page.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Meta {
    #[serde(default)]
    pub total_pages: Option<u64>,
}

/// One model definition as the API writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireDefinition {
    id: Option<String>,
    model_name: Option<String>,
    match_pattern: Option<String>,
    start_date: Option<String>,
    unit: Option<String>,
    input_price: Option<f64>,
    output_price: Option<f64>,
    total_price: Option<f64>,
    prices: Option<BTreeMap<String, WirePrice>>,
    pricing_tiers: Option<Vec<WireTier>>,
    is_langfuse_managed: Option<bool>,
}

/// A usage type's price in `prices`: `{"price": 0.000001}`.
#[derive(Debug, Deserialize)]
pub(super) struct WirePrice {
    price: f64,
}

/// A pricing tier.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireTier {
    #[serde(default)]
    is_default: bool,
    #[serde(default)]
    priority: i64,
    #[serde(default)]
    conditions: Vec<Value>,
    #[serde(default)]
    prices: BTreeMap<String, f64>,
}

/// What a page's definitions became: those costwatch prices with, and a
/// warning for each one it had to leave out.
#[derive(Debug, Default)]
pub(super) struct Read {
    pub definitions: Vec<Definition>,
    pub left_out: Vec<String>,
}

/// Maps one page's definitions onto `read`; the error names the field
/// (`data[2].pricingTiers[0].prices.input: ...`).
pub(super) fn map_page(data: Vec<WireDefinition>, read: &mut Read) -> Result<(), String> {
    for (i, d) in data.into_iter().enumerate() {
        let at = |e: String| format!("data[{i}].{e}");
        match definition(d).map_err(at)? {
            Ok(Some(def)) => read.definitions.push(def),
            Ok(None) => {}
            Err(warning) => read.left_out.push(at(warning)),
        }
    }
    Ok(())
}

/// One definition: an error for a definition of another shape; `Err`
/// inside for one left out with a reason; `None` for one costwatch has no
/// use for (not priced in tokens, or without a price).
fn definition(d: WireDefinition) -> Result<Result<Option<Definition>, String>, String> {
    let id = d.id.filter(|s| !s.is_empty()).ok_or("id: missing")?;
    let name = d
        .model_name
        .filter(|s| !s.is_empty())
        .ok_or("modelName: missing")?;
    super::limits::id("modelName", &name)?;
    let pattern = d.match_pattern.ok_or("matchPattern: missing")?;
    let start = d
        .start_date
        .as_deref()
        .map(|s| date(s).map_err(|e| format!("startDate: {e}")))
        .transpose()?;
    let custom = !d.is_langfuse_managed.unwrap_or(true);
    if d.unit.as_deref().is_some_and(|u| u != "TOKENS") {
        return Ok(Ok(None));
    }
    let tiers = match d.pricing_tiers.filter(|t| !t.is_empty()) {
        Some(tiers) => tiers,
        None => vec![WireTier {
            is_default: true,
            priority: 0,
            conditions: Vec::new(),
            prices: flat_prices(d.prices, d.input_price, d.output_price, d.total_price),
        }],
    };
    let mut default = None;
    let mut others: Vec<(i64, Tier)> = Vec::new();
    for (t, tier) in tiers.into_iter().enumerate() {
        let at = |e: String| format!("pricingTiers[{t}].{e}");
        let per_mtok = |k: &str, v: f64| per_mtok(k, v).map_err(|e| format!("prices.{e}"));
        let Some(price) = tier_price(&tier.prices, per_mtok).map_err(at)? else {
            continue;
        };
        if tier.is_default {
            default.get_or_insert(price);
            continue;
        }
        let mut conditions = Vec::with_capacity(tier.conditions.len());
        for (c, v) in tier.conditions.iter().enumerate() {
            match condition(v) {
                Ok(cond) => conditions.push(cond),
                Err(e) => return Ok(Err(at(format!("conditions[{c}]: {e}")))),
            }
        }
        others.push((tier.priority, Tier { conditions, price }));
    }
    let Some(default) = default else {
        return Ok(Ok(None));
    };
    others.sort_by_key(|(p, _)| *p);
    let pattern = match compile(&pattern, false) {
        Ok(p) => p,
        Err(e) => return Ok(Err(format!("matchPattern: {e} (definition {id})"))),
    };
    Ok(Ok(Some(Definition {
        name,
        pattern,
        start,
        custom,
        tiers: others.into_iter().map(|(_, t)| t).collect(),
        default,
    })))
}

/// The default tier's prices of a definition without `pricingTiers`:
/// `prices`, else the legacy `inputPrice`, `outputPrice`, `totalPrice`.
fn flat_prices(
    prices: Option<BTreeMap<String, WirePrice>>,
    input: Option<f64>,
    output: Option<f64>,
    total: Option<f64>,
) -> BTreeMap<String, f64> {
    match prices.filter(|p| !p.is_empty()) {
        Some(p) => p.into_iter().map(|(k, v)| (k, v.price)).collect(),
        None => [("input", input), ("output", output), ("total", total)]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v?)))
            .collect(),
    }
}

/// A tier's condition: a usage condition, or one on attributes costwatch
/// cannot see.
fn condition(v: &Value) -> Result<Condition, String> {
    let Some(pattern) = v.get("usageDetailPattern") else {
        return if v.get("source").is_some() {
            Ok(Condition::Unsupported)
        } else {
            Err("neither a usage nor an attribute condition".into())
        };
    };
    let pattern = pattern.as_str().ok_or("usageDetailPattern: not a string")?;
    let operator = v
        .get("operator")
        .and_then(Value::as_str)
        .and_then(Operator::parse)
        .ok_or("operator: not one of gt, gte, lt, lte, eq, neq")?;
    let value = v
        .get("value")
        .and_then(Value::as_f64)
        .ok_or("value: not a number")?;
    let case_sensitive = v
        .get("caseSensitive")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let pattern = compile(pattern, !case_sensitive)?;
    Ok(Condition::Usage {
        pattern,
        operator,
        value,
    })
}

fn compile(pattern: &str, case_insensitive: bool) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let first = e.to_string();
            let first = first.lines().last().unwrap_or_default().trim().to_owned();
            format!(
                "{} is not a pattern costwatch reads ({first})",
                crate::printable::Printable(pattern)
            )
        })
}

/// A start date: a timestamp, or a day (from its midnight, UTC).
fn date(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| format!("{} is not a date", crate::printable::Printable(s)))
}

/// Dollars per unit as dollars per million units, to the nano-dollar.
fn per_mtok(field: &str, per_unit: f64) -> Result<f64, String> {
    let v = (per_unit * 1e6 * 1e9).round() / 1e9;
    if v.is_finite() && (0.0..=MAX_PRICE_USD_PER_MTOK).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{}: {per_unit} per unit is not between 0 and {MAX_PRICE_USD_PER_MTOK} per million",
            crate::printable::Printable(field)
        ))
    }
}

/// The definitions of every page read.
pub(super) fn definitions(read: Read) -> Definitions {
    Definitions::new(read.definitions)
}
