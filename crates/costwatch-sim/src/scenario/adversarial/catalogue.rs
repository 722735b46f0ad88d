//! The adversarial family's model catalogue, as `GET /v1/models` lists it
//! (gateway-api.md section 1), and the facts about each model that the
//! gateway does not publish but that decide what waste is: the minimum
//! cacheable prefix, how long a cached prefix lives, and which models are
//! the premium tier.
//!
//! The minimums follow the providers' published prompt-caching rules: 1,024
//! tokens for most models, 2,048 for the small Claude models and 4,096 for
//! the largest; 1,024 for Gemini's Flash models, which the shipped caching
//! table of costwatch states as 2,048 for the family. A prefix stays cached for five minutes after its last use.

use crate::dataset::SimModel;

pub use super::super::models::{GEMINI, LUNA, NOVA, SOL, SONNET};

/// A small Claude model with a 2,048-token cache minimum (not premium).
pub const HAIKU: &str = "claude-haiku-5";
/// The largest Claude model, premium, with a 4,096-token cache minimum.
pub const OPUS: &str = "claude-opus-5";

/// How long a cached prefix lives after the call that wrote or read it.
pub const CACHE_TTL_MS: i64 = 5 * 60 * 1_000;
/// Prompt caches read and write in blocks of this many tokens.
pub const CACHE_BLOCK: u64 = 128;
/// The largest prompt of a tiny call, in tokens.
pub const TINY_INPUT: u64 = 1_000;
/// The largest completion of a tiny call, in tokens.
pub const TINY_OUTPUT: u64 = 500;

/// The smallest prompt prefix the model caches; `None` for a model without
/// a prompt cache (or an unknown one).
pub fn min_prefix(model: &str) -> Option<u64> {
    match model {
        LUNA | SOL | SONNET | GEMINI => Some(1_024),
        HAIKU => Some(2_048),
        OPUS => Some(4_096),
        _ => None,
    }
}

/// Whether the model is of the premium tier: the large models a small
/// model's sub-task should not go to.
pub fn is_premium(model: &str) -> bool {
    matches!(model, SOL | SONNET | OPUS)
}

/// Whether a call is a tiny one.
pub fn is_tiny(input: u64, output: u64) -> bool {
    input <= TINY_INPUT && output <= TINY_OUTPUT
}

/// Tokens a prompt cache holds of a `tokens`-long prefix: whole blocks.
pub fn cache_blocks(tokens: u64) -> u64 {
    tokens / CACHE_BLOCK * CACHE_BLOCK
}

/// The family's catalogue: the first family's five models, a small Claude
/// model and the largest one.
pub fn catalogue() -> Vec<SimModel> {
    use super::super::models::model;
    vec![
        model(LUNA, 0.10, Some(0.01), Some(0.125), 0.40),
        model(SOL, 2.50, Some(0.25), Some(3.125), 10.0),
        model(SONNET, 3.00, Some(0.30), Some(3.75), 15.0),
        model(HAIKU, 0.80, Some(0.08), Some(1.00), 4.00),
        model(OPUS, 15.0, Some(1.50), Some(18.75), 75.0),
        model(NOVA, 0.20, None, None, 0.80),
        model(GEMINI, 0.15, Some(0.0375), None, 0.60),
    ]
}
