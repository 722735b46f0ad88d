//! `GET /api/public/models`: the project's model definitions, made from
//! the dataset's catalogue as Langfuse's managed definitions are written.
//!
//! Followed from `langfuse/langfuse`:
//! - `fern/apis/server/definition/models.yml` (`list`: `page` from 1,
//!   `limit`; `PaginatedModels`) and `commons.yml` (`Model`);
//! - `web/src/features/models/server/publicApiModelService.ts`
//!   (`listModelsForApi`: ordered by `modelName`, `unit`, then `startDate`
//!   newest first, a definition without one last; `meta` `{page, limit,
//!   totalItems, totalPages}`) and `web/src/features/public-api/types/models.ts`
//!   (`APIModelDefinition`: the legacy `inputPrice`, `outputPrice`,
//!   `totalPrice` and `prices` taken from the default tier, `pricingTiers`
//!   with their `conditions`, `isLangfuseManaged`);
//! - `packages/shared/src/utils/zod.ts` (`publicApiPaginationZod`: `page`
//!   above 0, default 1; `limit` at most 100, default 50), a failed check
//!   a 400 `{"message": "Invalid request data", "error": [issues]}`;
//! - `worker/src/constants/default-model-prices.json` (how the managed
//!   definitions are written: `matchPattern` as `(?i)^(openai/)?(gpt-4o)$`,
//!   prices per token under every usage type an integration writes, a
//!   "Large Context" tier on input above 200,000 tokens for Anthropic's
//!   models).
//!
//! What the simulator serves: for each model of the catalogue, unless
//! [`LangfuseSim::serve_without_definition`](super::LangfuseSim) left it
//! out (by default the model without prompt cache, `nova-lite`, whose
//! calls still carry the costs they were traced with): its current
//! definition (from 2026-01-15) at the catalogue's prices; for the premium
//! models also the definition it replaced (from 2025-03-01, dearer) and
//! an announced price cut (from 2030-01-01), neither of which prices the
//! dataset's calls. Prices are dollars per token. The simulator's own
//! choices: every definition is managed by Langfuse, and a call's costs
//! stay those of the dataset (as an integration ingested them), whatever
//! the definitions say.

use super::{ApiError, LangfuseSim};
use crate::cursor::fnv1a;
use crate::dataset::SimModel;
use crate::scenario::NOVA;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The largest `limit` the models API accepts.
pub const MAX_MODELS_LIMIT: usize = 100;

/// The models served without a definition unless told otherwise.
pub(super) const UNDEFINED_BY_DEFAULT: [&str; 1] = [NOVA];

/// When the current definitions start.
const CURRENT: &str = "2026-01-15T00:00:00.000Z";
/// When the definitions they replaced started, at twice the price.
const REPLACED: &str = "2025-03-01T00:00:00.000Z";
/// When the announced price cut, to half the price, starts.
const ANNOUNCED: &str = "2030-01-01T00:00:00.000Z";

/// The page `raw` asks for, or the 400 of a bad query.
pub(super) fn answer(sim: &LangfuseSim, raw: Option<&str>) -> Result<Value, ApiError> {
    let (page, limit) = query(raw)?;
    let mut all: Vec<Value> = sim
        .dataset
        .models
        .iter()
        .filter(|m| sim.read_shape(|s| !s.without_definition.contains(&m.id)))
        .flat_map(definitions)
        .collect();
    let key = |d: &Value| {
        (
            d["modelName"].as_str().unwrap_or_default().to_owned(),
            // Newest first, none last: descending text of ISO dates.
            std::cmp::Reverse(d["startDate"].as_str().unwrap_or_default().to_owned()),
        )
    };
    all.sort_by_key(key);
    let total = all.len();
    let data: Vec<Value> = all
        .into_iter()
        .skip((page - 1).saturating_mul(limit))
        .take(limit)
        .collect();
    Ok(json!({
        "data": data,
        "meta": {
            "page": page,
            "limit": limit,
            "totalItems": total,
            "totalPages": total.div_ceil(limit),
        }
    }))
}

