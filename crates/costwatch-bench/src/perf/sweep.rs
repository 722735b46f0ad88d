//! Many small windows: what a window costs beside what a session costs.
//!
//! The simulator serves days of its scenario (the features, incidents and
//! daily curve of the quality report, at a chosen volume) from its own
//! process. `costwatch backtest` replays the same range with each window
//! size of the sweep, and `crates/costwatch-bench/reference.py --window`
//! reads it the same way; both run under `/usr/bin/time -v`. At equal
//! sessions, the least-squares slope of costwatch's CPU over the number of
//! windows is its fixed cost per window, with the sessions read again in
//! each window they are active in. Empty windows (a range after the served
//! days) give what a window costs whatever its sessions, with the
//! in-memory state and with a SQLite file. A long backtest (90 days at
//! 5-minute windows by default) is measured on its own.

use super::{Served, config_yaml, serve_with};
use crate::BenchError;
use crate::measure::{self, TimeReport};
use crate::quality::{Target, median, render, targets_table};
use chrono::{DateTime, Utc};
use costwatch_sim::scenario::ScenarioParams;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What to measure and with which programs.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Days of the sweep's scenario.
    pub days: u32,
    /// Base sessions per day of the sweep's scenario.
    pub per_day: u32,
    /// Window sizes of the sweep.
    pub windows: Vec<Duration>,
    /// Days of the long backtest (0 skips it).
    pub long_days: u32,
    /// Base sessions per day of the long backtest.
    pub long_per_day: u32,
    /// Window size of the long backtest.
    pub long_window: Duration,
    /// Days of the longer empty range (the shorter is one day); 0 or 1
    /// skips the empty windows.
    pub empty_days: u32,
    /// Scenario seed.
    pub seed: u64,
    /// Runs of each measured command.
    pub runs: usize,
    /// The `costwatch` binary.
    pub costwatch: PathBuf,
    /// The `costwatch-bench` binary (for `serve`).
    pub bench: PathBuf,
    /// The Python interpreter with `requests`; `None` skips the reference.
    pub python: Option<PathBuf>,
    /// `crates/costwatch-bench/reference.py`.
    pub reference: PathBuf,
    /// The rules directory.
    pub rules: PathBuf,
    /// Where configs, outputs and reports go.
    pub workdir: PathBuf,
}

/// The scenario served: `days` from `SWEEP_START`, at `per_day` base
/// sessions a day.
pub fn scenario_params(seed: u64, days: u32, per_day: u32) -> ScenarioParams {
    ScenarioParams {
        seed,
        days,
        sessions_per_day: per_day,
        start: sweep_start(),
    }
}

/// The sweep's first day, a Monday far enough in the past that the long
/// backtest's range has ended: a backtest stops at the current time, so a
/// range reaching past it would measure fewer windows than it claims.
const SWEEP_START: (i32, u32, u32) = (2026, 6, 1);

fn sweep_start() -> DateTime<Utc> {
    let (y, m, d) = SWEEP_START;
    chrono::NaiveDate::from_ymd_opt(y, m, d)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|n| n.and_utc())
        .unwrap_or_default()
}

/// The window count of `costwatch backtest`'s last summary line
/// (`backtest: 576 windows, ...`) in `stderr`.
pub fn windows_processed(stderr: &str) -> Option<usize> {
    stderr.lines().rev().find_map(|l| {
        l.strip_prefix("backtest: ")?
            .split_once(" windows")?
            .0
            .parse()
            .ok()
    })
}

/// One window size of the sweep.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    /// The window size.
    pub window: Duration,
    /// Windows in the range.
    pub windows: usize,
    /// `costwatch backtest` runs.
    pub costwatch: Vec<TimeReport>,
    /// Findings the first costwatch run printed.
    pub findings: usize,
    /// `reference.py --window` runs.
    pub python: Vec<TimeReport>,
}

impl SweepPoint {
    /// Median CPU seconds of costwatch.
    pub fn costwatch_cpu(&self) -> f64 {
        median_cpu(&self.costwatch)
    }

    /// Median CPU seconds of the Python reference (0 when not run).
    pub fn python_cpu(&self) -> f64 {
        median_cpu(&self.python)
    }
}

