//! The configuration file exactly as written: serde structs with defaults
//! and no unknown keys. `load` checks them and turns them into the typed
//! structs of [`super`]. Rule files are read straight into the rule
//! settings of `detect::rules`.

use super::{SmtpSecurity, TokenizerChoice, WebhookShape};
use crate::domain::{Kind, Severity};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::time::Duration;

mod source;

pub(crate) use self::source::RawSource;

/// A duration written the humantime way (`500ms`, `30s`, `15m`, `7d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HumanDuration(pub Duration);

impl HumanDuration {
    const fn secs(secs: u64) -> Self {
        HumanDuration(Duration::from_secs(secs))
    }

    const fn millis(millis: u64) -> Self {
        HumanDuration(Duration::from_millis(millis))
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(HumanDurationVisitor)
    }
}

struct HumanDurationVisitor;

impl Visitor<'_> for HumanDurationVisitor {
    type Value = HumanDuration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration with a unit, such as `30s` or `15m`")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<HumanDuration, E> {
        humantime::parse_duration(v)
            .map(HumanDuration)
            .map_err(|e| E::custom(format!("invalid duration `{v}`: {e}")))
    }
}

/// A whole configuration file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    /// Where sessions come from.
    #[serde(default)]
    pub source: RawSource,
    /// How time is cut into windows.
    #[serde(default)]
    pub windows: RawWindows,
    /// Labels whose values form a session's peer group.
    #[serde(default = "default_group_by")]
    pub group_by: Vec<String>,
    /// Where state lives.
    #[serde(default)]
    pub state: RawState,
    /// Detector tuning not tied to one rule.
    #[serde(default)]
    pub detection: RawDetection,
    /// When the detection job runs.
    #[serde(default)]
    pub schedule: RawSchedule,
    /// How findings become alerts.
    #[serde(default)]
    pub alerts: RawAlerts,
    /// Where alerts go.
    #[serde(default)]
    pub notify: RawNotify,
    /// The local HTTP endpoint.
    #[serde(default)]
    pub server: RawServer,
    /// Escalation of flagged incidents to an LLM investigation.
    #[serde(default)]
    pub investigation: RawInvestigation,
    /// Rule files and directories, relative to the configuration file's
    /// folder; none (the default) means the rules built into the binary.
    #[serde(default)]
    pub rules: Vec<String>,
}

/// Labels whose values form a session's peer group when `group_by` is not set.
pub fn default_group_by() -> Vec<String> {
    vec!["feature".to_owned()]
}

/// The `windows` section.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawWindows {
    /// Length of one window.
    pub size: HumanDuration,
    /// Wait after a window's end before it is read.
    pub settle_lag: HumanDuration,
    /// RFC 3339 start when there is no watermark yet.
    pub start: Option<String>,
    /// How far back processing ever reaches.
    pub max_backfill: HumanDuration,
}

impl Default for RawWindows {
    fn default() -> Self {
        RawWindows {
            size: HumanDuration::secs(15 * 60),
            settle_lag: HumanDuration::secs(2 * 60),
            start: None,
            max_backfill: HumanDuration::secs(7 * 24 * 3600),
        }
    }
}

/// The `state` section.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawState {
    /// `sqlite:...`, `postgres://...` or `postgresql://...`.
    pub url: String,
    /// Largest number of open database connections (1 to 100).
    pub max_connections: u64,
    /// How long a replica holds the detection job without renewing it.
    pub lease_ttl: HumanDuration,
}

impl Default for RawState {
    fn default() -> Self {
        RawState {
            url: "sqlite://costwatch.db".to_owned(),
            max_connections: 4,
            lease_ttl: HumanDuration::secs(60),
        }
    }
}

/// The `detection` section.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawDetection {
    /// Recent sessions kept per group as its baseline.
    pub baseline_samples: u64,
    /// Largest number of candidates judged in one window.
    pub max_candidates: u64,
    /// Concurrent drill-down requests.
    pub drilldown_concurrency: u64,
}

impl Default for RawDetection {
    fn default() -> Self {
        RawDetection {
            baseline_samples: 512,
            max_candidates: 10_000,
            drilldown_concurrency: 4,
        }
    }
}

/// The `schedule` section.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawSchedule {
    /// Cron expression: 5 fields, or 6 with seconds first.
    pub cron: String,
    /// IANA time zone name the expression is read in.
    pub timezone: String,
    /// Most windows processed in one catch-up.
    pub max_catch_up_windows: u64,
    /// How long one tick may read the gateway.
    pub tick_timeout: HumanDuration,
}

