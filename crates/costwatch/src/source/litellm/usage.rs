//! Prompt-cache tokens in a spend-log row's `metadata`, in every spelling
//! LiteLLM has written them.
//!
//! `prompt_tokens` already holds the whole prompt: LiteLLM adds cache reads
//! and writes to it for the providers that report them apart
//! (`llms/anthropic/chat/transformation.py: calculate_usage`,
//! `llms/bedrock/chat/converse_transformation.py: transform_usage`;
//! OpenAI and Gemini count them in the prompt themselves). The parts are in
//! `metadata`:
//!
//! - `additional_usage_values` is the response's usage without
//!   `prompt_tokens`, `completion_tokens` and `total_tokens`
//!   (`spend_tracking_utils.py: get_logging_payload`). Since the
//!   normalisation there it carries `cache_read_input_tokens` and
//!   `cache_creation_input_tokens` for every provider (copied from
//!   `prompt_tokens_details.cached_tokens` and `.cache_write_tokens` /
//!   `.cache_creation_tokens` when the provider did not report them apart,
//!   and only when above zero); rows written before it carry only
//!   `prompt_tokens_details`.
//! - `usage_object` is the usage as the standard logging payload saw it,
//!   with the same fields.
//!
//! The first spelling present (and not null) wins, in the order of
//! [`READ`] and [`WRITE`]. `cache_hit` is LiteLLM's response cache (the
//! whole answer served from its own cache), not the provider's prompt
//! cache, and is never read as cached tokens.

use super::check;
use super::metadata::{Details, Metadata, Usage};
use serde_json::Value;

/// A count at one spelling: its path in the row (`metadata.…`), and how
/// it is found there.
type Spelling = (
    &'static str,
    for<'m> fn(&'m Metadata<'_>) -> Option<&'m Value>,
);

fn additional<'m>(m: &'m Metadata<'_>) -> Option<&'m Usage> {
    m.additional_usage_values.as_ref()
}

fn usage_object<'m>(m: &'m Metadata<'_>) -> Option<&'m Usage> {
    m.usage_object.as_ref()
}

fn details(u: Option<&Usage>) -> Option<&Details> {
    u?.prompt_tokens_details.as_ref()
}

/// Where prompt tokens read from the cache are found, first match wins.
pub(super) const READ: &[Spelling] = &[
    (
        "metadata.additional_usage_values.cache_read_input_tokens",
        |m| additional(m)?.cache_read_input_tokens.as_ref(),
    ),
    (
        "metadata.additional_usage_values.prompt_tokens_details.cached_tokens",
        |m| details(additional(m))?.cached_tokens.as_ref(),
    ),
    ("metadata.usage_object.cache_read_input_tokens", |m| {
        usage_object(m)?.cache_read_input_tokens.as_ref()
    }),
    (
        "metadata.usage_object.prompt_tokens_details.cached_tokens",
        |m| details(usage_object(m))?.cached_tokens.as_ref(),
    ),
];

/// Where prompt tokens written to the cache are found, first match wins.
pub(super) const WRITE: &[Spelling] = &[
    (
        "metadata.additional_usage_values.cache_creation_input_tokens",
        |m| additional(m)?.cache_creation_input_tokens.as_ref(),
    ),
    (
        "metadata.additional_usage_values.prompt_tokens_details.cache_creation_tokens",
        |m| details(additional(m))?.cache_creation_tokens.as_ref(),
    ),
    (
        "metadata.additional_usage_values.prompt_tokens_details.cache_write_tokens",
        |m| details(additional(m))?.cache_write_tokens.as_ref(),
    ),
    ("metadata.usage_object.cache_creation_input_tokens", |m| {
        usage_object(m)?.cache_creation_input_tokens.as_ref()
    }),
    (
        "metadata.usage_object.prompt_tokens_details.cache_creation_tokens",
        |m| details(usage_object(m))?.cache_creation_tokens.as_ref(),
    ),
    (
        "metadata.usage_object.prompt_tokens_details.cache_write_tokens",
        |m| details(usage_object(m))?.cache_write_tokens.as_ref(),
    ),
];

