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
//! | `investigation` | object or null | the investigation's result ([`InvestigationReport`](crate::domain::investigation::InvestigationReport)): `summary`, `cost_usd`, `stop_reason`, `stop_detail`, `model`, `run_id`, token and call totals, `tools_offered` and `transcript` (the rounds; each tool result shortened to 1,000 bytes, whole rows, with `clipped_from` giving the bytes the model saw; the whole record is in the state database, `costwatch investigation show RUN_ID`). `transcript_text` is no longer sent: it repeated `transcript` as text |
//! | `chart` | object, absent when none | the chart of the flagged sessions against their group, as data ([`ChartSpec`](crate::notify::chart::ChartSpec)): `metric` (`"cached_share"` \| `"calls_per_session"` \| `"tiny_call_price"`), `group`, `peers` (sessions counted), `lo` and `hi` (the axis, in the metric's units), `bins` (the group's sessions per bin, 40 bins evenly spaced on the axis' scale: logarithmic for calls per session), `median`, `band` (`[low, high]`, one robust standard deviation either side), `flagged` (`[{"session_id", "value"}]`). Only finding alerts of groups with a baseline carry it |
//! | `incidents` | array, absent when empty | a catch-up summary's incidents, as data: `fingerprint`, `kind`, `group`, `status` (`"firing"` \| `"resolved"`: over within the catch-up) and `impact_usd`; absent from every other alert |
//! | `created_at` | RFC 3339 string | when this notification was made |
//!
//! Every webhook request also carries the headers `X-Costwatch-Idempotency-Key`
//! (`<fingerprint>:<status>:<sequence>`; the same notification delivered twice
//! carries the same key) and, when a secret is configured,
//! `X-Costwatch-Signature: sha256=<hex>`: the HMAC-SHA256 of the exact body
//! bytes under the shared secret (see [`signature`] and [`verify_signature`]).

mod alertmanager;
mod email;
mod signature;
mod slack;
#[cfg(test)]
pub(crate) mod tests;
mod transcript;

pub use email::{email_html, email_html_with_chart, email_subject, email_text, escape_html};
pub use signature::{signature, verify_signature};
pub use transcript::transcript_text;

use super::{Alert, AlertKind, AlertStatus};
use crate::printable::is_unsafe;
use chrono::SecondsFormat;
use serde_json::{Value, json};
use std::fmt::Write as _;
use url::Url;

pub use crate::notify::settings::WebhookShape;

/// Builds an alert title such as
/// `[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day`;
/// a resolved alert's title starts with `[costwatch] RESOLVED` and gives
/// the incident's whole impact instead of a rate (`+$0.084 in all`): an
/// incident that ended costs nothing a day. `impact_usd` is the day's rate
/// while firing, the total once resolved.
pub fn title_for(
    kind: AlertKind,
    group: &str,
    session_count: u64,
    impact_usd: f64,
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
        let per = match status {
            AlertStatus::Firing => "/day",
            AlertStatus::Resolved => " in all",
        };
        let _ = write!(title, ": {session_count} {noun}, +{}{per}", usd(impact_usd));
    }
    title
}

/// The JSON a webhook of `shape` receives for `alert`.
///
/// - [`WebhookShape::Generic`]: the alert itself (schema in the module docs).
/// - [`WebhookShape::Slack`]: `{"text": title, "blocks": [...]}` for an
///   incoming webhook; texts are escaped for Slack and cut to its limits.
/// - [`WebhookShape::Alertmanager`]: a one-element array for
///   `POST /api/v2/alerts`. `endsAt` is the resolution time when resolved,
///   and [`Alert::valid_until`] when firing (the delivery pass sets it);
///   `generatorURL` is the top session's link when it is an http(s) URL.
pub fn webhook_body(alert: &Alert, shape: WebhookShape) -> Value {
    webhook_body_linked(alert, shape, None)
}

/// [`webhook_body`], with `public_url` (`server.public_url`) to link the
/// alert's chart from: a Slack body then ends its text with an `image`
/// block showing [`chart_url`] when the alert has a chart. The other
/// shapes are the same either way.
pub fn webhook_body_linked(alert: &Alert, shape: WebhookShape, public_url: Option<&Url>) -> Value {
    match shape {
        WebhookShape::Generic => generic_body(alert),
        WebhookShape::Slack => {
            let chart = alert
                .chart
                .as_ref()
                .zip(public_url)
                .and_then(|(_, base)| chart_url(base, &alert.fingerprint));
            slack::slack_body(alert, chart.as_ref())
        }
        WebhookShape::Alertmanager => alertmanager::alertmanager_body(alert),
    }
}

/// Where the operations endpoint serves the chart of the incident
/// `fingerprint`, below `public_url`: `incidents/{fingerprint}/chart.png`.
pub fn chart_url(public_url: &Url, fingerprint: &str) -> Option<Url> {
    // Fingerprints are hex; anything else is not linked.
    if fingerprint.is_empty()
        || !fingerprint
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return None;
    }
    public_url
        .join(&format!("incidents/{fingerprint}/chart.png"))
        .ok()
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

/// The investigation's summary and cost, when it has a summary.
struct Investigation {
    summary: String,
    cost_usd: Option<f64>,
}

impl Investigation {
    fn of(alert: &Alert) -> Option<Investigation> {
        let report = alert.investigation.as_ref()?;
        let summary = report.summary.trim();
        if summary.is_empty() {
            return None;
        }
        Some(Investigation {
            summary: summary.to_owned(),
            // A cost that is not a number is left out rather than shown as NaN.
            cost_usd: report.cost_usd.is_finite().then_some(report.cost_usd),
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
        ("Impact", {
            let mut impact = format!(
                "+{} above peers over {}",
                usd(alert.impact_usd),
                crate::domain::counted(alert.session_count, "session")
            );
            if alert.has_rate() {
                let _ = write!(
                    impact,
                    ", +{}/day at the current rate",
                    usd(alert.impact_usd_per_day)
                );
            }
            impact
        }),
        ("Window", alert.window.to_string()),
        ("Started", rfc3339(alert.starts_at)),
    ];
    if let Some(ends) = alert.ends_at {
        facts.push(("Resolved", rfc3339(ends)));
    }
    facts
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

/// Dollars for people, one rule for every figure of an alert: cents from
/// a dollar up, two significant digits below (`$0.51`, `$0.013`,
/// `$0.0038`), so a small sum is never shown as `$0.01` beside its own
/// `$0.0132`.
pub fn usd(amount: f64) -> String {
    if !amount.is_finite() {
        return "$?".to_owned();
    }
    let size = amount.abs();
    if size == 0.0 || size >= 1.0 {
        return format!("${amount:.2}");
    }
    // Two significant digits: the first one's place, plus one.
    let first = (-size.log10().floor()) as usize;
    let decimals = (first + 1).clamp(2, 8);
    format!("${amount:.decimals$}")
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Control characters (line breaks included) and bidi controls become
/// spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if is_unsafe(c) { ' ' } else { c })
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
