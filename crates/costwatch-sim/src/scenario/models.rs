//! The simulated gateway's model catalogue, as `GET /v1/models` lists it
//! (gateway-api.md section 1: prices per million tokens, `null` cache prices
//! where a model has no prompt cache).

use crate::dataset::SimModel;

/// The small, cheap default model.
pub const LUNA: &str = "gpt-6-luna";
/// The premium model.
pub const SOL: &str = "gpt-6.1-sol";
/// The other premium model.
pub const SONNET: &str = "claude-sonnet-5.5";
/// A fast model whose provider caches prompts from 1,024 tokens, although
/// the shipped caching table says 2,048 for its family (only the traffic
/// can tell); no write premium.
pub const GEMINI: &str = "gemini-3.6-flash";
/// A cheap model without prompt cache.
pub const NOVA: &str = "nova-lite";

/// A catalogue entry with its prices per million tokens; it supports the
/// prompt cache when it has a cached-input price.
pub(in crate::scenario) fn model(
    id: &str,
    input: f64,
    cached: Option<f64>,
    write: Option<f64>,
    output: f64,
) -> SimModel {
    SimModel {
        id: id.to_string(),
        input_usd_per_mtok: input,
        cached_input_usd_per_mtok: cached,
        cache_write_usd_per_mtok: write,
        output_usd_per_mtok: output,
        supports_prompt_cache: cached.is_some(),
    }
}

/// The simulated gateway's model catalogue.
pub fn catalogue() -> Vec<SimModel> {
    vec![
        model(LUNA, 0.10, Some(0.01), Some(0.125), 0.40),
        model(SOL, 2.50, Some(0.25), Some(3.125), 10.0),
        model(SONNET, 3.00, Some(0.30), Some(3.75), 15.0),
        model(NOVA, 0.20, None, None, 0.80),
        model(GEMINI, 0.15, Some(0.0375), None, 0.60),
    ]
}
