//! What a channel would receive for an alert, without sending it: the
//! email's subject and plain-text body, a webhook's headers and JSON body.
//! Built with the same rendering functions the channels send with, for
//! `costwatch alerts --render`.

use super::Alert;
use super::chart::{CHART_HEIGHT, CHART_WIDTH, ChartSpec, render_png};
use super::render::{WebhookShape, email_subject, email_text, webhook_body_linked};
use super::settings::{EmailConfig, WebhookConfig};
use super::webhook::{IDEMPOTENCY_HEADER, SIGNATURE_HEADER};
use serde::Serialize;
use std::time::Duration;
use url::Url;

/// A configured channel, as far as its rendering goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelSpec {
    /// `notify.email`.
    Email {
        /// The sender.
        from: String,
        /// The recipients.
        to: Vec<String>,
    },
    /// One of `notify.webhooks`.
    Webhook {
        /// The channel's name.
        name: String,
        /// Its body shape.
        shape: WebhookShape,
        /// How often a firing alert is posted again (Alertmanager only).
        repost_interval: Option<Duration>,
        /// Whether requests carry a signature.
        signed: bool,
        /// `server.public_url`, which a Slack body links the chart from.
        public_url: Option<Url>,
    },
}

impl From<&EmailConfig> for ChannelSpec {
    fn from(c: &EmailConfig) -> ChannelSpec {
        ChannelSpec::Email {
            from: c.from.clone(),
            to: c.to.clone(),
        }
    }
}

impl From<&WebhookConfig> for ChannelSpec {
    fn from(c: &WebhookConfig) -> ChannelSpec {
        ChannelSpec::Webhook {
            name: c.name.clone(),
            shape: c.shape,
            // As `WebhookNotifier::repost_interval`: only Alertmanager forgets.
            repost_interval: (c.shape == WebhookShape::Alertmanager).then_some(c.repost_interval),
            signed: c.secret.is_some(),
            public_url: None,
        }
    }
}

impl ChannelSpec {
    /// Links alert charts from `url` (`server.public_url`), as the channel
    /// does.
    pub fn with_public_url(self, url: Option<&Url>) -> ChannelSpec {
        match self {
            ChannelSpec::Webhook {
                name,
                shape,
                repost_interval,
                signed,
                ..
            } => ChannelSpec::Webhook {
                name,
                shape,
                repost_interval,
                signed,
                public_url: url.cloned(),
            },
            email => email,
        }
    }

    /// The channel's name, as in the outbox: `email` or the webhook's name.
    pub fn name(&self) -> &str {
        match self {
            ChannelSpec::Email { .. } => "email",
            ChannelSpec::Webhook { name, .. } => name,
        }
    }

    /// How often a firing alert is posted again to it.
    pub fn repost_interval(&self) -> Option<Duration> {
        match self {
            ChannelSpec::Email { .. } => None,
            ChannelSpec::Webhook {
                repost_interval, ..
            } => *repost_interval,
        }
    }
}

/// What one channel would receive.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Rendered {
    /// An email.
    Email {
        /// The channel's name.
        channel: String,
        /// The sender.
        from: String,
        /// The recipients.
        to: Vec<String>,
        /// The subject.
        subject: String,
        /// The plain-text body (the message also has an HTML part).
        text: String,
        /// The attachment's name, when the alert carries an investigation
        /// transcript.
        attachment: Option<String>,
        /// The chart shown inline in the HTML part, when the alert has one.
        chart: Option<ChartPreview>,
    },
    /// A webhook `POST`.
    Webhook {
        /// The channel's name.
        channel: String,
        /// The body's shape: `generic`, `slack` or `alertmanager`.
        shape: String,
        /// The request headers costwatch sets (the signature's value is
        /// shown as a placeholder: it depends on the secret).
        headers: Vec<(String, String)>,
        /// The JSON body (sent compact, as one line).
        body: serde_json::Value,
    },
}

