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
mod schedule;

pub use crate::detect::rules::{
    NoCacheRule, OversizedModelRule, RetryLoopRule, RuleMeta, Rules, Selector,
};
pub use crate::domain::Severity;
pub use crate::investigate::budget::{Caps, Prices};
pub use crate::investigate::tokens::TokenizerChoice;
pub use crate::notify::settings::{EmailConfig, SmtpSecurity, WebhookConfig, WebhookShape};
pub use crate::source::gateway::DEFAULT_MAX_PAGES;
pub use error::{ConfigError, Problem};
pub use load::{BUILTIN_RULES, builtin_rules, load, load_rules, load_with_env, rules_schema};
pub use raw::{DEFAULT_MODEL, default_group_by};

use crate::domain::{Kind, Labels};
use crate::secret::Secret;
use crate::source::otlp::SpanMapping;
use crate::source::rows::{LabelField, RowSettings, SessionKey};
use crate::source::{ModelPrice, SourceKind};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
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
    /// Rule files and directories, resolved against the config file's
    /// folder; empty when the built-in rules are used.
    pub rule_paths: Vec<PathBuf>,
    /// The rules loaded from `rule_paths`, or the built-in ones.
    pub rules: Rules,
    /// When the detection job runs (`costwatch run`).
    pub schedule: ScheduleConfig,
    /// How findings become alerts.
    pub alerts: AlertsConfig,
    /// Where alerts go.
    pub notify: NotifyConfig,
    /// The local HTTP endpoint for `/metrics` and `/healthz`.
    pub server: ServerConfig,
    /// Escalation of flagged incidents to a capped LLM investigation.
    pub investigation: InvestigationConfig,
}

/// Escalation of flagged incidents to a capped LLM investigation.
#[derive(Debug, Clone)]
pub struct InvestigationConfig {
    /// Whether incidents are escalated at all.
    pub enabled: bool,
    /// The gateway's MCP endpoint (read with the admin key).
    pub mcp_url: Url,
    /// Base URL of the OpenAI-compatible model API.
    pub llm_url: Url,
    /// The investigating model.
    pub model: String,
    /// The inference key, from `COSTWATCH_INFERENCE_KEY` or `inference_key_file`.
    pub inference_key: Option<Secret>,
    /// Tools offered to the model, in this order: the allowlist.
    pub tools: Vec<String>,
    /// How prompts are counted before a call (`investigate::tokens`).
    pub tokenizer: TokenizerChoice,
    /// The tokenize endpoint asked with `tokenizer: server`; `None` with
    /// any other.
    pub tokenize_url: Option<Url>,
    /// Whether the server's chat template HTML-escapes message text, so
    /// the tokenize endpoint is asked for the escaped text.
    pub template_escapes_html: bool,
    /// The model's prices; `None` takes them from the gateway's catalogue.
    pub prices: Option<Prices>,
    /// Which incidents are escalated.
    pub escalate: EscalateConfig,
    /// Hard caps per run and per day.
    pub caps: Caps,
}

/// Which incidents are escalated to an investigation.
#[derive(Debug, Clone, PartialEq)]
pub struct EscalateConfig {
    /// Finding kinds escalated (`no_cache`, `oversized_model`, `retry_loop`).
    pub kinds: Vec<Kind>,
    /// Lowest severity escalated.
    pub min_severity: Severity,
    /// Most investigations started per hour.
    pub max_per_hour: u64,
}

/// When the detection job runs.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// The cron expression as written (5 fields, or 6 with seconds first).
    pub cron_text: String,
    /// The parsed expression (croner, seconds optional).
    pub cron: croner::Cron,
    /// Time zone the expression is read in (`UTC` by default); DST-correct.
    pub timezone: chrono_tz::Tz,
    /// Most windows processed in one catch-up after downtime; older windows
    /// beyond `windows.max_backfill` are skipped with a warning.
    pub max_catch_up_windows: usize,
    /// How long one tick may read the gateway. A window not read by then
    /// stays due; a tick that read none counts as a failed read of the
    /// gateway.
    pub tick_timeout: std::time::Duration,
}

