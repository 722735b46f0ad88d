//! Silences: an operator's "tell nobody about this for a while", like
//! Alertmanager's. A silence matches incidents by kind, peer group and
//! label values, and holds back the notifications an evaluation would queue
//! for them while it is active. Findings are still recorded and incidents
//! still tracked; only the telling waits.
//!
//! This module is the pure part: what a silence is, how one is checked
//! before it is stored, and which incidents it matches. The state database
//! keeps them (`store::SilenceStore`), so every replica honours the same
//! ones, and `alerting` applies them.
//!
//! Silences live in wall time, unlike incidents: a silence added for 24h
//! holds back what would be queued in the next 24 hours, whatever data time
//! a catch-up is evaluating.

use crate::domain::{Kind, Labels};
use crate::incidents::{Incident, SOURCE_UNHEALTHY};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde::Serialize;
use std::time::Duration;

/// The incident kinds a silence can name: the three kinds of waste and the
/// gateway's own health.
pub const SILENCE_KINDS: [&str; 4] = [
    Kind::NoCache.as_str(),
    Kind::OversizedModel.as_str(),
    Kind::RetryLoop.as_str(),
    SOURCE_UNHEALTHY,
];

/// A stored silence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Silence {
    /// Its id, given by the state database; never given twice.
    pub id: i64,
    /// The incident kind it matches (`no_cache`, ...); `None` matches any.
    pub kind: Option<String>,
    /// The peer group it matches (`feature=batch`); `None` matches any.
    pub group: Option<String>,
    /// Label values an incident must all carry (its group's labels).
    pub matchers: Labels,
    /// When it began.
    pub starts_at: DateTime<Utc>,
    /// When it ends (or ended): it is active in `[starts_at, ends_at)`.
    pub ends_at: DateTime<Utc>,
    /// When it was ended early with `silence expire`.
    pub expired_at: Option<DateTime<Utc>>,
    /// Who added it.
    pub author: String,
    /// Why.
    pub reason: String,
    /// When it was added.
    pub created_at: DateTime<Utc>,
}

impl Silence {
    /// Whether it holds notifications back at `now`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.starts_at <= now && now < self.ends_at
    }

    /// `active` or `expired` at `now`.
    pub fn state(&self, now: DateTime<Utc>) -> &'static str {
        if self.is_active(now) {
            "active"
        } else {
            "expired"
        }
    }

    /// Whether it matches an incident of `kind` in `group` with `labels`:
    /// every condition it has holds.
    pub fn matches_parts(&self, kind: &str, group: &str, labels: &Labels) -> bool {
        self.kind.as_deref().is_none_or(|k| k == kind)
            && self.group.as_deref().is_none_or(|g| g == group)
            && self
                .matchers
                .iter()
                .all(|(k, v)| labels.get(k).is_some_and(|have| have == v))
    }

    /// Whether it matches the incident.
    pub fn matches(&self, i: &Incident) -> bool {
        self.matches_parts(&i.kind, &i.group, &i.labels)
    }

    /// Its conditions as one line: `kind=no_cache group=feature=batch feature=batch`.
    pub fn conditions(&self) -> String {
        let mut parts = Vec::new();
        if let Some(k) = &self.kind {
            parts.push(format!("kind={k}"));
        }
        if let Some(g) = &self.group {
            parts.push(format!("group={g}"));
        }
        parts.extend(self.matchers.iter().map(|(k, v)| format!("{k}={v}")));
        parts.join(" ")
    }
}

/// How long a new silence lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SilenceEnd {
    /// For this long from now.
    For(Duration),
    /// Until this time.
    Until(DateTime<Utc>),
}

/// A silence checked and ready to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSilence {
    /// The incident kind it matches.
    pub kind: Option<String>,
    /// The peer group it matches.
    pub group: Option<String>,
    /// Label values an incident must all carry.
    pub matchers: Labels,
    /// When it begins (when it was added).
    pub starts_at: DateTime<Utc>,
    /// When it ends.
    pub ends_at: DateTime<Utc>,
    /// Who added it.
    pub author: String,
    /// Why.
    pub reason: String,
}

