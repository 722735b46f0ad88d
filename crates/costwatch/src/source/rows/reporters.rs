//! Which instrumentations report cache reads: what makes a call without a
//! cache-read count a call that read 0 rather than one whose reads are
//! unknown.
//!
//! The official OpenAI instrumentation of OpenTelemetry
//! (`opentelemetry-instrumentation-genai-openai` 1.3b0 with
//! `opentelemetry-util-genai` 1.3b0) writes
//! `gen_ai.usage.cache_read.input_tokens` only when it is above 0; the one
//! before it (`opentelemetry-instrumentation-openai-v2` 2.4b0) never writes
//! it on chat spans. A span without the count is the same in both, so the
//! difference is learned from the other spans: an instrumentation
//! ([`CallRow::instrumentation`]: scope name and version, with the
//! provider, endpoint and model it called) that reported a cache-read
//! count on any call read for a window reports them, and its calls without
//! one read 0 cached, in whichever service: a new service whose first
//! conversation never reads the cache is known to read 0 where another
//! service's calls to the same model read it. An instrumentation that
//! never did, or a model no call of it was seen reading, stays "not
//! reported", so a source that cannot tell says nothing about caching and
//! is never judged for no_cache.
//!
//! The rule, so that reading order never changes what is found: for the
//! window `[start, end)`, an instrumentation reports cache reads when one of
//! its calls that started in `[start - source.session_lookback, end)`
//! carries a cache-read count: exactly the calls a window read whole reads.
//! What is remembered is, per instrumentation, when the latest such call
//! started; it travels with the carried sessions and is dropped with them
//! (a window read whole learns again from its own calls), and an
//! instrumentation whose latest such call is older than the next window's
//! lookback is forgotten. The knowledge is applied when a window's sessions
//! are handed on, after all its calls were read, so a call counts whether
//! it was read before or after the one that taught it.

use super::CallRow;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Arc;

/// Most instrumentations remembered at once. Beyond it, new ones are not
/// learned (their calls stay "not reported": a miss, never a false
/// finding) and a warning says so.
pub(super) const MAX_REPORTERS: usize = 4096;

/// Instrumentations seen reporting cache reads, each with when its latest
/// call with a cache-read count started.
#[derive(Debug, Default, Clone)]
pub(super) struct Reporters {
    latest: HashMap<Arc<str>, DateTime<Utc>>,
    /// Whether an instrumentation was not learned for want of room.
    full: bool,
}

impl Reporters {
    /// Learns from one call read (whatever `source.filter` makes of it:
    /// the knowledge is about the instrumentation, not the session).
    pub fn learn(&mut self, row: &CallRow) {
        let Some(key) = &row.instrumentation else {
            return;
        };
        if !row.cache_reported {
            return;
        }
        let room = self.latest.len() < MAX_REPORTERS;
        match self.latest.get_mut(key) {
            Some(at) => *at = (*at).max(row.created_at),
            None if room => {
                self.latest.insert(key.clone(), row.created_at);
            }
            None => self.full = true,
        }
    }

    /// Whether `instrumentation` reported cache reads on a call that
    /// started at or after `since`.
    pub fn reports(&self, instrumentation: &str, since: DateTime<Utc>) -> bool {
        self.latest
            .get(instrumentation)
            .is_some_and(|at| *at >= since)
    }

    /// Forgets the instrumentations whose latest report started before
    /// `before`; returns whether one was not learned for want of room
    /// since the last call.
    pub fn forget_before(&mut self, before: DateTime<Utc>) -> bool {
        self.latest.retain(|_, at| *at >= before);
        std::mem::take(&mut self.full)
    }
}
