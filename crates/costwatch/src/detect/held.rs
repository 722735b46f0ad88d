//! A session still going at its window's end may be caching late, seen
//! before its first read: its misses so far do not yet say it never
//! caches. A session that ends right after a window is never in the next
//! window's listing, so its no_cache finding waits here
//! (`judge_once_ended`), held with the window that found it, for one
//! window: it is dropped where the next window sees the session again
//! (that window judges it afresh, and a finding it makes there stands
//! there), and stands in the next window if that window does not list the
//! session.
//!
//! A no_cache finding of a group with too few peers to compare waits
//! here too, for the group's next sessions (`wait_for_peers`): it stands
//! once enough of them show the group caches, and goes once they show it
//! does not ([`PeerWait`]). A group's first uncached session would
//! otherwise be judged by its own share, most of what so thin a history
//! says.
//!
//! Windows are processed in order, each one after the last: a held
//! finding still held at a window was not seen in any window since its
//! own, so the session made no call there.

use super::baseline::GroupBaseline;
use super::{Finding, PeerWait};
use crate::source::Window;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// A finding waiting for its session to end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Held {
    /// The finding as its window judged it.
    pub finding: Finding,
    /// When a cache lifetime will have passed since the session's last
    /// call.
    pub quiet_at: DateTime<Utc>,
    /// Always true now: a finding of enough missed reads to count alone,
    /// held one window. A row written by an earlier release with `false`
    /// held a single missed read, which is never a finding: it is dropped.
    pub alone: bool,
    /// What it waits for in its group, when the group had too few peers to
    /// compare; `None`: it waits only for its session to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<PeerWait>,
}

impl Held {
    /// The held finding of a session still going (see
    /// [`super::no_cache::Judged::Going`]).
    pub fn new(finding: Finding, quiet_at: DateTime<Utc>) -> Held {
        Held {
            finding,
            quiet_at,
            alone: true,
            peers: None,
        }
    }

    /// The held finding of a session whose group had too few peers (see
    /// [`super::no_cache::Judged::Thin`]).
    pub fn waiting(finding: Finding, quiet_at: DateTime<Utc>, wait: PeerWait) -> Held {
        Held {
            peers: Some(wait),
            ..Held::new(finding, quiet_at)
        }
    }

    /// The finding, standing in `window` once its group's peers decided
    /// it (`wait`).
    fn stand_by_peers(mut self, window: Window, wait: &PeerWait) -> Finding {
        let f = &mut self.finding;
        f.window = window;
        let cold_start = wait.peers < wait.min_peers;
        if let Some(e) = f.evidence.as_object_mut() {
            e.insert("waited_for_peers".into(), true.into());
            e.insert("peers".into(), wait.peers.into());
            e.insert(
                "peer_median_cached_share".into(),
                wait.median.map(super::ratio).into(),
            );
            e.insert("cold_start".into(), cold_start.into());
        }
        let group = &f.group;
        let why = match wait.median {
            Some(m) if !cold_start => format!(
                "; once {group} had {} peers, they cached a median {:.0}%",
                wait.peers,
                m * 100.0
            ),
            _ => format!(
                "; {group} still had {} peers when the wait for more ended, so the rule alone decided",
                wait.peers
            ),
        };
        f.explanation.push_str(&why);
        self.finding
    }

    /// The finding, standing in `window`, which showed no call of its
    /// session.
    fn stand(mut self, window: Window) -> Finding {
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let f = &mut self.finding;
        f.window = window;
        if let Some(e) = f.evidence.as_object_mut() {
            e.insert("judged_once_ended".into(), true.into());
        }
        let why = format!(
            "; its last call came within a cache lifetime of its window's end, and the next window, up to {}, shows no call of it",
            at(window.end)
        );
        f.explanation.push_str(&why);
        self.finding
    }
}

/// The findings held before a window, and which of their sessions it saw.
#[derive(Debug, Default)]
pub struct HeldFindings {
    held: Vec<Held>,
    ids: HashSet<String>,
    seen: HashSet<String>,
}

/// What a window decided about the findings held before it.
#[derive(Debug, Default, PartialEq)]
pub struct Settled {
    /// Findings that stand in the window (their sessions ended), in
    /// session order.
    pub stand: Vec<Finding>,
    /// Findings held on after the window, in session order.
    pub held: Vec<Held>,
    /// Whether `held` differs from what was held before the window.
    pub changed: bool,
}

impl HeldFindings {
    /// The findings held before a window.
    pub fn new(held: Vec<Held>) -> Self {
        let ids = held.iter().map(|h| h.finding.session_id.clone()).collect();
        HeldFindings {
            held,
            ids,
            seen: HashSet::new(),
        }
    }

    /// Notes a session the window lists (O(1); an empty set answers
    /// without hashing).
    pub fn saw(&mut self, session_id: &str) {
        if self.ids.contains(session_id) {
            self.seen.insert(session_id.to_owned());
        }
    }

