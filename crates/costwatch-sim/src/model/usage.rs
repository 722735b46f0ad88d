//! Token counting, as the OpenAI chat-completions `usage` object reports it
//! (`prompt_tokens`, `prompt_tokens_details.cached_tokens`,
//! `completion_tokens`; gateway-api.md section 3 prices them): honest counts
//! from the bytes that arrived at [`BYTES_PER_TOKEN`] bytes a token, the
//! prompt cache's prefix rule, and cutting an answer to `max_tokens`.

use super::script::Turn;
use super::{BYTES_PER_TOKEN, CACHE_MIN_TOKENS, CACHE_STEP_TOKENS};
use serde_json::Value;

/// Tokens of `bytes` bytes, rounded up.
pub(super) fn tokens(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// The prompt text counted: tools then messages, compact JSON.
pub fn prompt_text(request: &Value) -> String {
    let tools = request.get("tools").cloned().unwrap_or(Value::Null);
    let messages = request.get("messages").cloned().unwrap_or(Value::Null);
    let mut text = if tools.is_null() {
        String::new()
    } else {
        tools.to_string()
    };
    text.push_str(&messages.to_string());
    text
}

/// Prompt tokens of a request, as billed.
pub fn count_prompt_tokens(request: &Value) -> u64 {
    tokens(prompt_text(request).len())
}

/// Cached tokens of `prompt`: the longest prefix shared with an `earlier`
/// prompt, from [`CACHE_MIN_TOKENS`] on, in steps of [`CACHE_STEP_TOKENS`].
pub(super) fn cached_tokens(prompt: &str, earlier: &[String]) -> u64 {
    let shared = earlier
        .iter()
        .map(|p| {
            p.bytes()
                .zip(prompt.bytes())
                .take_while(|(a, b)| a == b)
                .count()
        })
        .max()
        .unwrap_or(0);
    let t = (shared / BYTES_PER_TOKEN) as u64;
    if t < CACHE_MIN_TOKENS {
        0
    } else {
        t / CACHE_STEP_TOKENS * CACHE_STEP_TOKENS
    }
}

/// Cuts the turn to `max_tokens`; returns it, its completion tokens and the
/// finish reason.
pub(super) fn fit(mut turn: Turn, max_tokens: u64) -> (Turn, u64, &'static str) {
    let bytes = turn.text.as_ref().map_or(0, String::len)
        + turn
            .calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>();
    let used = tokens(bytes).max(1);
    let natural = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    if used <= max_tokens {
        return (turn, used, natural);
    }
    let mut room = usize::try_from(max_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(BYTES_PER_TOKEN);
    if let Some(t) = &mut turn.text {
        cut(t, room);
        room = room.saturating_sub(t.len());
    }
    for c in &mut turn.calls {
        room = room.saturating_sub(c.name.len());
        cut(&mut c.arguments, room);
        room = room.saturating_sub(c.arguments.len());
    }
    (turn, max_tokens, "length")
}

/// Cuts `s` to at most `max` bytes, on a character boundary.
fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}