impl Default for RawSchedule {
    fn default() -> Self {
        RawSchedule {
            cron: "*/5 * * * *".to_owned(),
            timezone: "UTC".to_owned(),
            max_catch_up_windows: 672,
            // Twice the default window: a tick that cannot read one window
            // in that time would fall behind the windows anyway.
            tick_timeout: HumanDuration::secs(30 * 60),
        }
    }
}

/// The `alerts` section.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawAlerts {
    /// Quiet time after an incident's alert.
    pub cooldown: HumanDuration,
    /// After the cooldown, the growth factor of the session count that
    /// re-alerts; 0 never re-alerts.
    pub realert_growth: f64,
    /// Time without findings after which an incident is resolved.
    pub resolve_after: HumanDuration,
    /// A finding this soon after its incident resolved continues the
    /// episode instead of opening a new one.
    pub reopen_within: HumanDuration,
    /// How long (data time, from the start of an episode's first window
    /// with a finding) its first notification waits for the findings of
    /// the windows after it, so that it tells of them too.
    pub group_wait: HumanDuration,
    /// Incidents worth less than this many dollars a day are recorded, not sent.
    pub min_impact_usd_per_day: f64,
    /// Incidents with fewer sessions than this are recorded, not sent.
    pub min_sessions: u64,
    /// Whether resolved notifications are sent.
    pub send_resolved: bool,
    /// Sessions listed in an alert.
    pub top_sessions: u64,
    /// Catch-ups over more windows than this send one summary.
    pub summary_after_windows: u64,
    /// How long one alert's delivery is retried.
    pub delivery_deadline: HumanDuration,
    /// First delivery retry delay.
    pub retry_base: HumanDuration,
    /// Longest delay between delivery attempts.
    pub retry_max: HumanDuration,
    /// Base URL of the gateway's log UI.
    pub gateway_ui_url: Option<String>,
}

impl Default for RawAlerts {
    fn default() -> Self {
        RawAlerts {
            cooldown: HumanDuration::secs(6 * 3600),
            realert_growth: 0.0,
            resolve_after: HumanDuration::secs(2 * 3600),
            reopen_within: HumanDuration::secs(0),
            group_wait: HumanDuration::secs(0),
            min_impact_usd_per_day: 0.0,
            min_sessions: 1,
            send_resolved: true,
            top_sessions: 5,
            summary_after_windows: 4,
            delivery_deadline: HumanDuration::secs(24 * 3600),
            retry_base: HumanDuration::secs(30),
            retry_max: HumanDuration::secs(30 * 60),
            gateway_ui_url: None,
        }
    }
}

/// The `notify` section.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawNotify {
    /// Email over SMTP; absent means no email channel.
    pub email: Option<RawEmail>,
    /// Webhooks, each deserialized on its own (see [`RawWebhook`]) so one
    /// bad entry does not hide the problems of the others.
    pub webhooks: Vec<serde_json::Value>,
}

/// `notify.email`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEmail {
    /// SMTP host.
    pub host: String,
    /// SMTP port; by default the one of `security`.
    #[serde(default)]
    pub port: Option<u16>,
    /// Transport security.
    #[serde(default = "default_smtp_security")]
    pub security: SmtpSecurity,
    /// Extra CA certificate (PEM), relative to the configuration's folder.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// SMTP user.
    #[serde(default)]
    pub username: Option<String>,
    /// File holding the SMTP password.
    #[serde(default)]
    pub password_file: Option<String>,
    /// Sender mailbox.
    pub from: String,
    /// Recipients; required, checked by the loader so that a missing list
    /// and an empty one read alike.
    #[serde(default)]
    pub to: Vec<String>,
    /// Timeout of one delivery.
    #[serde(default = "email_timeout")]
    pub timeout: HumanDuration,
}

fn default_smtp_security() -> SmtpSecurity {
    SmtpSecurity::StartTls
}

fn email_timeout() -> HumanDuration {
    HumanDuration::secs(30)
}

/// One element of `notify.webhooks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWebhook {
    /// Unique channel name.
    pub name: String,
    /// Where to POST.
    pub url: String,
    /// Body format.
    #[serde(default = "default_webhook_shape")]
    pub shape: WebhookShape,
    /// File holding the signing secret.
    #[serde(default)]
    pub secret_file: Option<String>,
    /// Timeout of one delivery.
    #[serde(default = "webhook_timeout")]
    pub timeout: HumanDuration,
    /// How often a firing alert is posted again (Alertmanager only);
    /// [`REPOST_INTERVAL`] when left out.
    #[serde(default)]
    pub repost_interval: Option<HumanDuration>,
}

/// How often an Alertmanager webhook gets a firing alert again: Prometheus's
/// default `--rules.alert.resend-delay`.
pub(crate) const REPOST_INTERVAL: HumanDuration = HumanDuration::secs(60);

