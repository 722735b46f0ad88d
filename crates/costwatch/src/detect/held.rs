//! A session still going at its window's end may be caching late, seen
//! before its first read: its misses so far do not yet say it never
//! caches. Once it has ended (no call for a cache lifetime after its
//! last), what it missed is final, and for a session of enough calls one
//! miss is enough. A session that ends right after a window is never in
//! the next window's listing, so its no_cache finding waits here
//! (`judge_once_ended`): held with the window that found it, it is
//! dropped where a later window sees the session again, which judges it
//! afresh. A single missed read stands in the first later window that
//! shows no call of the session once the lifetime has passed. A finding
//! that counted alone already (enough misses) waits one window only: it
//! stands in the next window if that window does not list the session,
//! and, seen there still uncached, stands as that window judged it, even
//! if the session is still going.
//!
//! Windows are processed in order, each one after the last: a held
//! finding still held at a window was not seen in any window since its
//! own, so the session made no call there.

use super::{Finding, no_cache::Weak};
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
    /// call: from then on, a window without its calls makes it final.
    pub quiet_at: DateTime<Utc>,
    /// It had enough missed reads to count alone (held one window), not a
    /// single one (held until the session ends).
    pub alone: bool,
}

impl Held {
    /// The held finding of an uncorroborated weak one that would count
    /// alone once its session ended (`None` for any other).
    pub fn of(weak: Weak) -> Option<Held> {
        let quiet_at = weak.once_ended?;
        Some(Held {
            finding: weak.finding,
            quiet_at,
            alone: weak.alone,
        })
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
        let why = if self.alone {
            format!(
                "; its last call came within a cache lifetime of its window's end, and the next window, up to {}, shows no call of it",
                at(window.end)
            )
        } else {
            format!(
                "; its last call came within a cache lifetime of its window's end, and it made no call again by {}, so its missed read is final",
                at(self.quiet_at)
            )
        };
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
    /// dropped (the window judged it afresh); one it did not see stands if
    /// it counted alone (it has waited its window) or once its `quiet_at`
    /// is within the window, and is held on before. A fresh finding that
    /// counts alone, of a session held before, stands now: it has waited
    /// its window.
    pub fn settle(self, window: Window, fresh: Vec<Held>) -> Settled {
        let before = self.held.len();
        let mut stand = Vec::new();
        let mut held = Vec::with_capacity(before + fresh.len());
        let mut kept = 0;
        for h in self.held {
            if self.seen.contains(&h.finding.session_id) {
                continue;
            }
            // One that counted alone has waited its window.
            if h.alone || h.quiet_at <= window.end {
                stand.push(h.stand(window));
            } else {
                kept += 1;
                held.push(h);
            }
        }
        let mut added = 0;
        for h in fresh {
            if h.alone && self.ids.contains(&h.finding.session_id) {
                stand.push(h.finding);
            } else {
                added += 1;
                held.push(h);
            }
        }
        let changed = kept != before || added > 0;
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
        Held {
            finding: Finding {
                kind: Kind::NoCache,
                session_id: id.into(),
                window: window(0),
                severity: Severity::Warning,
                rule: "nc".into(),
                group: "feature=a".into(),
                labels: Default::default(),
                cost_usd: 0.01,
                impact_usd: 0.001,
                evidence: serde_json::json!({"missed_calls": 1}),
                explanation: "one miss".into(),
            },
            quiet_at,
            alone: false,
        }
    }

    #[test]
    fn a_window_drops_what_it_saw_and_settles_what_ended() {
        let w = window(1);
        let mut before = HeldFindings::new(vec![
            held("seen", w.start),
            held("ended", w.start + Duration::minutes(5)),
            held("at-the-end", w.end),
            held("later", w.end + Duration::seconds(1)),
        ]);
        before.saw("seen");
        before.saw("someone-else");
        let s = before.settle(w, vec![held("fresh", w.end + Duration::minutes(5))]);
        let stand: Vec<&str> = s.stand.iter().map(|f| f.session_id.as_str()).collect();
        assert_eq!(stand, ["at-the-end", "ended"]);
        assert!(s.stand.iter().all(|f| f.window == w));
        assert!(
            s.stand
                .iter()
                .all(|f| f.evidence["judged_once_ended"] == true)
        );
        assert_eq!(s.stand[1].evidence["missed_calls"], 1);
        let kept: Vec<&str> = s
            .held
            .iter()
            .map(|h| h.finding.session_id.as_str())
            .collect();
        assert_eq!(kept, ["fresh", "later"]);
        // The one held on keeps the window that found it.
        assert_eq!(s.held[1].finding.window, window(0));
        assert!(s.changed);
    }

    #[test]
    fn nothing_to_write_when_nothing_changed() {
        let w = window(1);
        let none = HeldFindings::new(Vec::new()).settle(w, Vec::new());
        assert_eq!(none, Settled::default());
        // Held on, untouched: the stored rows stay.
        let on = HeldFindings::new(vec![held("later", w.end + Duration::minutes(1))])
            .settle(w, Vec::new());
        assert!(!on.changed);
        assert_eq!(on.held.len(), 1);
        // One dropped: written.
        let mut seen = HeldFindings::new(vec![held("seen", w.end + Duration::minutes(1))]);
        seen.saw("seen");
        let s = seen.settle(w, Vec::new());
        assert!(s.changed && s.held.is_empty() && s.stand.is_empty());
    }

    #[test]
    fn a_finding_that_counts_alone_waits_one_window() {
        let w = window(1);
        let going = |id: &str| Held {
            alone: true,
            ..held(id, w.end + Duration::minutes(3))
        };
        let mut before = HeldFindings::new(vec![going("again"), held("single", w.start)]);
        before.saw("again");
        before.saw("single");
        // Both seen again and still going: the one that counted alone has
        // waited its window and stands as judged now; a single miss, and a
        // session not held before, wait.
        let s = before.settle(
            w,
            vec![
                going("again"),
                held("single", w.end + Duration::minutes(1)),
                going("new"),
            ],
        );
        let stand: Vec<&str> = s.stand.iter().map(|f| f.session_id.as_str()).collect();
        assert_eq!(stand, ["again"]);
        assert!(s.stand[0].evidence.get("judged_once_ended").is_none());
        let kept: Vec<&str> = s
            .held
            .iter()
            .map(|h| h.finding.session_id.as_str())
            .collect();
        assert_eq!(kept, ["new", "single"]);
        // Not seen in the next window: it stands, before its quiet_at (a
        // single miss would wait for it).
        let s = HeldFindings::new(vec![going("quiet")]).settle(w, Vec::new());
        assert_eq!(s.stand.len(), 1);
        assert_eq!(s.stand[0].evidence["judged_once_ended"], true);
        assert!(
            s.stand[0]
                .explanation
                .ends_with("the next window, up to 2026-11-02T00:30:00Z, shows no call of it"),
            "{}",
            s.stand[0].explanation
        );
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
