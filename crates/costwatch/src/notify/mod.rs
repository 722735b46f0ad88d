//! Alerts and where they go: the alert model, its renderings, the email and
//! webhook channels, and the outbox that delivers them durably.

pub mod chart;
pub mod email;
pub mod outbox;
pub mod preview;
pub mod render;
pub mod settings;
pub mod webhook;

use crate::domain::investigation::InvestigationReport;
use crate::domain::{Kind, Labels, Severity, Window};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::future::Future;

/// Version of the webhook JSON schema; bumped on any incompatible change.
pub const ALERT_SCHEMA_VERSION: &str = "costwatch.alert.v1";

/// Whether an incident is going on or over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertStatus {
    /// The incident is going on.
    Firing,
    /// The incident stopped recurring.
    Resolved,
}

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A no-cache incident.
    NoCache,
    /// An oversized-model incident.
    OversizedModel,
    /// A retry-loop incident.
    RetryLoop,
    /// One summary after a catch-up over many windows.
    CatchUpSummary,
    /// The gateway could not be read.
    SourceUnhealthy,
    /// A sample sent by `costwatch test-alert`.
    Test,
}

impl From<Kind> for AlertKind {
    fn from(k: Kind) -> AlertKind {
        match k {
            Kind::NoCache => AlertKind::NoCache,
            Kind::OversizedModel => AlertKind::OversizedModel,
            Kind::RetryLoop => AlertKind::RetryLoop,
        }
    }
}

impl AlertKind {
    /// The name used in subjects, labels and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::NoCache => Kind::NoCache.as_str(),
            AlertKind::OversizedModel => Kind::OversizedModel.as_str(),
            AlertKind::RetryLoop => Kind::RetryLoop.as_str(),
            AlertKind::CatchUpSummary => "catch_up_summary",
            AlertKind::SourceUnhealthy => "source_unhealthy",
            AlertKind::Test => "test",
        }
    }

    /// The alert of an incident of `kind` (a kind of waste, or
    /// `source_unhealthy`); `None` for a kind this build does not know.
    pub fn of_incident(kind: &str) -> Option<AlertKind> {
        match Kind::parse(kind) {
            Some(k) => Some(AlertKind::from(k)),
            None => {
                (kind == AlertKind::SourceUnhealthy.as_str()).then_some(AlertKind::SourceUnhealthy)
            }
        }
    }

    /// The kind of waste behind an incident alert; `None` for the daemon's
    /// own alerts (summaries, source health, tests).
    pub fn waste(self) -> Option<Kind> {
        match self {
            AlertKind::NoCache => Some(Kind::NoCache),
            AlertKind::OversizedModel => Some(Kind::OversizedModel),
            AlertKind::RetryLoop => Some(Kind::RetryLoop),
            AlertKind::CatchUpSummary | AlertKind::SourceUnhealthy | AlertKind::Test => None,
        }
    }
}

/// One session listed in an alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertSession {
    /// The gateway's session id.
    pub session_id: String,
    /// What the session cost.
    pub cost_usd: f64,
    /// Cost above its peers.
    pub impact_usd: f64,
    /// The finding's explanation.
    pub explanation: String,
    /// The finding's evidence.
    pub evidence: serde_json::Value,
    /// Link to the session in the gateway's UI, when configured.
    pub link: Option<String>,
    /// What to do about it: one line per kind and cause
    /// (`detect::remedy`); empty in alerts stored before it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub what_to_do: String,
}

/// An incident a catch-up summary stands for, as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedIncident {
    /// The incident's fingerprint (`costwatch incident show` takes it).
    pub fingerprint: String,
    /// What it is about.
    pub kind: AlertKind,
    /// Its peer group.
    pub group: String,
    /// Going on, or over within the catch-up.
    pub status: AlertStatus,
    /// Its sessions' cost above peers, in dollars.
    pub impact_usd: f64,
}

