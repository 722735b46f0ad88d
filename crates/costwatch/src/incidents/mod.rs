//! Findings become incidents, and incidents become alerts: one per incident,
//! not one per session or per window.
//!
//! An incident is the findings of one rule in one peer group. Its fingerprint
//! is stable. It fires once, is re-alerted (only where `realert_growth` is
//! set; never by default) only by a finding that comes after the cooldown
//! and only if it grew by that factor, and resolves
//! once no finding came for `resolve_after`. A finding within `reopen_within` of
//! the resolution continues the same episode (its start and counts), and
//! since the last word people had was its resolution, they are told once
//! that it fires again: costwatch never leaves "resolved" standing over
//! waste that goes on. An
//! incident below the floor (`min_impact_usd_per_day`, `min_sessions`) is
//! recorded and followed like any other but not sent until it rises above
//! it. All times are data time: the ends of
//! processed windows. A catch-up after downtime behaves as a live run would,
//! and a replay gives the same alerts.

mod settings;

pub use settings::AlertPolicy;

use crate::detect::Finding;
use crate::domain::Severity;
use crate::notify::render;
use crate::notify::{
    ALERT_SCHEMA_VERSION, Alert, AlertKind, AlertSession, AlertStatus, ListedIncident,
};
use crate::source::links::SessionLinks;
use crate::source::{Labels, Window};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// The kind name of the incident kept for the gateway's health.
pub const SOURCE_UNHEALTHY: &str = "source_unhealthy";

/// An incident as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Incident {
    /// Stable id: kind, rule and group hashed.
    pub fingerprint: String,
    /// Finding kind, or [`SOURCE_UNHEALTHY`].
    pub kind: String,
    /// Rule name (the job name for the source incident).
    pub rule: String,
    /// Peer group.
    pub group: String,
    /// The group's labels.
    pub labels: Labels,
    /// Severity of the rule.
    pub severity: Severity,
    /// Whether it is going on.
    pub firing: bool,
    /// Start of the first window with a finding in this episode.
    pub started: DateTime<Utc>,
    /// End of the latest window with a finding.
    pub last_finding: DateTime<Utc>,
    /// Sessions in this episode.
    pub session_count: u64,
    /// Their total impact.
    pub impact_usd: f64,
    /// Notifications enqueued so far, all episodes.
    pub sequence: u32,
    /// Data time of this episode's last notification.
    pub notified: Option<DateTime<Utc>>,
    /// Session count at that notification.
    pub notified_sessions: u64,
    /// Latest failure, for the source incident.
    pub last_error: Option<String>,
    /// Whether this episode was resolved, then continued by a finding
    /// within `reopen_within`, and nobody was told it fires again: the last
    /// word people had of it was its resolution.
    pub reopened: bool,
}

/// The stable id of the incident of `rule` (of `kind`) in `group`.
pub fn fingerprint(kind: &str, rule: &str, group: &str) -> String {
    let digest = Sha256::digest(format!("{kind}\u{1f}{rule}\u{1f}{group}").as_bytes());
    hex::encode(&digest[..12])
}

/// What to do with an incident now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// First notification of this episode.
    Fire,
    /// It kept recurring past the cooldown, and grew.
    Realert,
    /// It stopped recurring; `notify` says whether people hear of it.
    Resolve {
        /// Whether a resolved notification is sent.
        notify: bool,
    },
}

fn chrono(d: Duration) -> ChronoDuration {
    ChronoDuration::from_std(d).unwrap_or(ChronoDuration::MAX)
}

/// Whether an incident is worth a person's attention: at or above both
/// floors of the policy. The gateway's own incident always is.
pub fn meets_floor(i: &Incident, p: &AlertPolicy) -> bool {
    i.kind == SOURCE_UNHEALTHY
        || (i.session_count >= p.min_sessions && per_day(i) >= p.min_impact_usd_per_day)
}

/// Until when (data time) a finding continues the episode of an incident
/// resolved at `resolved_at` instead of opening a new one; `None` when
/// episodes are never continued (`reopen_within: 0s`).
pub fn reopen_until(resolved_at: DateTime<Utc>, p: &AlertPolicy) -> Option<DateTime<Utc>> {
    (!p.reopen_within.is_zero()).then(|| resolved_at + chrono(p.reopen_within))
}

