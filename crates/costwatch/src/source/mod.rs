//! Where session aggregates come from.
//!
//! Only this module knows a gateway's JSON. Everything downstream sees the
//! gateway-agnostic records defined here.

pub mod fetch;
pub(crate) mod json;
pub mod langfuse;
pub mod links;
pub mod litellm;
pub mod otlp;
pub mod reference;
pub mod rows;
pub mod settings;
pub(crate) mod time;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::time::Duration;

pub use crate::domain::{Labels, Window};
pub use crate::pricing::ModelPrice;

/// Which API a source speaks (`source.kind`); what each kind is comes
/// from its folder ([`SourceKind::facts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceKind {
    /// The reference gateway contract (`/sessions`, `/requests`, `/models`).
    Reference,
    /// The LiteLLM proxy's spend logs.
    Litellm,
    /// Langfuse's observations.
    Langfuse,
    /// OpenTelemetry GenAI spans sent over OTLP/HTTP to costwatch's receiver.
    Otlp,
    /// OpenTelemetry GenAI spans in OTLP/JSON files.
    #[value(name = "otlp_files")]
    OtlpFiles,
}

/// What a kind declares of itself, in its own folder.
#[derive(Debug)]
pub struct KindFacts {
    /// The config spelling (`source.kind`).
    pub name: &'static str,
    /// What it reads, in words (`the LiteLLM proxy's spend logs`).
    pub reads: &'static str,
    /// Page size when `source.page_limit` is not set.
    pub default_page_limit: u32,
    /// Largest page the API serves.
    pub max_page_limit: u32,
    /// Row fields `source.labels` may name besides `metadata.<key>` and
    /// `tag:<prefix>`.
    pub label_fields: &'static [&'static str],
    /// Where the system's own web UI shows a session, below its base
    /// (`source.ui_url`), with `{session_id}` (and `{project_id}`) in it;
    /// `None` when it shows none.
    pub session_page: Option<&'static str>,
    /// Whether that UI is served on the API's host, so `source.ui_url`
    /// defaults to `api_url`'s origin.
    pub ui_on_api_host: bool,
}

impl SourceKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [SourceKind; 5] = [
        SourceKind::Reference,
        SourceKind::Litellm,
        SourceKind::Langfuse,
        SourceKind::Otlp,
        SourceKind::OtlpFiles,
    ];

    /// The registry: each kind's facts, as its folder declares them.
    pub fn facts(self) -> &'static KindFacts {
        match self {
            SourceKind::Reference => &reference::KIND,
            SourceKind::Litellm => &litellm::KIND,
            SourceKind::Langfuse => &langfuse::KIND,
            SourceKind::Otlp => &otlp::RECEIVER_KIND,
            SourceKind::OtlpFiles => &otlp::FILES_KIND,
        }
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        self.facts().name
    }

    /// Parses the config spelling.
    pub fn parse(s: &str) -> Option<SourceKind> {
        SourceKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Largest page the API serves.
    pub fn max_page_limit(self) -> u32 {
        self.facts().max_page_limit
    }

    /// Page size when `source.page_limit` is not set.
    pub fn default_page_limit(self) -> u32 {
        self.facts().default_page_limit
    }

    /// Whether the API serves one row per call (grouped into sessions by
    /// costwatch) rather than sessions.
    pub fn is_row_source(self) -> bool {
        self != SourceKind::Reference
    }

    /// Whether the source is an HTTP API costwatch reads (with
    /// `source.api_url` and the admin key), rather than OpenTelemetry spans
    /// it receives or finds in files.
    pub fn is_http_api(self) -> bool {
        !self.is_otlp()
    }

    /// Whether the calls are OpenTelemetry GenAI spans.
    pub fn is_otlp(self) -> bool {
        matches!(self, SourceKind::Otlp | SourceKind::OtlpFiles)
    }

    /// Row fields `source.labels` may name besides `metadata.<key>` and
    /// `tag:<prefix>`.
    pub fn label_fields(self) -> &'static [&'static str] {
        self.facts().label_fields
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One model's share of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Model id as the gateway names it.
    pub model: String,
    /// Calls made to this model.
    pub requests: u64,
    /// Whole prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens read from the prompt cache.
    pub cached_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// What these calls cost.
    pub cost_usd: f64,
}

impl ModelUsage {
    /// Adds one call on `model` to its figures in the breakdown `by_model`
    /// (a new entry for a model not in it yet).
    pub fn add_call(
        by_model: &mut Vec<ModelUsage>,
        model: &str,
        input: u64,
        cached: u64,
        output: u64,
        cost_usd: f64,
    ) {
        match by_model.iter_mut().find(|m| m.model == model) {
            Some(m) => {
                m.requests += 1;
                m.input_tokens = m.input_tokens.saturating_add(input);
                m.cached_tokens = m.cached_tokens.saturating_add(cached);
                m.output_tokens = m.output_tokens.saturating_add(output);
                m.cost_usd += cost_usd;
            }
            None => by_model.push(ModelUsage {
                model: model.to_owned(),
                requests: 1,
                input_tokens: input,
                cached_tokens: cached,
                output_tokens: output,
                cost_usd,
            }),
        }
    }
}