/// How findings become alerts.
#[derive(Debug, Clone)]
pub struct AlertsConfig {
    /// An incident (rule + group) is not alerted again within this time.
    pub cooldown: Duration,
    /// After the cooldown, re-alert only when the incident's session count
    /// grew by this factor since the last alert (e.g. 2.0); 0, the default,
    /// never re-alerts: an incident is told of once, however long it lasts.
    pub realert_growth: f64,
    /// An incident with no new finding for this long is resolved.
    pub resolve_after: Duration,
    /// A finding within this time after its incident resolved continues
    /// that episode (same start and counts) rather than opening a new one:
    /// a flapping incident is one episode, told once that it fires again.
    pub reopen_within: Duration,
    /// How long an episode's first notification waits (data time, from
    /// the start of its first window with a finding) for the findings of
    /// the windows after it (0: sent with the first window).
    pub group_wait: Duration,
    /// The floor: an incident worth less than this many dollars a day (at
    /// its rate so far) is recorded but not sent (0 = no floor).
    pub min_impact_usd_per_day: f64,
    /// The floor: an incident of fewer sessions is recorded but not sent.
    pub min_sessions: u64,
    /// Whether a resolved notification is sent.
    pub send_resolved: bool,
    /// Sessions listed in an alert (largest impact first).
    pub top_sessions: usize,
    /// A catch-up over more than this many windows sends one summary alert
    /// instead of one alert per incident.
    pub summary_after_windows: usize,
    /// How long delivery of one alert is retried before it is given up.
    pub delivery_deadline: Duration,
    /// First delivery retry delay; doubles per attempt up to `retry_max`.
    pub retry_base: Duration,
    /// Longest delay between delivery attempts.
    pub retry_max: Duration,
    /// Base URL of the gateway's log UI for links in alerts (optional).
    pub gateway_ui_url: Option<Url>,
}

impl From<&AlertsConfig> for crate::incidents::AlertPolicy {
    /// The policy the `alerts` section describes.
    fn from(a: &AlertsConfig) -> crate::incidents::AlertPolicy {
        crate::incidents::AlertPolicy {
            cooldown: a.cooldown,
            realert_growth: a.realert_growth,
            resolve_after: a.resolve_after,
            reopen_within: a.reopen_within,
            group_wait: a.group_wait,
            min_impact_usd_per_day: a.min_impact_usd_per_day,
            min_sessions: a.min_sessions,
            send_resolved: a.send_resolved,
            top_sessions: a.top_sessions,
            summary_after_windows: a.summary_after_windows,
            gateway_ui_url: a.gateway_ui_url.as_ref().map(|u| u.to_string()),
        }
    }
}

impl From<&AlertsConfig> for crate::notify::outbox::RetryPolicy {
    /// The delivery backoff the `alerts` section describes.
    fn from(a: &AlertsConfig) -> crate::notify::outbox::RetryPolicy {
        crate::notify::outbox::RetryPolicy {
            base: a.retry_base,
            max: a.retry_max,
        }
    }
}

/// Where alerts go.
#[derive(Debug, Clone, Default)]
pub struct NotifyConfig {
    /// Email over SMTP.
    pub email: Option<EmailConfig>,
    /// Webhooks, each its own channel.
    pub webhooks: Vec<WebhookConfig>,
}

/// The local HTTP endpoint.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address for `/metrics` and `/healthz`; `None` disables it.
    pub listen: Option<std::net::SocketAddr>,
    /// Where that endpoint is reached from outside, ending in `/`; alert
    /// charts are linked from it (`incidents/{fingerprint}/chart.png`).
    pub public_url: Option<url::Url>,
}

/// Where session data comes from.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// Which API `api_url` serves.
    pub kind: SourceKind,
    /// Base URL of the API: the reference gateway's (e.g.
    /// `https://gateway.example/v1`), the LiteLLM proxy's or the Langfuse
    /// host's. `None` for the kinds that are not read over HTTP (`otlp`,
    /// `otlp_files`); required for the others.
    pub api_url: Option<Url>,
    /// Admin key (the reference gateway's `logs.read` key, a LiteLLM key,
    /// or Langfuse's secret key), from `COSTWATCH_ADMIN_KEY` or
    /// `admin_key_file`. `None` when neither is set; commands that talk to
    /// the gateway refuse to start without it.
    pub admin_key: Option<Secret>,
    /// Langfuse's public key.
    pub public_key: Option<String>,
    /// Page size for listing calls.
    pub page_limit: u32,
    /// Most pages read in one listing; a listing that goes on longer fails
    /// the read.
    pub max_pages: u64,
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
    /// Label filter (AND): sent as `metadata.<key>=<value>` to the
    /// reference gateway, applied to each call by row sources.
    pub labels: Labels,
    /// How row sources group and label calls.
    pub rows: RowConfig,
    /// The OTLP receiver and files (`otlp`, `otlp_files`).
    pub otlp: OtlpConfig,
}