/// Decides what an incident needs at data time `now` (pure). An incident
/// below the floor ([`meets_floor`]) is neither fired nor re-alerted: it
/// stays on record, and fires once it rises above the floor.
pub fn decide(i: &Incident, now: DateTime<Utc>, p: &AlertPolicy) -> Option<Decision> {
    if !i.firing {
        return None;
    }
    let quiet_since = i.last_finding;
    // The source incident resolves as soon as a read succeeds (handled by
    // the caller); finding incidents resolve after a quiet period.
    let waited = now - i.started >= chrono(p.group_wait);
    if i.kind != SOURCE_UNHEALTHY && now - quiet_since >= chrono(p.resolve_after) {
        // Still waiting for its siblings when it went quiet (a tick over
        // several windows): it is told of first, and resolves at the next.
        if i.notified.is_none() && !p.group_wait.is_zero() && meets_floor(i, p) {
            return Some(Decision::Fire);
        }
        // A continued episode whose resolution was the last word is not
        // resolved a second time.
        return Some(Decision::Resolve {
            notify: p.send_resolved && i.notified.is_some() && !i.reopened,
        });
    }
    if !meets_floor(i, p) {
        return None;
    }
    match i.notified {
        // The first notification waits `group_wait` for the findings of
        // the windows after the first, Alertmanager's group_wait in data
        // time, so that it tells of them too.
        None => waited.then_some(Decision::Fire),
        // Continued after its resolution was told: the last word people
        // had is that it ended, and it has not. Told once that it fires
        // again (the episode keeps its start and counts).
        Some(_) if i.reopened => Some(Decision::Realert),
        Some(at) => {
            // Still recurring: a finding came once the cooldown had passed.
            // Grown during the cooldown and quiet since, it is not "still
            // going on"; it resolves soon.
            let past_cooldown = i.last_finding - at >= chrono(p.cooldown);
            // A growth of 0 never re-alerts: told once, however long it lasts.
            let grew = p.realert_growth >= 1.0
                && i.session_count > i.notified_sessions
                && i.session_count as f64 >= i.notified_sessions as f64 * p.realert_growth;
            (past_cooldown && grew).then_some(Decision::Realert)
        }
    }
}

/// Cost per day at the incident's rate so far (at least one hour of span).
pub fn per_day(i: &Incident) -> f64 {
    let span = (i.last_finding - i.started).num_seconds().max(3600) as f64;
    i.impact_usd * 86_400.0 / span
}

/// The alert kind of an incident's stored kind. One this build does not
/// know (a newer replica's) is told as the source's own alert, and said.
fn alert_kind(kind: &str) -> AlertKind {
    AlertKind::of_incident(kind).unwrap_or_else(|| {
        tracing::warn!(
            kind,
            "an incident of a kind this build does not know is told as a source alert"
        );
        AlertKind::SourceUnhealthy
    })
}

/// Builds the notification for a decision on `i`, listing `sessions` (the
/// incident's largest findings).
pub fn build_alert(
    i: &Incident,
    decision: Decision,
    sessions: Vec<AlertSession>,
    now: DateTime<Utc>,
    created_at: DateTime<Utc>,
) -> Alert {
    let status = match decision {
        Decision::Resolve { .. } => AlertStatus::Resolved,
        _ => AlertStatus::Firing,
    };
    let kind = alert_kind(&i.kind);
    // A rate only while it lasts; an incident that ended has a total.
    let impact = match status {
        AlertStatus::Firing => per_day(i),
        AlertStatus::Resolved => i.impact_usd,
    };
    let title = render::title_for(kind, &i.group, i.session_count, impact, status);
    let summary = if kind == AlertKind::SourceUnhealthy {
        match status {
            AlertStatus::Firing => format!(
                "the gateway could not be read since {}: {}. Windows stay due and are processed once it answers again; this alert is not repeated while the outage lasts",
                i.started.format("%Y-%m-%d %H:%M UTC"),
                i.last_error.as_deref().unwrap_or("unknown error")
            ),
            AlertStatus::Resolved => {
                "the gateway answers again; the missed windows are being caught up".to_owned()
            }
        }
    } else {
        let (rate, end) = match decision {
            Decision::Fire => (true, "The incident is going on."),
            Decision::Realert => (true, "The incident is still going on."),
            Decision::Resolve { .. } => (
                false,
                "The incident is over: no finding since its last window.",
            ),
        };
        let rate = if rate {
            format!(" (about {} a day at this rate)", render::usd(per_day(i)))
        } else {
            String::new()
        };
        format!(
            "rule {} found {} in {} since {}; together they cost {} more than their peers would have{rate}. {end}",
            i.rule,
            crate::domain::counted(i.session_count, "session"),
            i.group,
            i.started.format("%Y-%m-%d %H:%M UTC"),
            render::usd(i.impact_usd),
        )
    };
    Alert {
        version: ALERT_SCHEMA_VERSION.to_owned(),
        fingerprint: i.fingerprint.clone(),
        sequence: i.sequence + 1,
        status,
        kind,
        severity: i.severity,
        rule: Some(i.rule.clone()),
        group: i.group.clone(),
        labels: i.labels.clone(),
        title,
        summary,
        session_count: i.session_count,
        impact_usd: i.impact_usd,
        impact_usd_per_day: per_day(i),
        sessions,
        window: Window {
            start: i.started,
            end: i.last_finding.max(i.started),
        },
        starts_at: i.started,
        ends_at: (status == AlertStatus::Resolved).then_some(now),
        valid_until: None,
        chart: None,
        investigation: None,
        incidents: Vec::new(),
        created_at,
    }
}

