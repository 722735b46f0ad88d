//! Alerts per incident: how many notifications a stream of findings turns
//! into, against how many real incidents there were.
//!
//! Findings are grouped exactly as the daemon groups them
//! ([`costwatch::incidents`]): one incident per `(kind, rule, group)`, a new
//! episode once the previous one resolved after `resolve_after` without a
//! finding and `reopen_within` passed since (a finding sooner continues the
//! episode), and [`incidents::decide`] run after every window (a live
//! daemon whose ticks each process one window) to count the first alert of
//! each episode and its re-alerts. Resolution notices are not counted.
//!
//! A real incident is a cluster of truly wasteful sessions of one kind in
//! one feature whose starts are less than `resolve_after` apart: the
//! simulator's broken deploy is one incident, an isolated retry loop
//! another. An alert is false when its episode holds no truly wasteful
//! session of its kind. A real incident is missed when none of its
//! sessions is in an episode that alerted (first alert or re-alert, before
//! or after the session joined it: either way a person was told about the
//! episode it is part of).

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::detect::{Finding, Kind};
use costwatch::incidents::{self, AlertPolicy, Decision, Incident};
use costwatch::source::{Labels, Window};
use costwatch_sim::Dataset;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// The alerting defaults of `config/costwatch.example.yaml` (told once per
/// episode, no re-alert; resolve after 2h quiet, no reopening, no floor).
pub fn default_policy() -> AlertPolicy {
    AlertPolicy::default()
}

/// Alerts of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlertTally {
    /// Notifications: first alerts of episodes plus re-alerts.
    pub alerts: usize,
    /// Of those, alerts whose episode holds no truly wasteful session.
    pub false_alerts: usize,
    /// Episodes opened.
    pub episodes: usize,
    /// Real incidents none of whose sessions is in an episode that alerted.
    pub missed_incidents: usize,
}

struct Episode {
    incident: Incident,
    kind: Kind,
    has_true: bool,
    /// The sessions of its findings.
    sessions: Vec<String>,
    /// Whether it sent an alert.
    alerted: bool,
    /// Set at its resolution: until when a finding continues it.
    reopen_until: Option<DateTime<Utc>>,
}

/// Replays the daemon's incident grouping over `findings` (each carrying the
/// window it was first found in), evaluating after every window of
/// `windows` (in order). `truth` maps kind names to wasteful session ids;
/// `incidents` lists each kind's real incidents (their sessions, as
/// [`truth_incidents`] gives them), to count the missed ones.
pub fn tally(
    findings: &[Finding],
    windows: &[Window],
    truth: &BTreeMap<String, BTreeSet<String>>,
    incidents: &BTreeMap<Kind, Vec<BTreeSet<String>>>,
    policy: &AlertPolicy,
) -> BTreeMap<Kind, AlertTally> {
    replay(findings, windows, truth, incidents, policy).tally
}

/// What [`replay`] found: the counts, and which incidents and episodes
/// they count.
#[derive(Debug, Clone, Default)]
pub struct Replayed {
    /// Alerts, false alerts, episodes and missed incidents per kind.
    pub tally: BTreeMap<Kind, AlertTally>,
    /// Per kind, the real incidents no alert told of (their sessions).
    pub missed: BTreeMap<Kind, Vec<BTreeSet<String>>>,
    /// Per kind, the episodes that alerted without a truly wasteful
    /// session (their sessions, in the order they were found).
    pub false_episodes: BTreeMap<Kind, Vec<Vec<String>>>,
}

