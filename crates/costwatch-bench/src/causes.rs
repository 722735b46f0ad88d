//! Why the no_cache findings' calls missed the prompt cache: the
//! `cache_miss_causes` of every no_cache finding of a report's runs,
//! summed per cause, with whether the cause counts in the impact.

use super::heldout::HeldOut;
use super::quality::render;
use costwatch::detect::Kind;
use costwatch::detect::no_cache::Cause;
use std::collections::BTreeMap;

/// Per cause name, the calls and dollars of the findings' evidence.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CauseTally {
    /// no_cache findings read.
    pub findings: u64,
    /// Cause name → (calls, dollars).
    pub by_cause: BTreeMap<&'static str, (u64, f64)>,
}

impl CauseTally {
    /// Adds the no_cache findings of `findings`.
    pub fn add(&mut self, findings: &[costwatch::detect::Finding]) {
        for f in findings.iter().filter(|f| f.kind == Kind::NoCache) {
            self.findings += 1;
            for c in Cause::ALL {
                let t = &f.evidence["cache_miss_causes"][c.name()];
                let calls = t["calls"].as_u64().unwrap_or(0);
                if calls > 0 {
                    let e = self.by_cause.entry(c.name()).or_default();
                    e.0 += calls;
                    e.1 += t["usd"].as_f64().unwrap_or(0.0);
                }
            }
        }
    }

    /// The tally of costwatch's findings in every run of `h`, per family.
    pub fn of_runs(h: &HeldOut) -> Vec<(&'static str, CauseTally)> {
        h.runs
            .iter()
            .map(|(family, runs)| {
                let mut t = CauseTally::default();
                for r in runs {
                    t.add(&r.run.costwatch);
                }
                (family.name(), t)
            })
            .collect()
    }
}

/// One row per family and cause: the calls of the no_cache findings that
/// read nothing (or wrote a cache no call read), their dollars, and
/// whether they count in the impact.
pub fn table(tallies: &[(&'static str, CauseTally)], markdown: bool) -> String {
    let header = [
        "family",
        "no_cache findings",
        "cause",
        "calls",
        "usd",
        "counts in impact",
    ];
    let mut rows = Vec::new();
    for (family, t) in tallies {
        for c in Cause::ALL {
            let (calls, usd) = t.by_cause.get(c.name()).copied().unwrap_or_default();
            rows.push(vec![
                (*family).to_owned(),
                t.findings.to_string(),
                c.name().to_owned(),
                calls.to_string(),
                format!("{usd:.4}"),
                if c.avoidable() { "yes" } else { "no" }.to_owned(),
            ]);
        }
    }
    render(&header, &rows, markdown)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use costwatch::detect::Finding;
    use costwatch::domain::Severity;
    use costwatch::source::Window;

    fn finding(kind: Kind, causes: serde_json::Value) -> Finding {
        let t = chrono::DateTime::<chrono::Utc>::MIN_UTC;
        Finding {
            kind,
            session_id: "s".into(),
            window: Window { start: t, end: t },
            severity: Severity::Warning,
            rule: "r".into(),
            group: "g".into(),
            labels: Default::default(),
            cost_usd: 1.0,
            impact_usd: 0.5,
            evidence: serde_json::json!({ "cache_miss_causes": causes }),
            explanation: String::new(),
        }
    }

    #[test]
    fn causes_are_summed_over_no_cache_findings_only() {
        let mut t = CauseTally::default();
        t.add(&[
            finding(
                Kind::NoCache,
                serde_json::json!({"cold_start": {"calls": 1, "usd": 0.0},
                                   "prefix_changed": {"calls": 3, "usd": 0.25}}),
            ),
            finding(
                Kind::NoCache,
                serde_json::json!({"prefix_changed": {"calls": 2, "usd": 0.5}}),
            ),
            finding(
                Kind::RetryLoop,
                serde_json::json!({"prefix_changed": {"calls": 9, "usd": 9.0}}),
            ),
        ]);
        assert_eq!(t.findings, 2);
        assert_eq!(t.by_cause["prefix_changed"], (5, 0.75));
        assert_eq!(t.by_cause["cold_start"], (1, 0.0));
        let text = table(&[("base", t)], false);
        assert!(text.contains("prefix_changed"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.contains("ttl_expired") && l.contains(" 0 ")),
            "{text}"
        );
    }
}
