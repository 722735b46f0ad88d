//! The Alertmanager body for `POST /api/v2/alerts`.

use super::{is_http_url, rfc3339};
use crate::notify::{Alert, AlertStatus};
use serde_json::{Value, json};

pub(super) fn alertmanager_body(alert: &Alert) -> Value {
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
    let mut annotations = json!({
        "summary": alert.title,
        "description": alert.summary,
        "session_count": alert.session_count.to_string(),
        "impact_usd": format!("{:.2}", alert.impact_usd),
        "impact_usd_per_day": format!("{:.2}", alert.impact_usd_per_day),
    });
    if let (Some(line), Some(map)) = (alert.what_to_do(), annotations.as_object_mut()) {
        map.insert("what_to_do".into(), Value::String(line.to_owned()));
    }
    object.insert("annotations".into(), annotations);
    object.insert("startsAt".into(), Value::String(rfc3339(alert.starts_at)));
    // A resolved alert ends when it was resolved. A firing one holds until
    // `valid_until`, the time the delivery pass gives it at each (re-)post,
    // as Prometheus sends `endsAt`; without it Alertmanager would resolve it
    // after its `resolve_timeout`.
    let ends = match alert.status {
        AlertStatus::Resolved => Some(alert.ends_at.unwrap_or(alert.created_at)),
        AlertStatus::Firing => alert.valid_until,
    };
    if let Some(ends) = ends {
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
