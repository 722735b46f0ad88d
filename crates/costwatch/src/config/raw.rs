//! The configuration and rule files exactly as written: serde structs with
//! defaults and no unknown keys. `load` checks them and turns them into the
//! typed structs of [`super`] and [`super::rules`].

use super::{SmtpSecurity, TokenizerChoice, WebhookShape};
use crate::domain::{Kind, Severity};
use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

mod source;

pub use self::source::DEFAULT_MAX_PAGES;
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
    /// After the cooldown, the growth factor of the session count that re-alerts.
    pub realert_growth: f64,
    /// Time without findings after which an incident is resolved.
    pub resolve_after: HumanDuration,
    /// A finding this soon after its incident resolved continues the
    /// episode instead of opening a new one.
    pub reopen_within: HumanDuration,
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
            realert_growth: 2.0,
            resolve_after: HumanDuration::secs(2 * 3600),
            reopen_within: HumanDuration::secs(0),
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

/// One rule file. Every kind is optional; each holds a list of rules.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "costwatch rule file")]
pub(crate) struct RawRuleFile {
    /// Multi-request conversations on a cache-capable model that never hit
    /// the prompt cache while their peers do.
    #[serde(default)]
    pub no_cache: Vec<RawNoCacheRule>,
    /// A premium model used for tiny calls where the group does not normally
    /// do so.
    #[serde(default)]
    pub oversized_model: Vec<RawOversizedModelRule>,
    /// Sessions that call far more often than their peers, confirmed by
    /// repeated near-identical requests or an error burst.
    #[serde(default)]
    pub retry_loop: Vec<RawRetryLoopRule>,
}

/// A `no_cache` rule.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "NoCacheRule")]
pub(crate) struct RawNoCacheRule {
    /// Unique name among the `no_cache` rules; appears in findings.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Severity of the rule's findings.
    #[serde(default = "default_severity")]
    pub severity: Severity,
    /// Exact-match label selector; `{}` covers every session. The most
    /// specific matching rule decides.
    #[serde(default, rename = "match")]
    pub selector: BTreeMap<String, String>,
    /// A disabled rule silences the sessions it covers.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Fewest calls in the session (a single call can never hit the cache).
    #[serde(default = "no_cache_min_requests")]
    #[schemars(range(min = 2))]
    pub min_requests: u64,
    /// Smallest average prompt per call, in tokens; shorter prompts are below
    /// the providers' cacheable minimum.
    #[serde(default = "no_cache_min_avg_input_tokens")]
    pub min_avg_input_tokens: u64,
    /// Smallest prompt prefix, in tokens, that a model caches, for models
    /// whose minimum neither `model_min_cacheable_tokens` nor the gateway's
    /// catalogue gives.
    #[serde(default = "no_cache_min_cacheable_tokens")]
    #[schemars(range(min = 1))]
    pub min_cacheable_tokens: u64,
    /// Per-model smallest cacheable prefix, in tokens (model id to tokens);
    /// overrides the gateway's catalogue and `min_cacheable_tokens`.
    #[serde(default)]
    pub model_min_cacheable_tokens: BTreeMap<String, u64>,
    /// Average prompt per call on a model, as a multiple of the model's
    /// cacheable minimum, from which the session's aggregates alone show its
    /// calls could read the cache; closer to the minimum, its request rows
    /// decide which calls could.
    #[serde(default = "no_cache_clear_avg_input_ratio")]
    #[schemars(range(min = 1.0))]
    pub clear_avg_input_ratio: f64,
    /// How long a cached prefix lives after the call that wrote or last read
    /// it, in seconds, for models `model_cache_lifetime_seconds` does not
    /// name: a call can read the cache only within it of an earlier
    /// cacheable call on the same model.
    #[serde(default = "no_cache_cache_lifetime_seconds")]
    #[schemars(range(min = 1))]
    pub cache_lifetime_seconds: u64,
    /// Per-model cache lifetime, in seconds (model id to seconds); overrides
    /// `cache_lifetime_seconds`.
    #[serde(default)]
    pub model_cache_lifetime_seconds: BTreeMap<String, u64>,
    /// Fewest calls that could have read the cache and did not before a
    /// session is judged uncached: a single miss is how caching that starts
    /// partway looks before its first read.
    #[serde(default = "no_cache_min_missed_calls")]
    #[schemars(range(min = 1))]
    pub min_missed_calls: u64,
    /// Cached share of the prompt at or below which the session counts as
    /// uncached.
    #[serde(default = "no_cache_max_cached_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_cached_share: f64,
    /// Peers' median cached share needed before an uncached session is unusual.
    #[serde(default = "no_cache_min_peer_cached_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_peer_cached_share: f64,
    /// Fewest eligible peers for the peer test; below it the rule alone decides.
    #[serde(default = "no_cache_min_peers")]
    #[schemars(range(min = 1))]
    pub min_peers: u64,
    /// Smallest estimated waste worth a finding, in USD.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub min_impact_usd: f64,
}

