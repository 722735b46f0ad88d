//! Retry-loop suspects waiting for the drill-down budget: per rule, the
//! `drilldown_budget` most suspicious sessions of the window are kept (a
//! bounded heap, so a window of a million suspects holds only the budget),
//! and the rest are counted as skipped.

use super::drilldown::Drilldown;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

/// One suspect and its rank.
#[derive(Debug)]
struct Ranked {
    suspicion: f64,
    /// Arrival order: on a tie the earlier suspect is kept.
    order: u64,
    drilldown: Drilldown,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    /// More suspicious is greater; on a tie, the earlier arrival.
    fn cmp(&self, other: &Self) -> Ordering {
        self.suspicion
            .total_cmp(&other.suspicion)
            .then_with(|| other.order.cmp(&self.order))
    }
}

/// The suspects of one window, by rule.
#[derive(Debug, Default)]
pub(super) struct Suspects {
    by_rule: HashMap<String, BinaryHeap<Reverse<Ranked>>>,
    arrived: u64,
    skipped: u64,
}

impl Suspects {
    /// Offers a suspect of `rule` to its budget: kept when the rule has
    /// room or when it is more suspicious than the least suspicious kept
    /// (which is then skipped).
    pub(super) fn offer(&mut self, rule: &str, budget: usize, suspicion: f64, d: Drilldown) {
        self.arrived += 1;
        if budget == 0 {
            self.skipped += 1;
            return;
        }
        let ranked = Ranked {
            suspicion,
            order: self.arrived,
            drilldown: d,
        };
        let heap = match self.by_rule.get_mut(rule) {
            Some(h) => h,
            None => self.by_rule.entry(rule.to_owned()).or_default(),
        };
        if heap.len() < budget {
            heap.push(Reverse(ranked));
            return;
        }
        self.skipped += 1;
        if heap.peek().is_some_and(|Reverse(least)| ranked > *least) {
            heap.pop();
            heap.push(Reverse(ranked));
        }
    }

    /// The suspects kept, most suspicious first, and how many were skipped.
    pub(super) fn finish(self) -> (Vec<Drilldown>, u64) {
        let mut kept: Vec<Ranked> = self
            .by_rule
            .into_values()
            .flat_map(|h| h.into_iter().map(|Reverse(r)| r))
            .collect();
        kept.sort_by(|a, b| b.cmp(a));
        (
            kept.into_iter().map(|r| r.drilldown).collect(),
            self.skipped,
        )
    }
}
