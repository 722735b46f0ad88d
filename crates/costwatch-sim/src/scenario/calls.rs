//! Calls before they become request rows: model, tokens, failure and the
//! pause before them, grouped into a session [`Draft`]; the shape of a
//! conversation; the prompt cache's 128-token blocks.
//!
//! No wire format yet: `generator` turns these into the request rows of
//! gateway-api.md section 1 (`status`, `http_status`, `error_type`, the
//! token fields).

use std::ops::RangeInclusive;

/// How a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    RateLimit,
    Timeout,
}

impl Failure {
    pub(super) fn http(self) -> (u16, &'static str) {
        match self {
            Failure::RateLimit => (429, "RateLimitError"),
            Failure::Timeout => (504, "Timeout"),
        }
    }
}

/// The pause before a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gap {
    /// A user thinking between conversation turns.
    Turn,
    /// A client backing off before resending.
    Retry,
    /// An agent or batch chaining calls.
    Chain,
}

impl Gap {
    pub(super) fn millis(self) -> RangeInclusive<i64> {
        match self {
            Gap::Turn => 2_000..=30_000,
            Gap::Retry => 1_000..=8_000,
            Gap::Chain => 1_000..=5_000,
        }
    }
}

/// One call before ids, times and costs are assigned.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) model: &'static str,
    pub(super) input: u64,
    pub(super) cached: u64,
    pub(super) write: u64,
    pub(super) output: u64,
    pub(super) failure: Option<Failure>,
    pub(super) gap: Gap,
}

impl Call {
    pub(super) fn ok(model: &'static str, input: u64, output: u64, gap: Gap) -> Call {
        Call {
            model,
            input,
            cached: 0,
            write: 0,
            output,
            failure: None,
            gap,
        }
    }

    /// The same prompt resent after a failure or as a retry.
    pub(super) fn resend(&self, failure: Option<Failure>, output: u64) -> Call {
        // A rate-limited call is rejected before the prompt is processed.
        let cached = if failure == Some(Failure::RateLimit) {
            0
        } else {
            self.cached
        };
        Call {
            cached,
            write: 0,
            output,
            failure,
            gap: Gap::Retry,
            ..self.clone()
        }
    }
}

/// A session's calls and, when it carries waste, its truth kind.
#[derive(Debug, Default)]
pub(super) struct Draft {
    pub(super) calls: Vec<Call>,
    pub(super) kind: Option<&'static str>,
}

/// The largest prompt of a tiny call, in tokens (the oversized_model
/// rule's default limit).
pub(super) const TINY_INPUT: u64 = 1_000;
/// The largest completion of a tiny call, in tokens.
pub(super) const TINY_OUTPUT: u64 = 500;

impl Draft {
    /// Sends the session's sub-step, its first `calls` tiny calls that
    /// went to `small` and succeeded the first time, to `model`; at least
    /// one such call stays on `small`. Returns how many moved.
    pub(super) fn move_substep(&mut self, small: &str, model: &'static str, calls: usize) -> usize {
        let movable: Vec<usize> = self
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.model == small
                    && c.failure.is_none()
                    && c.gap != Gap::Retry
                    && c.input <= TINY_INPUT
                    && c.output <= TINY_OUTPUT
            })
            .map(|(i, _)| i)
            .collect();
        let n = calls.min(movable.len().saturating_sub(1));
        for &i in &movable[..n] {
            if let Some(c) = self.calls.get_mut(i) {
                c.model = model;
            }
        }
        n
    }
}

/// How a conversation uses the prompt cache after its first turn.
#[derive(Debug, Clone, Copy)]
pub(super) enum CacheMode {
    /// Reads the previous turn's prompt, with occasional misses.
    Previous,
    /// Reads a share of the prompt in this range.
    Share(f64, f64),
    /// Never reads: the prefix changes every call (a broken deploy).
    Broken,
}

/// The shape of a conversation.
#[derive(Debug, Clone)]
pub(super) struct Conversation {
    pub(super) model: &'static str,
    pub(super) turns: u32,
    pub(super) prompt: RangeInclusive<u64>,
    pub(super) growth: RangeInclusive<u64>,
    pub(super) output: RangeInclusive<u64>,
    pub(super) cache: CacheMode,
}

/// Prompt caches work in blocks of 128 tokens.
pub(super) fn cache_blocks(tokens: u64) -> u64 {
    tokens / 128 * 128
}

/// A healthy conversation of 3+ turns reads the cache at least once.
pub(super) fn ensure_one_hit(calls: &mut [Call]) {
    if calls.len() < 3 || calls[1..].iter().any(|c| c.cached > 0) {
        return;
    }
    let previous = calls[0].input;
    let second = &mut calls[1];
    second.cached = cache_blocks(previous.min(second.input));
    second.write = second.input - second.cached;
}