/// `page` and `limit`, checked as `publicApiPaginationZod` checks them.
fn query(raw: Option<&str>) -> Result<(usize, usize), ApiError> {
    let mut page = 1.0;
    let mut limit = 50.0;
    let mut issues = Vec::new();
    for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        let n: f64 = if v.trim().is_empty() {
            continue;
        } else {
            v.trim().parse().unwrap_or(f64::NAN)
        };
        match k.as_ref() {
            "page" if n.is_nan() || n <= 0.0 || n.fract() != 0.0 => issues.push(json!({
                "origin": "number", "code": "too_small", "minimum": 0, "inclusive": false,
                "path": ["page"], "message": "Too small: expected number to be >0"
            })),
            "page" => page = n,
            "limit" if n.is_nan() || n > MAX_MODELS_LIMIT as f64 || n < 1.0 || n.fract() != 0.0 => {
                issues.push(json!({
                    "origin": "number", "code": "too_big", "maximum": MAX_MODELS_LIMIT,
                    "inclusive": true, "path": ["limit"],
                    "message": format!("Too big: expected number to be <={MAX_MODELS_LIMIT}")
                }));
            }
            "limit" => limit = n,
            _ => {}
        }
    }
    if !issues.is_empty() {
        return Err(ApiError::invalid(issues));
    }
    Ok((page as usize, limit as usize))
}

/// The definitions of one model: the current one, and for a premium
/// model (one with a prompt cache priced above a dollar per million input
/// tokens) the one it replaced and the announced cut.
fn definitions(m: &SimModel) -> Vec<Value> {
    let mut out = vec![definition(m, CURRENT, 1.0)];
    if m.supports_prompt_cache && m.input_usd_per_mtok > 1.0 {
        out.push(definition(m, REPLACED, 2.0));
        out.push(definition(m, ANNOUNCED, 0.5));
    }
    out
}

/// A definition of `m` from `start`, at `factor` times its prices.
fn definition(m: &SimModel, start: &str, factor: f64) -> Value {
    let per_token = |per_mtok: f64| per_mtok * factor / 1e6;
    let (provider, tokenizer) = match m.id.split('-').next() {
        Some("gpt") => ("openai", Some("openai")),
        Some("claude") => ("anthropic", Some("claude")),
        _ => ("[a-z]+", None),
    };
    let mut prices: BTreeMap<&str, f64> = BTreeMap::new();
    prices.insert("input", per_token(m.input_usd_per_mtok));
    prices.insert("output", per_token(m.output_usd_per_mtok));
    if let Some(read) = m.cached_input_usd_per_mtok {
        // Every spelling an integration writes a cache read in.
        for key in [
            "input_cached_tokens",
            "input_cache_read",
            "cache_read_input_tokens",
        ] {
            prices.insert(key, per_token(read));
        }
    }
    if let Some(write) = m.cache_write_usd_per_mtok {
        for key in ["input_cache_creation", "cache_creation_input_tokens"] {
            prices.insert(key, per_token(write));
        }
    }
    let id = format!("cm{:016x}", fnv1a(&["definition", &m.id, start]));
    let mut tiers = vec![tier(&id, "Standard", true, 0, json!([]), &prices, 1.0)];
    if provider == "anthropic" {
        let large = json!([{
            "usageDetailPattern": "input", "operator": "gt", "value": 200_000,
            "caseSensitive": false
        }]);
        tiers.push(tier(&id, "Large Context", false, 1, large, &prices, 2.0));
    }
    let flat: Map<String, Value> = prices
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!({ "price": v })))
        .collect();
    json!({
        "id": id,
        "modelName": m.id,
        "matchPattern": format!("(?i)^({provider}/)?({})$", escape(&m.id)),
        "startDate": start,
        "unit": "TOKENS",
        "inputPrice": prices["input"],
        "outputPrice": prices["output"],
        "totalPrice": Value::Null,
        "tokenizerId": tokenizer,
        "tokenizerConfig": Value::Null,
        "isLangfuseManaged": true,
        "createdAt": start,
        "prices": flat,
        "pricingTiers": tiers,
    })
}

