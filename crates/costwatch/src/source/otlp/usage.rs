//! A span's token counts, from every spelling instrumentations write, with
//! the whole prompt in `input`.

use super::attrs::Attrs;
use super::settings::InputTokens;
use crate::limits::MAX_COUNT;

/// Prompt tokens: the conventions' name, then the older one.
const INPUT: &[&str] = &["gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"];

/// Completion tokens: the conventions' name, then the older one.
const OUTPUT: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
];

/// Prompt tokens read from the cache: the conventions' name, then
/// OpenLLMetry's.
const CACHE_READ: &[&str] = &[
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
];

/// Prompt tokens written to the cache: the conventions' name, the
/// `cache_write` spelling of OpenTelemetry's own OpenAI instrumentation,
/// then OpenLLMetry's.
const CACHE_WRITE: &[&str] = &[
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
];

/// What a span says it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Usage {
    /// The whole prompt, cache reads and writes included.
    pub input: u64,
    /// Cache reads, a part of `input`.
    pub cache_read: u64,
    /// Cache writes, a part of `input`.
    pub cache_write: u64,
    /// Completion tokens.
    pub output: u64,
    /// Whether the span carries any token count at all.
    pub reported: bool,
    /// Whether it carries a cache-read count (0 included). The official
    /// OpenAI instrumentation's chat spans carry none in 2.4b0 (it reads
    /// only `prompt_tokens` and `completion_tokens` there): their cache
    /// reads are unknown, not 0; 1.3b0 leaves it out when 0, which the row
    /// source tells from its other spans (`CallRow::instrumentation`).
    pub cache_read_reported: bool,
}

/// The span's usage, `input` made the whole prompt as `how` says. Missing
/// counts are 0; a count that is not a whole number from 0 to the limit
/// is an error naming its attribute.
pub(super) fn usage(attrs: Attrs<'_>, how: InputTokens) -> Result<Usage, String> {
    let input = first(attrs, INPUT)?;
    let output = first(attrs, OUTPUT)?;
    let read = first(attrs, CACHE_READ)?;
    let write = first(attrs, CACHE_WRITE)?;
    let reported = input.is_some() || output.is_some() || read.is_some() || write.is_some();
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    let (cache_read, cache_write) = (read.unwrap_or(0), write.unwrap_or(0));
    let parts = cache_read + cache_write;
    let whole = match how {
        InputTokens::Total => input,
        InputTokens::Uncached => input + parts,
        // A total cannot be smaller than its parts: such a count left
        // them out.
        InputTokens::Auto if parts > input => input + parts,
        InputTokens::Auto => input,
    };
    if whole > MAX_COUNT {
        return Err(format!(
            "{input} input tokens with {cache_read} cache reads and {cache_write} cache writes \
             make {whole}, above the limit of {MAX_COUNT}"
        ));
    }
    Ok(Usage {
        input: whole,
        cache_read,
        cache_write,
        output,
        reported,
        cache_read_reported: read.is_some(),
    })
}

/// The first of `keys` the span has, as a count.
fn first(attrs: Attrs<'_>, keys: &[&str]) -> Result<Option<u64>, String> {
    for key in keys {
        if let Some(n) = attrs.count(key)? {
            return Ok(Some(n));
        }
    }
    Ok(None)
}