/// A session aggregated over its whole life so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The gateway's session id.
    pub session_id: String,
    /// Time of the first request.
    pub first_request_at: DateTime<Utc>,
    /// Time of the latest request.
    pub last_request_at: DateTime<Utc>,
    /// Number of calls.
    pub requests: u64,
    /// Number of failed calls.
    pub errors: u64,
    /// Whole prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens read from the prompt cache.
    pub cached_tokens: u64,
    /// Prompt tokens written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// What the session cost.
    pub cost_usd: f64,
    /// Per-model breakdown; may be empty when the gateway does not provide it.
    pub by_model: Vec<ModelUsage>,
    /// Session labels.
    pub labels: Labels,
    /// Whether costwatch computed some of the cost from its price table
    /// because the gateway reported none.
    #[serde(default)]
    pub cost_computed: bool,
    /// Whether the source reported cache reads for none of its successful
    /// calls (OpenTelemetry instrumentations that do not record them):
    /// `cached_tokens` is then unknown, and the session is not judged for
    /// no_cache nor counted among its group's cache peers.
    #[serde(default)]
    pub cache_unreported: bool,
}

/// Outcome of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestStatus {
    /// The model answered.
    Success,
    /// The call failed.
    Error,
}

/// One logged model call (never any prompt or response text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The gateway's request id.
    pub request_id: String,
    /// Session the request belongs to.
    pub session_id: String,
    /// When the call was made.
    pub created_at: DateTime<Utc>,
    /// Model called.
    pub model: String,
    /// Whether it succeeded.
    pub status: RequestStatus,
    /// HTTP status the model provider answered, if known.
    pub http_status: Option<u16>,
    /// Kind of failure (`RateLimitError`, `Timeout`, ...).
    pub error_type: Option<String>,
    /// Whole prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens read from the prompt cache.
    pub cached_tokens: u64,
    /// Prompt tokens written to the prompt cache (0 where the source does
    /// not say).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// What the call cost.
    pub cost_usd: f64,
    /// The provider or deployment that served the call, where the source
    /// names one (LiteLLM's `model_id`, OpenTelemetry's
    /// `gen_ai.provider.name`): a prompt cache lives with one deployment,
    /// so a call served by another cannot read it.
    #[serde(default)]
    pub provider: Option<String>,
}

/// Why a source call failed, in terms the caller can act on.
///
/// The text is safe to print: where it quotes the gateway (an id, a key, an
/// error body), control and bidi characters are escaped or dropped.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Worth trying again later: network trouble, 429, 5xx, a cut-off or
    /// malformed page. The window stays due.
    #[error("gateway unavailable: {0}")]
    Transient(String),
    /// Trying again will not help until someone changes something: 400, 401, 403, 404.
    #[error("gateway rejected the request: {0}")]
    Rejected(String),
    /// A response that does not follow the contract (missing required field,
    /// wrong type, truncated JSON, a value outside the limits), with the
    /// field's path. The window is retried later.
    #[error("gateway sent an invalid page: {0}")]
    Invalid(String),
}

impl SourceError {
    /// Whether a later attempt may succeed without a configuration change.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, SourceError::Rejected(_))
    }
}

/// Counters a source reports for one window read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Pages read.
    pub pages: u64,
    /// Rows read.
    pub rows: u64,
    /// Requests retried after a transient failure.
    pub retries: u64,
    /// Calls without a session id, each judged as a session of its own
    /// (row sources only).
    pub calls_without_session: u64,
    /// Calls the gateway did not price, priced from the price table.
    pub priced_calls: u64,
    /// Calls priced by neither the gateway nor the price table (counted at
    /// $0).
    pub unpriced_calls: u64,
}

/// Retry and size limits for talking to a gateway: the `source` keys
/// every kind reads for HTTP (the investigation's MCP calls too).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<HttpLimits>)]
pub struct HttpLimits {
    /// Whole-request timeout.
    #[serde(with = "crate::settings::units::positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub timeout: Duration,
    /// Connect timeout.
    #[serde(with = "crate::settings::units::positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub connect_timeout: Duration,
    /// Retries per page after the first attempt.
    pub max_retries: u32,
    /// First backoff delay; doubles per attempt up to `retry_max`.
    #[serde(with = "crate::settings::units::with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub retry_base: Duration,
    /// Longest backoff, and the longest `Retry-After` honoured.
    #[serde(with = "crate::settings::units::with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub retry_max: Duration,
    /// Largest response body accepted, in bytes.
    #[schemars(range(min = 1))]
    pub max_body_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_retries: 5,
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(60),
            max_body_bytes: 8 * 1024 * 1024,
        }
    }
}

