//! The definitions of waste, applied to a session's request rows (as
//! gateway-api.md section 1 serves them) and the notes the rows do not
//! show. The family's truth is exactly what these say, whatever a detector
//! can see:
//!
//! - **no_cache**: the session never read the prompt cache, yet at least
//!   [`NO_CACHE_MIN_MISSES`] (two) successful calls could have. A call
//!   could have read it when an earlier successful call on the same
//!   cache-capable model, ended at most [`CACHE_TTL_MS`] before it, had a
//!   prompt of at least the model's minimum cacheable prefix, and the two
//!   share at least that many tokens by the application's design (the
//!   conversation so far, a template, the same prompt). Prompts that were
//!   all below the minimum, or pauses longer than the cache lives, are not
//!   waste; nor is a single call that could have read and did not (a
//!   session of two calls whose second missed): that is the providers'
//!   best-effort caching.
//! - **retry_loop**: at least [`LOOP_MIN_REPEATS`] calls in a row resend a
//!   request the session already sent (the same call, or a cycle of calls),
//!   each at most [`LOOP_MAX_GAP_MS`] after the previous one ended. Up to
//!   three retries of a call and then giving up is a bounded retry, not a
//!   loop.
//! - **oversized_model**: a successful tiny call (at most
//!   [`TINY_INPUT`](super::catalogue::TINY_INPUT) prompt and
//!   [`TINY_OUTPUT`](super::catalogue::TINY_OUTPUT) completion tokens)
//!   went to a premium model although the group's design meant it for a
//!   small one. A group whose design is a premium model (from the start,
//!   or after it moved on purpose) is not wasting.

use super::catalogue::{CACHE_TTL_MS, cache_blocks, is_premium, is_tiny, min_prefix};
use super::draft::CallNote;
use crate::dataset::SimRequest;
use chrono::Duration;
use std::collections::HashSet;

/// Calls that could have read the cache and read nothing that make a
/// no-cache conversation.
pub const NO_CACHE_MIN_MISSES: usize = 2;
/// Consecutive resends that make a loop.
pub const LOOP_MIN_REPEATS: usize = 5;
/// The longest pause inside a loop, in milliseconds.
pub const LOOP_MAX_GAP_MS: i64 = 60_000;

/// When a call ended.
fn ended(r: &SimRequest) -> chrono::DateTime<chrono::Utc> {
    r.created_at + Duration::milliseconds(r.latency_ms as i64)
}

/// Tokens call `i` could have read from a working prompt cache (whole
/// blocks; 0 when nothing). `rows` and `notes` are one session's calls in
/// time order.
pub fn readable_tokens(rows: &[SimRequest], notes: &[CallNote], i: usize) -> u64 {
    let (Some(call), Some(note)) = (rows.get(i), notes.get(i)) else {
        return 0;
    };
    let Some(min) = min_prefix(&call.model) else {
        return 0;
    };
    if call.is_error() {
        return 0;
    }
    // Shared tokens with an earlier call of the thread on the model: the
    // smallest prefix along the chain of such calls between them.
    let mut common = note.prefix;
    let mut best = 0;
    for j in (0..i).rev() {
        let (Some(earlier), Some(earlier_note)) = (rows.get(j), notes.get(j)) else {
            break;
        };
        if earlier.model != call.model || earlier_note.thread != note.thread {
            continue;
        }
        if call.created_at - ended(earlier) > Duration::milliseconds(CACHE_TTL_MS) || common < min {
            break;
        }
        if !earlier.is_error() && earlier.input_tokens >= min {
            let shared = common.min(earlier.input_tokens);
            if shared >= min {
                best = best.max(cache_blocks(shared));
            }
        }
        common = common.min(earlier_note.prefix);
    }
    best
}

/// Whether the session is no_cache waste.
pub fn is_no_cache(rows: &[SimRequest], notes: &[CallNote]) -> bool {
    rows.iter().all(|r| r.cached_tokens == 0)
        && (0..rows.len())
            .filter(|&i| readable_tokens(rows, notes, i) > 0)
            .count()
            >= NO_CACHE_MIN_MISSES
}

/// The longest run of consecutive resends.
pub fn longest_resend_run(rows: &[SimRequest], notes: &[CallNote]) -> usize {
    let mut sent: HashSet<u32> = HashSet::new();
    let (mut run, mut longest) = (0usize, 0usize);
    for (i, (r, n)) in rows.iter().zip(notes).enumerate() {
        let close = i
            .checked_sub(1)
            .and_then(|p| rows.get(p))
            .is_some_and(|p| r.created_at - ended(p) <= Duration::milliseconds(LOOP_MAX_GAP_MS));
        if sent.contains(&n.request) {
            run = if close { run + 1 } else { 1 };
        } else {
            run = 0;
        }
        longest = longest.max(run);
        sent.insert(n.request);
    }
    longest
}

/// Whether the session is retry_loop waste.
pub fn is_retry_loop(rows: &[SimRequest], notes: &[CallNote]) -> bool {
    longest_resend_run(rows, notes) >= LOOP_MIN_REPEATS
}

/// Whether call `i` is a tiny sub-task on a premium model that the design
/// meant for a small one.
pub fn is_oversized_call(r: &SimRequest, n: &CallNote) -> bool {
    !r.is_error()
        && is_premium(&r.model)
        && is_tiny(r.input_tokens, r.output_tokens)
        && !is_premium(n.norm)
}

/// Whether the session is oversized_model waste.
pub fn is_oversized(rows: &[SimRequest], notes: &[CallNote]) -> bool {
    rows.iter().zip(notes).any(|(r, n)| is_oversized_call(r, n))
}

/// The kinds of waste the session carries.
pub fn kinds(rows: &[SimRequest], notes: &[CallNote]) -> Vec<&'static str> {
    let mut out = Vec::new();
    if is_no_cache(rows, notes) {
        out.push(crate::dataset::NO_CACHE);
    }
    if is_oversized(rows, notes) {
        out.push(crate::dataset::OVERSIZED_MODEL);
    }
    if is_retry_loop(rows, notes) {
        out.push(crate::dataset::RETRY_LOOP);
    }
    out
}