/// [`tally`], keeping which real incidents were missed and which
/// episodes alerted falsely.
pub fn replay(
    findings: &[Finding],
    windows: &[Window],
    truth: &BTreeMap<String, BTreeSet<String>>,
    incidents: &BTreeMap<Kind, Vec<BTreeSet<String>>>,
    policy: &AlertPolicy,
) -> Replayed {
    let mut by_window: HashMap<DateTime<Utc>, Vec<&Finding>> = HashMap::new();
    for f in findings {
        by_window.entry(f.window.start).or_default().push(f);
    }
    let is_true = |f: &Finding| {
        truth
            .get(f.kind.as_str())
            .is_some_and(|ids| ids.contains(&f.session_id))
    };
    let mut open: BTreeMap<String, Episode> = BTreeMap::new();
    let mut closed: Vec<Episode> = Vec::new();
    let mut out: BTreeMap<Kind, AlertTally> = Kind::ALL
        .into_iter()
        .map(|k| (k, AlertTally::default()))
        .collect();
    for w in windows {
        for f in by_window.get(&w.start).into_iter().flatten() {
            let fp = incidents::fingerprint(f.kind.as_str(), &f.rule, &f.group);
            match open.get_mut(&fp) {
                Some(e)
                    if e.incident.firing
                        || e.reopen_until.is_some_and(|until| w.start <= until) =>
                {
                    if !e.incident.firing {
                        e.incident.firing = true;
                        e.incident.reopened = true;
                    }
                    e.incident.session_count += 1;
                    e.incident.last_finding = w.end;
                    e.incident.impact_usd += f.impact_usd;
                    e.has_true |= is_true(f);
                    e.sessions.push(f.session_id.clone());
                }
                _ => {
                    let sequence = open.get(&fp).map_or(0, |e| e.incident.sequence);
                    out.entry(f.kind).or_default().episodes += 1;
                    let previous = open.insert(
                        fp.clone(),
                        Episode {
                            incident: Incident {
                                fingerprint: fp,
                                kind: f.kind.as_str().to_owned(),
                                rule: f.rule.clone(),
                                group: f.group.clone(),
                                labels: Labels::new(),
                                severity: f.severity,
                                firing: true,
                                started: w.start,
                                last_finding: w.end,
                                session_count: 1,
                                impact_usd: f.impact_usd,
                                sequence,
                                notified: None,
                                notified_sessions: 0,
                                last_error: None,
                                reopened: false,
                            },
                            kind: f.kind,
                            has_true: is_true(f),
                            sessions: vec![f.session_id.clone()],
                            alerted: false,
                            reopen_until: None,
                        },
                    );
                    closed.extend(previous);
                }
            }
        }
        for e in open.values_mut().filter(|e| e.incident.firing) {
            match incidents::decide(&e.incident, w.end, policy) {
                Some(Decision::Fire | Decision::Realert) => {
                    let t = out.entry(e.kind).or_default();
                    t.alerts += 1;
                    t.false_alerts += usize::from(!e.has_true);
                    e.alerted = true;
                    e.incident.notified = Some(w.end);
                    e.incident.notified_sessions = e.incident.session_count;
                    e.incident.sequence += 1;
                    e.incident.reopened = false;
                }
                Some(Decision::Resolve { notify }) => {
                    e.incident.firing = false;
                    if notify {
                        e.incident.notified = Some(w.end);
                        e.incident.notified_sessions = e.incident.session_count;
                        e.incident.sequence += 1;
                    }
                    e.reopen_until = incidents::reopen_until(w.end, policy);
                }
                None => {}
            }
        }
    }
    let mut told: BTreeMap<Kind, BTreeSet<&str>> = BTreeMap::new();
    let mut false_episodes: BTreeMap<Kind, Vec<Vec<String>>> = BTreeMap::new();
    for e in closed.iter().chain(open.values()).filter(|e| e.alerted) {
        told.entry(e.kind)
            .or_default()
            .extend(e.sessions.iter().map(String::as_str));
        if !e.has_true {
            false_episodes
                .entry(e.kind)
                .or_default()
                .push(e.sessions.clone());
        }
    }
    let mut missed: BTreeMap<Kind, Vec<BTreeSet<String>>> = BTreeMap::new();
    for (kind, list) in incidents {
        let told = told.get(kind);
        let untold: Vec<BTreeSet<String>> = list
            .iter()
            .filter(|sessions| {
                !sessions
                    .iter()
                    .any(|s| told.is_some_and(|t| t.contains(s.as_str())))
            })
            .cloned()
            .collect();
        out.entry(*kind).or_default().missed_incidents = untold.len();
        if !untold.is_empty() {
            missed.insert(*kind, untold);
        }
    }
    Replayed {
        tally: out,
        missed,
        false_episodes,
    }
}