/// What an operator asks for, before it is checked.
#[derive(Debug, Clone, Default)]
pub struct SilenceRequest {
    /// `--match KEY=VALUE`, as written.
    pub matchers: Vec<String>,
    /// `--kind`.
    pub kind: Option<String>,
    /// `--group`.
    pub group: Option<String>,
    /// `--for` or `--until`.
    pub end: Option<SilenceEnd>,
    /// `--author`.
    pub author: String,
    /// `--reason`.
    pub reason: String,
}

/// Why a silence was refused: every problem found, each a fragment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("silence refused: {}", .0.join("; "))]
pub struct SilenceRefused(pub Vec<String>);

/// Longest silence accepted: a year. Longer is a disabled rule, not a silence.
const MAX_SILENCE: ChronoDuration = ChronoDuration::days(366);

impl SilenceRequest {
    /// Checks the request at `now` against the configuration's `group_by`
    /// labels (an incident carries only those, so a matcher on another
    /// label could never match). Every problem is reported at once.
    pub fn check(
        &self,
        now: DateTime<Utc>,
        group_by: &[String],
    ) -> Result<NewSilence, SilenceRefused> {
        let mut problems = Vec::new();
        let mut matchers = Labels::new();
        for m in &self.matchers {
            let Some((key, value)) = m.split_once('=') else {
                problems.push(format!("--match {m}: expected KEY=VALUE"));
                continue;
            };
            let key = key.trim();
            if key.is_empty() {
                problems.push(format!("--match {m}: the label name is empty"));
            } else if !group_by.iter().any(|g| g == key) {
                problems.push(format!(
                    "--match {m}: incidents carry only their group's labels ({}), so {key} can never match",
                    if group_by.is_empty() {
                        "none".to_owned()
                    } else {
                        group_by.join(", ")
                    }
                ));
            } else if let Some(before) = matchers.insert(key.to_owned(), value.to_owned())
                && before != value
            {
                problems.push(format!(
                    "--match {key}: given twice with different values ({before}, {value}), so nothing could match"
                ));
            }
        }
        if let Some(k) = &self.kind
            && !SILENCE_KINDS.contains(&k.as_str())
        {
            problems.push(format!(
                "--kind {k}: expected one of {}",
                SILENCE_KINDS.join(", ")
            ));
        }
        let group = self.group.as_deref().map(str::trim);
        if group == Some("") {
            problems.push("--group: empty".to_owned());
        }
        if matchers.is_empty() && self.kind.is_none() && group.is_none() && problems.is_empty() {
            problems.push(
                "no matcher: give at least one --match KEY=VALUE, --kind or --group (a silence of everything is refused)"
                    .to_owned(),
            );
        }
        let ends_at = match self.end {
            None => {
                problems.push("give how long: --for DURATION or --until TIME".to_owned());
                None
            }
            Some(SilenceEnd::For(d)) if d.is_zero() => {
                problems.push("--for: must be positive".to_owned());
                None
            }
            Some(SilenceEnd::For(d)) => match ChronoDuration::from_std(d) {
                Ok(d) if d <= MAX_SILENCE => Some(now + d),
                _ => {
                    problems.push("--for: at most 366 days".to_owned());
                    None
                }
            },
            Some(SilenceEnd::Until(t)) if t <= now => {
                problems.push(format!(
                    "--until {}: already past",
                    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ));
                None
            }
            Some(SilenceEnd::Until(t)) if t - now > MAX_SILENCE => {
                problems.push("--until: at most 366 days ahead".to_owned());
                None
            }
            Some(SilenceEnd::Until(t)) => Some(t),
        };
        let reason = self.reason.trim();
        if reason.is_empty() {
            problems.push("--reason: say why, for whoever finds the silence later".to_owned());
        }
        let author = self.author.trim();
        if author.is_empty() {
            problems.push("--author: empty".to_owned());
        }
        match ends_at {
            Some(ends_at) if problems.is_empty() => Ok(NewSilence {
                kind: self.kind.clone(),
                group: group.map(str::to_owned),
                matchers,
                starts_at: now,
                ends_at,
                author: author.to_owned(),
                reason: reason.to_owned(),
            }),
            _ => Err(SilenceRefused(problems)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 2, 12, 0, 0).unwrap()
    }

    fn request(matchers: &[&str]) -> SilenceRequest {
        SilenceRequest {
            matchers: matchers.iter().map(|m| (*m).to_owned()).collect(),
            end: Some(SilenceEnd::For(Duration::from_secs(3600))),
            author: "ops".into(),
            reason: "batch jobs are known".into(),
            ..SilenceRequest::default()
        }
    }

    fn group_by() -> Vec<String> {
        vec!["feature".to_owned(), "team".to_owned()]
    }

    fn silence(new: NewSilence) -> Silence {
        Silence {
            id: 1,
            kind: new.kind,
            group: new.group,
            matchers: new.matchers,
            starts_at: new.starts_at,
            ends_at: new.ends_at,
            expired_at: None,
            author: new.author,
            reason: new.reason,
            created_at: new.starts_at,
        }
    }

    #[test]
    fn a_valid_request_becomes_a_silence_from_now() {
        let s = request(&["feature=batch=v2"])
            .check(now(), &group_by())
            .unwrap();
        assert_eq!(
            s.matchers.get("feature").map(String::as_str),
            Some("batch=v2")
        );
        assert_eq!(
            (s.starts_at, s.ends_at),
            (now(), now() + ChronoDuration::hours(1))
        );
    }

    #[test]
    fn a_silence_without_any_matcher_is_refused() {
        let err = request(&[]).check(now(), &group_by()).unwrap_err();
        assert!(err.to_string().contains("no matcher"), "{err}");
        // A kind alone, or a group alone, is a matcher.
        let mut r = request(&[]);
        r.kind = Some("retry_loop".into());
        assert!(r.check(now(), &group_by()).is_ok());
        let mut r = request(&[]);
        r.group = Some("feature=batch".into());
        assert!(r.check(now(), &group_by()).is_ok());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let mut r = request(&["nolabel", "region=eu", "feature=a", "feature=b"]);
        r.kind = Some("cache".into());
        r.end = Some(SilenceEnd::For(Duration::ZERO));
        r.reason = "  ".into();
        let SilenceRefused(problems) = r.check(now(), &group_by()).unwrap_err();
        let text = problems.join("\n");
        for want in [
            "--match nolabel: expected KEY=VALUE",
            "--match region=eu: incidents carry only their group's labels (feature, team)",
            "--match feature: given twice",
            "--kind cache: expected one of no_cache, oversized_model, retry_loop, source_unhealthy",
            "--for: must be positive",
            "--reason",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
        assert_eq!(problems.len(), 6, "{text}");
    }

    #[test]
    fn the_end_must_be_ahead_and_within_a_year() {
        let mut r = request(&["feature=a"]);
        r.end = Some(SilenceEnd::Until(now()));
        assert!(
            r.check(now(), &group_by())
                .unwrap_err()
                .to_string()
                .contains("already past")
        );
        r.end = Some(SilenceEnd::Until(now() + ChronoDuration::days(400)));
        assert!(r.check(now(), &group_by()).is_err());
        r.end = Some(SilenceEnd::For(Duration::from_secs(400 * 86_400)));
        assert!(r.check(now(), &group_by()).is_err());
        r.end = None;
        assert!(
            r.check(now(), &group_by())
                .unwrap_err()
                .to_string()
                .contains("--for")
        );
        r.end = Some(SilenceEnd::Until(now() + ChronoDuration::minutes(5)));
        assert_eq!(
            r.check(now(), &group_by()).unwrap().ends_at,
            now() + ChronoDuration::minutes(5)
        );
    }

    #[test]
    fn a_silence_matches_when_every_condition_holds_and_only_while_active() {
        let mut r = request(&["feature=batch"]);
        r.kind = Some("no_cache".into());
        let s = silence(r.check(now(), &group_by()).unwrap());
        let labels = |v: &str| Labels::from([("feature".to_owned(), v.to_owned())]);
        assert!(s.matches_parts("no_cache", "feature=batch", &labels("batch")));
        assert!(!s.matches_parts("retry_loop", "feature=batch", &labels("batch")));
        assert!(!s.matches_parts("no_cache", "feature=chat", &labels("chat")));
        assert!(
            !s.matches_parts("no_cache", "", &Labels::new()),
            "a missing label does not match"
        );
        assert!(s.is_active(now()));
        assert!(s.is_active(s.ends_at - ChronoDuration::milliseconds(1)));
        assert!(!s.is_active(s.ends_at), "the end is not inside it");
        assert_eq!(s.state(s.ends_at), "expired");
        assert_eq!(s.conditions(), "kind=no_cache feature=batch");
    }
}
