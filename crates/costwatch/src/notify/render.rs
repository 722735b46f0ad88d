//! How an [`Alert`] looks to people and to machines: the email subject, text
//! and HTML bodies, the webhook bodies and the webhook signature. Pure
//! functions: no I/O, no clock.
//!
//! # The generic webhook body (`costwatch.alert.v1`)
//!
//! The generic shape is the [`Alert`] itself, serialized as one JSON object.
//! Receivers should check `version` and ignore fields they do not know;
//! fields are only ever added within one version.
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `version` | string | always `"costwatch.alert.v1"` |
//! | `fingerprint` | string | stable id of the incident |
//! | `sequence` | integer | notifications this incident had before this one |
//! | `status` | `"firing"` \| `"resolved"` | whether the incident is going on |
//! | `kind` | `"no_cache"` \| `"oversized_model"` \| `"retry_loop"` \| `"catch_up_summary"` \| `"source_unhealthy"` \| `"test"` | what it is about |
//! | `severity` | `"info"` \| `"warning"` \| `"critical"` | the highest severity of its findings |
//! | `rule` | string or null | the rule's name, for finding alerts |
//! | `group` | string | the peer group, e.g. `"feature=support-agent"` |
//! | `labels` | object of string → string | the group's labels |
//! | `title` | string | the subject line |
//! | `summary` | string | a few sentences for people |
//! | `session_count` | integer | sessions involved so far |
//! | `impact_usd` | number | total cost above peers of those sessions, in US dollars |
//! | `impact_usd_per_day` | number | the impact extrapolated to a day |
//! | `sessions` | array | the largest sessions, largest impact first (below) |
//! | `sessions[].session_id` | string | the gateway's session id |
//! | `sessions[].cost_usd` | number | what the session cost |
//! | `sessions[].impact_usd` | number | its cost above peers |
//! | `sessions[].explanation` | string | why it was flagged |
//! | `sessions[].evidence` | any JSON | the detector's evidence |
//! | `sessions[].link` | string or null | the session in the gateway's UI |
//! | `window` | object | `{"start": RFC 3339, "end": RFC 3339}`, half-open |
//! | `starts_at` | RFC 3339 string | when the incident started |
//! | `ends_at` | RFC 3339 string or null | when it was resolved |
//! | `investigation` | object or null | the investigation's result, usually `{"summary": string, "cost_usd": number, ...}` |
//! | `created_at` | RFC 3339 string | when this notification was made |
//!
//! Every webhook request also carries the headers `X-Costwatch-Idempotency-Key`
//! (`<fingerprint>:<status>:<sequence>`; the same notification delivered twice
//! carries the same key) and, when a secret is configured,
//! `X-Costwatch-Signature: sha256=<hex>`: the HMAC-SHA256 of the exact body
//! bytes under the shared secret (see [`signature`] and [`verify_signature`]).

use super::{Alert, AlertKind, AlertSession, AlertStatus};
use chrono::SecondsFormat;
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

pub use crate::config::WebhookShape;

/// The signature header's value for `body`: `sha256=` followed by the
/// lower-case hex HMAC-SHA256 of the exact bytes under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(hmac_sha256(secret.as_bytes(), body))
    )
}

/// Whether `header` (an `X-Costwatch-Signature` value) is the signature of
/// `body` under `secret`. The comparison takes constant time.
pub fn verify_signature(secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex_digest) = header.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Ok(claimed) = hex::decode(hex_digest) else {
        return false;
    };
    hmac_instance(secret.as_bytes(), body)
        .verify_slice(&claimed)
        .is_ok()
}

type HmacSha256 = hmac::Hmac<Sha256>;

/// SHA-256's block size: HMAC keys are padded (or first hashed) to it.
const SHA256_BLOCK: usize = 64;

fn hmac_sha256(key: &[u8], body: &[u8]) -> Vec<u8> {
    hmac_instance(key, body).finalize().into_bytes().to_vec()
}