/// Real incidents per kind, each as its sessions: the dataset's wasteful
/// sessions of one kind and one feature, clustered by start time with gaps
/// under `gap`.
pub fn truth_incidents(dataset: &Dataset, gap: Duration) -> BTreeMap<Kind, Vec<BTreeSet<String>>> {
    let gap = ChronoDuration::from_std(gap).unwrap_or(ChronoDuration::hours(2));
    let mut out = BTreeMap::new();
    for kind in Kind::ALL {
        let mut starts: BTreeMap<&str, Vec<(DateTime<Utc>, String)>> = BTreeMap::new();
        for id in dataset.truth.of(kind.as_str()) {
            if let Some(s) = dataset.session(id) {
                let feature = s.labels.get("feature").map_or("", String::as_str);
                if let Some(t) = s.first_request_at() {
                    starts.entry(feature).or_default().push((t, id.to_owned()));
                }
            }
        }
        out.insert(
            kind,
            starts
                .into_values()
                .flat_map(|t| clusters(t, gap))
                .collect(),
        );
    }
    out
}

/// The clusters of `(time, id)` whose neighbours in time are less than
/// `gap` apart, each as its ids.
pub fn clusters(
    mut times: Vec<(DateTime<Utc>, String)>,
    gap: ChronoDuration,
) -> Vec<BTreeSet<String>> {
    times.sort();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    let mut last: Option<DateTime<Utc>> = None;
    for (t, id) in times {
        match out.last_mut() {
            Some(current) if last.is_some_and(|l| t - l < gap) => {
                current.insert(id);
            }
            _ => out.push(BTreeSet::from([id])),
        }
        last = Some(t);
    }
    out
}

