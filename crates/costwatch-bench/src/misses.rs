//! What the quality report counts but does not show: on a tuning seed,
//! every truly wasteful session costwatch did not flag for its kind, every
//! session it flagged for a kind it does not carry, each with its request
//! rows (and, in the adversarial family, what it was made to be and the
//! model its group's design meant for each call), and the real incidents
//! no alert told of and the alerts that told of none.
//!
//! It is the tool for tuning a detector, so it refuses held-out seeds
//! (CONTRIBUTING.md, "Tuning seeds and held-out seeds"): a pattern seen in
//! held-out figures is written into a tuning seed or a table row first.

use crate::BenchError;
use crate::alerts;
use crate::family::Family;
use crate::quality::{self, WINDOW};
use costwatch::detect::{Finding, Kind};
use costwatch_sim::Dataset;
use costwatch_sim::scenario::ScenarioParams;
use costwatch_sim::scenario::adversarial::Notes;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// One call of a reviewed session, as its request row shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Seconds since the session's first call.
    pub offset_secs: i64,
    /// The model called.
    pub model: String,
    /// `success` or `error`.
    pub status: String,
    /// Prompt tokens.
    pub input: u64,
    /// Prompt tokens read from the cache.
    pub cached: u64,
    /// Completion tokens.
    pub output: u64,
    /// The model the group's design meant for this call (adversarial only).
    pub norm: Option<&'static str>,
}

/// One session the detectors got wrong for one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    /// The kind it was missed for or wrongly flagged with.
    pub kind: Kind,
    /// `true`: wasteful of `kind` and not flagged for it; `false`: flagged
    /// for `kind` and not wasteful of it.
    pub missed: bool,
    /// The session.
    pub session_id: String,
    /// Its `feature` label.
    pub feature: String,
    /// When its first call was made.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// What it was made to be (adversarial only).
    pub situation: Option<&'static str>,
    /// Whether its session row carries a per-model breakdown.
    pub breakdown: bool,
    /// The kinds the truth gives it.
    pub truly: Vec<String>,
    /// The kinds costwatch flagged it with.
    pub flagged_as: Vec<Kind>,
    /// The wrong finding's explanation (false flags only).
    pub explanation: Option<String>,
    /// Its calls.
    pub calls: Vec<Call>,
}

/// One seed's review.
#[derive(Debug, Clone)]
pub struct Review {
    /// The family.
    pub family: Family,
    /// The seed.
    pub seed: u64,
    /// Sessions missed or wrongly flagged, by kind, missed first, then by
    /// feature and id.
    pub sessions: Vec<Reviewed>,
    /// Which real incidents were missed and which alerts were false.
    pub alerts: alerts::Replayed,
}

/// Fails when any of `seeds` is one of `family`'s held-out seeds.
pub fn refuse_held_out(family: Family, seeds: &[u64]) -> Result<(), BenchError> {
    let held: Vec<String> = seeds
        .iter()
        .filter(|s| family.is_held_out(**s))
        .map(u64::to_string)
        .collect();
    if held.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Setup(format!(
            "seed {} of the {} family is held out: its misses are reported, never looked into (CONTRIBUTING.md, \"Tuning seeds and held-out seeds\")",
            held.join(", "),
            family.name()
        )))
    }
}

/// Generates, replays and reviews one seed of `family`.
pub async fn review_seed(
    family: Family,
    seed: u64,
    days: u32,
    rules: &Path,
) -> Result<Review, BenchError> {
    refuse_held_out(family, &[seed])?;
    let params = ScenarioParams {
        seed,
        days,
        ..ScenarioParams::default()
    };
    let (dataset, notes) = family.generate(&params);
    let run = quality::run_dataset(
        seed,
        dataset.clone(),
        &params,
        rules,
        &family.told(),
        family.serving(),
    )
    .await?;
    let policy = alerts::default_policy();
    let replayed = alerts::replay(
        &run.costwatch,
        &alerts::windows(params.start, run.until, WINDOW),
        &dataset.truth.by_kind,
        &alerts::truth_incidents(&dataset, policy.resolve_after),
        &policy,
    );
    Ok(Review {
        family,
        seed,
        sessions: review(&dataset, notes.as_ref(), &run.costwatch),
        alerts: replayed,
    })
}

/// The sessions of `dataset` that `findings` got wrong, kind by kind.
pub fn review(dataset: &Dataset, notes: Option<&Notes>, findings: &[Finding]) -> Vec<Reviewed> {
    let mut flagged: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    for f in findings {
        flagged.entry(f.session_id.as_str()).or_default().push(f);
    }
    let flagged_for = |id: &str, kind: Kind| {
        flagged
            .get(id)
            .and_then(|list| list.iter().find(|f| f.kind == kind))
            .copied()
    };
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let truth: BTreeSet<&str> = dataset.truth.of(kind.as_str()).collect();
        for id in &truth {
            if flagged_for(id, kind).is_none() {
                out.extend(reviewed(dataset, notes, &flagged, kind, id, None));
            }
        }
        for (id, list) in &flagged {
            if let Some(f) = list.iter().find(|f| f.kind == kind)
                && !truth.contains(id)
            {
                out.extend(reviewed(dataset, notes, &flagged, kind, id, Some(f)));
            }
        }
    }
    out.sort_by(|a, b| {
        (a.kind, !a.missed, &a.feature, &a.session_id).cmp(&(
            b.kind,
            !b.missed,
            &b.feature,
            &b.session_id,
        ))
    });
    out
}