fn median_cpu(runs: &[TimeReport]) -> f64 {
    median(&runs.iter().map(TimeReport::cpu_secs).collect::<Vec<_>>())
}

fn median_rss_mib(runs: &[TimeReport]) -> f64 {
    median(
        &runs
            .iter()
            .map(|r| r.max_rss_kib as f64 / 1024.0)
            .collect::<Vec<_>>(),
    )
}

/// The long backtest.
#[derive(Debug, Clone)]
pub struct LongRun {
    /// Days replayed.
    pub days: u32,
    /// Window size.
    pub window: Duration,
    /// Windows replayed.
    pub windows: usize,
    /// Sessions served.
    pub sessions: usize,
    /// `costwatch backtest` runs.
    pub runs: Vec<TimeReport>,
}

/// Where a backtest keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The default throwaway state in process memory.
    Memory,
    /// A new SQLite file (`--state sqlite://...`): each window runs the
    /// daemon's statements and commits, as `costwatch run` does.
    SqliteFile,
}

impl State {
    fn label(self) -> &'static str {
        match self {
            State::Memory => "in memory (the default)",
            State::SqliteFile => "SQLite file (as the daemon)",
        }
    }

    fn short_name(self) -> &'static str {
        match self {
            State::Memory => "memory",
            State::SqliteFile => "sqlite",
        }
    }
}

/// Backtests over ranges where the gateway lists no session: what a window
/// costs whatever its sessions (its listing request, its commit).
#[derive(Debug, Clone)]
pub struct EmptyWindows {
    /// Where the backtests kept their state.
    pub state: State,
    /// The window size.
    pub window: Duration,
    /// Days of the longer range (the shorter is one day).
    pub long_days: u32,
    /// Windows of the shorter range, and its runs.
    pub short: (usize, Vec<TimeReport>),
    /// Windows of the longer range, and its runs.
    pub long: (usize, Vec<TimeReport>),
}

impl EmptyWindows {
    /// Milliseconds of CPU per window: the difference of the two ranges'
    /// median CPU over the difference of their window counts, so that
    /// start-up cancels out. `None` when the counts are equal.
    pub fn ms_per_window(&self) -> Option<f64> {
        let windows = self.long.0 as f64 - self.short.0 as f64;
        (windows > 0.0)
            .then(|| (median_cpu(&self.long.1) - median_cpu(&self.short.1)) * 1e3 / windows)
    }
}

/// Everything the sweep measured.
#[derive(Debug, Clone)]
pub struct SweepReport {
    /// Days of the sweep's range.
    pub days: u32,
    /// Sessions served in it.
    pub sessions: usize,
    /// Calls behind them.
    pub requests: usize,
    /// One entry per window size.
    pub points: Vec<SweepPoint>,
    /// The long backtest, if run.
    pub long: Option<LongRun>,
    /// Empty windows, with each kind of state (none when skipped).
    pub empty: Vec<EmptyWindows>,
}

impl SweepReport {
    /// The least-squares slope of costwatch's median CPU seconds over the
    /// number of windows, and the intercept; `None` under two sizes.
    pub fn slope(&self) -> Option<(f64, f64)> {
        let pts: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|p| (p.windows as f64, p.costwatch_cpu()))
            .collect();
        least_squares(&pts)
    }
}

