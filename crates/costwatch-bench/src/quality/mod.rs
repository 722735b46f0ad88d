//! The detection-quality report: for each seed, the simulator's labelled
//! scenario is served on loopback and read by costwatch through
//! [`backtest::replay`] (the daemon's own pipeline) and by the static
//! baseline, through the same REST API; both are scored against the truth.

use super::BenchError;
use super::alerts::{self, AlertTally};
use super::baseline;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::backtest::{self, ClassScore};
use costwatch::clock::SystemClock;
use costwatch::config;
use costwatch::detect::{Detector, Finding, Kind, rules};
use costwatch::secret::Secret;
use costwatch::source::Labels;
use costwatch::source::reference::ReferenceSource;
use costwatch_sim::scenario::{self, ScenarioParams};
use costwatch_sim::server::{SimOptions, SimServer};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The window size `backtest --simulate` uses.
pub const WINDOW: Duration = Duration::from_secs(900);
/// Concurrent drill-downs, as `backtest --simulate` uses.
pub const DRILLDOWN_CONCURRENCY: usize = 4;

/// The detector `backtest --simulate` and `demo` use without a configuration:
/// the rules at `rules`, peer groups by `feature`, 512 samples per group and
/// at most 10,000 candidates per window.
pub fn default_detector(rules: &Path) -> Result<Detector, BenchError> {
    Ok(costwatch::app::default_detector(config::load_rules(&[
        rules.to_path_buf(),
    ])?))
}

/// What a team tells costwatch about its own traffic, in its rules, as a
/// user of those models and the owner of those features would.
#[derive(Debug, Clone, Default)]
pub struct Told {
    /// Each model's minimum cacheable prefix, in tokens.
    pub cache_minimums: BTreeMap<String, u64>,
    /// Per `feature` label, the model it moved to on purpose: declared
    /// with an `oversized_model` rule naming `design_model`. A move nobody
    /// declares is an incident.
    pub design_models: BTreeMap<String, String>,
}

/// [`default_detector`] told what `told` says, the way a user writes it:
/// each minimum in every `no_cache` rule's `model_min_cacheable_tokens`,
/// where the rule does not already say, and each declared move as an
/// `oversized_model` rule of its own (`{feature}-by-design`, the settings
/// of the rule that covered the feature, with `design_model`).
pub fn detector_knowing(rules: &Path, told: &Told) -> Result<Detector, BenchError> {
    let mut d = default_detector(rules)?;
    for rule in &mut d.rules.no_cache {
        for (model, tokens) in &told.cache_minimums {
            rule.settings
                .model_min_cacheable_tokens
                .entry(model.clone())
                .or_insert(*tokens);
        }
    }
    for (feature, model) in &told.design_models {
        let labels = Labels::from([("feature".to_owned(), feature.clone())]);
        let covering = rules::select(&d.rules.oversized_model, |r| &r.meta, &labels);
        let Some(mut rule) = covering.cloned() else {
            continue;
        };
        rule.meta.name = format!("{feature}-by-design");
        rule.meta.selector = rules::Selector(labels);
        rule.settings.design_model = Some(model.clone());
        d.rules.oversized_model.push(rule);
    }
    Ok(d)
}

/// A gateway client for a simulator at `base_url`, with the limits
/// `backtest --simulate` uses.
pub fn sim_source(base_url: &str, admin_key: &str) -> Result<ReferenceSource, BenchError> {
    let url =
        url::Url::parse(base_url).map_err(|e| BenchError::Setup(format!("{base_url}: {e}")))?;
    Ok(ReferenceSource::new(
        url,
        &Secret::new(admin_key),
        50,
        Labels::new(),
        costwatch::app::simulator_limits(),
    )?)
}

/// One system's results on one seed.
#[derive(Debug, Clone)]
pub struct SystemResult {
    /// Precision, recall and F1 per kind (in [`Kind::ALL`] order).
    pub scores: Vec<ClassScore>,
    /// Alerts per kind.
    pub alerts: BTreeMap<Kind, AlertTally>,
}