/// One incident notification, as stored in the outbox and sent to every channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Schema version ([`ALERT_SCHEMA_VERSION`]).
    pub version: String,
    /// Stable id of the incident; receivers deduplicate on it together with
    /// `status` and `sequence` (the idempotency key is [`Alert::idempotency_key`]).
    pub fingerprint: String,
    /// How many notifications this incident had before this one.
    pub sequence: u32,
    /// Firing or resolved.
    pub status: AlertStatus,
    /// What it is about.
    pub kind: AlertKind,
    /// Severity (the highest of the findings).
    pub severity: Severity,
    /// Rule name, for finding alerts.
    pub rule: Option<String>,
    /// Peer group, e.g. `feature=support-agent`.
    pub group: String,
    /// The group's labels.
    pub labels: Labels,
    /// Subject line, e.g. `[costwatch] no_cache in feature=support-agent: 12 sessions, +$4.20/day`.
    pub title: String,
    /// A few sentences for people.
    pub summary: String,
    /// Sessions involved in the incident so far.
    pub session_count: u64,
    /// Total cost above peers of those sessions.
    pub impact_usd: f64,
    /// Impact extrapolated to a day at the incident's rate.
    pub impact_usd_per_day: f64,
    /// The largest sessions (top N by impact).
    pub sessions: Vec<AlertSession>,
    /// The windows the incident spans.
    pub window: Window,
    /// When the incident started.
    pub starts_at: DateTime<Utc>,
    /// When it was resolved.
    pub ends_at: Option<DateTime<Utc>>,
    /// Until when a receiver that forgets firing alerts (Alertmanager) is
    /// to hold this one firing: set by the delivery pass at each post of a
    /// firing alert to such a receiver, never stored or sent elsewhere.
    #[serde(skip)]
    pub valid_until: Option<DateTime<Utc>>,
    /// Filled by the investigation: summary, transcript, cost.
    pub investigation: Option<InvestigationReport>,
    /// The chart of the flagged sessions against their group, captured
    /// when the alert was built; absent from alerts of other kinds, of
    /// groups without a baseline yet, and from alerts stored before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<chart::ChartSpec>,
    /// The incidents a catch-up summary stands for; empty, and absent from
    /// the JSON, for every other alert.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incidents: Vec<ListedIncident>,
    /// When this notification was made.
    pub created_at: DateTime<Utc>,
}

impl Alert {
    /// Whether a per-day rate says something: only of one incident of
    /// waste still going on (not of one that ended, a catch-up's mix, the
    /// source's health or a test).
    pub fn has_rate(&self) -> bool {
        self.status == AlertStatus::Firing && self.kind.waste().is_some()
    }

    /// What to do about it: the top session's line, for an alert about
    /// one incident of waste (a catch-up summary's sessions are of
    /// several).
    pub fn what_to_do(&self) -> Option<&str> {
        self.kind.waste()?;
        self.sessions
            .first()
            .map(|s| s.what_to_do.as_str())
            .filter(|line| !line.is_empty())
    }

    /// The key a receiver deduplicates on: the same notification delivered
    /// twice carries the same key.
    pub fn idempotency_key(&self) -> String {
        let status = match self.status {
            AlertStatus::Firing => "firing",
            AlertStatus::Resolved => "resolved",
        };
        format!("{}:{}:{}", self.fingerprint, status, self.sequence)
    }
}

/// Why a delivery failed.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// Worth retrying: network trouble, timeouts, 429/5xx, SMTP 4xx.
    #[error("delivery failed, will retry: {0}")]
    Transient(String),
    /// Retrying will not help: bad address, 4xx other than 429, SMTP 5xx.
    #[error("delivery rejected: {0}")]
    Rejected(String),
}

/// A channel alerts are sent to.
pub trait Notifier: Send + Sync {
    /// The channel's name (`email`, or the webhook's name).
    fn name(&self) -> &str;

    /// Sends one alert.
    fn send(&self, alert: &Alert) -> impl Future<Output = Result<(), NotifyError>> + Send;

    /// How often a firing alert is posted again, for a receiver that
    /// forgets a firing alert it is not told about again (Alertmanager);
    /// `None` for receivers that keep what they were told.
    fn repost_interval(&self) -> Option<std::time::Duration> {
        None
    }
}