/// The windows of `[from, to)`, `size` long.
pub fn windows(from: DateTime<Utc>, to: DateTime<Utc>, size: Duration) -> Vec<Window> {
    let step = ChronoDuration::from_std(size).unwrap_or(ChronoDuration::minutes(15));
    let mut out = Vec::new();
    let mut start = from;
    while start < to && step > ChronoDuration::zero() {
        out.push(Window {
            start,
            end: start + step,
        });
        start += step;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use costwatch::config::Severity;

    fn t(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap() + ChronoDuration::minutes(min)
    }

    fn finding(kind: Kind, id: &str, group: &str, window_min: i64) -> Finding {
        Finding {
            kind,
            session_id: id.into(),
            window: Window {
                start: t(window_min),
                end: t(window_min + 15),
            },
            severity: Severity::Warning,
            rule: "r".into(),
            group: group.into(),
            labels: Labels::new(),
            cost_usd: 0.0,
            impact_usd: 0.01,
            evidence: serde_json::Value::Null,
            explanation: String::new(),
        }
    }

    fn none() -> BTreeMap<Kind, Vec<BTreeSet<String>>> {
        BTreeMap::new()
    }

    fn ids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn truth(ids: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        BTreeMap::from([(
            "no_cache".to_string(),
            ids.iter().map(|s| s.to_string()).collect(),
        )])
    }

    #[test]
    fn one_episode_alerts_once_and_a_quiet_gap_opens_another() {
        let ws = windows(t(0), t(24 * 60), Duration::from_secs(900));
        assert_eq!(ws.len(), 96);
        // Three findings within an hour: one alert. Quiet for 5 hours
        // (resolved after 2h, at 03:00), then one more at 06:00, within
        // reopen_within (6h) of the resolution: the same episode, told
        // once that it fires again (its resolution was the last word). It
        // resolves at 08:15; one at 15:00 is past 14:15: a second episode
        // and alert.
        let f = vec![
            finding(Kind::NoCache, "a", "feature=x", 0),
            finding(Kind::NoCache, "b", "feature=x", 15),
            finding(Kind::NoCache, "c", "feature=x", 45),
            finding(Kind::NoCache, "d", "feature=x", 6 * 60),
            finding(Kind::NoCache, "e", "feature=x", 15 * 60),
        ];
        let ids = ["a", "b", "c", "d", "e"];
        let six_hours = AlertPolicy {
            reopen_within: Duration::from_secs(6 * 3600),
            group_wait: Duration::ZERO,
            ..default_policy()
        };
        let out = tally(&f, &ws, &truth(&ids), &none(), &six_hours);
        assert_eq!(
            out[&Kind::NoCache],
            AlertTally {
                alerts: 3,
                false_alerts: 0,
                episodes: 2,
                missed_incidents: 0,
            }
        );
        // Without reopening (the default), the comeback at 06:00 is an
        // episode of its own.
        let out = tally(&f, &ws, &truth(&ids), &none(), &default_policy());
        assert_eq!(
            out[&Kind::NoCache],
            AlertTally {
                alerts: 3,
                false_alerts: 0,
                episodes: 3,
                missed_incidents: 0,
            }
        );
        assert_eq!(out[&Kind::RetryLoop], AlertTally::default());
    }

    #[test]
    fn separate_groups_alert_separately_and_untrue_episodes_are_false() {
        let ws = windows(t(0), t(4 * 60), Duration::from_secs(900));
        let f = vec![
            finding(Kind::NoCache, "a", "feature=x", 0),
            finding(Kind::NoCache, "z", "feature=y", 0),
            finding(Kind::NoCache, "y", "feature=y", 30),
        ];
        let out = replay(&f, &ws, &truth(&["a"]), &none(), &default_policy());
        assert_eq!(out.tally[&Kind::NoCache].alerts, 2);
        assert_eq!(out.tally[&Kind::NoCache].false_alerts, 1);
        // The false episode is the one of group y, with both its sessions.
        assert_eq!(
            out.false_episodes.get(&Kind::NoCache),
            Some(&vec![vec!["z".to_string(), "y".to_string()]])
        );
        assert!(out.missed.is_empty());
    }

    #[test]
    fn a_growing_incident_realerts_after_the_cooldown() {
        let ws = windows(t(0), t(24 * 60), Duration::from_secs(900));
        // One finding every 30 minutes for 12 hours: never quiet for 2h, so
        // one episode; past the 6h cooldown it has more than doubled.
        let f: Vec<Finding> = (0..24)
            .map(|i| finding(Kind::NoCache, &format!("s{i}"), "feature=x", i * 30))
            .collect();
        let realert = AlertPolicy {
            realert_growth: 2.0,
            ..default_policy()
        };
        let out = tally(&f, &ws, &truth(&[]), &none(), &realert);
        assert_eq!(out[&Kind::NoCache].episodes, 1);
        assert_eq!(out[&Kind::NoCache].alerts, 2);
        assert_eq!(out[&Kind::NoCache].false_alerts, 2);
        // By default it is told of once, however long it lasts.
        let out = tally(&f, &ws, &truth(&[]), &none(), &default_policy());
        assert_eq!(out[&Kind::NoCache].alerts, 1);
    }

    #[test]
    fn an_incident_is_missed_when_no_episode_holding_it_alerted() {
        let ws = windows(t(0), t(24 * 60), Duration::from_secs(900));
        // Incident 1 (a, b) is found: its episode alerts. Incident 2 (c)
        // is never found. Incident 3 (d) is found, but an alert floor keeps
        // its lone, tiny episode from alerting.
        let f = vec![
            finding(Kind::NoCache, "a", "feature=x", 0),
            finding(Kind::NoCache, "b", "feature=x", 15),
            finding(Kind::NoCache, "d", "feature=y", 600),
        ];
        let incidents = BTreeMap::from([(
            Kind::NoCache,
            vec![ids(&["a", "b"]), ids(&["c"]), ids(&["d"])],
        )]);
        let floor = AlertPolicy {
            min_sessions: 2,
            ..default_policy()
        };
        let out = replay(&f, &ws, &truth(&["a", "b", "c", "d"]), &incidents, &floor);
        assert_eq!(out.tally[&Kind::NoCache].alerts, 1);
        assert_eq!(out.tally[&Kind::NoCache].missed_incidents, 2);
        assert_eq!(out.missed[&Kind::NoCache], vec![ids(&["c"]), ids(&["d"])]);
        assert!(out.false_episodes.is_empty());
        // Without the floor only the incident never found is missed.
        let out = replay(
            &f,
            &ws,
            &truth(&["a", "b", "c", "d"]),
            &incidents,
            &default_policy(),
        );
        assert_eq!(out.tally[&Kind::NoCache].missed_incidents, 1);
        assert_eq!(out.missed[&Kind::NoCache], vec![ids(&["c"])]);
    }

    #[test]
    fn clusters_split_on_gaps_of_at_least_the_gap() {
        let gap = ChronoDuration::hours(2);
        let at = |list: &[(i64, &str)]| -> Vec<(DateTime<Utc>, String)> {
            list.iter().map(|(m, id)| (t(*m), id.to_string())).collect()
        };
        assert!(clusters(vec![], gap).is_empty());
        assert_eq!(
            clusters(at(&[(0, "a"), (60, "b"), (119, "c")]), gap),
            [ids(&["a", "b", "c"])]
        );
        assert_eq!(
            clusters(at(&[(300, "c"), (0, "a"), (120, "b")]), gap),
            [ids(&["a"]), ids(&["b"]), ids(&["c"])]
        );
    }
}