/// One alert standing for many, after a catch-up.
pub fn summary_alert(
    alerts: &[Alert],
    windows: usize,
    span: Window,
    first: bool,
    created_at: DateTime<Utc>,
) -> Alert {
    let when = if first {
        "on its first start"
    } else {
        "after a pause"
    };
    let impact: f64 = alerts.iter().map(|a| a.impact_usd).sum();
    let sessions: u64 = alerts.iter().map(|a| a.session_count).sum();
    let mut lines: Vec<String> = alerts
        .iter()
        .map(|a| {
            let status = if a.status == AlertStatus::Resolved {
                "over"
            } else {
                "going on"
            };
            format!(
                "{} in {} ({status}): {}, +{}",
                a.kind.as_str(),
                a.group,
                crate::domain::counted(a.session_count, "session"),
                render::usd(a.impact_usd)
            )
        })
        .collect();
    lines.sort();
    let mut top: Vec<AlertSession> = alerts
        .iter()
        .flat_map(|a| a.sessions.iter().cloned())
        .collect();
    top.sort_by(|a, b| b.impact_usd.total_cmp(&a.impact_usd));
    top.truncate(10);
    let hours = (span.end - span.start).num_minutes() as f64 / 60.0;
    Alert {
        version: ALERT_SCHEMA_VERSION.to_owned(),
        fingerprint: fingerprint("catch_up_summary", "", &span.start.to_rfc3339()),
        sequence: 1,
        status: AlertStatus::Firing,
        kind: AlertKind::CatchUpSummary,
        severity: alerts
            .iter()
            .map(|a| a.severity)
            .max()
            .unwrap_or(Severity::Info),
        rule: None,
        group: "all".to_owned(),
        labels: Labels::new(),
        title: format!(
            "[costwatch] catch-up over {windows} windows ({hours:.1} h): {}, {}, +${impact:.2}",
            crate::domain::counted(alerts.len() as u64, "incident"),
            crate::domain::counted(sessions, "session")
        ),
        summary: format!(
            "costwatch caught up {windows} windows from {} to {} {when}. Instead of one alert per incident, this summary lists them:\n{}",
            span.start.format("%Y-%m-%d %H:%M UTC"),
            span.end.format("%Y-%m-%d %H:%M UTC"),
            lines.join("\n")
        ),
        session_count: sessions,
        impact_usd: impact,
        impact_usd_per_day: if hours > 0.0 {
            impact * 24.0 / hours
        } else {
            impact
        },
        sessions: top,
        window: span,
        starts_at: span.start,
        ends_at: None,
        valid_until: None,
        chart: None,
        investigation: None,
        incidents: alerts
            .iter()
            .map(|a| ListedIncident {
                fingerprint: a.fingerprint.clone(),
                kind: a.kind,
                group: a.group.clone(),
                status: a.status,
                impact_usd: a.impact_usd,
            })
            .collect(),
        created_at,
    }
}

/// The windows one evaluation of the incidents covers: those committed
/// since the previous evaluation, whichever ticks committed them. Over more
/// than `summary_after_windows` it is a catch-up, told in one summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickSpan {
    /// Windows committed since the previous evaluation.
    pub windows: usize,
    /// From the first window's start to the last window's end.
    pub span: Option<Window>,
    /// No evaluation came before: the job's first start.
    pub first: bool,
}