/// An HMAC-SHA256 over `body`, keyed without a fallible call: RFC 2104 pads a
/// key to the block size with zeros and first hashes a longer one, so the
/// padded block keys exactly the same MAC as the original key.
fn hmac_instance(key: &[u8], body: &[u8]) -> HmacSha256 {
    let mut block = hmac::digest::Key::<HmacSha256>::default();
    if key.len() > SHA256_BLOCK {
        let hashed = Sha256::digest(key);
        block[..hashed.len()].copy_from_slice(&hashed);
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut mac = <HmacSha256 as KeyInit>::new(&block);
    mac.update(body);
    mac
}

/// Builds an alert title such as
/// `[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day`;
/// a resolved alert's title starts with `[costwatch] RESOLVED`.
pub fn title_for(
    kind: AlertKind,
    group: &str,
    session_count: u64,
    impact_usd_per_day: f64,
    status: AlertStatus,
) -> String {
    let mut title = String::from("[costwatch] ");
    if status == AlertStatus::Resolved {
        title.push_str("RESOLVED ");
    }
    title.push_str(kind.as_str());
    if !group.is_empty() {
        let _ = write!(title, " in {}", one_line(group));
    }
    if session_count > 0 {
        let noun = if session_count == 1 {
            "session"
        } else {
            "sessions"
        };
        let _ = write!(
            title,
            ": {session_count} {noun}, +{}/day",
            usd(impact_usd_per_day)
        );
    }
    title
}

/// The email subject: the alert's title on one line.
pub fn email_subject(alert: &Alert) -> String {
    one_line(&alert.title)
}

/// The plain-text email body.
pub fn email_text(alert: &Alert) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", alert.title);
    let _ = writeln!(out);
    if !alert.summary.is_empty() {
        let _ = writeln!(out, "{}", alert.summary);
        let _ = writeln!(out);
    }
    for (name, value) in facts(alert) {
        let _ = writeln!(out, "{:<13} {}", format!("{name}:"), value);
    }

    if let Some(inv) = Investigation::of(alert) {
        let _ = writeln!(out);
        match inv.cost_usd {
            Some(cost) => {
                let _ = writeln!(out, "Investigation (cost {}):", usd(cost));
            }
            None => {
                let _ = writeln!(out, "Investigation:");
            }
        }
        let _ = writeln!(out, "{}", inv.summary);
    }

    if !alert.sessions.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Top sessions (largest impact first):");
        for (i, s) in alert.sessions.iter().enumerate() {
            let _ = writeln!(
                out,
                "{}. {}  cost {}  impact +{}",
                i + 1,
                s.session_id,
                usd(s.cost_usd),
                usd(s.impact_usd)
            );
            if !s.explanation.is_empty() {
                let _ = writeln!(out, "   {}", s.explanation);
            }
            if let Some(link) = &s.link {
                let _ = writeln!(out, "   {link}");
            }
        }
    }

    if let Some(top) = alert.sessions.first() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Evidence for {}:", top.session_id);
        let _ = writeln!(out, "{}", pretty(&top.evidence));
    }

    let _ = writeln!(out);
    let _ = writeln!(out, "Fingerprint:  {}", alert.fingerprint);
    let _ = writeln!(out, "Notification: {}", alert.idempotency_key());
    out
}

