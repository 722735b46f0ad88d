//! `GET /model/info`: the proxy's deployments with the prices LiteLLM
//! knows for them, as [`ModelPrice`]s.
//!
//! Each entry is `{model_name, litellm_params, model_info}`; `model_info`
//! is the deployment's configuration merged with LiteLLM's cost map
//! (`proxy_server.py: _enrich_model_info_with_litellm_data`), so it holds
//! `input_cost_per_token`, `output_cost_per_token`,
//! `cache_read_input_token_cost`, `cache_creation_input_token_cost` (dollars
//! per token) and `supports_prompt_caching`. A model LiteLLM cannot price
//! has null costs and is left out: the price table fills it in.
//!
//! Prices are keyed by `model_name`, the name callers ask for and the
//! spend log's `model_group`, which is what a call row's `model` is. A
//! name served by several deployments takes the first priced one;
//! wildcard routes (`openai/*`) name no model and are left out.

use super::check::{self, MAX_PRICE_USD_PER_MTOK};
use super::wire::{ModelEntry, WireModelInfo};
use crate::source::ModelPrice;

/// The priced models of a `/model/info` answer; a price outside the
/// limits fails the answer with its path (`data[2].model_info.
/// input_cost_per_token: ...`).
pub(super) fn prices(entries: Vec<ModelEntry>) -> Result<Vec<ModelPrice>, String> {
    let mut out: Vec<ModelPrice> = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let info = entry.model_info.unwrap_or_default();
        let priced = price(&info).map_err(|e| format!("data[{i}].model_info.{e}"))?;
        let Some(mut model) = priced else { continue };
        if entry.model_name.contains('*') || out.iter().any(|m| m.id == entry.model_name) {
            continue;
        }
        check::id("model_name", &entry.model_name).map_err(|e| format!("data[{i}].{e}"))?;
        model.id = entry.model_name;
        out.push(model);
    }
    Ok(out)
}

/// The prices of one deployment per million tokens; `None` without an
/// input or an output price.
fn price(info: &WireModelInfo) -> Result<Option<ModelPrice>, String> {
    let (Some(input), Some(output)) = (info.input_cost_per_token, info.output_cost_per_token)
    else {
        return Ok(None);
    };
    let cached = info
        .cache_read_input_token_cost
        .map(|p| per_mtok("cache_read_input_token_cost", p))
        .transpose()?;
    let write = info
        .cache_creation_input_token_cost
        .map(|p| per_mtok("cache_creation_input_token_cost", p))
        .transpose()?;
    Ok(Some(ModelPrice {
        id: String::new(),
        input_usd_per_mtok: per_mtok("input_cost_per_token", input)?,
        cached_input_usd_per_mtok: cached,
        cache_write_usd_per_mtok: write,
        output_usd_per_mtok: per_mtok("output_cost_per_token", output)?,
        supports_prompt_cache: info.supports_prompt_caching.unwrap_or(cached.is_some()),
        min_cacheable_prompt_tokens: None,
        cache_lifetime_seconds: None,
    }))
}

/// Dollars per token as dollars per million tokens, to the nano-dollar
/// (so `1e-7` per token reads back as `0.1`, not `0.09999999999999999`).
fn per_mtok(field: &str, per_token: f64) -> Result<f64, String> {
    let v = (per_token * 1e6 * 1e9).round() / 1e9;
    check::usd(field, v, MAX_PRICE_USD_PER_MTOK).map_err(|_| {
        format!(
            "{field}: {per_token} per token is not between 0 and {} per million",
            MAX_PRICE_USD_PER_MTOK
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::litellm::wire::{ModelInfoList, parse};
    use serde_json::json;

    #[test]
    fn priced_models_are_read_per_million_and_unpriced_ones_left_out() {
        // Shaped as LiteLLM 1.110.2 answers (`model_info_v1`).
        let answer = json!({"data": [
            {"model_name": "claude-sonnet", "litellm_params": {"model": "anthropic/claude-sonnet-4-5"},
             "model_info": {"id": "a1", "db_model": false, "key": "claude-sonnet-4-5",
                "max_tokens": 64000, "input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5,
                "cache_read_input_token_cost": 3e-7, "cache_creation_input_token_cost": 3.75e-6,
                "supports_prompt_caching": true, "litellm_provider": "anthropic", "mode": "chat"}},
            {"model_name": "gpt-mini", "litellm_params": {"model": "openai/gpt-4o-mini"},
             "model_info": {"id": "b2", "input_cost_per_token": 1.5e-7, "output_cost_per_token": 6e-7,
                "cache_read_input_token_cost": 7.5e-8, "supports_prompt_caching": null}},
            {"model_name": "local-llama", "litellm_params": {"model": "ollama/llama3"},
             "model_info": {"id": "c3", "input_cost_per_token": null, "output_cost_per_token": null}},
            {"model_name": "openai/*", "litellm_params": {"model": "openai/*"},
             "model_info": {"input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6}},
            {"model_name": "claude-sonnet", "model_info": {"input_cost_per_token": 9e-6,
                "output_cost_per_token": 9e-6}},
            {"model_name": "bare"}
        ]});
        let list: ModelInfoList = parse(answer).unwrap_or(ModelInfoList { data: Vec::new() });
        let got = prices(list.data).unwrap_or_default();
        let ids: Vec<&str> = got.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["claude-sonnet", "gpt-mini"]);
        let sonnet = &got[0];
        assert_eq!(sonnet.input_usd_per_mtok, 3.0);
        assert_eq!(sonnet.output_usd_per_mtok, 15.0);
        assert_eq!(sonnet.cached_input_usd_per_mtok, Some(0.3));
        assert_eq!(sonnet.cache_write_usd_per_mtok, Some(3.75));
        assert!(sonnet.supports_prompt_cache);
        assert_eq!(sonnet.min_cacheable_prompt_tokens, None);
        let mini = &got[1];
        assert_eq!(mini.input_usd_per_mtok, 0.15);
        assert_eq!(mini.cached_input_usd_per_mtok, Some(0.075));
        assert_eq!(mini.cache_write_usd_per_mtok, None);
        // No flag: a cache price says the model caches.
        assert!(mini.supports_prompt_cache);
    }

    #[test]
    fn a_price_outside_the_limits_names_its_path() {
        let list: ModelInfoList = parse(json!({"data": [
            {"model_name": "ok", "model_info": {"input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6}},
            {"model_name": "bad", "model_info": {"input_cost_per_token": -1e-6, "output_cost_per_token": 1e-6}}
        ]}))
        .unwrap_or(ModelInfoList { data: Vec::new() });
        let err = prices(list.data).err().unwrap_or_default();
        assert!(
            err.starts_with("data[1].model_info.input_cost_per_token"),
            "{err}"
        );
        let err = parse::<ModelInfoList>(json!({"data": [{"model_name": "m",
            "model_info": {"input_cost_per_token": "cheap"}}]}))
        .err()
        .unwrap_or_default();
        assert!(
            err.starts_with("data[0].model_info.input_cost_per_token"),
            "{err}"
        );
    }
}