/// Slope and intercept of the least-squares line through `pts`.
pub fn least_squares(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

fn serve_scenario(opts: &SweepOptions, days: u32, per_day: u32) -> Result<Served, BenchError> {
    let args = [
        "--scenario-days".to_owned(),
        days.to_string(),
        "--per-day".to_owned(),
        per_day.to_string(),
        "--seed".to_owned(),
        opts.seed.to_string(),
    ];
    serve_with(&opts.bench, &args)
}

fn range(opts: &SweepOptions, days: u32) -> (DateTime<Utc>, DateTime<Utc>) {
    let from = scenario_params(opts.seed, days, 1).start;
    (from, from + chrono::Duration::days(i64::from(days)))
}

fn windows_in(from: DateTime<Utc>, to: DateTime<Utc>, window: Duration) -> usize {
    let secs = (to - from).num_seconds().max(0) as u64;
    secs.div_ceil(window.as_secs().max(1)) as usize
}

/// Runs `costwatch backtest` over `[from, to)` with `window`, `runs` times.
fn backtests(
    opts: &SweepOptions,
    served: &Served,
    name: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    window: Duration,
    state: State,
    progress: &mut impl FnMut(&str),
) -> Result<(Vec<TimeReport>, usize), BenchError> {
    let dir = opts.workdir.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::setup("work directory", e))?;
    let config = dir.join("costwatch.yaml");
    let size = humantime::format_duration(window).to_string();
    let yaml = config_yaml(&served.url, &opts.rules, &dir.join("unused.db"), "")
        .replace("size: 1h", &format!("size: {size}"));
    std::fs::write(&config, yaml).map_err(|e| BenchError::setup("config", e))?;
    let mut args = super::backtest_args(&config, (from, to));
    let db = dir.join("state.db");
    if state == State::SqliteFile {
        args.push("--state".into());
        args.push(format!("sqlite://{}", db.display()));
    }
    let env = [("COSTWATCH_ADMIN_KEY", served.admin_key.as_str())];
    let mut runs = Vec::new();
    let mut findings = 0;
    for i in 0..opts.runs {
        if state == State::SqliteFile {
            // Each run starts from an empty database, as the first.
            for suffix in ["", "-wal", "-shm"] {
                let f = PathBuf::from(format!("{}{suffix}", db.display()));
                match std::fs::remove_file(&f) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(BenchError::setup("old state database", e));
                    }
                    _ => {}
                }
            }
        }
        let out = dir.join(format!("findings-{i}.jsonl"));
        let r = measure::timed(
            &opts.costwatch,
            &args,
            &env,
            &out,
            &dir.join(format!("stderr-{i}")),
        )?;
        progress(&format!(
            "costwatch backtest ({name}) run {}: {}",
            i + 1,
            r.summary()
        ));
        let stderr = dir.join(format!("stderr-{i}"));
        let log = std::fs::read_to_string(&stderr).map_err(|e| BenchError::setup("stderr", e))?;
        let want = windows_in(from, to, window);
        if windows_processed(&log) != Some(want) {
            return Err(BenchError::Setup(format!(
                "costwatch backtest ({name}) did not process the {want} windows of its range \
                 (see {})",
                stderr.display()
            )));
        }
        if i == 0 {
            let text =
                std::fs::read_to_string(&out).map_err(|e| BenchError::setup("findings", e))?;
            findings = super::read_jsonl_findings(&text).len();
        }
        runs.push(r);
    }
    Ok((runs, findings))
}

/// Runs `reference.py --window` over `[from, to)`, `runs` times.
fn references(
    opts: &SweepOptions,
    python: &Path,
    served: &Served,
    name: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    window: Duration,
    progress: &mut impl FnMut(&str),
) -> Result<Vec<TimeReport>, BenchError> {
    let dir = super::run_dir(&opts.workdir, name)?;
    let extra = ["--window".to_owned(), window.as_secs().to_string()];
    let mut runs = Vec::new();
    for i in 0..opts.runs {
        let r = super::reference_run(python, &opts.reference, served, (from, to), &extra, &dir, i)?;
        progress(&format!(
            "reference.py ({name}) run {}: {:.2} s CPU, {:.2} s wall",
            i + 1,
            r.cpu_secs(),
            r.wall_secs
        ));
        runs.push(r);
    }
    Ok(runs)
}

