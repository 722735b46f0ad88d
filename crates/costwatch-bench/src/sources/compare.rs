//! A source served over HTTP beside the script a user would write for it.
//!
//! The simulator serves days of its scenario (the sweep's, by default two
//! days at 12,000 base sessions a day) from its own process, in the
//! source's wire format. `costwatch backtest` reads the range through that
//! source with 15-minute windows, and the script (the three static rules
//! over the same pages, grouped by session) reads it window by window too;
//! each runs under `/usr/bin/time -v` (CPU = user + system of the whole
//! process, peak RSS, as the kernel's `wait4` reports them). The script
//! must count every call of the range. Beside them runs the floor of the
//! path (`costwatch-bench fetch-pages`, [`crate::perf::floor`]): the pages
//! costwatch's source requests, fetched with its HTTP client and nothing
//! parsed but the paging fields; it must list every call of the range.
//! One more backtest runs under `perf record` for where its CPU goes.
//!
//! What differs from source to source is a [`ServedSource`]: its name, its
//! configuration and the script's arguments.

use super::profile::{self, HotSpot};
use crate::BenchError;
use crate::measure::{self, TimeReport};
use crate::perf::floor::{self, Fetched};
use crate::perf::sweep::{scenario_params, windows_processed};
use crate::perf::{
    Medians, Served, backtest_args, config_with_source, read_jsonl_findings, rfc, run_dir,
    serve_with,
};
use crate::quality::{Target, render, targets_table};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The targets: CPU per call, all in, and against the script at
/// 15-minute windows.
pub const MAX_US_PER_CALL: f64 = 12.0;
/// How many times less CPU than the script costwatch must use.
pub const MIN_RATIO: f64 = 8.0;

/// A source the simulator serves over HTTP, and how each reader is
/// pointed at it.
#[derive(Debug, Clone, Copy)]
pub struct ServedSource {
    /// The work folder's name (`litellm`).
    pub name: &'static str,
    /// The source as the tables name it (`LiteLLM`).
    pub title: &'static str,
    /// What a call is served as (`spend-log rows`).
    pub rows: &'static str,
    /// The configuration's `source` lines, given the simulator's root URL.
    pub config: fn(&str) -> String,
    /// The arguments before the range that the script and `fetch-pages`
    /// both take (the URL, a public key), given the simulator.
    pub reader_args: fn(&Served) -> Vec<String>,
    /// The environment variable the script takes the secret key from.
    pub script_key_env: &'static str,
}

/// What to measure and with which programs.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// Days of the scenario served.
    pub days: u32,
    /// Base sessions per day.
    pub per_day: u32,
    /// Scenario seed.
    pub seed: u64,
    /// The window size of both readers.
    pub window: Duration,
    /// Runs of each measured program (medians are reported).
    pub runs: usize,
    /// Whether to profile one more backtest with `perf`.
    pub profile: bool,
    /// The `costwatch` binary.
    pub costwatch: PathBuf,
    /// The `costwatch-bench` binary (for `serve`).
    pub bench: PathBuf,
    /// The Python interpreter with `requests`; `None` skips the script.
    pub python: Option<PathBuf>,
    /// The script (`crates/costwatch-bench/litellm.py`).
    pub script: PathBuf,
    /// The rules directory.
    pub rules: PathBuf,
    /// Where configs, outputs and reports go.
    pub workdir: PathBuf,
}

impl SourceOptions {
    /// The scenario's days: `[from, to)`.
    pub fn range(&self) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
        let from = scenario_params(self.seed, self.days, self.per_day).start;
        (from, from + chrono::Duration::days(i64::from(self.days)))
    }

    /// Windows of [`SourceOptions::window`] in the range.
    pub fn windows(&self) -> usize {
        let (from, to) = self.range();
        ((to - from).num_seconds().max(0) as u64).div_ceil(self.window.as_secs().max(1)) as usize
    }

    /// The script's file name.
    fn script_name(&self) -> String {
        self.script.file_name().map_or_else(
            || self.script.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }
}