impl From<&SourceConfig> for crate::source::HttpLimits {
    /// The limits `source` sets for every gateway request.
    fn from(s: &SourceConfig) -> crate::source::HttpLimits {
        crate::source::HttpLimits {
            timeout: s.timeout,
            connect_timeout: s.connect_timeout,
            max_retries: s.max_retries,
            retry_base: s.retry_base,
            retry_max: s.retry_max,
            max_body_bytes: s.max_body_bytes,
        }
    }
}

/// What only the OpenTelemetry kinds read.
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// Where the receiver listens.
    pub listen: std::net::SocketAddr,
    /// The bearer token exporters must send (`COSTWATCH_OTLP_TOKEN` or
    /// `source.token_file`), if any.
    pub token: Option<Secret>,
    /// `otlp_files`: the folder of OTLP/JSON files, resolved.
    pub path: Option<PathBuf>,
    /// How spans become call rows.
    pub mapping: SpanMapping,
    /// Largest request body, as sent.
    pub max_request_bytes: usize,
    /// Requests a second before exporters are asked to wait.
    pub max_requests_per_second: u32,
    /// How long received calls are kept.
    pub retention: Duration,
}

/// The settings only row sources (LiteLLM, Langfuse) read.
#[derive(Debug, Clone)]
pub struct RowConfig {
    /// What groups calls into sessions.
    pub session_key: SessionKey,
    /// Label name -> the row field its value comes from.
    pub labels: BTreeMap<String, LabelField>,
    /// `source.models_file`, resolved, if set.
    pub models_file: Option<PathBuf>,
    /// The prices it holds.
    pub models: Vec<ModelPrice>,
    /// How far before a window calls are read.
    pub session_lookback: Duration,
    /// Most open sessions in one read.
    pub max_open_sessions: usize,
    /// Most calls kept for drill-downs.
    pub max_kept_rows: usize,
}

/// What a row source of `kind` reads with no `source` settings (the
/// simulator's readers, for one).
pub fn default_row_settings(kind: SourceKind) -> RowSettings {
    let raw = raw::RawSource::default();
    RowSettings {
        session_key: SessionKey::Session,
        labels: BTreeMap::new(),
        filter: BTreeMap::new(),
        page_limit: raw.page_limit.unwrap_or(kind.default_page_limit()),
        max_pages: raw.max_pages,
        session_lookback: raw.session_lookback.0,
        max_open_sessions: usize::try_from(raw.max_open_sessions).unwrap_or(usize::MAX),
        max_kept_rows: usize::try_from(raw.max_kept_rows).unwrap_or(usize::MAX),
    }
}

impl SourceConfig {
    /// What a row reader needs to know.
    pub fn row_settings(&self) -> RowSettings {
        RowSettings {
            session_key: self.rows.session_key.clone(),
            labels: self.rows.labels.clone(),
            filter: self.labels.clone(),
            page_limit: self.page_limit,
            max_pages: self.max_pages,
            session_lookback: self.rows.session_lookback,
            max_open_sessions: self.rows.max_open_sessions,
            max_kept_rows: self.rows.max_kept_rows,
        }
    }
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
    /// Largest number of open database connections.
    pub max_connections: u32,
    /// How long a replica holds the detection job without renewing it; when
    /// the holder dies, another replica takes over after this long.
    pub lease_ttl: Duration,
}

/// Detector tuning not tied to one rule.
#[derive(Debug, Clone)]
pub struct DetectionConfig {
    /// Recent sessions kept per group as its baseline.
    pub baseline_samples: usize,
    /// Largest number of candidates kept in memory for one window; beyond
    /// it the window is read a second time and judged as it streams.
    pub max_candidates: usize,
    /// Concurrent drill-down requests.
    pub drilldown_concurrency: usize,
}
