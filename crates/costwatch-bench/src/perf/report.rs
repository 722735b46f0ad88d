//! The performance benchmark's tables and targets.

use super::{Medians, PerfReport};
use crate::measure::TimeReport;
use crate::quality::{Target, render};
use costwatch::backtest::ClassScore;
use costwatch::detect::Kind;

/// The performance table: one row per measured program, medians of the runs.
pub fn table(r: &PerfReport, markdown: bool) -> String {
    let cw = Medians::of(&r.costwatch);
    let py = Medians::of(&r.python);
    let row = |name: &str, runs: &[TimeReport]| {
        let m = Medians::of(runs);
        let per_session = |t: &TimeReport| t.cpu_secs() * 1e6 / r.sessions.max(1) as f64;
        let lo = runs.iter().map(per_session).fold(f64::INFINITY, f64::min);
        let hi = runs.iter().map(per_session).fold(0.0, f64::max);
        vec![
            name.to_owned(),
            runs.len().to_string(),
            format!("{:.2}", m.cpu_us_per_session(r.sessions)),
            format!("{lo:.2}-{hi:.2}"),
            format!("{:.2}", m.cpu_secs),
            format!("{:.2}", m.wall_secs),
            format!("{:.1}", m.max_rss_mib),
        ]
    };
    let mut rows = vec![row("costwatch backtest", &r.costwatch)];
    if !r.scenario.is_empty() {
        rows.push(row(
            "costwatch backtest, scenario shares (window read twice)",
            &r.scenario,
        ));
    }
    if !r.floor.is_empty() {
        rows.push(row(
            "fetch-pages: the same pages, nothing parsed (the floor)",
            &r.floor,
        ));
    }
    if !r.python.is_empty() {
        rows.push(row("crates/costwatch-bench/reference.py", &r.python));
        rows.push(vec![
            "ratio python / costwatch".to_owned(),
            String::new(),
            format!("{:.1}x", py.cpu_secs / cw.cpu_secs.max(1e-9)),
            String::new(),
            String::new(),
            format!("{:.1}x", py.wall_secs / cw.wall_secs.max(1e-9)),
            format!("{:.1}x", py.max_rss_mib / cw.max_rss_mib.max(1e-9)),
        ]);
    }
    let mut out = render(
        &[
            "program",
            "runs",
            "CPU us/session",
            "range",
            "CPU s",
            "wall s",
            "peak RSS MiB",
        ],
        &rows,
        markdown,
    );
    out.push('\n');
    match &r.idle {
        Ok(list) => {
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|i| {
                    vec![
                        format!("after a {}-session window", i.sessions),
                        format!("{:.0}", i.span_secs),
                        format!("{:.3}", i.cpu_secs),
                        format!("{:.3}", 100.0 * i.cpu_secs / i.span_secs.max(1e-9)),
                        format!("{:.1}", i.rss_start_mib),
                        format!("{:.1}", i.rss_end_mib),
                        format!("{:.1}", i.rss_max_mib),
                        format!("{:.1}", i.first_tick_secs),
                        format!("{:.1}", i.hwm_mib),
                    ]
                })
                .collect();
            out.push_str(&render(
                &[
                    "idle daemon (costwatch run)",
                    "seconds",
                    "CPU s",
                    "CPU %",
                    "RSS start MiB",
                    "RSS end MiB",
                    "RSS max MiB",
                    "first tick s",
                    "peak RSS MiB",
                ],
                &rows,
                markdown,
            ));
        }
        Err(why) => out.push_str(&format!("idle daemon: {why}\n")),
    }
    out
}

/// 200 MB (decimal, as the issue writes it) in MiB.
const MB_200_MIB: f64 = 200e6 / 1_048_576.0;
/// 20 MB in MiB.
const MB_20_MIB: f64 = 20e6 / 1_048_576.0;