/// What was measured.
#[derive(Debug, Clone)]
pub struct SourceReport {
    /// The source as the tables name it.
    pub title: &'static str,
    /// What a call is served as.
    pub rows: &'static str,
    /// The script's file name.
    pub script: String,
    /// Days served.
    pub days: u32,
    /// Sessions served.
    pub sessions: usize,
    /// Calls served.
    pub calls: usize,
    /// The window size.
    pub window: Duration,
    /// Windows in the range.
    pub windows: usize,
    /// `costwatch backtest` runs.
    pub costwatch: Vec<TimeReport>,
    /// Findings of the first backtest.
    pub findings: usize,
    /// `fetch-pages` runs: the same pages, nothing parsed (the floor).
    pub floor: Vec<TimeReport>,
    /// What the first of them fetched.
    pub floor_fetched: Fetched,
    /// Script runs.
    pub python: Vec<TimeReport>,
    /// The summary line of the first script run (`148697 calls: ...`).
    pub python_summary: Option<String>,
    /// The backtest's functions with the most samples of their own.
    pub hot_spots: Vec<HotSpot>,
}

impl SourceReport {
    /// Microseconds of CPU per call of `runs`' median.
    pub fn us_per_call(&self, runs: &[TimeReport]) -> f64 {
        Medians::of(runs).cpu_secs * 1e6 / self.calls.max(1) as f64
    }

    /// How many times more CPU the script used than costwatch.
    pub fn ratio(&self) -> Option<f64> {
        self.script_over(&self.costwatch)
    }

    /// How many times more CPU the script used than the floor.
    pub fn floor_ratio(&self) -> Option<f64> {
        self.script_over(&self.floor)
    }

    /// The script's median CPU over that of `runs`, when both ran.
    fn script_over(&self, runs: &[TimeReport]) -> Option<f64> {
        (!self.python.is_empty() && !runs.is_empty())
            .then(|| Medians::of(&self.python).cpu_secs / Medians::of(runs).cpu_secs.max(1e-9))
    }
}

/// Whether the floor listed the `in_range` calls of the range, each once.
pub fn listed_every_call(f: &Fetched, in_range: u64) -> Result<(), String> {
    match f.rows {
        Some(rows) if rows == in_range => Ok(()),
        rows => Err(format!(
            "listed {} calls, not the {in_range} of the range",
            rows.map_or("uncounted".to_owned(), |r| r.to_string())
        )),
    }
}

/// The calls a script's summary line counts (`148645 calls: ...`).
pub fn calls_counted(summary: &str) -> Option<usize> {
    summary.split_once(" calls")?.0.trim().parse().ok()
}

/// Serves the scenario as `source`, runs both readers and the profile.
pub fn run(
    source: &ServedSource,
    opts: &SourceOptions,
    mut progress: impl FnMut(&str),
) -> Result<SourceReport, BenchError> {
    let dir = run_dir(&opts.workdir, source.name)?;
    progress(&format!(
        "generating {} days of the scenario at {} base sessions a day",
        opts.days, opts.per_day
    ));
    let served = serve_with(
        &opts.bench,
        &[
            "--scenario-days".to_owned(),
            opts.days.to_string(),
            "--per-day".to_owned(),
            opts.per_day.to_string(),
            "--seed".to_owned(),
            opts.seed.to_string(),
        ],
    )?;
    let root = served.root_url().to_owned();
    progress(&format!(
        "{} at {root} ({} sessions, {} calls, {} in the range)",
        source.title, served.sessions, served.requests, served.in_range
    ));
    let (from, to) = opts.range();
    let windows = opts.windows();
    let config = dir.join("costwatch.yaml");
    let yaml = window_config(
        &(source.config)(&root),
        &opts.rules,
        &dir.join("unused.db"),
        opts.window,
    );
    std::fs::write(&config, yaml).map_err(|e| BenchError::setup("config", e))?;
    let args = backtest_args(&config, (from, to));
    let env = [
        ("COSTWATCH_ADMIN_KEY", served.admin_key.as_str()),
        (source.script_key_env, served.admin_key.as_str()),
    ];
    let mut report = SourceReport {
        title: source.title,
        rows: source.rows,
        script: opts.script_name(),
        days: opts.days,
        sessions: served.sessions,
        calls: served.requests,
        window: opts.window,
        windows,
        costwatch: Vec::new(),
        findings: 0,
        floor: Vec::new(),
        floor_fetched: Fetched::default(),
        python: Vec::new(),
        python_summary: None,
        hot_spots: Vec::new(),
    };
    let (costwatch, findings) = backtests(
        &opts.costwatch,
        &args,
        &env,
        opts.runs,
        windows,
        &dir,
        &mut progress,
    )?;
    report.costwatch = costwatch;
    report.findings = findings;
    let mut floor_args = vec![
        "fetch-pages".to_owned(),
        "--source".to_owned(),
        source.name.to_owned(),
    ];
    floor_args.extend((source.reader_args)(&served));
    floor_args.extend([
        "--from".to_owned(),
        rfc(from),
        "--to".to_owned(),
        rfc(to),
        "--window".to_owned(),
        humantime::format_duration(opts.window).to_string(),
    ]);
    let in_range = served.in_range as u64;
    (report.floor, report.floor_fetched) = floor::timed_runs(
        &opts.bench,
        &floor_args,
        &env,
        opts.runs,
        &run_dir(&opts.workdir, &format!("{}-floor", source.name))?,
        &mut progress,
        |f| listed_every_call(f, in_range),
    )?;
    if let Some(python) = &opts.python {
        let py_dir = run_dir(&opts.workdir, &format!("{}-py", source.name))?;
        let mut args = vec![opts.script.display().to_string()];
        args.extend((source.reader_args)(&served));
        args.extend([
            "--start".to_owned(),
            rfc(from),
            "--end".to_owned(),
            rfc(to),
            "--window".to_owned(),
            opts.window.as_secs().to_string(),
        ]);
        for i in 0..opts.runs {
            let stdout = py_dir.join(format!("stdout-{i}"));
            let r = measure::timed(
                python,
                &args,
                &env,
                &stdout,
                &py_dir.join(format!("stderr-{i}")),
            )?;
            progress(&format!("{} run {}: {}", report.script, i + 1, r.summary()));
            if i == 0 {
                let text = std::fs::read_to_string(&stdout)
                    .map_err(|e| BenchError::setup("script output", e))?;
                let summary = text.lines().next().unwrap_or_default().to_owned();
                if calls_counted(&summary) != Some(served.in_range) {
                    return Err(BenchError::Setup(format!(
                        "{} did not read the {} calls of the range: `{summary}`",
                        report.script, served.in_range
                    )));
                }
                report.python_summary = Some(summary);
            }
            report.python.push(r);
        }
    }
    if opts.profile {
        report.hot_spots = profile_backtest(&opts.costwatch, &args, &env, &dir, &mut progress)?;
    }
    Ok(report)
}

