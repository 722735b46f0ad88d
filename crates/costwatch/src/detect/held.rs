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
//! Windows are processed in order, each one after the last: a held
//! finding still held at a window was not seen in any window since its
//! own, so the session made no call there.

use super::Finding;
use crate::source::Window;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

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
}

impl Held {
    /// The held finding of a session still going (see
    /// [`super::no_cache::Judged::Going`]).
    pub fn new(finding: Finding, quiet_at: DateTime<Utc>) -> Held {
        Held {
            finding,
            quiet_at,
            alone: true,
        }
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
    /// (it has waited its window). A fresh finding of a session held
    /// before stands now: it has waited its window.
    pub fn settle(self, window: Window, fresh: Vec<Held>) -> Settled {
        let before = self.held.len();
        let mut stand = Vec::new();
        let mut held = Vec::with_capacity(before + fresh.len());
        for h in self.held {
            if self.seen.contains(&h.finding.session_id) {
                continue;
            }
            // It has waited its window. (A single missed read held by an
            // earlier release is never a finding.)
            if h.alone {
                stand.push(h.stand(window));
            }
        }
        let mut added = 0;
        for h in fresh {
            if self.ids.contains(&h.finding.session_id) {
                stand.push(h.finding);
            } else {
                added += 1;
                held.push(h);
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
        let s = before.settle(w, vec![held("fresh", w.end + Duration::minutes(5))]);
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
        let s = before.settle(w, vec![held("again", w.end + Duration::minutes(1))]);
        assert_eq!(s.stand.len(), 1);
        assert!(s.stand[0].evidence.get("judged_once_ended").is_none());
        assert!(s.held.is_empty());
    }

    #[test]
    fn nothing_to_write_when_nothing_changed() {
        let w = window(1);
        let none = HeldFindings::new(Vec::new()).settle(w, Vec::new());
        assert_eq!(none, Settled::default());
        // One dropped: written.
        let mut seen = HeldFindings::new(vec![held("seen", w.end + Duration::minutes(1))]);
        seen.saw("seen");
        let s = seen.settle(w, Vec::new());
        assert!(s.changed && s.held.is_empty() && s.stand.is_empty());
    }

    #[test]
    fn a_single_missed_read_held_by_an_earlier_release_is_dropped() {
        let mut single = held("single", window(1).start);
        single.alone = false;
        let s = HeldFindings::new(vec![single]).settle(window(1), Vec::new());
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
        let s = HeldFindings::new(vec![back]).settle(window(1), Vec::new());
        assert_eq!(s.stand.len(), 1);
    }

    #[test]
    fn a_held_finding_reads_back_as_it_was_written() {
        let h = held("a", window(3).end);
        let back: Held = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }
}
