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
pub use error::{ConfigError, Problem};
pub use load::{BUILTIN_RULES, builtin_rules, load, load_rules, load_with_env, rules_schema};
pub use raw::{DEFAULT_MAX_PAGES, DEFAULT_MODEL, default_group_by};

use crate::domain::{Kind, Labels};
use crate::secret::Secret;
use crate::source::otlp::SpanMapping;
use crate::source::rows::{LabelField, RowSettings, SessionKey};
use crate::source::{ModelPrice, SourceKind};
use chrono::{DateTime, Utc};
use serde::Deserialize;
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

/// Which tokenizer counts prompts (`investigation.tokenizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenizerChoice {
    /// By the model's name: OpenAI families get theirs, others the bound.
    Auto,
    /// OpenAI's `o200k_base`.
    O200kBase,
    /// OpenAI's `cl100k_base`.
    Cl100kBase,
    /// No tokenizer: the bound learned from reported usage.
    None,
    /// The model server's tokenizer, asked through its tokenize endpoint
    /// (`investigation.tokenize_url`), with the bound's learning of what
    /// the chat template adds.
    Server,
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

/// The hard limits of one investigation, and of a day.
#[derive(Debug, Clone, PartialEq)]
pub struct Caps {
    /// Model calls per run.
    pub max_rounds: u32,
    /// Tool calls per run (refused and malformed calls count).
    pub max_tool_calls: u32,
    /// Prompt tokens per run, summed over its calls (cached ones included).
    pub max_input_tokens: u64,
    /// Completion tokens per run, summed over its calls.
    pub max_output_tokens: u64,
    /// Dollars per run.
    pub max_usd_per_run: f64,
    /// Dollars per UTC day, over every run and replica (kept in the ledger).
    pub max_usd_per_day: f64,
    /// Largest tool result passed to the model, truncation marker included.
    pub max_tool_result_bytes: usize,
    /// Wall-clock time per run.
    pub wall_timeout: Duration,
}

/// What the investigating model costs, in dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Uncached prompt tokens.
    pub input_usd_per_mtok: f64,
    /// Prompt tokens read from the cache (the input price without a cache).
    pub cached_input_usd_per_mtok: f64,
    /// Completion tokens.
    pub output_usd_per_mtok: f64,
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

/// Where alerts go.
#[derive(Debug, Clone, Default)]
pub struct NotifyConfig {
    /// Email over SMTP.
    pub email: Option<EmailConfig>,
    /// Webhooks, each its own channel.
    pub webhooks: Vec<WebhookConfig>,
}

/// How to reach the SMTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// Plain SMTP: allowed only to a loopback host.
    None,
    /// STARTTLS upgrade (port 587).
    StartTls,
    /// TLS from the first byte (port 465).
    Tls,
}

/// Email over SMTP.
#[derive(Debug, Clone)]
pub struct EmailConfig {
    /// SMTP host.
    pub host: String,
    /// SMTP port.
    pub port: u16,
    /// Transport security.
    pub security: SmtpSecurity,
    /// Extra CA certificate (PEM) to trust, for private mail servers.
    pub ca_file: Option<PathBuf>,
    /// SMTP user, if the server wants authentication.
    pub username: Option<String>,
    /// SMTP password, from `COSTWATCH_SMTP_PASSWORD` or `password_file`.
    pub password: Option<Secret>,
    /// Sender mailbox (`costwatch <costwatch@example.com>`).
    pub from: String,
    /// Recipients.
    pub to: Vec<String>,
    /// Timeout of one delivery.
    pub timeout: Duration,
}

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookShape {
    /// costwatch's own versioned JSON.
    Generic,
    /// A Slack incoming webhook.
    Slack,
    /// Alertmanager's `POST /api/v2/alerts`.
    Alertmanager,
}

/// One webhook channel.
#[derive(Clone)]
pub struct WebhookConfig {
    /// Name of the channel (unique), used in logs and metrics.
    pub name: String,
    /// Where to POST.
    pub url: Url,
    /// Body format.
    pub shape: WebhookShape,
    /// Shared secret for `X-Costwatch-Signature`, from `secret_file` or
    /// `COSTWATCH_WEBHOOK_<NAME>_SECRET` (name upper-cased, `-` as `_`).
    pub secret: Option<Secret>,
    /// Timeout of one delivery.
    pub timeout: Duration,
    /// How often a firing alert is posted again to an Alertmanager webhook,
    /// so Alertmanager keeps it firing until it is resolved; unused by the
    /// other shapes.
    pub repost_interval: Duration,
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

impl std::fmt::Debug for WebhookConfig {
    /// Webhook URLs often carry their token in the path or query: only the
    /// scheme and host are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = format!(
            "{}://{}/[redacted]",
            self.url.scheme(),
            self.url.host_str().unwrap_or("")
        );
        f.debug_struct("WebhookConfig")
            .field("name", &self.name)
            .field("url", &url)
            .field("shape", &self.shape)
            .field("secret", &self.secret)
            .field("timeout", &self.timeout)
            .field("repost_interval", &self.repost_interval)
            .finish()
    }
}