/// A pricing tier as the API lists it.
fn tier(
    model_id: &str,
    name: &str,
    is_default: bool,
    priority: u32,
    conditions: Value,
    prices: &BTreeMap<&str, f64>,
    factor: f64,
) -> Value {
    let prices: Map<String, Value> = prices
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v * factor)))
        .collect();
    let id = if is_default {
        format!("{model_id}_tier_default")
    } else {
        format!("{model_id}_tier_{priority}")
    };
    json!({
        "id": id,
        "name": name,
        "isDefault": is_default,
        "priority": priority,
        "conditions": conditions,
        "prices": prices,
    })
}

/// A model name as a literal in a pattern.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if ".+*?()|[]{}^$\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use crate::scenario::{NOVA, SOL, SONNET, ScenarioParams, generate};
    use crate::server::{SimOptions, SimServer};
    use serde_json::Value;
    use std::sync::Arc;

    async fn server() -> SimServer {
        let d = generate(&ScenarioParams {
            days: 1,
            sessions_per_day: 20,
            ..Default::default()
        });
        SimServer::start(Arc::new(d), SimOptions::default())
            .await
            .unwrap()
    }

    async fn get(s: &SimServer, query: &[(&str, &str)], keys: bool) -> reqwest::Response {
        let req = reqwest::Client::new()
            .get(format!("{}/api/public/models", s.langfuse_url()))
            .query(query);
        let req = if keys {
            req.basic_auth(s.langfuse().public_key(), Some(s.langfuse().secret_key()))
        } else {
            req
        };
        req.send().await.unwrap()
    }

    #[tokio::test]
    async fn definitions_are_paged_ordered_and_priced_per_token() {
        let s = server().await;
        let all: Value = get(&s, &[], true).await.json().await.unwrap();
        let data = all["data"].as_array().unwrap();
        let total = all["meta"]["totalItems"].as_u64().unwrap() as usize;
        assert_eq!(data.len(), total);
        assert_eq!(all["meta"]["totalPages"], 1);
        let names: Vec<&str> = data
            .iter()
            .map(|d| d["modelName"].as_str().unwrap())
            .collect();
        assert!(!names.contains(&NOVA), "nova-lite has no definition");
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        // The premium models: newest first.
        let sol: Vec<&Value> = data.iter().filter(|d| d["modelName"] == SOL).collect();
        let starts: Vec<&str> = sol
            .iter()
            .map(|d| d["startDate"].as_str().unwrap())
            .collect();
        assert_eq!(
            starts,
            [
                "2030-01-01T00:00:00.000Z",
                "2026-01-15T00:00:00.000Z",
                "2025-03-01T00:00:00.000Z"
            ]
        );
        let current = sol[1];
        assert_eq!(current["inputPrice"], 2.5e-6);
        assert_eq!(current["prices"]["input_cached_tokens"]["price"], 2.5e-7);
        assert_eq!(current["pricingTiers"][0]["isDefault"], true);
        assert_eq!(current["matchPattern"], r"(?i)^(openai/)?(gpt-6\.1-sol)$");
        let sonnet = data
            .iter()
            .find(|d| d["modelName"] == SONNET && d["startDate"] == super::CURRENT)
            .unwrap();
        let large = &sonnet["pricingTiers"][1];
        assert_eq!(large["conditions"][0]["operator"], "gt");
        assert_eq!(large["prices"]["input"], 6e-6);

        // Pages of two.
        let mut seen = Vec::new();
        for page in 1..=total.div_ceil(2) {
            let p = page.to_string();
            let body: Value = get(&s, &[("page", &p), ("limit", "2")], true)
                .await
                .json()
                .await
                .unwrap();
            assert_eq!(body["meta"]["totalPages"], total.div_ceil(2));
            seen.extend(body["data"].as_array().unwrap().iter().cloned());
        }
        assert_eq!(&seen, data);

        s.langfuse().serve_without_definition([SOL.to_owned()]);
        let body: Value = get(&s, &[], true).await.json().await.unwrap();
        assert!(
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["modelName"] != SOL)
        );
    }

    #[tokio::test]
    async fn bad_paging_and_missing_keys_are_refused_as_langfuse_does() {
        let s = server().await;
        for q in [[("limit", "101")], [("page", "0")], [("limit", "x")]] {
            let res = get(&s, &q, true).await;
            assert_eq!(res.status(), 400, "{q:?}");
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["message"], "Invalid request data");
        }
        assert_eq!(get(&s, &[], false).await.status(), 401);
    }
}