/// The HTML email body; every value from the alert is escaped.
pub fn email_html(alert: &Alert) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">");
    let _ = write!(out, "<title>{}</title>", escape_html(&alert.title));
    out.push_str("</head>\n<body style=\"font-family: sans-serif\">\n");
    let _ = writeln!(out, "<h2>{}</h2>", escape_html(&alert.title));
    if !alert.summary.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", escape_html(&alert.summary));
    }

    out.push_str("<table cellpadding=\"4\">\n");
    for (name, value) in facts(alert) {
        let _ = writeln!(
            out,
            "<tr><th align=\"left\">{}</th><td>{}</td></tr>",
            escape_html(name),
            escape_html(&value)
        );
    }
    out.push_str("</table>\n");

    if let Some(inv) = Investigation::of(alert) {
        match inv.cost_usd {
            Some(cost) => {
                let _ = writeln!(
                    out,
                    "<h3>Investigation (cost {})</h3>",
                    escape_html(&usd(cost))
                );
            }
            None => out.push_str("<h3>Investigation</h3>\n"),
        }
        let _ = writeln!(out, "<p>{}</p>", escape_html(&inv.summary));
    }

    if !alert.sessions.is_empty() {
        out.push_str("<h3>Top sessions</h3>\n<table border=\"1\" cellpadding=\"4\" style=\"border-collapse: collapse\">\n");
        out.push_str("<tr><th>Session</th><th>Cost</th><th>Impact</th><th>Explanation</th></tr>\n");
        for s in &alert.sessions {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>+{}</td><td>{}</td></tr>",
                session_cell(s),
                escape_html(&usd(s.cost_usd)),
                escape_html(&usd(s.impact_usd)),
                escape_html(&s.explanation)
            );
        }
        out.push_str("</table>\n");
    }

    if let Some(top) = alert.sessions.first() {
        let _ = writeln!(
            out,
            "<h3>Evidence for {}</h3>\n<pre>{}</pre>",
            escape_html(&top.session_id),
            escape_html(&pretty(&top.evidence))
        );
    }

    let _ = writeln!(
        out,
        "<p style=\"color: #666\">Fingerprint {}<br>Notification {}</p>",
        escape_html(&alert.fingerprint),
        escape_html(&alert.idempotency_key())
    );
    out.push_str("</body></html>\n");
    out
}

/// The JSON a webhook of `shape` receives for `alert`.
///
/// - [`WebhookShape::Generic`]: the alert itself (schema in the module docs).
/// - [`WebhookShape::Slack`]: `{"text": title, "blocks": [...]}` for an
///   incoming webhook; texts are escaped for Slack and cut to its limits.
/// - [`WebhookShape::Alertmanager`]: a one-element array for
///   `POST /api/v2/alerts`. `endsAt` is set only when resolved;
///   `generatorURL` is the top session's link when it is an http(s) URL.
pub fn webhook_body(alert: &Alert, shape: WebhookShape) -> Value {
    match shape {
        WebhookShape::Generic => generic_body(alert),
        WebhookShape::Slack => slack_body(alert),
        WebhookShape::Alertmanager => alertmanager_body(alert),
    }
}

fn generic_body(alert: &Alert) -> Value {
    // Serializing an `Alert` cannot fail (string map keys, no custom
    // serializers); should it ever, receivers still get the essentials.
    serde_json::to_value(alert).unwrap_or_else(|err| {
        json!({
            "version": alert.version,
            "fingerprint": alert.fingerprint,
            "status": alert.status,
            "kind": alert.kind,
            "title": alert.title,
            "summary": alert.summary,
            "error": format!("alert could not be serialized: {err}"),
        })
    })
}

/// Slack's limits: header text, section text and the number of blocks.
const SLACK_HEADER_MAX: usize = 150;
const SLACK_TEXT_MAX: usize = 3000;
const SLACK_SESSIONS_MAX: usize = 10;

