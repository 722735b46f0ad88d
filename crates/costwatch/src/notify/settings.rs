//! The channels' settings, as the `notify` section configures them.

use crate::secret::Secret;
use crate::settings::units::{http_url, positive};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;
use url::Url;

/// Where alerts go (the `notify` section).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<NotifyConfig>)]
pub struct NotifyConfig {
    /// Email over SMTP; absent means no email channel.
    pub email: Option<EmailConfig>,
    /// Webhooks, each its own channel.
    pub webhooks: Vec<WebhookConfig>,
}

/// How to reach the SMTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// Plain SMTP: allowed only to a loopback host.
    None,
    /// STARTTLS upgrade (port 587).
    StartTls,
    /// TLS from the first byte (port 465).
    Tls,
}

impl SmtpSecurity {
    /// The port it is spoken on by default.
    pub fn port(self) -> u16 {
        match self {
            SmtpSecurity::None => 25,
            SmtpSecurity::StartTls => 587,
            SmtpSecurity::Tls => 465,
        }
    }
}

/// Email over SMTP (`notify.email`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<EmailConfig>)]
pub struct EmailConfig {
    /// SMTP host.
    #[schemars(example = "smtp.example.com")]
    pub host: String,
    /// SMTP port; by default the one of `security` (25, 587 or 465).
    #[serde(default)]
    #[schemars(range(min = 1))]
    #[schemars(example = 587)]
    pub port: Option<u16>,
    /// Transport security: `starttls`, `tls`, or `none` (to a loopback
    /// host only).
    #[serde(default = "starttls")]
    pub security: SmtpSecurity,
    /// Extra CA certificate (PEM) to trust, for private mail servers;
    /// relative to the configuration's folder.
    #[serde(default)]
    #[schemars(example = "ca.pem")]
    pub ca_file: Option<PathBuf>,
    /// SMTP user, if the server wants authentication.
    #[serde(default)]
    #[schemars(example = &"costwatch")]
    pub username: Option<String>,
    /// File holding the SMTP password; `COSTWATCH_SMTP_PASSWORD` wins.
    #[serde(default)]
    #[schemars(example = "/run/credentials/costwatch.service/smtp_password")]
    pub password_file: Option<PathBuf>,
    /// The SMTP password, from `COSTWATCH_SMTP_PASSWORD` or `password_file`.
    #[serde(skip)]
    pub password: Option<Secret>,
    /// Sender mailbox (`costwatch <costwatch@example.com>`).
    #[schemars(example = "costwatch <costwatch@example.com>")]
    pub from: String,
    /// Recipients, at least one.
    #[serde(default)]
    #[schemars(example = ["oncall@example.com"])]
    pub to: Vec<String>,
    /// Timeout of one delivery.
    #[serde(default = "thirty_seconds", with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub timeout: Duration,
}

impl EmailConfig {
    /// The port: as written, else the one of `security`.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(self.security.port())
    }
}

fn starttls() -> SmtpSecurity {
    SmtpSecurity::StartTls
}

fn thirty_seconds() -> Duration {
    Duration::from_secs(30)
}

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WebhookShape {
    /// costwatch's own versioned JSON.
    Generic,
    /// A Slack incoming webhook.
    Slack,
    /// Alertmanager's `POST /api/v2/alerts`.
    Alertmanager,
}

/// One webhook channel (an element of `notify.webhooks`).
#[derive(Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<WebhookConfig>)]
pub struct WebhookConfig {
    /// Name of the channel, unique: lower-case letters, digits, `_` and
    /// `-`. Used in logs and metrics, and it names the secret's variable.
    #[schemars(example = &"chat")]
    pub name: String,
    /// Where to POST.
    #[serde(with = "http_url")]
    #[schemars(with = "String")]
    #[schemars(example = "https://hooks.slack.com/services/T000/B000/XXXX")]
    pub url: Url,
    /// Body format.
    #[serde(default = "generic")]
    pub shape: WebhookShape,
    /// File holding the shared secret for `X-Costwatch-Signature`;
    /// `COSTWATCH_WEBHOOK_<NAME>_SECRET` (name upper-cased, `-` as `_`)
    /// wins.
    #[serde(default)]
    #[schemars(example = "/run/credentials/costwatch.service/webhook_chat")]
    pub secret_file: Option<PathBuf>,
    /// The shared secret, from the variable or `secret_file`.
    #[serde(skip)]
    pub secret: Option<Secret>,
    /// Timeout of one delivery.
    #[serde(default = "ten_seconds", with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub timeout: Duration,
    /// How often a firing alert is posted again to an Alertmanager webhook,
    /// so Alertmanager keeps it firing until it is resolved (by default
    /// Prometheus's `--rules.alert.resend-delay`); set only with
    /// `shape: alertmanager`.
    #[serde(default = "one_minute", with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub repost_interval: Duration,
}

fn generic() -> WebhookShape {
    WebhookShape::Generic
}

fn ten_seconds() -> Duration {
    Duration::from_secs(10)
}

fn one_minute() -> Duration {
    Duration::from_secs(60)
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