impl SystemResult {
    fn score(&self, kind: Kind) -> Option<&ClassScore> {
        self.scores.iter().find(|s| s.kind == kind)
    }
}

/// Both systems' results on one seed.
#[derive(Debug, Clone)]
pub struct SeedResult {
    /// The scenario seed.
    pub seed: u64,
    /// Sessions in the scenario.
    pub sessions: usize,
    /// Calls in the scenario.
    pub requests: usize,
    /// Real incidents per kind.
    pub incidents: BTreeMap<Kind, usize>,
    /// costwatch.
    pub costwatch: SystemResult,
    /// The static baseline.
    pub baseline: SystemResult,
    /// Wall time of the costwatch replay.
    pub replay_secs: f64,
}

fn system(
    findings: &[Finding],
    truth: &BTreeMap<String, BTreeSet<String>>,
    incidents: &BTreeMap<Kind, Vec<BTreeSet<String>>>,
    windows: &[costwatch::source::Window],
) -> SystemResult {
    SystemResult {
        scores: backtest::score(findings, truth),
        alerts: alerts::tally(
            findings,
            windows,
            truth,
            incidents,
            &alerts::default_policy(),
        ),
    }
}

/// Generates, serves and scores one seed of the first family, served
/// historically.
pub async fn run_seed(seed: u64, days: u32, rules: &Path) -> Result<SeedResult, BenchError> {
    let params = ScenarioParams {
        seed,
        days,
        ..ScenarioParams::default()
    };
    let dataset = scenario::generate(&params);
    let run = run_dataset(
        seed,
        dataset,
        &params,
        rules,
        &Told::default(),
        Serving::Historical,
    )
    .await?;
    Ok(run.result)
}

/// The daemon's default `settle_lag`: how long after a window ends it is
/// read.
pub const SETTLE_LAG: Duration = Duration::from_secs(120);

/// What the simulator shows while a window is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Every call, past and future: a replay of history.
    Historical,
    /// Only the calls made by the window's end plus [`SETTLE_LAG`], as a
    /// live daemon sees them; a session is seen again, larger, later.
    Live,
}

/// One seed's results and the findings behind them.
#[derive(Debug, Clone)]
pub struct DatasetRun {
    /// The scores.
    pub result: SeedResult,
    /// costwatch's findings.
    pub costwatch: Vec<Finding>,
    /// The static baseline's findings.
    pub baseline: Vec<Finding>,
    /// Where the replay stopped ([`replay_end`]).
    pub until: DateTime<Utc>,
}

/// Where the replay of a scenario from `from` to `end` stops: at `end`, or,
/// when its last call comes later or less than a window before, at the end
/// of the window after the one holding that call. A session started on the
/// last day is read whole, as the truth counts it and a daemon still
/// running would read it, and a finding held until its session is quiet
/// is told.
pub fn replay_end(
    from: DateTime<Utc>,
    end: DateTime<Utc>,
    last_call: Option<DateTime<Utc>>,
) -> DateTime<Utc> {
    let window = WINDOW.as_secs().max(1) as i64;
    let Some(last) = last_call else {
        return end;
    };
    let windows = (last - from).num_seconds().div_euclid(window) + 2;
    end.max(from + ChronoDuration::seconds(windows * window))
}

