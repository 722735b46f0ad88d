//! What calls cost: the price tables ([`table`]: a source's catalogue,
//! `source.models_file`, the table shipped inside the binary, all in the
//! one shape of [`list`]), the prices
//! learned from the costs a source reports ([`learned`]), and the
//! providers' prompt-caching facts ([`caching`]). Sources price the calls
//! they read with them; detectors read the caching facts.

pub mod caching;
pub mod learned;
pub mod list;
pub mod table;

use serde::{Deserialize, Serialize};

/// A model's prices, per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Model id.
    pub id: String,
    /// Uncached prompt tokens.
    pub input_usd_per_mtok: f64,
    /// Prompt tokens read from cache; `None` without a prompt cache.
    pub cached_input_usd_per_mtok: Option<f64>,
    /// Prompt tokens written to cache; `None` without a prompt cache.
    pub cache_write_usd_per_mtok: Option<f64>,
    /// Completion tokens.
    pub output_usd_per_mtok: f64,
    /// Whether the model has a prompt cache at all.
    pub supports_prompt_cache: bool,
    /// Smallest prompt prefix the model caches, in tokens, when the gateway
    /// publishes it (`min_cacheable_prompt_tokens`, optional).
    #[serde(default)]
    pub min_cacheable_prompt_tokens: Option<u64>,
    /// How long the model's cached prefix lives after its last use, in
    /// seconds, where a table gives it (`cache_lifetime_seconds`,
    /// optional).
    #[serde(default)]
    pub cache_lifetime_seconds: Option<u64>,
}
