//! The Slack incoming-webhook body.

use super::{
    Investigation, group_or_all, is_http_url, one_line, rfc3339, status_str, truncate, usd,
};
use crate::notify::Alert;
use serde_json::{Value, json};
use std::fmt::Write as _;
use url::Url;

/// Slack's limits: header text, section text and the number of blocks.
pub(super) const SLACK_HEADER_MAX: usize = 150;
pub(super) const SLACK_TEXT_MAX: usize = 3000;
const SLACK_SESSIONS_MAX: usize = 10;
/// Slack's limit on an image block's alt text.
const SLACK_ALT_MAX: usize = 2000;

/// The Slack body; `chart` is the URL of the alert's chart image, shown
/// in an `image` block before the context line.
pub(super) fn slack_body(alert: &Alert, chart: Option<&Url>) -> Value {
    let mut blocks = vec![json!({
        "type": "header",
        "text": {"type": "plain_text", "text": truncate(&one_line(&alert.title), SLACK_HEADER_MAX), "emoji": false},
    })];
    if !alert.summary.is_empty() {
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": truncate(&slack_escape(&alert.summary), SLACK_TEXT_MAX)},
        }));
    }
    if let Some(line) = alert.what_to_do() {
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": truncate(&format!("*What to do:* {}.", slack_escape(line)), SLACK_TEXT_MAX)},
        }));
    }
    let fields: Vec<Value> = [
        ("Group", group_or_all(&alert.group)),
        ("Severity", alert.severity.as_str().to_owned()),
        (
            "Impact",
            if alert.has_rate() {
                format!(
                    "+{} total, +{}/day",
                    usd(alert.impact_usd),
                    usd(alert.impact_usd_per_day)
                )
            } else {
                format!("+{} in all", usd(alert.impact_usd))
            },
        ),
        ("Sessions", alert.session_count.to_string()),
    ]
    .into_iter()
    .map(|(name, value)| {
        json!({"type": "mrkdwn", "text": truncate(&format!("*{name}*\n{}", slack_escape(&value)), 2000)})
    })
    .collect();
    blocks.push(json!({"type": "section", "fields": fields}));

    if let Some(inv) = Investigation::of(alert) {
        let cost = inv
            .cost_usd
            .map(|c| format!(" (cost {})", usd(c)))
            .unwrap_or_default();
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": truncate(&format!("*Investigation*{cost}\n{}", slack_escape(&inv.summary)), SLACK_TEXT_MAX)},
        }));
    }

    if !alert.sessions.is_empty() {
        let mut text = String::from("*Top sessions*");
        for s in alert.sessions.iter().take(SLACK_SESSIONS_MAX) {
            let id = match s.link.as_deref().filter(|l| is_http_url(l)) {
                Some(link) => format!("<{}|{}>", slack_escape(link), slack_escape(&s.session_id)),
                None => format!("`{}`", slack_escape(&s.session_id)),
            };
            let _ = write!(
                text,
                "\n• {id}: cost {}, impact +{} – {}",
                usd(s.cost_usd),
                usd(s.impact_usd),
                slack_escape(&one_line(&s.explanation))
            );
        }
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": truncate(&text, SLACK_TEXT_MAX)},
        }));
    }

    if let (Some(url), Some(spec)) = (chart, &alert.chart) {
        blocks.push(json!({
            "type": "image",
            "image_url": url.as_str(),
            "alt_text": truncate(&one_line(&spec.describe()), SLACK_ALT_MAX),
        }));
    }

    blocks.push(json!({
        "type": "context",
        "elements": [{
            "type": "mrkdwn",
            "text": truncate(&slack_escape(&format!(
                "{} · window {} · started {} · fingerprint {}",
                status_str(alert.status),
                alert.window,
                rfc3339(alert.starts_at),
                alert.fingerprint
            )), SLACK_TEXT_MAX),
        }],
    }));

    json!({"text": one_line(&alert.title), "blocks": blocks})
}

/// Escapes the three characters Slack's mrkdwn treats as markup.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
