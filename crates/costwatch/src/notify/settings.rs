//! The channels' settings, as the `notify` section configures them.

use crate::secret::Secret;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;
use url::Url;

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
