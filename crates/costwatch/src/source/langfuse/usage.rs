//! Tokens and cost of one observation, from `usageDetails`, `costDetails`
//! and `totalCost`.
//!
//! `usageDetails` is a free-form map from usage type to count. Every way
//! Langfuse fills it keeps `input` for the *uncached* prompt tokens and
//! puts each cached part under a key of its own that names the input:
//! - OpenAI (the SDK integration, normalised by the server in
//!   `packages/shared/src/server/ingestion/types.ts`,
//!   `OpenAICompletionUsageSchema`): `prompt_tokens_details.cached_tokens`
//!   becomes `input_cached_tokens` and is subtracted from `input`
//!   (likewise `input_audio_tokens`, and `output_reasoning_tokens`,
//!   `output_audio_tokens`, ... from `output`);
//! - LangChain (`langfuse/langchain/CallbackHandler.py`,
//!   `_parse_usage_model`): `input_token_details` becomes
//!   `input_cache_read` and `input_cache_creation`, subtracted from `input`;
//! - OpenTelemetry (`packages/shared/src/server/otel/OtelIngestionProcessor.ts`):
//!   `input_cached_tokens`, `input_cache_creation` (and its
//!   `input_cache_creation_5m` / `_1h` parts), `input_cache_read`,
//!   `input_cache_write`, all subtracted from `input`;
//! - Anthropic's own usage passed through as is: `input` is already
//!   without the cache, which comes as `cache_read_input_tokens` and
//!   `cache_creation_input_tokens`.
//!
//! Langfuse itself counts a call's input as the sum of every key that
//! contains `input` (`reduceUsageOrCostDetails` in
//! `packages/shared/src/server/repositories/observations_converters.ts`),
//! and its output as the sum of every key that contains `output`. costwatch
//! does the same, which gives its inclusive `input_tokens` (uncached +
//! cache read + cache write) for every spelling above. Of those keys, the
//! ones that also say `cache_read`, `cached` or `cache_hit` are cache
//! reads, and the ones that say `cache_creation` or `cache_write` are cache
//! writes. Vertex AI's `cached_modality_*` (LangChain), which the handler
//! subtracts from `input` without naming the input, counts as a cache
//! read too.
//!
//! One more shape exists: an OpenAI-style usage with extra keys fails the
//! server's strict OpenAI schema and is stored raw, as `prompt_tokens`
//! (the whole prompt) and `completion_tokens`. When no key names the input
//! or the output, those are read instead, with DeepSeek's
//! `prompt_cache_hit_tokens` as the cache read.
//!
//! A map that says `input` but means the whole prompt (a caller that wrote
//! it by hand, cached tokens under another key) is counted twice here, as
//! Langfuse itself prices it twice; nothing on the wire tells it apart.

use super::limits::{Key, MAX_COST_USD, MAX_COUNT, usd};
use super::wire::Details;
use serde_json::Number;

/// A call's tokens, `input` being the whole prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tokens {
    /// The whole prompt: uncached, cache read and cache write.
    pub input: u64,
    /// Read from the prompt cache.
    pub cached: u64,
    /// Written to the prompt cache.
    pub write: u64,
    /// Completion tokens.
    pub output: u64,
}

/// Sums counts under [`MAX_COUNT`], naming what went over.
#[derive(Default)]
struct Sum(u64);

impl Sum {
    fn add(&mut self, v: u64, what: &str) -> Result<(), String> {
        self.0 = self
            .0
            .checked_add(v)
            .filter(|n| *n <= MAX_COUNT)
            .ok_or_else(|| {
                format!("usageDetails: the {what} tokens add up to more than {MAX_COUNT}")
            })?;
        Ok(())
    }
}