    /// Settles the held findings at the end of `window`, adding the ones
    /// the window itself would hold (`fresh`): a session the window saw is
    /// dropped (the window judged it afresh); one it did not see stands
    /// (it has waited its window), unless it waits for its group's peers:
    /// `groups` (the baselines of the groups the window saw) say whether
    /// they decide it. A fresh finding of a session held before stands now
    /// (it has waited its window), unless it waits for peers: then it waits
    /// on, until the end of the first wait.
    pub fn settle(
        self,
        window: Window,
        fresh: Vec<Held>,
        groups: &HashMap<String, GroupBaseline>,
    ) -> Settled {
        let before = self.held.len();
        let mut stand = Vec::new();
        let mut held = Vec::with_capacity(before + fresh.len());
        let mut first_until = HashMap::new();
        for mut h in self.held {
            if let Some(wait) = &h.peers {
                first_until.insert(h.finding.session_id.clone(), wait.until);
            }
            if self.seen.contains(&h.finding.session_id) {
                continue;
            }
            let Some(mut wait) = h.peers else {
                // It has waited its window. (A single missed read held by
                // an earlier release is never a finding.)
                if h.alone {
                    stand.push(h.stand(window));
                }
                continue;
            };
            if let Some(b) = groups.get(&h.finding.group) {
                wait.saw(b.cached_share.len(), b.cached_share.median());
            }
            match wait.decide(window.end) {
                Some(true) => stand.push(h.stand_by_peers(window, &wait)),
                Some(false) => {}
                None => {
                    h.peers = Some(wait);
                    held.push(h);
                }
            }
        }
        let mut added = 0;
        for mut h in fresh {
            let id = &h.finding.session_id;
            match &mut h.peers {
                Some(wait) => {
                    if let Some(until) = first_until.get(id) {
                        wait.until = *until;
                    }
                    match wait.decide(window.end) {
                        Some(true) => {
                            let wait = *wait;
                            stand.push(h.stand_by_peers(window, &wait));
                        }
                        Some(false) => {}
                        None => {
                            added += 1;
                            held.push(h);
                        }
                    }
                }
                None if self.ids.contains(id) => stand.push(h.finding),
                None => {
                    added += 1;
                    held.push(h);
                }
            }
        }
        let changed = before > 0 || added > 0;
        stand.sort_by(|a, b| (&a.session_id, a.kind).cmp(&(&b.session_id, b.kind)));
        held.sort_by(|a, b| {
            let (a, b) = (&a.finding, &b.finding);
            (&a.session_id, a.kind).cmp(&(&b.session_id, b.kind))
        });
        Settled {
            stand,
            held,
            changed,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::{Kind, Severity};
    use chrono::{Duration, TimeZone};

    fn window(i: i64) -> Window {
        let start = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap() + Duration::minutes(15 * i);
        Window {
            start,
            end: start + Duration::minutes(15),
        }
    }

    fn held(id: &str, quiet_at: DateTime<Utc>) -> Held {
        Held::new(
            Finding {
                kind: Kind::NoCache,
                session_id: id.into(),
                window: window(0),
                severity: Severity::Warning,
                rule: "nc".into(),
                group: "feature=a".into(),
                labels: Default::default(),
                cost_usd: 0.01,
                impact_usd: 0.001,
                evidence: serde_json::json!({"missed_calls": 2}),
                explanation: "two misses".into(),
            },
            quiet_at,
        )
    }

    #[test]
    fn a_window_drops_what_it_saw_and_stands_what_it_did_not() {
        let w = window(1);
        let mut before = HeldFindings::new(vec![
            held("seen", w.start),
            held("quiet", w.end + Duration::minutes(3)),
        ]);
        before.saw("seen");
        before.saw("someone-else");
        let s = before.settle(
            w,
            vec![held("fresh", w.end + Duration::minutes(5))],
            &HashMap::new(),
        );
        let stand: Vec<&str> = s.stand.iter().map(|f| f.session_id.as_str()).collect();
        // Not seen in the next window: it stands there, before its quiet_at.
        assert_eq!(stand, ["quiet"]);
        assert_eq!(s.stand[0].window, w);
        assert_eq!(s.stand[0].evidence["judged_once_ended"], true);
        assert_eq!(s.stand[0].evidence["missed_calls"], 2);
        assert!(
            s.stand[0]
                .explanation
                .ends_with("the next window, up to 2026-11-02T00:30:00Z, shows no call of it"),
            "{}",
            s.stand[0].explanation
        );
        let kept: Vec<&str> = s
            .held
            .iter()
            .map(|h| h.finding.session_id.as_str())
            .collect();
        assert_eq!(kept, ["fresh"]);
        // The one held keeps the window that found it.
        assert_eq!(s.held[0].finding.window, window(0));
        assert!(s.changed);
    }

    #[test]
    fn seen_again_and_still_uncached_it_stands_as_judged_now() {
        let w = window(1);
        let mut before = HeldFindings::new(vec![held("again", w.start)]);
        before.saw("again");
        let s = before.settle(
            w,
            vec![held("again", w.end + Duration::minutes(1))],
            &HashMap::new(),
        );
        assert_eq!(s.stand.len(), 1);
        assert!(s.stand[0].evidence.get("judged_once_ended").is_none());
        assert!(s.held.is_empty());
    }

    /// A group baseline whose cached shares are `shares`.
    fn group(shares: &[f64]) -> GroupBaseline {
        let mut b = GroupBaseline::new(16);
        for s in shares {
            b.cached_share.push(*s);
        }
        b
    }

    fn waiting(id: &str, until: DateTime<Utc>) -> Held {
        let wait = PeerWait {
            min_peers: 5,
            min_peer_cached_share: 0.15,
            until,
            peers: 2,
            median: Some(0.3),
        };
        Held::waiting(held(id, window(0).end).finding, window(0).end, wait)
    }

    #[test]
    fn a_finding_waiting_for_peers_is_decided_by_them() {
        let w = window(1);
        let until = window(8).end;
        let settle = |shares: Option<&[f64]>, at: Window| {
            let groups: HashMap<String, GroupBaseline> = shares
                .map(|s| ("feature=a".to_owned(), group(s)))
                .into_iter()
                .collect();
            HeldFindings::new(vec![waiting("w", until)]).settle(at, Vec::new(), &groups)
        };
        // Its group not seen, or still thin: it waits on, past its
        // session's end.
        for shares in [None, Some(&[0.0, 0.6, 0.7][..])] {
            let s = settle(shares, w);
            assert!(s.stand.is_empty(), "{shares:?}");
            assert_eq!(s.held.len(), 1);
            assert_eq!(
                s.held[0].peers.unwrap().peers,
                shares.map_or(2, <[f64]>::len)
            );
        }
        // Five peers that cache: it stands, saying so.
        let s = settle(Some(&[0.0, 0.6, 0.7, 0.5, 0.65]), w);
        assert_eq!(s.stand.len(), 1);
        assert_eq!(s.stand[0].evidence["peers"], 5);
        assert_eq!(s.stand[0].evidence["cold_start"], false);
        assert_eq!(s.stand[0].window, w);
        // Five that do not: it goes.
        let s = settle(Some(&[0.0, 0.0, 0.0, 0.6, 0.0]), w);
        assert!(s.stand.is_empty() && s.held.is_empty() && s.changed);
        // Still thin when the wait ends: it stands unless the few cache
        // nothing.
        assert_eq!(settle(None, window(8)).stand.len(), 1);
        assert!(settle(Some(&[0.0, 0.0]), window(8)).stand.is_empty());
    }

    #[test]
    fn a_session_judged_again_keeps_its_first_wait() {
        let mut before = HeldFindings::new(vec![waiting("w", window(8).end)]);
        before.saw("w");
        let again = waiting("w", window(9).end);
        let s = before.settle(window(1), vec![again], &HashMap::new());
        assert_eq!(s.held.len(), 1);
        assert_eq!(s.held[0].peers.unwrap().until, window(8).end);
    }

    #[test]
    fn nothing_to_write_when_nothing_changed() {
        let w = window(1);
        let none = HeldFindings::new(Vec::new()).settle(w, Vec::new(), &HashMap::new());
        assert_eq!(none, Settled::default());
        // One dropped: written.
        let mut seen = HeldFindings::new(vec![held("seen", w.end + Duration::minutes(1))]);
        seen.saw("seen");
        let s = seen.settle(w, Vec::new(), &HashMap::new());
        assert!(s.changed && s.held.is_empty() && s.stand.is_empty());
    }

    #[test]
    fn a_single_missed_read_held_by_an_earlier_release_is_dropped() {
        let mut single = held("single", window(1).start);
        single.alone = false;
        let s = HeldFindings::new(vec![single]).settle(window(1), Vec::new(), &HashMap::new());
        assert!(s.stand.is_empty() && s.held.is_empty() && s.changed);
    }

    #[test]
    fn a_finding_held_by_an_earlier_release_reads_back_as_a_wait_for_its_session() {
        // Written when oversized_model findings waited on their group's
        // next sessions: the wait is gone, so the finding is held as any
        // other, and stands when its time comes.
        let mut json = serde_json::to_value(held("p", window(1).end)).unwrap();
        json["group_move"] = serde_json::json!({"run": 1, "moved_after": 3, "floor": 10.0});
        let back: Held = serde_json::from_value(json).unwrap();
        let s = HeldFindings::new(vec![back]).settle(window(1), Vec::new(), &HashMap::new());
        assert_eq!(s.stand.len(), 1);
    }

    #[test]
    fn a_held_finding_reads_back_as_it_was_written() {
        let h = held("a", window(3).end);
        let back: Held = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }
}