/// Runs the sweep and the long backtest; `progress` hears what is going on.
pub fn run(opts: &SweepOptions, mut progress: impl FnMut(&str)) -> Result<SweepReport, BenchError> {
    std::fs::create_dir_all(&opts.workdir).map_err(|e| BenchError::setup("work directory", e))?;
    progress(&format!(
        "generating {} days of the scenario at {} base sessions a day",
        opts.days, opts.per_day
    ));
    let served = serve_scenario(opts, opts.days, opts.per_day)?;
    progress(&format!(
        "simulator at {} ({} sessions, {} calls, generated in {:.1} s)",
        served.url, served.sessions, served.requests, served.generate_secs
    ));
    let span = range(opts, opts.days);
    let mut report = SweepReport {
        days: opts.days,
        sessions: served.sessions,
        requests: served.requests,
        points: Vec::new(),
        long: None,
        empty: Vec::new(),
    };
    for &window in &opts.windows {
        let label = humantime::format_duration(window).to_string();
        let (costwatch, findings) = backtests(
            opts,
            &served,
            &format!("sweep-{label}"),
            span,
            window,
            State::Memory,
            &mut progress,
        )?;
        let python = match &opts.python {
            Some(py) => references(
                opts,
                py,
                &served,
                &format!("sweep-py-{label}"),
                span,
                window,
                &mut progress,
            )?,
            None => Vec::new(),
        };
        report.points.push(SweepPoint {
            window,
            windows: windows_in(span.0, span.1, window),
            costwatch,
            findings,
            python,
        });
    }
    if let Some(&window) = opts.windows.iter().min()
        && opts.empty_days > 1
    {
        // A week after the served days, where every listing is empty.
        let from = span.1 + chrono::Duration::days(7);
        let range = |days: u32| (from, from + chrono::Duration::days(i64::from(days)));
        for state in [State::Memory, State::SqliteFile] {
            let mut measure = |days: u32| {
                let (from, to) = range(days);
                let name = format!("empty-{}-{days}d", state.short_name());
                backtests(
                    opts,
                    &served,
                    &name,
                    (from, to),
                    window,
                    state,
                    &mut progress,
                )
                .map(|(runs, _)| (windows_in(from, to, window), runs))
            };
            let short = measure(1)?;
            let long = measure(opts.empty_days)?;
            report.empty.push(EmptyWindows {
                state,
                window,
                long_days: opts.empty_days,
                short,
                long,
            });
        }
    }
    drop(served);
    if opts.long_days > 0 {
        progress(&format!(
            "generating {} days of the scenario at {} base sessions a day",
            opts.long_days, opts.long_per_day
        ));
        let served = serve_scenario(opts, opts.long_days, opts.long_per_day)?;
        progress(&format!(
            "simulator at {} ({} sessions, generated in {:.1} s)",
            served.url, served.sessions, served.generate_secs
        ));
        let span = range(opts, opts.long_days);
        let (runs, _) = backtests(
            opts,
            &served,
            "long",
            span,
            opts.long_window,
            State::Memory,
            &mut progress,
        )?;
        report.long = Some(LongRun {
            days: opts.long_days,
            window: opts.long_window,
            windows: windows_in(span.0, span.1, opts.long_window),
            sessions: served.sessions,
            runs,
        });
    }
    Ok(report)
}