/// A finding as one of an alert's listed sessions.
pub fn alert_session(f: Finding, links: Option<&SessionLinks>) -> AlertSession {
    AlertSession {
        link: links.and_then(|l| l.session(&f.session_id)),
        session_id: f.session_id,
        cost_usd: f.cost_usd,
        impact_usd: f.impact_usd,
        what_to_do: crate::detect::remedy::what_to_do(f.kind, &f.evidence).to_owned(),
        explanation: f.explanation,
        evidence: f.evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn policy() -> AlertPolicy {
        AlertPolicy {
            realert_growth: 2.0,
            reopen_within: Duration::from_secs(6 * 3600),
            ..AlertPolicy::default()
        }
    }

    fn t(h: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap() + ChronoDuration::hours(h)
    }

    fn incident() -> Incident {
        Incident {
            fingerprint: fingerprint("no_cache", "r", "feature=a"),
            kind: "no_cache".into(),
            rule: "r".into(),
            group: "feature=a".into(),
            labels: Labels::new(),
            severity: Severity::Warning,
            firing: true,
            started: t(0),
            last_finding: t(1),
            session_count: 3,
            impact_usd: 0.5,
            sequence: 0,
            notified: None,
            notified_sessions: 0,
            last_error: None,
            reopened: false,
        }
    }

    #[test]
    fn an_incident_fires_once_and_realerts_only_after_the_cooldown_with_growth() {
        let p = policy();
        let mut i = incident();
        assert_eq!(decide(&i, t(1), &p), Some(Decision::Fire));
        i.notified = Some(t(1));
        i.notified_sessions = 3;
        i.sequence = 1;
        // Still recurring and much larger, inside the cooldown: quiet.
        i.session_count = 40;
        i.last_finding = t(3);
        assert_eq!(decide(&i, t(3), &p), None);
        // Past the cooldown but grown less than the factor: quiet.
        i.session_count = 5;
        i.last_finding = t(8);
        assert_eq!(decide(&i, t(8), &p), None);
        // Past the cooldown and doubled: re-alert.
        i.session_count = 6;
        assert_eq!(decide(&i, t(8), &p), Some(Decision::Realert));
        // Doubled inside the cooldown, quiet since: past the cooldown, it
        // is not still going on.
        i.last_finding = t(6);
        assert_eq!(decide(&i, t(7), &p), None);
    }

    #[test]
    fn a_quiet_incident_resolves_and_tells_only_if_it_was_told() {
        let p = policy();
        let mut i = incident();
        assert_eq!(
            decide(&i, t(3), &p),
            Some(Decision::Resolve { notify: false })
        );
        i.notified = Some(t(1));
        assert_eq!(
            decide(&i, t(3), &p),
            Some(Decision::Resolve { notify: true })
        );
        i.firing = false;
        assert_eq!(decide(&i, t(30), &p), None);
    }

    #[test]
    fn an_incident_below_the_floor_is_followed_but_not_told_until_it_rises() {
        // The issue's false alerts: one session worth about $0.0001.
        let p = AlertPolicy {
            min_impact_usd_per_day: 0.05,
            ..policy()
        };
        let mut i = incident();
        i.session_count = 1;
        i.impact_usd = 0.0001;
        assert!(!meets_floor(&i, &p));
        assert_eq!(decide(&i, t(1), &p), None);
        // It still resolves when it goes quiet, untold.
        assert_eq!(
            decide(&i, t(3), &p),
            Some(Decision::Resolve { notify: false })
        );
        // Grown to $0.01 over one hour ($0.24 a day): told.
        i.session_count = 4;
        i.impact_usd = 0.01;
        assert!(meets_floor(&i, &p));
        assert_eq!(decide(&i, t(1), &p), Some(Decision::Fire));
        // The session floor alone holds a one-session incident back.
        let p = AlertPolicy {
            min_sessions: 5,
            ..policy()
        };
        assert_eq!(decide(&i, t(1), &p), None);
        i.session_count = 5;
        assert_eq!(decide(&i, t(1), &p), Some(Decision::Fire));
        // The gateway's own incident is never below the floor.
        let mut source = incident();
        source.kind = SOURCE_UNHEALTHY.into();
        source.session_count = 0;
        assert!(meets_floor(&source, &p));
    }

    #[test]
    fn a_resolution_can_be_reopened_for_reopen_within() {
        let p = policy();
        assert_eq!(reopen_until(t(3), &p), Some(t(9)));
        let p = AlertPolicy {
            reopen_within: Duration::ZERO,
            group_wait: Duration::ZERO,
            ..policy()
        };
        assert_eq!(reopen_until(t(3), &p), None);
    }

    #[test]
    fn an_episode_that_comes_back_after_its_told_resolution_fires_again_once() {
        let p = policy();
        let mut i = incident();
        i.notified = Some(t(1));
        i.notified_sessions = i.session_count;
        // Reopened: told it fires again, whatever the cooldown and growth.
        i.reopened = true;
        i.last_finding = t(2);
        assert_eq!(decide(&i, t(2), &p), Some(Decision::Realert));
        // Once told, it is an ordinary episode again.
        i.reopened = false;
        assert_eq!(decide(&i, t(2), &p), None);
    }

    #[test]
    fn the_first_notification_waits_group_wait_for_its_siblings() {
        let p = AlertPolicy {
            group_wait: Duration::from_secs(30 * 60),
            ..policy()
        };
        // The first window (00:00-00:15) found one session.
        let mut i = incident();
        i.session_count = 1;
        i.last_finding = t(0) + ChronoDuration::minutes(15);
        assert_eq!(decide(&i, t(0) + ChronoDuration::minutes(15), &p), None);
        // The second found 30 more: still inside the wait.
        i.session_count = 31;
        i.last_finding = t(0) + ChronoDuration::minutes(30);
        // The wait is over at the end of the second window: one
        // notification, with all 31.
        assert_eq!(
            decide(&i, t(0) + ChronoDuration::minutes(30), &p),
            Some(Decision::Fire)
        );
        // Without a wait it fired with the first window.
        i.session_count = 1;
        assert_eq!(
            decide(&i, t(0) + ChronoDuration::minutes(15), &policy()),
            Some(Decision::Fire)
        );
        // Gone quiet past resolve_after before anyone was told (one tick
        // over many windows): told first, resolved at the next tick.
        assert_eq!(decide(&i, t(5), &p), Some(Decision::Fire));
        i.notified = Some(t(5));
        assert_eq!(
            decide(&i, t(5), &p),
            Some(Decision::Resolve { notify: true })
        );
    }

    #[test]
    fn fingerprints_are_stable_and_distinct() {
        assert_eq!(
            fingerprint("no_cache", "r", "g"),
            fingerprint("no_cache", "r", "g")
        );
        assert_ne!(
            fingerprint("no_cache", "r", "g"),
            fingerprint("no_cache", "r", "h")
        );
        assert_eq!(fingerprint("a", "b", "c").len(), 24);
    }

    #[test]
    fn the_alert_says_what_where_and_how_much() {
        let a = build_alert(&incident(), Decision::Fire, vec![], t(1), t(1));
        assert_eq!(a.status, AlertStatus::Firing);
        assert_eq!(a.sequence, 1);
        assert!(
            a.title.contains("no_cache") && a.title.contains("feature=a"),
            "{}",
            a.title
        );
        assert!(a.summary.contains("3 sessions"), "{}", a.summary);
        assert!(
            (a.impact_usd_per_day - 12.0).abs() < 1e-9,
            "{}",
            a.impact_usd_per_day
        );
    }

    #[test]
    fn one_alert_gives_one_set_of_figures_and_a_rate_only_while_open() {
        let mut i = incident();
        i.impact_usd = 0.0132;
        let firing = build_alert(&i, Decision::Fire, vec![], t(1), t(1));
        let text = render::email_text(&firing);
        // The same rounding in the title, the summary and the facts.
        let rate = render::usd(per_day(&i));
        assert!(
            firing.title.ends_with(&format!("+{rate}/day")),
            "{}",
            firing.title
        );
        assert!(
            firing.summary.contains(&format!("about {rate} a day")),
            "{}",
            firing.summary
        );
        assert!(
            firing.summary.contains("cost $0.013 more"),
            "{}",
            firing.summary
        );
        assert!(text.contains("+$0.013 above peers"), "{text}");
        assert!(!firing.summary.ends_with("started"), "{}", firing.summary);
        // Over: a total, and no rate anywhere.
        i.firing = false;
        let over = build_alert(&i, Decision::Resolve { notify: true }, vec![], t(5), t(5));
        let text = render::email_text(&over);
        assert!(over.title.ends_with("+$0.013 in all"), "{}", over.title);
        for said in [&over.title, &over.summary, &text] {
            assert!(!said.contains("/day") && !said.contains("a day"), "{said}");
        }
        // A catch-up's mix of incidents has a total, not a rate.
        let span = Window {
            start: t(0),
            end: t(5),
        };
        let summary = summary_alert(&[firing, over], 5, span, true, t(5));
        let text = render::email_text(&summary);
        assert!(!text.contains("/day"), "{text}");
        assert_eq!(summary.incidents.len(), 2);
    }
}