/// A configuration with `source` (its indented lines) read with windows
/// of `window`.
pub fn window_config(source: &str, rules: &Path, state: &Path, window: Duration) -> String {
    config_with_source(source, rules, state, "").replace(
        "size: 1h",
        &format!("size: {}", humantime::format_duration(window)),
    )
}

/// Runs `costwatch args` `runs` times under `/usr/bin/time -v`, checking
/// that each processed the range's `windows`; returns the runs and the
/// findings of the first.
pub fn backtests(
    costwatch: &Path,
    args: &[String],
    env: &[(&str, &str)],
    runs: usize,
    windows: usize,
    dir: &Path,
    progress: &mut impl FnMut(&str),
) -> Result<(Vec<TimeReport>, usize), BenchError> {
    let mut out_runs = Vec::new();
    let mut findings = 0;
    for i in 0..runs.max(1) {
        let out = dir.join(format!("findings-{i}.jsonl"));
        let stderr = dir.join(format!("stderr-{i}"));
        let r = measure::timed(costwatch, args, env, &out, &stderr)?;
        progress(&format!(
            "costwatch backtest run {}: {}",
            i + 1,
            r.summary()
        ));
        let log = std::fs::read_to_string(&stderr).map_err(|e| BenchError::setup("stderr", e))?;
        if windows_processed(&log) != Some(windows) {
            return Err(BenchError::Setup(format!(
                "costwatch backtest did not process the {windows} windows of its range (see {})",
                stderr.display()
            )));
        }
        if i == 0 {
            let text =
                std::fs::read_to_string(&out).map_err(|e| BenchError::setup("findings", e))?;
            findings = read_jsonl_findings(&text).len();
        }
        out_runs.push(r);
    }
    Ok((out_runs, findings))
}

/// The hot spots of one more backtest, or none when perf is missing.
pub fn profile_backtest(
    costwatch: &Path,
    args: &[String],
    env: &[(&str, &str)],
    dir: &Path,
    progress: &mut impl FnMut(&str),
) -> Result<Vec<HotSpot>, BenchError> {
    if profile::available() {
        progress("profiling one more backtest with perf record");
        profile::hot_spots(costwatch, args, env, dir, 12)
    } else {
        progress("perf is not installed: no profile (apt-get install linux-perf)");
        Ok(Vec::new())
    }
}