fn fmt_window(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The sweep's tables and targets.
pub fn render_report(r: &SweepReport, markdown: bool) -> String {
    let mut out = format!(
        "{} days, {} sessions ({} calls), read with each window size\n\n",
        r.days, r.sessions, r.requests
    );
    let rows: Vec<Vec<String>> = r
        .points
        .iter()
        .map(|p| {
            let cw = p.costwatch_cpu();
            let py = p.python_cpu();
            let per_window = |cpu: f64| cpu * 1e3 / p.windows.max(1) as f64;
            vec![
                fmt_window(p.window),
                p.windows.to_string(),
                format!("{cw:.3}"),
                format!("{:.3}", per_window(cw)),
                format!("{:.1}", median_rss_mib(&p.costwatch)),
                p.findings.to_string(),
                if p.python.is_empty() {
                    "-".to_owned()
                } else {
                    format!("{py:.3}")
                },
                if p.python.is_empty() {
                    "-".to_owned()
                } else {
                    format!("{:.1}x", py / cw.max(1e-9))
                },
            ]
        })
        .collect();
    out.push_str(&render(
        &[
            "window",
            "windows",
            "costwatch CPU s",
            "CPU ms/window",
            "peak RSS MiB",
            "findings",
            "reference.py CPU s",
            "ratio python / costwatch",
        ],
        &rows,
        markdown,
    ));
    out.push('\n');
    if let Some((slope, intercept)) = r.slope() {
        out.push_str(&format!(
            "Fixed cost per window (least-squares slope of costwatch's CPU over the window count, {} sessions each time): {:.3} ms; the rest (intercept): {:.3} s.\n\n",
            r.sessions,
            slope * 1e3,
            intercept
        ));
    }
    if let Some(first) = r.empty.first() {
        out.push_str(&format!(
            "What a window costs whatever its sessions: backtests over 1 and {} days a week after the served range, where the gateway lists no session, with {} windows; CPU per window is the difference of the two over the difference of their window counts, so start-up cancels out.\n\n",
            first.long_days,
            fmt_window(first.window)
        ));
        let rows: Vec<Vec<String>> = r
            .empty
            .iter()
            .map(|e| {
                vec![
                    e.state.label().to_owned(),
                    e.short.0.to_string(),
                    format!("{:.2}", median_cpu(&e.short.1)),
                    e.long.0.to_string(),
                    format!("{:.2}", median_cpu(&e.long.1)),
                    e.ms_per_window()
                        .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.3}")),
                ]
            })
            .collect();
        out.push_str(&render(
            &[
                "state",
                "windows in 1 day",
                "CPU s",
                &format!("windows in {} days", first.long_days),
                "CPU s",
                "CPU ms/empty window",
            ],
            &rows,
            markdown,
        ));
        out.push('\n');
    }
    if let Some(l) = &r.long {
        let rows = vec![vec![
            format!(
                "{} days, {} windows, {} sessions",
                l.days,
                fmt_window(l.window),
                l.sessions
            ),
            l.windows.to_string(),
            l.runs.len().to_string(),
            format!("{:.2}", median_cpu(&l.runs)),
            format!(
                "{:.2}",
                median(&l.runs.iter().map(|t| t.wall_secs).collect::<Vec<_>>())
            ),
            format!("{:.1}", median_rss_mib(&l.runs)),
        ]];
        out.push_str(&render(
            &[
                "long backtest",
                "windows",
                "runs",
                "CPU s",
                "wall s",
                "peak RSS MiB",
            ],
            &rows,
            markdown,
        ));
        out.push('\n');
    }
    out.push_str(&targets_table(&targets(r), markdown));
    out
}