fn default_webhook_shape() -> WebhookShape {
    WebhookShape::Generic
}

fn webhook_timeout() -> HumanDuration {
    HumanDuration::secs(10)
}

/// The `server` section.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawServer {
    /// Socket address for `/metrics`, `/healthz` and the status page at
    /// `/`; `null` disables the endpoint.
    pub listen: Option<String>,
    /// The URL at which people and Slack reach that endpoint from outside
    /// (a reverse proxy's, say); alert charts are linked from it. Unset,
    /// Slack messages carry no chart.
    pub public_url: Option<String>,
}

impl Default for RawServer {
    fn default() -> Self {
        RawServer {
            listen: Some("127.0.0.1:9464".to_owned()),
            public_url: None,
        }
    }
}

/// The investigating model when `investigation.model` is not set.
pub const DEFAULT_MODEL: &str = "gpt-6-luna";

/// The `investigation` section.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawInvestigation {
    /// Whether flagged incidents are escalated at all.
    pub enabled: bool,
    /// The gateway's MCP endpoint (read with the admin key).
    pub mcp_url: String,
    /// Base URL of an OpenAI-compatible API (`{llm_url}/chat/completions`).
    pub llm_url: String,
    /// The investigating model.
    pub model: String,
    /// File with the inference key; `COSTWATCH_INFERENCE_KEY` wins.
    pub inference_key_file: Option<String>,
    /// Tools offered to the model, in this order (the allowlist).
    pub tools: Vec<String>,
    /// How prompts are counted before a call.
    pub tokenizer: TokenizerChoice,
    /// The model server's tokenize endpoint, for `tokenizer: server`
    /// (default: llama-cpp-python's, below the `llm_url`'s origin).
    pub tokenize_url: Option<String>,
    /// With `tokenizer: server`: whether the server's chat template
    /// HTML-escapes message text (llama-cpp-python's
    /// `chatml-function-calling` does), so it is counted escaped.
    pub template_escapes_html: bool,
    /// The model's prices per million tokens; without them the gateway's
    /// catalogue is used.
    pub prices: Option<RawPrices>,
    /// Which incidents are escalated.
    pub escalate: RawEscalate,
    /// Hard caps.
    pub caps: RawCaps,
}

impl Default for RawInvestigation {
    fn default() -> Self {
        RawInvestigation {
            enabled: false,
            mcp_url: "http://127.0.0.1:8080/v1/mcp".to_owned(),
            llm_url: "http://127.0.0.1:8080/v1".to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            inference_key_file: None,
            tools: vec![
                "search_requests".into(),
                "get_request".into(),
                "list_sessions".into(),
            ],
            tokenizer: TokenizerChoice::Auto,
            tokenize_url: None,
            template_escapes_html: false,
            prices: None,
            escalate: RawEscalate::default(),
            caps: RawCaps::default(),
        }
    }
}

/// Model prices per million tokens.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPrices {
    /// Uncached prompt tokens.
    pub input_usd_per_mtok: f64,
    /// Cached prompt tokens.
    pub cached_input_usd_per_mtok: f64,
    /// Completion tokens.
    pub output_usd_per_mtok: f64,
}

/// Which incidents are escalated.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawEscalate {
    /// Finding kinds escalated.
    pub kinds: Vec<Kind>,
    /// Lowest severity escalated.
    pub min_severity: Severity,
    /// Most investigations started per hour.
    pub max_per_hour: u64,
}

impl Default for RawEscalate {
    fn default() -> Self {
        RawEscalate {
            kinds: Kind::ALL.to_vec(),
            min_severity: Severity::Warning,
            max_per_hour: 6,
        }
    }
}

/// Hard caps of one investigation, and of a day.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawCaps {
    /// Model calls per run.
    pub max_rounds: u64,
    /// Tool calls per run.
    pub max_tool_calls: u64,
    /// Prompt tokens per run.
    pub max_input_tokens: u64,
    /// Completion tokens per run.
    pub max_output_tokens: u64,
    /// Dollars per run.
    pub max_usd_per_run: f64,
    /// Dollars per UTC day, over every run and replica.
    pub max_usd_per_day: f64,
    /// Largest tool result passed to the model, in bytes.
    pub max_tool_result_bytes: u64,
    /// Wall-clock time per run.
    pub wall_timeout: HumanDuration,
}

impl Default for RawCaps {
    fn default() -> Self {
        RawCaps {
            max_rounds: 4,
            max_tool_calls: 6,
            max_input_tokens: 16_000,
            max_output_tokens: 2_000,
            max_usd_per_run: 0.05,
            max_usd_per_day: 1.0,
            max_tool_result_bytes: 4_000,
            wall_timeout: HumanDuration::secs(120),
        }
    }
}