fn reviewed(
    dataset: &Dataset,
    notes: Option<&Notes>,
    flagged: &BTreeMap<&str, Vec<&Finding>>,
    kind: Kind,
    id: &str,
    wrong: Option<&Finding>,
) -> Option<Reviewed> {
    let session = dataset.session(id)?;
    let noted = notes.and_then(|n| n.of(id));
    let first = session.first_request_at()?;
    let calls = session
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| Call {
            offset_secs: (r.created_at - first).num_seconds(),
            model: r.model.clone(),
            status: r.status.clone(),
            input: r.input_tokens,
            cached: r.cached_tokens,
            output: r.output_tokens,
            norm: noted.and_then(|n| n.calls.get(i)).map(|c| c.norm),
        })
        .collect();
    Some(Reviewed {
        kind,
        missed: wrong.is_none(),
        session_id: id.to_owned(),
        feature: session.labels.get("feature").cloned().unwrap_or_default(),
        started_at: first,
        situation: noted.map(|n| n.situation.name()),
        breakdown: dataset.has_breakdown(id),
        truly: dataset
            .truth
            .kinds_of(id)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        flagged_as: flagged
            .get(id)
            .map(|l| l.iter().map(|f| f.kind).collect())
            .unwrap_or_default(),
        explanation: wrong.map(|f| f.explanation.clone()),
        calls,
    })
}