/// The report as text or Markdown: the figures, the targets, the hot spots.
pub fn render_report(r: &SourceReport, markdown: bool) -> String {
    let window = humantime::format_duration(r.window).to_string();
    let mut out = format!(
        "{} days, {} sessions ({} calls as {}), read with {window} windows ({} windows)\n\n",
        r.days, r.sessions, r.calls, r.rows, r.windows
    );
    let row = |name: &str, runs: &[TimeReport], findings: String| {
        let m = Medians::of(runs);
        vec![
            name.to_owned(),
            runs.len().to_string(),
            format!("{:.2}", m.cpu_secs),
            format!("{:.2}", m.wall_secs),
            format!("{:.1}", r.us_per_call(runs)),
            format!("{:.1}", m.max_rss_mib),
            findings,
        ]
    };
    let mut rows = vec![row(
        &format!("costwatch backtest ({} source)", r.title),
        &r.costwatch,
        format!("{} findings", r.findings),
    )];
    if !r.floor.is_empty() {
        let f = &r.floor_fetched;
        rows.push(row(
            FLOOR_ROW,
            &r.floor,
            format!(
                "{} pages, {:.0} MB, {} calls listed",
                f.pages,
                f.bytes as f64 / 1e6,
                f.rows.unwrap_or(0)
            ),
        ));
    }
    if !r.python.is_empty() {
        rows.push(row(
            &r.script,
            &r.python,
            r.python_summary.clone().unwrap_or_default(),
        ));
    }
    out.push_str(&render(
        &[
            "program",
            "runs",
            "CPU s",
            "wall s",
            "CPU us/call",
            "peak RSS MiB",
            "output",
        ],
        &rows,
        markdown,
    ));
    out.push('\n');
    out.push_str(&targets_table(&targets(r), markdown));
    out.push_str(&profile::render_hot_spots(&r.hot_spots, markdown));
    out
}

/// The table's row of the floor.
pub const FLOOR_ROW: &str = "fetch-pages: the same pages, nothing parsed (the floor)";