/// An `oversized_model` rule.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "OversizedModelRule")]
pub(crate) struct RawOversizedModelRule {
    /// Unique name among the `oversized_model` rules; appears in findings.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Severity of the rule's findings.
    #[serde(default = "default_severity")]
    pub severity: Severity,
    /// Exact-match label selector; `{}` covers every session. The most
    /// specific matching rule decides.
    #[serde(default, rename = "match")]
    pub selector: BTreeMap<String, String>,
    /// A disabled rule silences the sessions it covers.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A model is premium when its blended price is at least this many times
    /// the cheapest model in use.
    #[serde(default = "oversized_premium_price_ratio")]
    #[schemars(range(min = 1.0))]
    pub premium_price_ratio: f64,
    /// Largest average prompt per premium call that counts as tiny, in tokens.
    #[serde(default = "oversized_max_avg_input_tokens")]
    pub max_avg_input_tokens: u64,
    /// Largest average completion per premium call that counts as tiny, in
    /// tokens.
    #[serde(default = "oversized_max_avg_output_tokens")]
    pub max_avg_output_tokens: u64,
    /// Smallest share of the session's cost spent on tiny premium calls.
    #[serde(default = "oversized_min_premium_cost_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_premium_cost_share: f64,
    /// Fewest peers before the group's habits are judged at all.
    #[serde(default = "oversized_min_peers")]
    #[schemars(range(min = 1))]
    pub min_peers: u64,
    /// When more than this share of the group's sessions make tiny premium
    /// calls, that is the group's normal pattern and nothing is flagged.
    #[serde(default = "oversized_max_group_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_group_share: f64,
    /// Below this many peers the group's baseline is thin: a finding needs
    /// at most half of `max_group_share` of the peers to make mostly tiny
    /// premium calls, and is marked `cold_start`.
    #[serde(default = "oversized_cold_start_peers")]
    #[schemars(range(min = 1))]
    pub cold_start_peers: u64,
    /// The group's newest sessions that show a change of habit: when more
    /// than `max_group_share` of them made mostly tiny premium calls, the
    /// group has moved to the premium model.
    #[serde(default = "oversized_recent_sessions")]
    #[schemars(range(min = 1))]
    pub recent_sessions: u64,
    /// Smallest estimated waste worth a finding, in USD.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub min_impact_usd: f64,
}