/// Serves `dataset` (generated from `params`), replays it through costwatch
/// (its rules at `rules`, told what `told` says) and the static baseline,
/// and scores both.
pub async fn run_dataset(
    seed: u64,
    dataset: costwatch_sim::Dataset,
    params: &ScenarioParams,
    rules: &Path,
    told: &Told,
    serving: Serving,
) -> Result<DatasetRun, BenchError> {
    let from = params.start;
    let to = replay_end(
        from,
        from + ChronoDuration::days(i64::from(params.days)),
        dataset.time_range().map(|(_, last)| last),
    );
    let dataset = Arc::new(dataset);
    let truth = dataset.truth.by_kind.clone();
    let incident_sessions =
        alerts::truth_incidents(&dataset, alerts::default_policy().resolve_after);
    let incidents = incident_sessions
        .iter()
        .map(|(k, list)| (*k, list.len()))
        .collect();
    let (sessions, requests) = (dataset.sessions.len(), dataset.request_count());
    let sim = SimServer::start(dataset, SimOptions::default())
        .await
        .map_err(|e| BenchError::Setup(format!("cannot start the simulator: {e}")))?;
    let step = ChronoDuration::from_std(WINDOW + SETTLE_LAG).unwrap_or_default();
    let live = serving == Serving::Live;
    let show_until = |end: DateTime<Utc>| {
        if live {
            sim.set_now(Some(
                end + ChronoDuration::from_std(SETTLE_LAG).unwrap_or_default(),
            ));
        }
    };
    let source = sim_source(&sim.base_url(), sim.admin_key())?;
    if live {
        sim.set_now(Some(from + step));
    }
    let started = Instant::now();
    let replay = backtest::replay(
        source.clone(),
        detector_knowing(rules, told)?,
        "sqlite::memory:",
        from,
        to,
        WINDOW,
        DRILLDOWN_CONCURRENCY,
        Arc::new(SystemClock),
        &backtest::WindowRetries::none(),
        |r| show_until(r.window.end + ChronoDuration::from_std(WINDOW).unwrap_or_default()),
    )
    .await?;
    let replay_secs = started.elapsed().as_secs_f64();
    let static_findings =
        baseline::run_with(&source, from, to, WINDOW, |w| show_until(w.end)).await?;
    let _ = sim.shutdown().await;
    let windows = alerts::windows(from, to, WINDOW);
    Ok(DatasetRun {
        result: SeedResult {
            seed,
            sessions,
            requests,
            incidents,
            costwatch: system(&replay.findings, &truth, &incident_sessions, &windows),
            baseline: system(&static_findings, &truth, &incident_sessions, &windows),
            replay_secs,
        },
        costwatch: replay.findings,
        baseline: static_findings,
        until: to,
    })
}

/// One kind's figures for one system, on one seed or aggregated.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Precision.
    pub precision: f64,
    /// Recall.
    pub recall: f64,
    /// F1.
    pub f1: f64,
    /// Alerts per real incident.
    pub alerts_per_incident: f64,
    /// Real incidents none of whose sessions was in an episode that alerted.
    pub missed_incidents: f64,
    /// Alerts without a truly wasteful session.
    pub false_alerts: f64,
}

impl Figures {
    /// The figures of `kind` in `r`, with `incidents` real incidents.
    pub fn of(r: &SystemResult, kind: Kind, incidents: usize) -> Figures {
        let s = r.score(kind);
        let a = r.alerts.get(&kind).copied().unwrap_or_default();
        Figures {
            precision: s.map_or(0.0, |s| s.precision),
            recall: s.map_or(0.0, |s| s.recall),
            f1: s.map_or(0.0, |s| s.f1),
            alerts_per_incident: if incidents == 0 {
                a.alerts as f64
            } else {
                a.alerts as f64 / incidents as f64
            },
            missed_incidents: a.missed_incidents as f64,
            false_alerts: a.false_alerts as f64,
        }
    }
}

/// Median of values (mean of the middle two for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Mean of values; 0 when empty.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Median or mean of each figure over seeds.
pub fn aggregate(figures: &[Figures], f: fn(&[f64]) -> f64) -> Figures {
    let pick = |g: fn(&Figures) -> f64| f(&figures.iter().map(g).collect::<Vec<_>>());
    Figures {
        precision: pick(|x| x.precision),
        recall: pick(|x| x.recall),
        f1: pick(|x| x.f1),
        alerts_per_incident: pick(|x| x.alerts_per_incident),
        missed_incidents: pick(|x| x.missed_incidents),
        false_alerts: pick(|x| x.false_alerts),
    }
}