/// Reads `usageDetails` (see the module documentation); a value that is
/// not a whole count from 0 to [`MAX_COUNT`] fails with its key.
pub(super) fn tokens(details: &Details<'_, Number>) -> Result<Tokens, String> {
    let (mut input, mut cached, mut write, mut output) = (
        Sum::default(),
        Sum::default(),
        Sum::default(),
        Sum::default(),
    );
    let (mut names_input, mut names_output) = (false, false);
    for (key, value) in details.iter() {
        let n = count(key, value)?;
        let part = Part::of(key);
        if part.input {
            names_input |= part.names_input;
            input.add(n, "input")?;
            if part.read {
                cached.add(n, "cache read")?;
            } else if part.write {
                write.add(n, "cache write")?;
            }
        }
        if part.output {
            names_output = true;
            output.add(n, "output")?;
        }
    }
    if !names_input && let Some(prompt) = raw(details, "prompt_tokens")? {
        input = Sum(prompt);
        if let Some(hit) = raw(details, "prompt_cache_hit_tokens")? {
            if hit > prompt {
                return Err(format!(
                    "usageDetails.prompt_cache_hit_tokens: {hit} is above prompt_tokens {prompt}"
                ));
            }
            cached = Sum(hit);
        }
    }
    if !names_output && let Some(completion) = raw(details, "completion_tokens")? {
        output = Sum(completion);
    }
    Ok(Tokens {
        input: input.0,
        cached: cached.0,
        write: write.0,
        output: output.0,
    })
}

/// What one usage type counts toward (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Part {
    /// It names the input (`input` is in the key).
    names_input: bool,
    /// It counts in the whole prompt.
    input: bool,
    /// A cache read, of the prompt.
    read: bool,
    /// A cache write, of the prompt.
    write: bool,
    /// It counts in the completion.
    output: bool,
}

impl Part {
    const NONE: Part = Part {
        names_input: false,
        input: false,
        read: false,
        write: false,
        output: false,
    };
    const INPUT: Part = Part {
        names_input: true,
        input: true,
        ..Part::NONE
    };
    const INPUT_READ: Part = Part {
        read: true,
        ..Part::INPUT
    };
    const INPUT_WRITE: Part = Part {
        write: true,
        ..Part::INPUT
    };
    const OUTPUT: Part = Part {
        output: true,
        ..Part::NONE
    };

    /// The part of `key`: the usage types the integrations write are
    /// looked up (the rule gives each the same, see the test), any other
    /// is read by the rule ([`Part::by_rule`]).
    fn of(key: &str) -> Part {
        match key {
            "input" | "input_audio_tokens" => Part::INPUT,
            "input_cached_tokens" | "input_cache_read" | "cache_read_input_tokens" => {
                Part::INPUT_READ
            }
            "input_cache_creation" | "input_cache_write" | "cache_creation_input_tokens" => {
                Part::INPUT_WRITE
            }
            "output"
            | "output_reasoning_tokens"
            | "output_audio_tokens"
            | "output_accepted_prediction_tokens"
            | "output_rejected_prediction_tokens" => Part::OUTPUT,
            "total" | "prompt_tokens" | "completion_tokens" => Part::NONE,
            _ => Part::by_rule(key),
        }
    }

    /// The part of any key, by the words in it.
    fn by_rule(key: &str) -> Part {
        let names_input = has(key, "input");
        let input = names_input || key.starts_with("cached_modality_");
        let read = input && is_cache_read(key);
        Part {
            names_input,
            input,
            read,
            write: input && !read && is_cache_write(key),
            output: has(key, "output"),
        }
    }
}

pub(super) fn is_cache_read(key: &str) -> bool {
    has(key, "cache_read")
        || has(key, "cached")
        || has(key, "cache_hit")
        || key.starts_with("cached_modality_")
}

pub(super) fn is_cache_write(key: &str) -> bool {
    has(key, "cache_creation") || has(key, "cache_write")
}

/// Whether `key` holds `part`, as `str::contains` says, by comparing at
/// each place: for a key of a few bytes, cheaper than setting up the
/// searcher `contains` builds for every call (which showed in profiles).
fn has(key: &str, part: &str) -> bool {
    let part = part.as_bytes();
    let Some(&first) = part.first() else {
        return true;
    };
    key.as_bytes()
        .windows(part.len())
        .any(|w| w[0] == first && w == part)
}