/// A `retry_loop` rule.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "RetryLoopRule")]
pub(crate) struct RawRetryLoopRule {
    /// Unique name among the `retry_loop` rules; appears in findings.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Severity of the rule's findings.
    #[serde(default = "default_severity")]
    pub severity: Severity,
    /// Exact-match label selector; `{}` covers every session. The most
    /// specific matching rule decides.
    #[serde(default, rename = "match")]
    pub selector: BTreeMap<String, String>,
    /// A disabled rule silences the sessions it covers.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Fewest calls for a session to be considered at all.
    #[serde(default = "retry_min_requests")]
    #[schemars(range(min = 2))]
    pub min_requests: u64,
    /// Calls must be at least this many times the peers' median.
    #[serde(default = "retry_min_ratio_to_median")]
    #[schemars(range(min = 1.0))]
    pub min_ratio_to_median: f64,
    /// Robust z-score (median and MAD of log call counts) needed; above 0.
    #[serde(default = "retry_min_robust_z")]
    pub min_robust_z: f64,
    /// Fewest peers for the statistical test; below it
    /// `cold_start_min_requests` applies.
    #[serde(default = "retry_min_peers")]
    #[schemars(range(min = 1))]
    pub min_peers: u64,
    /// Calls needed when the group has too little history.
    #[serde(default = "retry_cold_start_min_requests")]
    pub cold_start_min_requests: u64,
    /// Consecutive near-identical calls that confirm a loop.
    #[serde(default = "retry_min_identical_run")]
    #[schemars(range(min = 2))]
    pub min_identical_run: u64,
    /// Consecutive calls of exactly the same prompt size that confirm a
    /// suspect's loop (a session no other test nominated).
    #[serde(default = "retry_suspect_min_identical_run")]
    #[schemars(range(min = 2))]
    pub suspect_min_identical_run: u64,
    /// Prompt sizes within this many tokens count as near-identical...
    #[serde(default = "retry_input_tolerance_tokens")]
    pub input_tolerance_tokens: u64,
    /// ...or within this share of the previous prompt.
    #[serde(default = "retry_input_tolerance_ratio")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub input_tolerance_ratio: f64,
    /// Most suspects of this rule (sessions of at least `min_requests` calls
    /// that the outlier, error and cold-start tests did not nominate) whose
    /// request rows are read per window, the most suspicious first; the rest
    /// are skipped and counted.
    #[serde(default = "retry_drilldown_budget")]
    #[schemars(range(max = 1_000_000))]
    pub drilldown_budget: u64,
    /// Longest pause, in seconds from one call's start to the next, inside a
    /// run of resent calls.
    #[serde(default = "retry_max_run_gap_seconds")]
    #[schemars(range(min = 1))]
    pub max_run_gap_seconds: u64,
    /// Failed calls in a row that confirm a loop; also the failed calls that
    /// make a session a candidate whatever its size.
    #[serde(default = "retry_min_error_burst")]
    pub min_error_burst: u64,
}

fn default_severity() -> Severity {
    Severity::Warning
}

fn yes() -> bool {
    true
}

fn no_cache_min_requests() -> u64 {
    3
}
fn no_cache_min_avg_input_tokens() -> u64 {
    1024
}
fn no_cache_min_cacheable_tokens() -> u64 {
    1024
}
fn no_cache_clear_avg_input_ratio() -> f64 {
    2.0
}
fn no_cache_max_cached_share() -> f64 {
    0.05
}
fn no_cache_min_peer_cached_share() -> f64 {
    0.15
}
fn no_cache_min_peers() -> u64 {
    5
}
fn no_cache_cache_lifetime_seconds() -> u64 {
    300
}
fn no_cache_min_missed_calls() -> u64 {
    2
}

fn oversized_premium_price_ratio() -> f64 {
    5.0
}
fn oversized_max_avg_input_tokens() -> u64 {
    1000
}
fn oversized_max_avg_output_tokens() -> u64 {
    500
}
fn oversized_min_premium_cost_share() -> f64 {
    0.5
}
fn oversized_min_peers() -> u64 {
    2
}
fn oversized_max_group_share() -> f64 {
    0.5
}
fn oversized_cold_start_peers() -> u64 {
    20
}
fn oversized_recent_sessions() -> u64 {
    20
}

fn retry_min_requests() -> u64 {
    6
}
fn retry_min_ratio_to_median() -> f64 {
    2.5
}
fn retry_min_robust_z() -> f64 {
    3.0
}
fn retry_min_peers() -> u64 {
    20
}
fn retry_cold_start_min_requests() -> u64 {
    8
}
fn retry_suspect_min_identical_run() -> u64 {
    7
}
fn retry_min_identical_run() -> u64 {
    5
}
fn retry_input_tolerance_tokens() -> u64 {
    32
}
fn retry_input_tolerance_ratio() -> f64 {
    0.0
}
fn retry_drilldown_budget() -> u64 {
    100
}
fn retry_max_run_gap_seconds() -> u64 {
    60
}
fn retry_min_error_burst() -> u64 {
    5
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
