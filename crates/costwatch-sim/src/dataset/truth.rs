//! The ground truth of a dataset: which sessions really carry waste, by
//! kind. It is never visible through the gateway's API (gateway-api.md
//! sections 1 and 2 have no field for it); the backtest and the benchmark
//! score findings against it.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Truth kind: a conversation that never reads its prompt cache.
pub const NO_CACHE: &str = "no_cache";
/// Truth kind: a premium model doing a small model's job.
pub const OVERSIZED_MODEL: &str = "oversized_model";
/// Truth kind: the same call resent over and over.
pub const RETRY_LOOP: &str = "retry_loop";
/// Every truth kind.
pub const KINDS: [&str; 3] = [NO_CACHE, OVERSIZED_MODEL, RETRY_LOOP];

/// Which sessions really carry waste, by kind (`no_cache`,
/// `oversized_model`, `retry_loop`). Never visible through the API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truth {
    /// Kind -> ids of the sessions of that kind.
    pub by_kind: BTreeMap<String, BTreeSet<String>>,
}

impl Truth {
    /// Records `session_id` as a session of `kind`.
    pub fn insert(&mut self, kind: &str, session_id: &str) {
        self.by_kind
            .entry(kind.to_string())
            .or_default()
            .insert(session_id.to_string());
    }

    /// The sessions of `kind` (empty when none).
    pub fn of(&self, kind: &str) -> impl Iterator<Item = &str> {
        self.by_kind
            .get(kind)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// The kinds `session_id` is labelled with.
    pub fn kinds_of(&self, session_id: &str) -> Vec<&str> {
        self.by_kind
            .iter()
            .filter(|(_, ids)| ids.contains(session_id))
            .map(|(k, _)| k.as_str())
            .collect()
    }
}
