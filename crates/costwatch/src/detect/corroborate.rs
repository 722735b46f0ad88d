//! A single missed read of the prompt cache is weak evidence: alone it is a
//! cache's rare miss, or caching that starts late seen before its first
//! read. Beside sessions of the same group that never cached in the same
//! window, it is the same broken cache. Once a window's other findings are
//! known, its weak no_cache findings stand where enough of their group's
//! sessions were found uncached on their own (`corroborating_sessions`).

use super::no_cache::Weak;
use super::{Drilldown, Finding, Kind};
use std::collections::HashMap;

/// Per group, the sessions a window found uncached on their own.
#[derive(Debug, Default)]
pub struct Corroboration {
    uncached: HashMap<String, u64>,
}

impl Corroboration {
    /// Counts the no_cache findings of a window's `findings` (weak ones are
    /// never among them) and those of `weak` that count alone (held only
    /// because their session is still going).
    pub fn of(findings: &[Finding], weak: &[Weak]) -> Self {
        let mut uncached: HashMap<String, u64> = HashMap::new();
        let alone = weak.iter().filter(|w| w.alone).map(|w| &w.finding);
        for f in findings
            .iter()
            .filter(|f| f.kind == Kind::NoCache)
            .chain(alone)
        {
            match uncached.get_mut(&f.group) {
                Some(n) => *n += 1,
                None => {
                    uncached.insert(f.group.clone(), 1);
                }
            }
        }
        Corroboration { uncached }
    }

    /// How many sessions of `group` corroborate, if at least `needs` (0:
    /// never).
    fn enough(&self, group: &str, needs: u64) -> Option<u64> {
        let n = self.uncached.get(group).copied().unwrap_or(0);
        (needs > 0 && n >= needs).then_some(n)
    }

    /// Which of the sessions held back for their group (see
    /// [`super::Judgement::weak_drilldowns`]) are worth reading now.
    pub fn wanted(&self, held: Vec<Drilldown>) -> Vec<Drilldown> {
        held.into_iter()
            .filter(|d| {
                d.corroboration_needed()
                    .is_some_and(|needs| self.enough(&d.group, needs).is_some())
            })
            .collect()
    }

    /// The weak findings that corroboration lets stand, in session order,
    /// and the others.
    pub fn stand(&self, weak: Vec<Weak>) -> (Vec<Finding>, Vec<Weak>) {
        let mut out = Vec::new();
        let mut rest = Vec::new();
        for w in weak {
            if w.alone {
                // It needs no corroboration, only its next window.
                rest.push(w);
                continue;
            }
            match self.enough(&w.finding.group, w.needs) {
                Some(by) => out.push(w.corroborated(by)),
                None => rest.push(w),
            }
        }
        out.sort_by(|a: &Finding, b: &Finding| a.session_id.cmp(&b.session_id));
        (out, rest)
    }
}