/// The targets for a source served over HTTP, each beside the
/// floor of the path, and what the floor allows of the ratio.
pub fn targets(r: &SourceReport) -> Vec<Target> {
    let mut out = Vec::new();
    let window = humantime::format_duration(r.window).to_string();
    let floor = (!r.floor.is_empty()).then(|| Medians::of(&r.floor).cpu_secs);
    if let Some(ratio) = r.ratio() {
        let alone = floor.map_or(String::new(), |s| {
            format!("; fetching the pages alone: {s:.2} s")
        });
        out.push(Target {
            what: format!(
                ">= {MIN_RATIO:.0}x less CPU than {} with {window} windows",
                r.script
            ),
            result: format!(
                "{ratio:.1}x ({:.2} vs {:.2} s{alone})",
                Medians::of(&r.python).cpu_secs,
                Medians::of(&r.costwatch).cpu_secs
            ),
            met: ratio >= MIN_RATIO,
        });
    }
    if let Some(allows) = r.floor_ratio() {
        let above = r.us_per_call(&r.costwatch) - r.us_per_call(&r.floor);
        out.push(Target {
            what: format!(
                "the floor allows >= {MIN_RATIO:.0}x less CPU than {}",
                r.script
            ),
            result: format!(
                "the floor alone is {allows:.1}x less CPU than the script; costwatch above \
                 the floor: {above:.1} us per call"
            ),
            met: allows >= MIN_RATIO,
        });
    }
    let us = r.us_per_call(&r.costwatch);
    let alone = if r.floor.is_empty() {
        String::new()
    } else {
        format!(
            " (fetching the pages alone: {:.1} us)",
            r.us_per_call(&r.floor)
        )
    };
    out.push(Target {
        what: format!("<= {MAX_US_PER_CALL:.0} us of CPU per call, all in"),
        result: format!("{us:.1} us{alone}"),
        met: us <= MAX_US_PER_CALL,
    });
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn run(cpu: f64) -> TimeReport {
        TimeReport {
            user_secs: cpu,
            sys_secs: 0.0,
            wall_secs: cpu,
            max_rss_kib: 1024,
            exit_status: 0,
        }
    }

    fn report(costwatch: f64, python: f64) -> SourceReport {
        SourceReport {
            title: "LiteLLM",
            rows: "spend-log rows",
            script: "litellm.py".into(),
            days: 2,
            sessions: 10,
            calls: 100_000,
            window: Duration::from_secs(900),
            windows: 192,
            costwatch: vec![run(costwatch)],
            findings: 3,
            floor: Vec::new(),
            floor_fetched: Fetched::default(),
            python: vec![run(python)],
            python_summary: Some("100000 calls: no_cache 1".into()),
            hot_spots: Vec::new(),
        }
    }

    fn with_floor(mut r: SourceReport, floor: f64) -> SourceReport {
        r.floor = vec![run(floor)];
        r.floor_fetched = Fetched {
            pages: 385,
            bytes: 250_000_000,
            rows: Some(100_000),
        };
        r
    }

    #[test]
    fn the_targets_are_per_call_and_against_the_script() {
        let met = targets(&report(1.0, 9.0));
        assert_eq!(met.len(), 2);
        assert!(met.iter().all(|t| t.met), "{met:?}");
        assert_eq!(met[1].result, "10.0 us");
        assert!(met[0].what.contains("than litellm.py"), "{met:?}");
        let missed = targets(&report(1.3, 9.0));
        assert!(!missed[0].met && !missed[1].met, "{missed:?}");
        let text = render_report(&report(1.0, 9.0), true);
        assert!(
            text.contains("| costwatch backtest (LiteLLM source) |"),
            "{text}"
        );
        assert!(text.contains("100000 calls as spend-log rows"), "{text}");
        assert!(text.contains("9.0x"), "{text}");
    }

    #[test]
    fn the_floor_stands_beside_the_ratio_and_says_what_it_allows() {
        // costwatch 1.3 s, the script 9 s, the floor 0.5 s: 6.9x not met,
        // though the floor alone is 18x less CPU than the script.
        let reachable = targets(&with_floor(report(1.3, 9.0), 0.5));
        assert_eq!(reachable.len(), 3, "{reachable:?}");
        assert_eq!(
            reachable[0].result,
            "6.9x (9.00 vs 1.30 s; fetching the pages alone: 0.50 s)"
        );
        assert!(!reachable[0].met);
        assert_eq!(
            reachable[1].what,
            "the floor allows >= 8x less CPU than litellm.py"
        );
        assert_eq!(
            reachable[1].result,
            "the floor alone is 18.0x less CPU than the script; costwatch above the floor: \
             8.0 us per call"
        );
        assert!(reachable[1].met);
        assert_eq!(
            reachable[2].result,
            "13.0 us (fetching the pages alone: 5.0 us)"
        );
        // A floor of 2 s leaves 8x out of reach on this path.
        let out_of_reach = targets(&with_floor(report(1.3, 9.0), 2.0));
        assert!(
            out_of_reach[1]
                .result
                .starts_with("the floor alone is 4.5x"),
            "{out_of_reach:?}"
        );
        assert!(!out_of_reach[1].met);
        let text = render_report(&with_floor(report(1.3, 9.0), 0.5), true);
        let row = text
            .lines()
            .find(|l| l.contains(FLOOR_ROW))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            row.contains("| 385 pages, 250 MB, 100000 calls listed |"),
            "{row}"
        );
        assert!(
            text.contains("| NOT met |") && text.contains("| met "),
            "{text}"
        );
    }

    #[test]
    fn the_floor_must_list_every_call_of_the_range_once() {
        let fetched = |rows| Fetched {
            pages: 396,
            bytes: 1,
            rows,
        };
        assert_eq!(listed_every_call(&fetched(Some(148_645)), 148_645), Ok(()));
        let err = listed_every_call(&fetched(Some(148_646)), 148_645).unwrap_err();
        assert_eq!(err, "listed 148646 calls, not the 148645 of the range");
        assert!(listed_every_call(&fetched(None), 1).is_err());
    }

    #[test]
    fn a_summary_line_counts_the_calls_read() {
        assert_eq!(
            calls_counted("148645 calls: no_cache 11785, retry_loop 3332"),
            Some(148_645)
        );
        assert_eq!(calls_counted("Traceback (most recent call last):"), None);
        assert_eq!(calls_counted(""), None);
    }

    #[test]
    fn a_window_config_reads_the_source_at_that_window_size() {
        let yaml = window_config(
            "  kind: otlp_files\n  path: /t\n",
            Path::new("rules"),
            Path::new("s.db"),
            Duration::from_secs(900),
        );
        assert!(
            yaml.starts_with("source:\n  kind: otlp_files\n  path: /t\nwindows:\n  size: 15m\n"),
            "{yaml}"
        );
    }
}
