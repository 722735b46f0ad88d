//! The words every part of costwatch shares: what kind of waste, how urgent,
//! which stretch of time, which labels. Plain data with no I/O, so `config`,
//! `source`, `detect` and `notify` can all speak them without depending on
//! each other.

pub mod investigation;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The three kinds of waste.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Kind {
    /// A conversation that never hits the prompt cache.
    NoCache,
    /// A premium model used for tiny calls.
    OversizedModel,
    /// The same call made again and again.
    RetryLoop,
}

impl Kind {
    /// All kinds, in report order.
    pub const ALL: [Kind; 3] = [Kind::NoCache, Kind::OversizedModel, Kind::RetryLoop];

    /// The name used in output and storage: the one place each is
    /// spelled.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::NoCache => "no_cache",
            Kind::OversizedModel => "oversized_model",
            Kind::RetryLoop => "retry_loop",
        }
    }

    /// Parses [`Kind::as_str`] back.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How urgent a finding is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth a look.
    Info,
    /// Money is being wasted.
    Warning,
    /// A lot of money is being wasted.
    Critical,
}

impl Severity {
    /// The name used in rules and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// Labels a gateway attaches to sessions and requests (`feature=...`).
pub type Labels = BTreeMap<String, String>;

/// A half-open time range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Window {
    /// Inclusive start.
    pub start: DateTime<Utc>,
    /// Exclusive end.
    pub end: DateTime<Utc>,
}

impl Window {
    /// Whether `t` falls inside the window.
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.start <= t && t < self.end
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}, {})",
            self.start.format("%Y-%m-%dT%H:%M:%SZ"),
            self.end.format("%Y-%m-%dT%H:%M:%SZ")
        )
    }
}

/// `n` and a regular English noun, plural unless `n` is 1: `1 session`,
/// `2 sessions`, `0 tool calls`.
pub fn counted(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod counted_tests {
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(super::counted(1u32, "tool call"), "1 tool call");
        assert_eq!(super::counted(0u32, "session"), "0 sessions");
        assert_eq!(super::counted(2u64, "round"), "2 rounds");
    }
}
