//! The held-out report: both families on their held-out seeds
//! ([`super::family`]), costwatch beside the static baseline, the median
//! over seeds per kind, and where the adversarial family's sessions were
//! found or missed, situation by situation.

use super::family::{Family, FamilyRun, SituationTally};
use super::quality::{self, SeedResult, Target, cells, median, render};
use costwatch::detect::Kind;
use costwatch_sim::scenario::adversarial::Situation;
use std::collections::BTreeMap;

/// Every run of the report, by family.
#[derive(Debug, Clone, Default)]
pub struct HeldOut {
    /// Runs per family, in seed order.
    pub runs: BTreeMap<Family, Vec<FamilyRun>>,
}

impl HeldOut {
    /// Adds one run.
    pub fn push(&mut self, r: FamilyRun) {
        self.runs.entry(r.family).or_default().push(r);
    }

    /// The seed results of `family`.
    pub fn results(&self, family: Family) -> Vec<SeedResult> {
        self.runs
            .get(&family)
            .map(|rs| rs.iter().map(|r| r.run.result.clone()).collect())
            .unwrap_or_default()
    }

    /// The adversarial family's situations, summed over its seeds.
    pub fn situations(&self) -> BTreeMap<Situation, SituationTally> {
        let mut out: BTreeMap<Situation, SituationTally> = BTreeMap::new();
        for r in self.runs.values().flatten() {
            for (s, t) in &r.situations {
                out.entry(*s).or_default().add(t);
            }
        }
        out
    }
}

/// One row per family and kind: the medians over the family's held-out
/// seeds, costwatch beside the static baseline.
pub fn summary_table(h: &HeldOut, markdown: bool) -> String {
    let header = [&["family", "kind", "seeds"][..], &quality::FIGURE_COLUMNS].concat();
    let mut rows = Vec::new();
    for family in Family::ALL {
        let results = h.results(family);
        if results.is_empty() {
            continue;
        }
        for (kind, figs) in quality::summary(&results) {
            let incidents: Vec<f64> = results.iter().map(|r| r.incidents[&kind] as f64).collect();
            let mut row = vec![
                family.name().to_owned(),
                kind.as_str().to_owned(),
                results.len().to_string(),
                format!("{:.1}", median(&incidents)),
            ];
            row.extend(cells(&figs[0]));
            row.extend(cells(&figs[1]));
            rows.push(row);
        }
    }
    render(&header, &rows, markdown)
}

/// One row per situation of the adversarial family, summed over its
/// seeds: sessions, and per kind the truly wasteful sessions, how many of
/// them costwatch found, and how many it flagged that were not.
pub fn situations_table(h: &HeldOut, markdown: bool) -> String {
    let mut header = vec!["situation".to_owned(), "sessions".to_owned()];
    for kind in Kind::ALL {
        for what in ["true", "found", "false flags"] {
            header.push(format!("{} {what}", kind.as_str()));
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = h
        .situations()
        .iter()
        .map(|(s, t)| {
            let mut row = vec![s.name().to_owned(), t.sessions.to_string()];
            for k in 0..3 {
                row.extend([
                    t.truth[k].to_string(),
                    t.found[k].to_string(),
                    t.false_flags[k].to_string(),
                ]);
            }
            row
        })
        .collect();
    render(&header, &rows, markdown)
}

/// The targets per family on held-out seeds: every class's precision and
/// recall at least 0.98, the static baseline far below, and what reaches a
/// person ([`quality::alerting_targets`]).
pub fn targets(h: &HeldOut) -> Vec<Target> {
    let mut out = Vec::new();
    for family in Family::ALL {
        let results = h.results(family);
        if results.is_empty() {
            continue;
        }
        let all = quality::targets_at(&results, 0.98)
            .into_iter()
            .chain(quality::alerting_targets(&results));
        for t in all {
            out.push(Target {
                what: format!("{}: {}", family.name(), t.what),
                ..t
            });
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::alerts::AlertTally;
    use crate::quality::{DatasetRun, SystemResult};
    use costwatch::backtest::ClassScore;

    fn result(seed: u64, p: f64) -> SeedResult {
        let sys = |p: f64| SystemResult {
            scores: Kind::ALL
                .into_iter()
                .map(|kind| ClassScore {
                    kind,
                    true_positives: 1,
                    false_positives: 0,
                    false_negatives: 0,
                    precision: p,
                    recall: 1.0,
                    f1: 2.0 * p / (p + 1.0),
                })
                .collect(),
            alerts: Kind::ALL
                .into_iter()
                .map(|k| (k, AlertTally::default()))
                .collect(),
        };
        SeedResult {
            seed,
            sessions: 10,
            requests: 20,
            incidents: Kind::ALL.into_iter().map(|k| (k, 2)).collect(),
            costwatch: sys(p),
            baseline: sys(p / 10.0),
            replay_secs: 0.0,
        }
    }

    fn run(family: Family, seed: u64, p: f64, below: usize) -> FamilyRun {
        FamilyRun {
            family,
            run: DatasetRun {
                result: result(seed, p),
                costwatch: Vec::new(),
                baseline: Vec::new(),
                until: chrono::DateTime::UNIX_EPOCH,
            },
            situations: (below > 0)
                .then_some((
                    Situation::BelowMinimum,
                    SituationTally {
                        sessions: below,
                        truth: [0; 3],
                        found: [0; 3],
                        false_flags: [below / 2, 0, 0],
                    },
                ))
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn the_summary_has_three_rows_per_family_with_medians() {
        let mut h = HeldOut::default();
        for (seed, p) in [(1, 0.9), (2, 0.5), (3, 0.7)] {
            h.push(run(Family::Base, seed, 1.0, 0));
            h.push(run(Family::Adversarial, seed, p, 10));
        }
        let text = summary_table(&h, false);
        assert_eq!(text.lines().count(), 1 + 6);
        let adv = text
            .lines()
            .find(|l| l.starts_with("adversarial  no_cache"))
            .unwrap();
        assert!(adv.contains("0.700"), "{adv}");
        let t = targets(&h);
        assert_eq!(t.len(), 12, "per family: P, R, baseline, then alerting");
        assert!(t[0].what.starts_with("base: ") && t[0].met);
        assert!(t[0].what.contains(">= 0.98"), "{}", t[0].what);
        assert!(t[5].what.contains("no false alert") && t[5].met);
        assert!(t[6].what.starts_with("adversarial: ") && !t[6].met);
    }

    #[test]
    fn situations_are_summed_over_seeds() {
        let mut h = HeldOut::default();
        h.push(run(Family::Adversarial, 1, 1.0, 10));
        h.push(run(Family::Adversarial, 2, 1.0, 4));
        let s = h.situations();
        assert_eq!(s[&Situation::BelowMinimum].sessions, 14);
        assert_eq!(s[&Situation::BelowMinimum].false_flags[0], 7);
        let md = situations_table(&h, true);
        let row: Vec<&str> = md
            .lines()
            .nth(2)
            .unwrap()
            .split('|')
            .map(str::trim)
            .collect();
        assert_eq!(row[1..5], ["below_minimum", "14", "0", "0"]);
        assert_eq!(row[5], "7");
        assert!(
            md.lines()
                .next()
                .unwrap()
                .contains("retry_loop false flags")
        );
    }
}