/// The chart an email would carry inline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChartPreview {
    /// Its media type, `image/png`.
    pub content_type: String,
    /// Its width and height in pixels.
    pub width: u32,
    /// Its height in pixels.
    pub height: u32,
    /// The PNG's size in bytes (0 when it could not be drawn).
    pub bytes: usize,
    /// What it shows (the text part's line, the image's alt text).
    pub shows: String,
}

impl ChartPreview {
    fn of(spec: &ChartSpec) -> ChartPreview {
        ChartPreview {
            content_type: "image/png".to_owned(),
            width: CHART_WIDTH,
            height: CHART_HEIGHT,
            bytes: render_png(spec).map(|p| p.len()).unwrap_or(0),
            shows: spec.describe(),
        }
    }
}

/// What `spec` would receive for `alert`. A firing alert to a channel that
/// forgets it unless told again must already carry its `valid_until`, as
/// the delivery pass sets it.
pub fn render(alert: &Alert, spec: &ChannelSpec) -> Rendered {
    match spec {
        ChannelSpec::Email { from, to } => Rendered::Email {
            channel: spec.name().to_owned(),
            from: from.clone(),
            to: to.clone(),
            subject: email_subject(alert),
            text: email_text(alert),
            // As the email channel does: an investigation travels as a
            // text attachment.
            attachment: alert
                .investigation
                .as_ref()
                .map(|_| "investigation-transcript.txt".to_owned()),
            chart: alert.chart.as_ref().map(ChartPreview::of),
        },
        ChannelSpec::Webhook {
            name,
            shape,
            signed,
            public_url,
            ..
        } => {
            let mut headers = vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                (IDEMPOTENCY_HEADER.to_owned(), alert.idempotency_key()),
            ];
            if *signed {
                headers.push((
                    SIGNATURE_HEADER.to_owned(),
                    "sha256=<HMAC-SHA256 of the body with the channel's secret>".to_owned(),
                ));
            }
            Rendered::Webhook {
                channel: name.clone(),
                shape: shape_name(*shape).to_owned(),
                headers,
                body: webhook_body_linked(alert, *shape, public_url.as_ref()),
            }
        }
    }
}

/// The name of a webhook shape, as written in the configuration.
pub fn shape_name(shape: WebhookShape) -> &'static str {
    match shape {
        WebhookShape::Generic => "generic",
        WebhookShape::Slack => "slack",
        WebhookShape::Alertmanager => "alertmanager",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::render::webhook_body;
    use crate::notify::sample_alert;
    use chrono::TimeZone;

    #[test]
    fn every_channel_gets_what_its_renderer_makes() {
        let now = chrono::Utc.with_ymd_and_hms(2026, 11, 2, 12, 0, 0).unwrap();
        let alert = sample_alert(now);
        let email = ChannelSpec::Email {
            from: "costwatch <cw@example.com>".into(),
            to: vec!["ops@example.com".into()],
        };
        match render(&alert, &email) {
            Rendered::Email {
                subject,
                text,
                attachment,
                chart,
                ..
            } => {
                assert_eq!(subject, email_subject(&alert));
                assert_eq!(text, email_text(&alert));
                assert_eq!(attachment, None);
                assert_eq!(chart, None);
            }
            other => panic!("{other:?}"),
        }
        let hook = ChannelSpec::Webhook {
            name: "am".into(),
            shape: WebhookShape::Alertmanager,
            repost_interval: Some(Duration::from_secs(60)),
            signed: true,
            public_url: None,
        };
        match render(&alert, &hook) {
            Rendered::Webhook { headers, body, .. } => {
                assert_eq!(body, webhook_body(&alert, WebhookShape::Alertmanager));
                assert!(
                    headers.contains(&(IDEMPOTENCY_HEADER.to_owned(), alert.idempotency_key()))
                );
                assert!(
                    headers
                        .iter()
                        .any(|(k, v)| k == SIGNATURE_HEADER && !v.contains("secret:"))
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(hook.name(), "am");
        assert_eq!(email.repost_interval(), None);
    }
}