fn slack_body(alert: &Alert) -> Value {
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
    let fields: Vec<Value> = [
        ("Group", group_or_all(&alert.group)),
        ("Severity", alert.severity.as_str().to_owned()),
        (
            "Impact",
            format!(
                "+{} total, +{}/day",
                usd(alert.impact_usd),
                usd(alert.impact_usd_per_day)
            ),
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

fn alertmanager_body(alert: &Alert) -> Value {
    let mut labels = serde_json::Map::new();
    for (key, value) in &alert.labels {
        labels.insert(prometheus_label_name(key), Value::String(value.clone()));
    }
    // costwatch's own labels come last so a group label cannot override them.
    if let Some(rule) = &alert.rule {
        labels.insert("rule".into(), Value::String(rule.clone()));
    }
    labels.insert(
        "alertname".into(),
        Value::String(format!("costwatch_{}", alert.kind.as_str())),
    );
    labels.insert(
        "severity".into(),
        Value::String(alert.severity.as_str().into()),
    );
    labels.insert("group".into(), Value::String(alert.group.clone()));
    labels.insert(
        "fingerprint".into(),
        Value::String(alert.fingerprint.clone()),
    );

    let mut object = serde_json::Map::new();
    object.insert("labels".into(), Value::Object(labels));
    object.insert(
        "annotations".into(),
        json!({
            "summary": alert.title,
            "description": alert.summary,
            "session_count": alert.session_count.to_string(),
            "impact_usd": format!("{:.2}", alert.impact_usd),
            "impact_usd_per_day": format!("{:.2}", alert.impact_usd_per_day),
        }),
    );
    object.insert("startsAt".into(), Value::String(rfc3339(alert.starts_at)));
    if alert.status == AlertStatus::Resolved {
        let ends = alert.ends_at.unwrap_or(alert.created_at);
        object.insert("endsAt".into(), Value::String(rfc3339(ends)));
    }
    if let Some(link) = alert
        .sessions
        .first()
        .and_then(|s| s.link.as_deref())
        .filter(|l| is_http_url(l))
    {
        object.insert("generatorURL".into(), Value::String(link.to_owned()));
    }
    Value::Array(vec![Value::Object(object)])
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Escapes the three characters Slack's mrkdwn treats as markup.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The investigation's summary and cost, when it has a summary.
struct Investigation {
    summary: String,
    cost_usd: Option<f64>,
}

impl Investigation {
    fn of(alert: &Alert) -> Option<Investigation> {
        let value = alert.investigation.as_ref()?;
        let summary = value.get("summary")?.as_str()?.trim();
        if summary.is_empty() {
            return None;
        }
        Some(Investigation {
            summary: summary.to_owned(),
            cost_usd: value.get("cost_usd").and_then(Value::as_f64),
        })
    }
}

/// The name/value lines shared by the text and HTML bodies.
fn facts(alert: &Alert) -> Vec<(&'static str, String)> {
    let mut what = format!(
        "{} ({}, {})",
        alert.kind.as_str(),
        alert.severity.as_str(),
        status_str(alert.status)
    );
    if let Some(rule) = &alert.rule {
        let _ = write!(what, ", rule {rule}");
    }
    let labels = if alert.labels.is_empty() {
        "(none)".to_owned()
    } else {
        alert
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut facts = vec![
        ("What", what),
        ("Where", group_or_all(&alert.group)),
        ("Labels", labels),
        (
            "Impact",
            format!(
                "+{} above peers over {} sessions, +{}/day at the current rate",
                usd(alert.impact_usd),
                alert.session_count,
                usd(alert.impact_usd_per_day)
            ),
        ),
        ("Window", alert.window.to_string()),
        ("Started", rfc3339(alert.starts_at)),
    ];
    if let Some(ends) = alert.ends_at {
        facts.push(("Resolved", rfc3339(ends)));
    }
    facts
}

fn session_cell(s: &AlertSession) -> String {
    match s.link.as_deref().filter(|l| is_http_url(l)) {
        Some(link) => format!(
            "<a href=\"{}\">{}</a>",
            escape_html(link),
            escape_html(&s.session_id)
        ),
        None => escape_html(&s.session_id),
    }
}

fn status_str(status: AlertStatus) -> &'static str {
    match status {
        AlertStatus::Firing => "firing",
        AlertStatus::Resolved => "resolved",
    }
}

fn group_or_all(group: &str) -> String {
    if group.is_empty() {
        "(all sessions)".to_owned()
    } else {
        group.to_owned()
    }
}

/// Dollars for people: cents, or four decimals below one cent.
fn usd(amount: f64) -> String {
    if amount != 0.0 && amount.abs() < 0.01 {
        format!("${amount:.4}")
    } else {
        format!("${amount:.2}")
    }
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Control characters (line breaks included) become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// At most `max` characters, with an ellipsis when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn is_http_url(link: &str) -> bool {
    let lower = link.to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// A Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`): other characters
/// become `_`.
fn prometheus_label_name(key: &str) -> String {
    let mut name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::Severity;
    use crate::notify::ALERT_SCHEMA_VERSION;
    use crate::source::{Labels, Window};
    use chrono::{TimeZone, Utc};

    /// A firing no-cache alert with two sessions and an investigation.
    pub(crate) fn sample_alert() -> Alert {
        let t = |h| Utc.with_ymd_and_hms(2026, 3, 4, h, 0, 0).unwrap();
        let mut labels = Labels::new();
        labels.insert("feature".into(), "support-agent".into());
        labels.insert("team".into(), "care".into());
        Alert {
            version: ALERT_SCHEMA_VERSION.into(),
            fingerprint: "fp-0123456789abcdef".into(),
            sequence: 0,
            status: AlertStatus::Firing,
            kind: AlertKind::NoCache,
            severity: Severity::Warning,
            rule: Some("cache-long-conversations".into()),
            group: "feature=support-agent".into(),
            labels,
            title: title_for(
                AlertKind::NoCache,
                "feature=support-agent",
                12,
                4.2,
                AlertStatus::Firing,
            ),
            summary:
                "12 long conversations in feature=support-agent sent their whole history uncached."
                    .into(),
            session_count: 12,
            impact_usd: 8.4,
            impact_usd_per_day: 4.2,
            sessions: vec![
                AlertSession {
                    session_id: "sess-top-001".into(),
                    cost_usd: 1.75,
                    impact_usd: 1.3125,
                    explanation: "34 calls re-sent 900k prompt tokens, none cached".into(),
                    evidence: json!({"requests": 34, "input_tokens": 900000, "cached_tokens": 0}),
                    link: Some("https://gateway.example.com/logs?session=sess-top-001".into()),
                },
                AlertSession {
                    session_id: "sess-second-002".into(),
                    cost_usd: 0.9,
                    impact_usd: 0.61,
                    explanation: "20 calls, none cached".into(),
                    evidence: json!({"requests": 20}),
                    link: None,
                },
            ],
            window: Window {
                start: t(10),
                end: t(11),
            },
            starts_at: t(10),
            ends_at: None,
            investigation: Some(
                json!({"summary": "The agent rebuilds its prompt every turn.", "cost_usd": 0.0375, "transcript": []}),
            ),
            created_at: t(11),
        }
    }

    #[test]
    fn titles_name_kind_group_sessions_and_daily_impact() {
        assert_eq!(
            title_for(
                AlertKind::NoCache,
                "feature=support-agent",
                12,
                4.2,
                AlertStatus::Firing
            ),
            "[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day"
        );
        assert_eq!(
            title_for(
                AlertKind::RetryLoop,
                "feature=x",
                1,
                0.5,
                AlertStatus::Resolved
            ),
            "[costwatch] RESOLVED retry_loop in feature=x: 1 session, +$0.50/day"
        );
        assert_eq!(
            title_for(AlertKind::SourceUnhealthy, "", 0, 0.0, AlertStatus::Firing),
            "[costwatch] source_unhealthy"
        );
        assert_eq!(
            title_for(AlertKind::Test, "a\nb", 2, 0.004, AlertStatus::Firing),
            "[costwatch] test in a b: 2 sessions, +$0.0040/day"
        );
    }

    #[test]
    fn subject_is_the_title_on_one_line() {
        let mut alert = sample_alert();
        assert_eq!(email_subject(&alert), alert.title);
        alert.title = "a\r\nBcc: x@example.com".into();
        assert_eq!(email_subject(&alert), "a  Bcc: x@example.com");
    }

    #[test]
    fn text_body_has_what_where_how_much_sessions_evidence_and_investigation() {
        let text = email_text(&sample_alert());
        for needle in [
            "[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day",
            "no_cache (warning, firing), rule cache-long-conversations",
            "Where:        feature=support-agent",
            "feature=support-agent, team=care",
            "+$8.40 above peers over 12 sessions, +$4.20/day",
            "1. sess-top-001  cost $1.75  impact +$1.31",
            "34 calls re-sent 900k prompt tokens",
            "https://gateway.example.com/logs?session=sess-top-001",
            "2. sess-second-002",
            "Evidence for sess-top-001:",
            "  \"input_tokens\": 900000",
            "[2026-03-04T10:00:00Z, 2026-03-04T11:00:00Z)",
            "Started:      2026-03-04T10:00:00Z",
            "Investigation (cost $0.04):",
            "The agent rebuilds its prompt every turn.",
            "Fingerprint:  fp-0123456789abcdef",
            "Notification: fp-0123456789abcdef:firing:0",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert!(!text.contains("Resolved:"));
    }

    #[test]
    fn investigation_without_summary_is_left_out() {
        let mut alert = sample_alert();
        alert.investigation = Some(json!({"error": "budget exhausted"}));
        assert!(!email_text(&alert).contains("Investigation"));
        assert!(!email_html(&alert).contains("Investigation"));
    }

    #[test]
    fn html_escapes_every_value() {
        let mut alert = sample_alert();
        alert
            .labels
            .insert("feature".into(), "<script>alert(1)</script>".into());
        alert.group = "feature=<b>x</b>".into();
        alert.summary = "a & b \"quoted\"".into();
        alert.sessions[0].session_id = "<img src=x onerror=y>".into();
        alert.sessions[0].evidence = json!({"note": "</pre><script>"});
        alert.sessions[1].link = Some("javascript:alert(1)".into());
        let html = email_html(&alert);
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>x"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("a &amp; b &quot;quoted&quot;"));
        assert!(html.contains("&lt;/pre&gt;&lt;script&gt;"));
        // The http(s) link of the top session is kept, escaped.
        assert!(html.contains("<a href=\"https://gateway.example.com/logs?session="));
    }

    #[test]
    fn html_has_sessions_table_and_facts() {
        let html = email_html(&sample_alert());
        for needle in [
            "<td>+$1.31</td>",
            "<td>$1.75</td>",
            "sess-second-002",
            "Investigation (cost $0.04)",
            "fp-0123456789abcdef:firing:0",
            "&quot;cached_tokens&quot;: 0",
            "2026-03-04T10:00:00Z",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in:\n{html}");
        }
    }

    #[test]
    fn resolved_bodies_say_when() {
        let mut alert = sample_alert();
        alert.status = AlertStatus::Resolved;
        alert.ends_at = Some(Utc.with_ymd_and_hms(2026, 3, 4, 15, 0, 0).unwrap());
        assert!(email_text(&alert).contains("Resolved:     2026-03-04T15:00:00Z"));
    }

    #[test]
    fn generic_body_is_the_alert_and_round_trips() {
        let alert = sample_alert();
        let body = webhook_body(&alert, WebhookShape::Generic);
        assert_eq!(body["version"], "costwatch.alert.v1");
        assert_eq!(body["status"], "firing");
        assert_eq!(body["kind"], "no_cache");
        assert_eq!(body["severity"], "warning");
        assert_eq!(body["sessions"][0]["session_id"], "sess-top-001");
        assert_eq!(body["window"]["start"], "2026-03-04T10:00:00Z");
        let back: Alert = serde_json::from_value(body).unwrap();
        assert_eq!(back, alert);
    }

    #[test]
    fn slack_body_has_text_and_blocks() {
        let mut alert = sample_alert();
        alert.sessions[1].explanation = "uses <!channel> & more".into();
        let body = webhook_body(&alert, WebhookShape::Slack);
        assert_eq!(body["text"], alert.title.as_str());
        let blocks = body["blocks"].as_array().unwrap();
        assert_eq!(blocks[0]["type"], "header");
        assert_eq!(blocks[0]["text"]["type"], "plain_text");
        assert_eq!(blocks[0]["text"]["text"], alert.title.as_str());
        let all = body.to_string();
        assert!(all.contains("sess-top-001"));
        assert!(all.contains("+$1.31"));
        assert!(all.contains("The agent rebuilds its prompt"));
        assert!(all.contains("uses &lt;!channel&gt; &amp; more"));
        assert!(!all.contains("<!channel>"));
        assert!(
            all.contains("<https://gateway.example.com/logs?session=sess-top-001|sess-top-001>")
        );
        for block in blocks {
            if let Some(text) = block["text"]["text"].as_str() {
                assert!(text.chars().count() <= SLACK_TEXT_MAX);
            }
        }
    }

    #[test]
    fn slack_texts_are_cut_to_the_limits() {
        let mut alert = sample_alert();
        alert.title = "t".repeat(400);
        alert.summary = "s".repeat(5000);
        let body = webhook_body(&alert, WebhookShape::Slack);
        let header = body["blocks"][0]["text"]["text"].as_str().unwrap();
        assert_eq!(header.chars().count(), SLACK_HEADER_MAX);
        assert!(header.ends_with('…'));
        let summary = body["blocks"][1]["text"]["text"].as_str().unwrap();
        assert_eq!(summary.chars().count(), SLACK_TEXT_MAX);
    }

    #[test]
    fn alertmanager_body_firing() {
        let mut alert = sample_alert();
        alert.labels.insert("alertname".into(), "spoof".into());
        alert
            .labels
            .insert("app.kubernetes/name".into(), "x".into());
        let body = webhook_body(&alert, WebhookShape::Alertmanager);
        let list = body.as_array().unwrap();
        assert_eq!(list.len(), 1);
        let a = &list[0];
        assert_eq!(a["labels"]["alertname"], "costwatch_no_cache");
        assert_eq!(a["labels"]["severity"], "warning");
        assert_eq!(a["labels"]["group"], "feature=support-agent");
        assert_eq!(a["labels"]["fingerprint"], "fp-0123456789abcdef");
        assert_eq!(a["labels"]["feature"], "support-agent");
        assert_eq!(a["labels"]["team"], "care");
        assert_eq!(a["labels"]["rule"], "cache-long-conversations");
        assert_eq!(a["labels"]["app_kubernetes_name"], "x");
        assert_eq!(a["annotations"]["summary"], alert.title.as_str());
        assert_eq!(a["annotations"]["description"], alert.summary.as_str());
        assert_eq!(a["startsAt"], "2026-03-04T10:00:00Z");
        assert!(a.get("endsAt").is_none());
        assert_eq!(
            a["generatorURL"],
            "https://gateway.example.com/logs?session=sess-top-001"
        );
        // Every label value is a string, as Alertmanager requires.
        for value in a["labels"].as_object().unwrap().values() {
            assert!(value.is_string());
        }
    }

    #[test]
    fn alertmanager_body_resolved_has_ends_at() {
        let mut alert = sample_alert();
        alert.status = AlertStatus::Resolved;
        alert.ends_at = Some(Utc.with_ymd_and_hms(2026, 3, 4, 15, 0, 0).unwrap());
        alert.sessions.clear();
        let body = webhook_body(&alert, WebhookShape::Alertmanager);
        assert_eq!(body[0]["endsAt"], "2026-03-04T15:00:00Z");
        assert!(body[0].get("generatorURL").is_none());
    }

    #[test]
    fn signature_matches_rfc_4231_vectors() {
        // RFC 4231 test case 2 (short key).
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // RFC 4231 test case 6 (a key longer than the block is hashed first).
        let key = vec![0xaa_u8; 131];
        let mac = hmac_sha256(
            &key,
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        // A key of exactly one block is used as is.
        let exact = "k".repeat(64);
        assert!(verify_signature(&exact, b"x", &signature(&exact, b"x")));
        assert_ne!(signature(&exact, b"x"), signature(&"k".repeat(65), b"x"));
    }

    #[test]
    fn verify_signature_accepts_only_the_right_secret_and_body() {
        let sig = signature("s3cret", b"{\"a\":1}");
        assert!(sig.starts_with("sha256="));
        assert_eq!(sig.len(), "sha256=".len() + 64);
        assert!(verify_signature("s3cret", b"{\"a\":1}", &sig));
        assert!(!verify_signature("wrong", b"{\"a\":1}", &sig));
        assert!(!verify_signature("s3cret", b"{\"a\":2}", &sig));
        assert!(!verify_signature("s3cret", b"{\"a\":1}", &sig[7..]));
        assert!(!verify_signature("s3cret", b"{\"a\":1}", "sha256=zz"));
    }
}