/// A part of the prompt and where it was read (`metadata.usage_object.
/// cache_read_input_tokens`), for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    /// Tokens.
    pub tokens: u64,
    /// The field it came from; empty when no spelling was present.
    pub field: &'static str,
}

/// The cache reads and writes of one row's `metadata` (zero when absent),
/// each checked to be a count.
pub(super) fn cache_tokens(metadata: &Metadata<'_>) -> Result<(Part, Part), String> {
    Ok((first(metadata, READ)?, first(metadata, WRITE)?))
}

fn first(metadata: &Metadata<'_>, spellings: &[Spelling]) -> Result<Part, String> {
    for (path, find) in spellings {
        // A null count is read as absent: `Usage` holds none.
        if let Some(v) = find(metadata) {
            let tokens = check::json_count(path, v)?;
            return Ok(Part {
                tokens,
                field: path,
            });
        }
    }
    Ok(Part {
        tokens: 0,
        field: "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn tokens(metadata: Value) -> Result<(u64, u64), String> {
        let text = metadata.to_string();
        let map = super::super::metadata::metadata_text(&text).unwrap_or_default();
        cache_tokens(&map).map(|(r, w)| (r.tokens, w.tokens))
    }

    #[test]
    fn every_spelling_is_read_and_the_normalised_one_wins() {
        // Anthropic through LiteLLM 1.110.2: both spellings, the same figures.
        let anthropic = json!({"additional_usage_values": {
            "prompt_tokens_details": {"cached_tokens": 900, "cache_creation_tokens": 40,
                                      "text_tokens": 60, "audio_tokens": null},
            "cache_creation_input_tokens": 40, "cache_read_input_tokens": 900}});
        assert_eq!(tokens(anthropic), Ok((900, 40)));
        // A row written before the normalisation: only the details.
        let old = json!({"additional_usage_values": {
            "prompt_tokens_details": {"cached_tokens": 128, "audio_tokens": 0}}});
        assert_eq!(tokens(old), Ok((128, 0)));
        // Only the standard logging payload's usage.
        let usage_object = json!({"additional_usage_values": {},
            "usage_object": {"prompt_tokens": 500, "cache_read_input_tokens": 300,
                             "cache_creation_input_tokens": 20}});
        assert_eq!(tokens(usage_object), Ok((300, 20)));
        let details = json!({"usage_object": {"prompt_tokens_details": {"cached_tokens": 64,
            "cache_write_tokens": 8}}});
        assert_eq!(tokens(details), Ok((64, 8)));
        // The normalised field wins over a stale detail.
        let both = json!({"additional_usage_values": {"cache_read_input_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 99}}});
        assert_eq!(tokens(both), Ok((10, 0)));
        // Null is absent, so the next spelling is read.
        let null = json!({"additional_usage_values": {"cache_read_input_tokens": null,
            "prompt_tokens_details": {"cached_tokens": 5}}});
        assert_eq!(tokens(null), Ok((5, 0)));
    }

    #[test]
    fn nothing_cached_is_zero_and_the_response_cache_is_not_read() {
        assert_eq!(tokens(json!({})), Ok((0, 0)));
        assert_eq!(tokens(json!({"additional_usage_values": null})), Ok((0, 0)));
        assert_eq!(
            tokens(json!({"cache_hit": "True", "cache_key": "k"})),
            Ok((0, 0))
        );
    }

    #[test]
    fn a_bad_count_names_the_spelling_it_was_read_from() {
        let err = tokens(json!({"usage_object": {"cache_read_input_tokens": -3}}))
            .err()
            .unwrap_or_default();
        assert_eq!(
            err,
            "metadata.usage_object.cache_read_input_tokens: -3 is negative"
        );
        let err = tokens(json!({"additional_usage_values": {"cache_creation_input_tokens": "x"}}))
            .err()
            .unwrap_or_default();
        assert!(
            err.starts_with("metadata.additional_usage_values.cache_creation_input_tokens:"),
            "{err}"
        );
    }
}