/// The count under `key`, if there is one.
fn raw(details: &Details<'_, Number>, key: &str) -> Result<Option<u64>, String> {
    details.get(key).map(|v| count(key, v)).transpose()
}

/// A whole count from 0 to [`MAX_COUNT`].
fn count(key: &str, value: &Number) -> Result<u64, String> {
    let field = Key("usageDetails", key);
    if let Some(n) = value.as_u64() {
        if n > MAX_COUNT {
            return Err(format!("{field}: {n} is above the limit of {MAX_COUNT}"));
        }
        return Ok(n);
    }
    if let Some(n) = value.as_i64() {
        return Err(format!("{field}: {n} is negative"));
    }
    match value.as_f64() {
        Some(f) if f < 0.0 => Err(format!("{field}: {value} is negative")),
        Some(f) if f.fract() != 0.0 => Err(format!("{field}: {value} is not a whole count")),
        Some(f) if f <= MAX_COUNT as f64 => Ok(f as u64),
        _ => Err(format!(
            "{field}: {value} is above the limit of {MAX_COUNT}"
        )),
    }
}

/// What the call cost: `totalCost` when it is above zero; else the
/// `costDetails` (their `total`, or the sum of their parts when there is
/// none); `None` when neither says anything.
///
/// The server derives `totalCost` from `costDetails.total` and sends `0`
/// when the call has no cost at all (`reduceUsageOrCostDetails`), so a
/// zero `totalCost` beside empty `costDetails` means "not priced", not
/// "free": costwatch then prices the call itself. A call Langfuse priced at
/// zero keeps its zero `costDetails`, and costs zero.
pub(super) fn cost(
    total: Option<f64>,
    details: Option<&Details<'_, f64>>,
) -> Result<Option<f64>, String> {
    if let Some(details) = details {
        for (key, v) in details.iter() {
            usd(Key("costDetails", key), *v)?;
        }
    }
    if let Some(total) = total {
        usd("totalCost", total)?;
        if total > 0.0 {
            return Ok(Some(total));
        }
    }
    let Some(details) = details.filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    if let Some(total) = details.get("total") {
        return Ok(Some(*total));
    }
    let sum: f64 = details.values().sum();
    if sum > MAX_COST_USD {
        return Err(format!(
            "costDetails: the parts add up to {sum}, above the limit of {MAX_COST_USD}"
        ));
    }
    Ok(Some(sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usage_types_looked_up_are_what_the_rule_makes_of_them() {
        let looked_up = [
            "input",
            "input_audio_tokens",
            "input_cached_tokens",
            "input_cache_read",
            "cache_read_input_tokens",
            "input_cache_creation",
            "input_cache_write",
            "cache_creation_input_tokens",
            "output",
            "output_reasoning_tokens",
            "output_audio_tokens",
            "output_accepted_prediction_tokens",
            "output_rejected_prediction_tokens",
            "total",
            "prompt_tokens",
            "completion_tokens",
        ];
        for key in looked_up {
            assert_eq!(Part::of(key), Part::by_rule(key), "{key}");
        }
        assert_eq!(Part::of("input_cached_tokens"), Part::INPUT_READ);
        assert_eq!(Part::of("cache_creation_input_tokens"), Part::INPUT_WRITE);
        assert_eq!(Part::of("output_audio_tokens"), Part::OUTPUT);
        // Keys not looked up go by the rule.
        assert_eq!(
            Part::of("cached_modality_image"),
            Part::by_rule("cached_modality_image")
        );
        assert!(
            Part::of("cached_modality_image").read
                && !Part::of("cached_modality_image").names_input
        );
        assert!(Part::of("input_cache_creation_5m").write);
    }

    #[test]
    fn has_finds_a_part_where_contains_does() {
        for (key, part) in [
            ("input_cached_tokens", "cached"),
            ("input", "input"),
            ("inpu", "input"),
            ("x_cache_hit", "cache_hit"),
            ("", "a"),
            ("abc", ""),
            ("aaab", "aab"),
        ] {
            assert_eq!(has(key, part), key.contains(part), "{key} {part}");
        }
    }
}