/// The median (and mean) over seeds of each kind's figures, for costwatch
/// and the baseline: `(kind, costwatch median, baseline median, costwatch
/// mean, baseline mean)`.
pub fn summary(results: &[SeedResult]) -> Vec<(Kind, [Figures; 4])> {
    Kind::ALL
        .into_iter()
        .map(|kind| {
            let cw: Vec<Figures> = results
                .iter()
                .map(|r| Figures::of(&r.costwatch, kind, r.incidents[&kind]))
                .collect();
            let base: Vec<Figures> = results
                .iter()
                .map(|r| Figures::of(&r.baseline, kind, r.incidents[&kind]))
                .collect();
            (
                kind,
                [
                    aggregate(&cw, median),
                    aggregate(&base, median),
                    aggregate(&cw, mean),
                    aggregate(&base, mean),
                ],
            )
        })
        .collect()
}

/// Rows of cells rendered as an aligned text table or a Markdown table.
pub fn render(header: &[&str], rows: &[Vec<String>], markdown: bool) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = width.get_mut(i) {
                *w = (*w).max(c.len());
            }
        }
    }
    // Columns of figures are right-aligned, columns of words left-aligned.
    let left: Vec<bool> = (0..width.len())
        .map(|i| {
            rows.iter().any(|r| {
                r.get(i)
                    .and_then(|c| c.chars().next())
                    .is_some_and(char::is_alphabetic)
            })
        })
        .collect();
    let line = |cells: Vec<&str>| -> String {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = width.get(i).copied().unwrap_or(0);
                if left.get(i).copied().unwrap_or(true) {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        if markdown {
            format!("| {} |\n", padded.join(" | "))
        } else {
            format!("{}\n", padded.join("  ").trim_end())
        }
    };
    let mut out = line(header.to_vec());
    if markdown {
        let rule: Vec<String> = width
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if left.get(i).copied().unwrap_or(true) {
                    "-".repeat(*w)
                } else {
                    format!("{}:", "-".repeat(w.saturating_sub(1)))
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
    }
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// The column names of [`cells`] for costwatch, then for the static
/// baseline, after a table's own leading columns.
pub const FIGURE_COLUMNS: [&str; 13] = [
    "incidents",
    "cw P",
    "cw R",
    "cw F1",
    "cw alerts/inc",
    "cw missed inc",
    "cw false alerts",
    "static P",
    "static R",
    "static F1",
    "static alerts/inc",
    "static missed inc",
    "static false alerts",
];

/// A side's figures as table cells, in [`FIGURE_COLUMNS`] order.
pub fn cells(f: &Figures) -> [String; 6] {
    [
        format!("{:.3}", f.precision),
        format!("{:.3}", f.recall),
        format!("{:.3}", f.f1),
        format!("{:.2}", f.alerts_per_incident),
        format!("{:.1}", f.missed_incidents),
        format!("{:.1}", f.false_alerts),
    ]
}

/// The side-by-side table: one row per seed and kind, then the median and
/// the mean over seeds.
pub fn table(results: &[SeedResult], markdown: bool) -> String {
    let header = [&["seed", "kind"][..], &FIGURE_COLUMNS].concat();
    let mut rows = Vec::new();
    for r in results {
        for kind in Kind::ALL {
            let n = r.incidents[&kind];
            let mut row = vec![r.seed.to_string(), kind.as_str().to_owned(), n.to_string()];
            row.extend(cells(&Figures::of(&r.costwatch, kind, n)));
            row.extend(cells(&Figures::of(&r.baseline, kind, n)));
            rows.push(row);
        }
    }
    let incidents = |kind: Kind, f: fn(&[f64]) -> f64| {
        f(&results
            .iter()
            .map(|r| r.incidents[&kind] as f64)
            .collect::<Vec<_>>())
    };
    for (label, i, f) in [
        ("median", 0, median as fn(&[f64]) -> f64),
        ("mean", 2, mean),
    ] {
        for (kind, figs) in summary(results) {
            let mut row = vec![
                label.to_owned(),
                kind.as_str().to_owned(),
                format!("{:.1}", incidents(kind, f)),
            ];
            row.extend(cells(&figs[i]));
            row.extend(cells(&figs[i + 1]));
            rows.push(row);
        }
    }
    render(&header, &rows, markdown)
}

/// One target of the issue and where a measurement lands.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The target as the issue states it.
    pub what: String,
    /// The measured figure.
    pub result: String,
    /// Whether the target is met.
    pub met: bool,
}

/// Targets as a table.
pub fn targets_table(targets: &[Target], markdown: bool) -> String {
    let rows: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            vec![
                t.what.clone(),
                t.result.clone(),
                if t.met { "met" } else { "NOT met" }.to_owned(),
            ]
        })
        .collect();
    render(&["target", "measured", ""], &rows, markdown)
}

