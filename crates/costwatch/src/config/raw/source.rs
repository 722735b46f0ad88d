//! The raw `source` section: every source kind's keys and their defaults.

use super::HumanDuration;
use crate::source::gateway::DEFAULT_MAX_PAGES;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The `source` section; a key left out keeps its default.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawSource {
    /// Which API `api_url` serves: `reference`, `litellm` or `langfuse`.
    pub kind: String,
    /// Base URL of the gateway API; required, here or in the environment.
    pub api_url: Option<String>,
    /// File holding the admin key, relative to the configuration file's folder.
    pub admin_key_file: Option<String>,
    /// Langfuse's public key (the secret key is the admin key).
    pub public_key: Option<String>,
    /// Page size for listing calls; the default depends on `kind`.
    pub page_limit: Option<u32>,
    /// Most pages read in one listing (a window's sessions, a session's
    /// requests); a listing that goes on longer fails the read.
    pub max_pages: u64,
    /// Whole-request timeout.
    pub timeout: HumanDuration,
    /// Connect timeout.
    pub connect_timeout: HumanDuration,
    /// Retries per page after the first attempt.
    pub max_retries: u32,
    /// First backoff delay.
    pub retry_base: HumanDuration,
    /// Longest backoff.
    pub retry_max: HumanDuration,
    /// Largest response body accepted, in bytes.
    pub max_body_bytes: u64,
    /// `reference`: the label filter (the old spelling of `filter`). Row
    /// sources: label name -> the row field it comes from.
    pub labels: BTreeMap<String, String>,
    /// Only sessions (calls) carrying all these labels are read.
    pub filter: BTreeMap<String, String>,
    /// Row sources: what groups calls into sessions.
    pub session_key: Option<String>,
    /// Row sources: a price table in the `GET /models` shape.
    pub models_file: Option<String>,
    /// Row sources: how far before a window calls are read.
    pub session_lookback: HumanDuration,
    /// Row sources: most open sessions in one read.
    pub max_open_sessions: u64,
    /// Row sources: most calls kept for drill-downs.
    pub max_kept_rows: u64,
    /// `otlp`: where the receiver listens (default `127.0.0.1:4318`).
    pub listen: Option<String>,
    /// `otlp`: file holding the bearer token exporters must send.
    pub token_file: Option<String>,
    /// `otlp_files`: the folder of OTLP/JSON files.
    pub path: Option<String>,
    /// `otlp`, `otlp_files`: what a span without a conversation id is
    /// grouped by (`trace`, `span.<key>`, `resource.<key>`, `none`).
    pub session_fallback: Option<String>,
    /// `otlp`, `otlp_files`: whether `gen_ai.usage.input_tokens` includes
    /// the cache (`auto`, `total`, `uncached`).
    pub input_tokens: Option<String>,
    /// `otlp`, `otlp_files`: every string resource attribute is a label.
    pub resource_labels: Option<bool>,
    /// `otlp`: largest request body, as sent.
    pub max_request_bytes: Option<u64>,
    /// `otlp`: requests a second before exporters are asked to wait.
    pub max_requests_per_second: Option<u32>,
    /// `otlp`: how long received calls are kept.
    pub retention: Option<HumanDuration>,
}

impl Default for RawSource {
    fn default() -> Self {
        RawSource {
            kind: "reference".to_owned(),
            api_url: None,
            admin_key_file: None,
            public_key: None,
            page_limit: None,
            max_pages: DEFAULT_MAX_PAGES,
            timeout: HumanDuration::secs(30),
            connect_timeout: HumanDuration::secs(5),
            max_retries: 5,
            retry_base: HumanDuration::millis(500),
            retry_max: HumanDuration::secs(60),
            max_body_bytes: 8 * 1024 * 1024,
            labels: BTreeMap::new(),
            filter: BTreeMap::new(),
            session_key: None,
            models_file: None,
            session_lookback: HumanDuration::secs(6 * 3600),
            max_open_sessions: 2_000_000,
            max_kept_rows: 500_000,
            listen: None,
            token_file: None,
            path: None,
            session_fallback: None,
            input_tokens: None,
            resource_labels: None,
            max_request_bytes: None,
            max_requests_per_second: None,
            retention: None,
        }
    }
}