impl crate::settings::Settings for HttpLimits {
    fn problems(&self) -> Vec<crate::settings::Issue> {
        crate::settings::Issue::retry_max_below_base(self.retry_base, self.retry_max)
            .into_iter()
            .collect()
    }
}

/// Which calls a log tool asks for (`search_requests`): one session's, or
/// every session's, that started in a range.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestQuery {
    /// One session's calls; `None`: every session's.
    pub session_id: Option<String>,
    /// Calls that started in `[start, end)`.
    pub range: Window,
    /// Most calls kept: a read that finds more stops there and says so, so
    /// memory is bounded by this number, not by the range.
    pub max_calls: usize,
}

/// A call with the labels of its row (or of its session, where the source
/// labels sessions, not calls).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledCall {
    /// The call.
    pub call: RequestRecord,
    /// Its labels.
    pub labels: Labels,
}

/// The calls a [`RequestQuery`] found, in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FoundCalls {
    /// At most `max_calls` of them.
    pub calls: Vec<LabelledCall>,
    /// Whether the range held more than `max_calls` calls (the read
    /// stopped there).
    pub more: bool,
}

impl FoundCalls {
    /// Keeps `call` unless `max` are kept already, in which case it notes
    /// that there were more; returns whether there is room for another.
    pub fn push(&mut self, call: LabelledCall, max: usize) -> bool {
        if self.calls.len() >= max {
            self.more = true;
            return false;
        }
        self.calls.push(call);
        true
    }

    /// The calls in time order, then by id.
    pub fn sorted(mut self) -> FoundCalls {
        self.calls.sort_by(|a, b| {
            (a.call.created_at, &a.call.request_id).cmp(&(b.call.created_at, &b.call.request_id))
        });
        self
    }
}

/// A gateway that can be read window by window.
pub trait Source: Send + Sync {
    /// The model catalogue with prices.
    fn models(&self) -> impl Future<Output = Result<Vec<ModelPrice>, SourceError>> + Send;

    /// The prices of the models the calls of the window last read by
    /// [`Source::sessions`] name, where they differ from or add to
    /// [`Source::models`]: a model the source's catalogue matches by a
    /// pattern, a date or a tier rather than by its name, or one no
    /// catalogue prices whose prices were learned from the costs the source
    /// reported (`learned`). Known once the window's calls are read, before
    /// its first session is handed on; laid on the catalogue of that window
    /// (`crate::pricing::table::overlay`). Empty for a source whose catalogue names every
    /// model it serves.
    fn window_models(&self) -> Vec<ModelPrice> {
        Vec::new()
    }

    /// Streams every session active in `window`, page by page, into `sink`.
    /// Returns only after the last page was read; any error means the window
    /// was not read completely.
    fn sessions<F>(
        &self,
        window: Window,
        sink: F,
    ) -> impl Future<Output = Result<ReadStats, SourceError>> + Send
    where
        F: FnMut(SessionRecord) + Send;

    /// Every request of one session (the drill-down for candidates).
    fn session_requests(
        &self,
        session_id: &str,
    ) -> impl Future<Output = Result<Vec<RequestRecord>, SourceError>> + Send;

    /// The calls `query` asks for, read afresh from the source (never from
    /// what the last window left), so a log tool may ask for any range
    /// while windows are read. The default reads one session's calls
    /// through [`Source::session_requests`], or lists the range's sessions
    /// and reads each one's calls; a source that can filter calls by range
    /// does better.
    fn requests(
        &self,
        query: &RequestQuery,
    ) -> impl Future<Output = Result<FoundCalls, SourceError>> + Send {
        async move {
            let in_range = |c: &RequestRecord| query.range.contains(c.created_at);
            let mut found = FoundCalls::default();
            let sessions = match &query.session_id {
                Some(id) => vec![(id.clone(), Labels::new())],
                None => {
                    // Every session has a call: more sessions than
                    // `max_calls` are more calls than that.
                    let mut sessions = Vec::new();
                    self.sessions(query.range, |s| {
                        if sessions.len() < query.max_calls {
                            sessions.push((s.session_id, s.labels));
                        } else {
                            found.more = true;
                        }
                    })
                    .await?;
                    sessions
                }
            };
            'sessions: for (id, labels) in sessions {
                for call in self.session_requests(&id).await? {
                    if !in_range(&call) {
                        continue;
                    }
                    let labels = labels.clone();
                    if !found.push(LabelledCall { call, labels }, query.max_calls) {
                        break 'sessions;
                    }
                }
            }
            Ok(found.sorted())
        }
    }
}
