//! Configuration and rules: raw serde structs are parsed, checked and turned
//! into the typed [`Config`] below, which cannot be invalid.
//!
//! Loading collects every problem (file, line, column, field path, message)
//! instead of stopping at the first one.

mod env;
mod error;
mod load;
mod locate;
mod raw;
pub mod rules;

pub use error::{ConfigError, Problem};
pub use load::{load, load_rules, load_with_env, rules_schema};
pub use rules::{
    NoCacheRule, OversizedModelRule, RetryLoopRule, RuleMeta, Rules, Selector, Severity,
};

use crate::secret::Secret;
use crate::source::Labels;
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::time::Duration;
use url::Url;

/// The whole, validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// File the configuration was read from.
    pub path: PathBuf,
    /// Where sessions come from.
    pub source: SourceConfig,
    /// How time is cut into windows.
    pub windows: WindowConfig,
    /// Labels whose values form a session's peer group (`[feature]`).
    pub group_by: Vec<String>,
    /// Where state lives.
    pub state: StateConfig,
    /// Detector tuning not tied to one rule.
    pub detection: DetectionConfig,
    /// Rule files and directories, resolved against the config file's folder.
    pub rule_paths: Vec<PathBuf>,
    /// The rules loaded from `rule_paths`.
    pub rules: Rules,
}

/// The gateway REST source.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// Base URL of the gateway API, e.g. `https://gateway.example/v1`.
    pub api_url: Url,
    /// Admin key (scope `logs.read`), from `COSTWATCH_ADMIN_KEY` or
    /// `admin_key_file`. `None` when neither is set; commands that talk to the
    /// gateway refuse to start without it.
    pub admin_key: Option<Secret>,
    /// Page size for `/sessions` and `/requests` (1..=50).
    pub page_limit: u32,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Retries per page after the first attempt.
    pub max_retries: u32,
    /// First backoff delay.
    pub retry_base: Duration,
    /// Longest backoff, and the longest `Retry-After` honoured.
    pub retry_max: Duration,
    /// Largest response body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Label filter sent as `metadata.<key>=<value>` (AND).
    pub labels: Labels,
}

/// How time is cut into windows.
#[derive(Debug, Clone)]
pub struct WindowConfig {
    /// Length of one window; windows are aligned to multiples of it since the
    /// Unix epoch.
    pub size: Duration,
    /// How long after a window's end it is read, so late log rows have landed.
    pub settle_lag: Duration,
    /// Where processing starts when there is no watermark yet. `None` means
    /// `now - max_backfill`.
    pub start: Option<DateTime<Utc>>,
    /// How far back processing ever reaches.
    pub max_backfill: Duration,
}

/// Where state lives.
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// `sqlite://path` (default `sqlite://costwatch.db`) or `postgres://...`.
    pub url: String,
}

/// Detector tuning not tied to one rule.
#[derive(Debug, Clone)]
pub struct DetectionConfig {
    /// Recent sessions kept per group as its baseline.
    pub baseline_samples: usize,
    /// Largest number of candidates judged in one window; the rest are
    /// reported as a diagnostic.
    pub max_candidates: usize,
    /// Concurrent drill-down requests.
    pub drilldown_concurrency: usize,
}