/// The performance targets and where the medians land.
pub fn targets(r: &PerfReport) -> Vec<Target> {
    let cw = Medians::of(&r.costwatch);
    let py = Medians::of(&r.python);
    let per_session = cw.cpu_us_per_session(r.sessions);
    let floor = if r.floor.is_empty() {
        String::new()
    } else {
        format!(
            " (fetching the pages alone: {:.2} us)",
            Medians::of(&r.floor).cpu_us_per_session(r.sessions)
        )
    };
    let mut out = vec![Target {
        what: "<= 2 us CPU per session in backtest".to_owned(),
        result: format!("{per_session:.2} us{floor}"),
        met: !r.costwatch.is_empty() && per_session <= 2.0,
    }];
    if !r.python.is_empty() {
        let ratio = py.cpu_secs / cw.cpu_secs.max(1e-9);
        out.push(Target {
            what: ">= 20x less CPU per session than the Python reference".to_owned(),
            result: format!(
                "{ratio:.1}x ({:.2} vs {per_session:.2} us)",
                py.cpu_us_per_session(r.sessions)
            ),
            met: ratio >= 20.0,
        });
    }
    for (scores, what) in [
        (&r.costwatch_scores, ""),
        (&r.scenario_scores, ", scenario shares"),
    ] {
        if !scores.is_empty() {
            out.push(findings_target(scores, what));
        }
    }
    out.push(Target {
        what: format!("<= 200 MB peak RSS for a {}-session window", r.sessions),
        result: format!("{:.1} MB", cw.max_rss_mib * 1.048_576),
        met: !r.costwatch.is_empty() && cw.max_rss_mib <= MB_200_MIB,
    });
    match &r.idle {
        Ok(list) => {
            for i in list {
                out.push(Target {
                    what: format!("idle RSS <= 20 MB (after a {}-session window)", i.sessions),
                    result: format!("{:.1} MB", i.rss_max_mib * 1.048_576),
                    met: i.rss_max_mib <= MB_20_MIB,
                });
            }
        }
        Err(why) => out.push(Target {
            what: "idle RSS <= 20 MB".to_owned(),
            result: why.clone(),
            met: false,
        }),
    }
    out
}

/// Whether costwatch found every labelled session of the window and
/// nothing else, each class (`what` names the window's mix): a fast read
/// that finds nothing is not fast reading.
fn findings_target(scores: &[ClassScore], what: &str) -> Target {
    let worst = scores.iter().min_by(|a, b| {
        a.precision
            .min(a.recall)
            .total_cmp(&b.precision.min(b.recall))
    });
    Target {
        what: format!("costwatch precision and recall 1.0 per class{what}"),
        result: worst.map_or("-".to_owned(), |c| {
            format!(
                "lowest: {} P {:.3} R {:.3} ({} fp, {} fn)",
                c.kind.as_str(),
                c.precision,
                c.recall,
                c.false_positives,
                c.false_negatives
            )
        }),
        met: scores
            .iter()
            .all(|c| c.false_positives == 0 && c.false_negatives == 0),
    }
}

/// The scores of the 1M-session window, costwatch beside the Python reference.
pub fn scores_table(r: &PerfReport, markdown: bool) -> String {
    let rows: Vec<Vec<String>> = Kind::ALL
        .iter()
        .map(|k| {
            let cell = |s: &[ClassScore]| {
                s.iter().find(|c| c.kind == *k).map_or("-".to_owned(), |c| {
                    format!(
                        "{:.3} / {:.3} ({} tp, {} fp, {} fn)",
                        c.precision,
                        c.recall,
                        c.true_positives,
                        c.false_positives,
                        c.false_negatives
                    )
                })
            };
            vec![
                k.as_str().to_owned(),
                cell(&r.costwatch_scores),
                cell(&r.python_scores),
                cell(&r.scenario_scores),
            ]
        })
        .collect();
    render(
        &[
            "kind",
            "costwatch P / R",
            "reference.py P / R",
            "costwatch P / R, scenario shares",
        ],
        &rows,
        markdown,
    )
}