/// The sample alert `costwatch test-alert` sends.
pub fn sample_alert(now: DateTime<Utc>) -> Alert {
    let fingerprint = format!("test-{}", now.timestamp());
    Alert {
        version: ALERT_SCHEMA_VERSION.to_owned(),
        title: render::title_for(
            AlertKind::Test,
            "feature=example",
            1,
            0.0,
            AlertStatus::Firing,
        ),
        summary:
            "this is a test alert from costwatch test-alert: if you read it, this channel works"
                .to_owned(),
        fingerprint,
        sequence: 1,
        status: AlertStatus::Firing,
        kind: AlertKind::Test,
        severity: Severity::Info,
        rule: None,
        group: "feature=example".to_owned(),
        labels: Labels::from([("feature".to_owned(), "example".to_owned())]),
        session_count: 1,
        impact_usd: 0.0,
        impact_usd_per_day: 0.0,
        sessions: vec![AlertSession {
            session_id: "example-session".to_owned(),
            cost_usd: 0.0012,
            impact_usd: 0.0,
            explanation: "a sample session".to_owned(),
            evidence: serde_json::json!({}),
            link: None,
            what_to_do: String::new(),
        }],
        window: Window {
            start: now,
            end: now,
        },
        starts_at: now,
        ends_at: None,
        valid_until: None,
        investigation: None,
        chart: None,
        incidents: Vec::new(),
        created_at: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::investigation::StopCode;

    /// An alert as the outbox stored it before the investigation was typed
    /// (keys in the order `serde_json::Value` wrote them).
    const STORED: &str = r#"{"version":"costwatch.alert.v1","fingerprint":"fp-1","sequence":0,"status":"firing","kind":"retry_loop","severity":"warning","rule":"retries","group":"feature=support-agent","labels":{"feature":"support-agent"},"title":"[costwatch] retry_loop in feature=support-agent: 1 session, +$0.40/day","summary":"one session retried the same call","session_count":1,"impact_usd":0.2,"impact_usd_per_day":0.4,"sessions":[{"session_id":"s-1","cost_usd":0.3,"impact_usd":0.2,"explanation":"12 identical calls","evidence":{"calls":12},"link":null}],"window":{"start":"2026-10-11T12:00:00Z","end":"2026-10-11T13:00:00Z"},"starts_at":"2026-10-11T12:00:00Z","ends_at":null,"investigation":{"cached_tokens":0,"cost_usd":0.000912,"input_tokens":2210,"model":"gpt-6-luna","output_tokens":180,"rounds":2,"run_id":"inv-fp-1-0-1791720300000","stop_detail":null,"stop_reason":"answered","summary":"Session s-1 retried search 12 times.","tool_calls":1,"tools_offered":["search_requests","get_request","list_sessions"],"transcript":[{"client_request_id":"inv-fp-1-0-1791720300000-r1","content":null,"cost_is_worst_case":false,"cost_usd":0.00026,"error":null,"error_type":null,"finish_reason":"tool_calls","index":1,"latency_ms":12,"request":{"body_bytes":4120,"estimated_prompt_tokens":1400,"max_tokens":1024,"messages":2,"reserved_usd":0.0061,"tool_choice":"auto","tools":["search_requests","get_request","list_sessions"]},"response_id":"chatcmpl-1","retries":0,"tool_calls":[{"arguments":"{\"session_id\":\"s-1\"}","id":"call_1","latency_ms":3,"name":"search_requests","result":"{\"data\":[]}","result_bytes":11,"status":"ok","truncated":false}],"usage":{"cached_tokens":0,"completion_tokens":40,"prompt_tokens":1000}},{"client_request_id":"inv-fp-1-0-1791720300000-r2","content":"Session s-1 retried search 12 times.","cost_is_worst_case":false,"cost_usd":0.000652,"error":null,"error_type":null,"finish_reason":"stop","index":2,"latency_ms":15,"request":{"body_bytes":4500,"estimated_prompt_tokens":1500,"max_tokens":1024,"messages":4,"reserved_usd":0.0062,"tool_choice":"none","tools":["search_requests","get_request","list_sessions"]},"response_id":"chatcmpl-2","retries":1,"tool_calls":[],"usage":{"cached_tokens":0,"completion_tokens":140,"prompt_tokens":1210}}],"transcript_text":"costwatch investigation inv-fp-1-0-1791720300000\n"},"created_at":"2026-10-11T13:05:00Z"}"#;

    #[test]
    fn an_alert_stored_before_the_typed_investigation_still_reads() {
        let alert: Alert = serde_json::from_str(STORED).unwrap();
        // Stored before alerts carried a chart: none, and none written.
        assert_eq!(alert.chart, None);
        let inv = alert.investigation.as_ref().unwrap();
        assert_eq!(inv.stop_reason, StopCode::Answered);
        assert_eq!(inv.summary, "Session s-1 retried search 12 times.");
        assert_eq!((inv.rounds, inv.tool_calls), (2, 1));
        assert_eq!(inv.transcript.len(), 2);
        assert_eq!(inv.transcript[0].tool_calls[0].name, "search_requests");
        assert_eq!(inv.transcript[1].usage.map(|u| u.prompt_tokens), Some(1210));
        // The text copy it carried then is no longer part of the report.
        let again = serde_json::to_value(inv).unwrap();
        assert!(again.get("transcript_text").is_none());
        // Written again, it is the same JSON less that copy.
        let mut stored: serde_json::Value = serde_json::from_str(STORED).unwrap();
        if let Some(i) = stored["investigation"].as_object_mut() {
            i.remove("transcript_text");
        }
        assert_eq!(serde_json::to_value(&alert).unwrap(), stored);
    }

    #[test]
    fn an_incident_kind_is_read_back_or_refused_never_guessed() {
        for k in Kind::ALL {
            assert_eq!(AlertKind::of_incident(k.as_str()), Some(AlertKind::from(k)));
            assert_eq!(AlertKind::from(k).waste(), Some(k));
        }
        assert_eq!(
            AlertKind::of_incident("source_unhealthy"),
            Some(AlertKind::SourceUnhealthy)
        );
        assert_eq!(AlertKind::of_incident("a_future_kind"), None);
        assert_eq!(AlertKind::of_incident("catch_up_summary"), None);
    }
}