/// The targets for many small windows.
pub fn targets(r: &SweepReport) -> Vec<Target> {
    let mut out = Vec::new();
    for (window, want) in [
        (Duration::from_secs(900), 8.0),
        (Duration::from_secs(3600), 10.0),
    ] {
        if let Some(p) = r
            .points
            .iter()
            .find(|p| p.window == window && !p.python.is_empty())
        {
            let ratio = p.python_cpu() / p.costwatch_cpu().max(1e-9);
            out.push(Target {
                what: format!(
                    ">= {want:.0}x less CPU than reference.py with {} windows",
                    fmt_window(window)
                ),
                result: format!(
                    "{ratio:.1}x ({:.2} vs {:.2} s)",
                    p.python_cpu(),
                    p.costwatch_cpu()
                ),
                met: ratio >= want,
            });
        }
    }
    if let Some((slope, _)) = r.slope() {
        out.push(Target {
            what: "fixed cost per window <= 0.2 ms CPU".to_owned(),
            result: format!("{:.3} ms", slope * 1e3),
            met: slope * 1e3 <= 0.2,
        });
    }
    for e in &r.empty {
        if let Some(ms) = e.ms_per_window() {
            out.push(Target {
                what: format!("an empty window <= 0.2 ms CPU, state {}", e.state.label()),
                result: format!("{ms:.3} ms"),
                met: ms <= 0.2,
            });
        }
    }
    if let Some(l) = &r.long {
        let cpu = median_cpu(&l.runs);
        out.push(Target {
            what: format!(
                "backtest over {} days at {} windows in <= 15 s CPU",
                l.days,
                fmt_window(l.window)
            ),
            result: format!("{cpu:.2} s"),
            met: cpu <= 15.0,
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_its_cost_per_window() {
        let pts = [
            (8.0, 1.0 + 8.0 * 0.002),
            (192.0, 1.0 + 192.0 * 0.002),
            (576.0, 1.0 + 576.0 * 0.002),
        ];
        let (slope, intercept) = least_squares(&pts).unwrap();
        assert!((slope - 0.002).abs() < 1e-12);
        assert!((intercept - 1.0).abs() < 1e-9);
        assert!(least_squares(&pts[..1]).is_none());
        assert!(least_squares(&[(3.0, 1.0), (3.0, 2.0)]).is_none());
    }

    fn cpu(secs: f64) -> TimeReport {
        TimeReport {
            user_secs: secs * 0.25,
            sys_secs: secs * 0.75,
            ..TimeReport::default()
        }
    }

    fn empty(state: State, short: &[f64], long: &[f64]) -> EmptyWindows {
        EmptyWindows {
            state,
            window: Duration::from_secs(300),
            long_days: 8,
            short: (288, short.iter().copied().map(cpu).collect()),
            long: (2304, long.iter().copied().map(cpu).collect()),
        }
    }

    #[test]
    fn an_empty_window_costs_the_difference_of_two_ranges_per_window() {
        // What both ranges share (start-up) cancels, and the medians
        // ignore the outlying runs (0.5 s and 0.01 s): 0.2 s over 2,016
        // windows.
        let e = empty(State::Memory, &[0.05, 0.5, 0.05], &[0.25, 0.25, 0.01]);
        let ms = e.ms_per_window().unwrap();
        assert!((ms - 0.2 * 1e3 / 2016.0).abs() < 1e-9, "{ms}");
        let same = EmptyWindows {
            long: (288, vec![cpu(1.0)]),
            ..e
        };
        assert_eq!(same.ms_per_window(), None);
    }

    #[test]
    fn each_state_has_its_empty_window_target_and_row() {
        let report = SweepReport {
            days: 2,
            sessions: 0,
            requests: 0,
            points: Vec::new(),
            long: None,
            empty: vec![
                empty(State::Memory, &[0.03], &[0.15]),
                empty(State::SqliteFile, &[0.2], &[1.0]),
            ],
        };
        let t = targets(&report);
        assert_eq!(t.len(), 2);
        assert!(t[0].met && t[0].what.contains("in memory"), "{:?}", t[0]);
        assert_eq!(t[0].result, "0.060 ms");
        assert!(!t[1].met && t[1].what.contains("SQLite file"), "{:?}", t[1]);
        assert_eq!(t[1].result, "0.397 ms");
        let text = render_report(&report, true);
        assert!(text.contains("backtests over 1 and 8 days"), "{text}");
        assert!(text.contains("| SQLite file (as the daemon)"), "{text}");
    }

    #[test]
    fn windows_are_counted_over_the_range() {
        let (from, to) = (
            ScenarioParams::default().start,
            ScenarioParams::default().start + chrono::Duration::days(2),
        );
        assert_eq!(windows_in(from, to, Duration::from_secs(300)), 576);
        assert_eq!(windows_in(from, to, Duration::from_secs(900)), 192);
        assert_eq!(windows_in(from, to, Duration::from_secs(6 * 3600)), 8);
    }

    #[test]
    fn the_sweep_reads_a_range_that_has_ended_from_a_monday() {
        use chrono::Datelike;
        let p = scenario_params(7, 90, 10_000);
        assert_eq!(p.start.weekday(), chrono::Weekday::Mon);
        // Ended months before these benchmarks were first run from it
        // (2026-12-01); the sweep also fails if a backtest stops short.
        let ended = p.start + chrono::Duration::days(90);
        assert!(ended.to_rfc3339().as_str() < "2026-09-01", "{ended}");
    }

    #[test]
    fn the_processed_windows_come_from_the_last_summary_line() {
        let log = "backtest: 96 windows up to 2026-06-02 00:00:00 UTC, 98 findings\n\
                   WARN windows after the current time are not due yet\n\
                   backtest: 192 windows, 27883 session rows, 4009 drill-downs, 383 findings\n";
        assert_eq!(windows_processed(log), Some(192));
        assert_eq!(windows_processed("costwatch: no admin key\n"), None);
    }
}