/// The quality targets: costwatch's precision and recall at least 0.97 for
/// every class on every seed, and the baseline far below (its median F1 at
/// most half of costwatch's in every class).
pub fn targets(results: &[SeedResult]) -> Vec<Target> {
    targets_at(results, 0.97)
}

/// [`targets`] with `min` as the lowest precision and recall.
pub fn targets_at(results: &[SeedResult], min: f64) -> Vec<Target> {
    let worst = |pick: fn(&ClassScore) -> f64| {
        results
            .iter()
            .flat_map(|r| {
                r.costwatch
                    .scores
                    .iter()
                    .map(move |s| (pick(s), s.kind, r.seed))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
    };
    let mut out = Vec::new();
    for (name, pick) in [
        (
            "precision",
            (|s: &ClassScore| s.precision) as fn(&ClassScore) -> f64,
        ),
        ("recall", |s: &ClassScore| s.recall),
    ] {
        let (result, met) = match worst(pick) {
            Some((v, kind, seed)) => (format!("lowest {v:.3} ({kind}, seed {seed})"), v >= min),
            None => ("no seeds".to_owned(), false),
        };
        out.push(Target {
            what: format!("costwatch {name} >= {min:.2} per class, every seed"),
            result,
            met,
        });
    }
    let s = summary(results);
    let far = s.iter().all(|(_, f)| f[1].f1 <= 0.5 * f[0].f1);
    let listed: Vec<String> = s
        .iter()
        .map(|(k, f)| {
            format!(
                "{k} P {:.3} R {:.3} F1 {:.3}",
                f[1].precision, f[1].recall, f[1].f1
            )
        })
        .collect();
    out.push(Target {
        what: "static baseline far below (median F1 at most half of costwatch's)".to_owned(),
        result: listed.join("; "),
        met: far && !results.is_empty(),
    });
    out
}

/// What reaches a person, run as a daemon: every real incident alerted,
/// at most one alert per incident in every class on every seed, and no
/// false alert.
pub fn alerting_targets(results: &[SeedResult]) -> Vec<Target> {
    let figures = || {
        results.iter().flat_map(|r| {
            Kind::ALL
                .into_iter()
                .map(move |k| (r.seed, k, Figures::of(&r.costwatch, k, r.incidents[&k])))
        })
    };
    let missed: f64 = figures().map(|(_, _, f)| f.missed_incidents).sum();
    let incidents: usize = results.iter().flat_map(|r| r.incidents.values()).sum();
    let worst =
        figures().max_by(|a, b| a.2.alerts_per_incident.total_cmp(&b.2.alerts_per_incident));
    let false_alerts: f64 = figures().map(|(_, _, f)| f.false_alerts).sum();
    let none = results.is_empty();
    vec![
        Target {
            what: "costwatch alerts every real incident, every seed".to_owned(),
            result: format!("{missed:.0} of {incidents} missed"),
            met: !none && missed == 0.0,
        },
        Target {
            what: "costwatch alerts per incident <= 1.0 per class, every seed".to_owned(),
            result: worst.map_or("no seeds".to_owned(), |(seed, kind, f)| {
                format!("highest {:.2} ({kind}, seed {seed})", f.alerts_per_incident)
            }),
            met: !none && worst.is_some_and(|(_, _, f)| f.alerts_per_incident <= 1.0),
        },
        Target {
            what: "costwatch sends no false alert".to_owned(),
            result: format!("{false_alerts:.0} false alerts"),
            met: !none && false_alerts == 0.0,
        },
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