/// The review as text: a line per session and, under it, up to
/// `max_calls` of its calls; then the missed incidents and false alerts.
pub fn render(r: &Review, kinds: &[Kind], max_calls: usize) -> String {
    let mut s = String::new();
    let shown: Vec<&Reviewed> = r
        .sessions
        .iter()
        .filter(|x| kinds.contains(&x.kind))
        .collect();
    let _ = writeln!(
        s,
        "{} seed {}: {} missed, {} false flags",
        r.family.name(),
        r.seed,
        shown.iter().filter(|x| x.missed).count(),
        shown.iter().filter(|x| !x.missed).count()
    );
    for x in shown {
        let verdict = if x.missed { "missed" } else { "false flag" };
        let mut facts = vec![format!("feature={}", x.feature)];
        facts.extend(x.situation.map(str::to_owned));
        if !x.breakdown {
            facts.push("no breakdown".into());
        }
        if !x.truly.is_empty() {
            facts.push(format!("truly {}", x.truly.join("+")));
        }
        let others: Vec<&str> = x
            .flagged_as
            .iter()
            .filter(|k| **k != x.kind)
            .map(|k| k.as_str())
            .collect();
        if !others.is_empty() {
            facts.push(format!("flagged {}", others.join("+")));
        }
        let _ = writeln!(
            s,
            "\n  {verdict} {} {} ({}), {} calls from {}",
            x.kind.as_str(),
            x.session_id,
            facts.join(", "),
            x.calls.len(),
            x.started_at.format("%Y-%m-%d %H:%M:%S")
        );
        if let Some(e) = &x.explanation {
            let _ = writeln!(s, "    finding: {e}");
        }
        for c in x.calls.iter().take(max_calls) {
            let norm = match c.norm {
                Some(n) if n != c.model => format!("  (meant for {n})"),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "    +{:>5}s {:<18} {:<7} in {:>6} cached {:>6} out {:>5}{norm}",
                c.offset_secs, c.model, c.status, c.input, c.cached, c.output
            );
        }
        if x.calls.len() > max_calls {
            let _ = writeln!(s, "    ... {} more calls", x.calls.len() - max_calls);
        }
    }
    for kind in kinds {
        for incident in r.alerts.missed.get(kind).into_iter().flatten() {
            let ids: Vec<&str> = incident.iter().map(String::as_str).collect();
            let _ = writeln!(
                s,
                "\n  missed incident {}: {}",
                kind.as_str(),
                ids.join(", ")
            );
        }
        for episode in r.alerts.false_episodes.get(kind).into_iter().flatten() {
            let _ = writeln!(
                s,
                "\n  false alert {}: {}",
                kind.as_str(),
                episode.join(", ")
            );
        }
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::family::Split;
    use chrono::{Duration as ChronoDuration, TimeZone, Utc};
    use costwatch::config::Severity;
    use costwatch::source::{Labels, Window};
    use costwatch_sim::{SimRequest, SimSession, Truth};

    fn session(id: &str, feature: &str, calls: &[(i64, &str, u64, u64)]) -> SimSession {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap();
        let labels = BTreeMap::from([("feature".to_string(), feature.to_string())]);
        SimSession {
            session_id: id.into(),
            labels: labels.clone(),
            requests: calls
                .iter()
                .enumerate()
                .map(|(i, (secs, model, input, cached))| SimRequest {
                    request_id: format!("{id}-{i}"),
                    session_id: id.into(),
                    created_at: t0 + ChronoDuration::seconds(*secs),
                    model: (*model).into(),
                    status: "success".into(),
                    http_status: 200,
                    error_type: None,
                    input_tokens: *input,
                    cached_tokens: *cached,
                    cache_write_tokens: 0,
                    output_tokens: 50,
                    cost_usd: 0.001,
                    latency_ms: 500,
                    labels: labels.clone(),
                })
                .collect(),
            fixed_row: None,
        }
    }

    fn finding(kind: Kind, id: &str) -> Finding {
        let at = Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap();
        Finding {
            kind,
            session_id: id.into(),
            window: Window {
                start: at,
                end: at + ChronoDuration::minutes(15),
            },
            severity: Severity::Warning,
            rule: "r".into(),
            group: "feature=x".into(),
            labels: Labels::new(),
            cost_usd: 0.0,
            impact_usd: 0.0,
            evidence: serde_json::Value::Null,
            explanation: format!("{id} looks wrong"),
        }
    }

    #[test]
    fn held_out_seeds_are_refused_and_tuning_seeds_pass() {
        for family in Family::ALL {
            assert!(refuse_held_out(family, family.seeds(Split::Tuning)).is_ok());
            let held = family.seeds(Split::HeldOut)[0];
            let err = refuse_held_out(family, &[family.seeds(Split::Tuning)[0], held])
                .unwrap_err()
                .to_string();
            assert!(err.contains(&held.to_string()), "{err}");
            assert!(err.contains("held out"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_held_out_seed_is_refused_before_anything_runs() {
        let err = review_seed(
            Family::Adversarial,
            Family::Adversarial.seeds(Split::HeldOut)[0],
            1,
            Path::new("/nonexistent"),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("held out"), "{err}");
    }

    #[test]
    fn misses_and_false_flags_are_listed_with_their_calls() {
        let mut truth = Truth::default();
        truth.insert("no_cache", "found");
        truth.insert("no_cache", "missed");
        truth.insert("retry_loop", "loop");
        let sessions = vec![
            session("found", "x", &[(0, "luna", 1500, 0), (30, "luna", 1600, 0)]),
            session(
                "missed",
                "x",
                &[(0, "luna", 1100, 0), (40, "luna", 1200, 0)],
            ),
            session(
                "fine",
                "y",
                &[(0, "luna", 1500, 0), (20, "luna", 1600, 1500)],
            ),
            session("loop", "z", &[(0, "sol", 300, 0), (2, "sol", 300, 0)]),
        ];
        let dataset =
            Dataset::new(Vec::new(), sessions, truth).without_breakdown(["missed".to_string()]);
        // `loop` is flagged, but for the wrong kind: missed as a retry
        // loop and a false no_cache flag.
        let findings = vec![
            finding(Kind::NoCache, "found"),
            finding(Kind::NoCache, "fine"),
            finding(Kind::NoCache, "loop"),
        ];
        let out = review(&dataset, None, &findings);
        let seen: Vec<(Kind, bool, &str)> = out
            .iter()
            .map(|r| (r.kind, r.missed, r.session_id.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (Kind::NoCache, true, "missed"),
                (Kind::NoCache, false, "fine"),
                (Kind::NoCache, false, "loop"),
                (Kind::RetryLoop, true, "loop"),
            ]
        );
        let missed = &out[0];
        assert!(!missed.breakdown);
        assert_eq!(missed.explanation, None);
        assert_eq!(
            missed.calls[1],
            Call {
                offset_secs: 40,
                model: "luna".into(),
                status: "success".into(),
                input: 1200,
                cached: 0,
                output: 50,
                norm: None,
            }
        );
        assert_eq!(out[1].explanation.as_deref(), Some("fine looks wrong"));
        assert_eq!(out[3].flagged_as, [Kind::NoCache]);
        assert_eq!(out[3].truly, ["retry_loop"]);

        let text = render(
            &Review {
                family: Family::Adversarial,
                seed: 3,
                sessions: out,
                alerts: alerts::Replayed::default(),
            },
            &[Kind::NoCache],
            1,
        );
        assert!(
            text.starts_with("adversarial seed 3: 1 missed, 2 false flags"),
            "{text}"
        );
        assert!(
            text.contains(
                "missed no_cache missed (feature=x, no breakdown, truly no_cache), 2 calls"
            ),
            "{text}"
        );
        assert!(text.contains("... 1 more calls"), "{text}");
        assert!(text.contains("finding: fine looks wrong"), "{text}");
        assert!(!text.contains("retry_loop loop"), "{text}");
    }
}
