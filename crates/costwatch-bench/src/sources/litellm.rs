//! The LiteLLM source beside `crates/costwatch-bench/litellm.py`.
//!
//! The simulator serves days of its scenario (the sweep's, by default two
//! days at 12,000 base sessions a day) as a LiteLLM proxy's spend logs
//! from its own process. `costwatch backtest` reads the range through its
//! LiteLLM source with 15-minute windows, and `litellm.py` (the three
//! static rules over the same pages of 1,000 rows, grouped by
//! `session_id`) reads it window by window too; each runs under
//! `/usr/bin/time -v` (CPU = user + system of the whole process, peak RSS,
//! as the kernel's `wait4` reports them). One more backtest runs under
//! `perf record` for where its CPU goes.

use super::profile::{self, HotSpot};
use crate::BenchError;
use crate::measure::{self, TimeReport};
use crate::perf::sweep::{scenario_params, windows_processed};
use crate::perf::{
    Medians, backtest_args, config_yaml, read_jsonl_findings, rfc, run_dir, serve_with,
};
use crate::quality::{Target, render, targets_table};
use std::path::PathBuf;
use std::time::Duration;

/// The targets: CPU per call, all in, and against the script at
/// 15-minute windows.
pub const MAX_US_PER_CALL: f64 = 12.0;
/// How many times less CPU than `litellm.py` costwatch must use.
pub const MIN_RATIO: f64 = 8.0;

/// What to measure and with which programs.
#[derive(Debug, Clone)]
pub struct LitellmOptions {
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
    /// `crates/costwatch-bench/litellm.py`.
    pub script: PathBuf,
    /// The rules directory.
    pub rules: PathBuf,
    /// Where configs, outputs and reports go.
    pub workdir: PathBuf,
}

/// What was measured.
#[derive(Debug, Clone)]
pub struct LitellmReport {
    /// Days served.
    pub days: u32,
    /// Sessions served.
    pub sessions: usize,
    /// Calls served: the rows of the spend log.
    pub calls: usize,
    /// The window size.
    pub window: Duration,
    /// Windows in the range.
    pub windows: usize,
    /// `costwatch backtest` runs.
    pub costwatch: Vec<TimeReport>,
    /// Findings of the first backtest.
    pub findings: usize,
    /// `litellm.py` runs.
    pub python: Vec<TimeReport>,
    /// The summary line of the first script run (`148697 calls: ...`).
    pub python_summary: Option<String>,
    /// The backtest's functions with the most samples of their own.
    pub hot_spots: Vec<HotSpot>,
}

impl LitellmReport {
    /// Microseconds of CPU per call of `runs`' median.
    pub fn us_per_call(&self, runs: &[TimeReport]) -> f64 {
        Medians::of(runs).cpu_secs * 1e6 / self.calls.max(1) as f64
    }

    /// How many times more CPU the script used than costwatch.
    pub fn ratio(&self) -> Option<f64> {
        (!self.python.is_empty()).then(|| {
            Medians::of(&self.python).cpu_secs / Medians::of(&self.costwatch).cpu_secs.max(1e-9)
        })
    }
}

/// Serves the scenario, runs both readers and the profile.
pub fn run(
    opts: &LitellmOptions,
    mut progress: impl FnMut(&str),
) -> Result<LitellmReport, BenchError> {
    let dir = run_dir(&opts.workdir, "litellm")?;
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
    let proxy = served.litellm_url().to_owned();
    progress(&format!(
        "LiteLLM proxy at {proxy} ({} sessions, {} calls)",
        served.sessions, served.requests
    ));
    let from = scenario_params(opts.seed, opts.days, opts.per_day).start;
    let to = from + chrono::Duration::days(i64::from(opts.days));
    let windows =
        ((to - from).num_seconds().max(0) as u64).div_ceil(opts.window.as_secs().max(1)) as usize;
    let config = dir.join("costwatch.yaml");
    let yaml = config_yaml(&proxy, &opts.rules, &dir.join("unused.db"), "")
        .replacen("source:\n", "source:\n  kind: litellm\n", 1)
        .replace(
            "size: 1h",
            &format!("size: {}", humantime::format_duration(opts.window)),
        );
    std::fs::write(&config, yaml).map_err(|e| BenchError::setup("config", e))?;
    let args = backtest_args(&config, (from, to));
    let env = [("COSTWATCH_ADMIN_KEY", served.admin_key.as_str())];
    let mut report = LitellmReport {
        days: opts.days,
        sessions: served.sessions,
        calls: served.requests,
        window: opts.window,
        windows,
        costwatch: Vec::new(),
        findings: 0,
        python: Vec::new(),
        python_summary: None,
        hot_spots: Vec::new(),
    };
    for i in 0..opts.runs {
        let out = dir.join(format!("findings-{i}.jsonl"));
        let stderr = dir.join(format!("stderr-{i}"));
        let r = measure::timed(&opts.costwatch, &args, &env, &out, &stderr)?;
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
            report.findings = read_jsonl_findings(&text).len();
        }
        report.costwatch.push(r);
    }
    if let Some(python) = &opts.python {
        let py_dir = run_dir(&opts.workdir, "litellm-py")?;
        let args = vec![
            opts.script.display().to_string(),
            "--url".to_owned(),
            proxy.clone(),
            "--start".to_owned(),
            rfc(from),
            "--end".to_owned(),
            rfc(to),
            "--window".to_owned(),
            opts.window.as_secs().to_string(),
        ];
        for i in 0..opts.runs {
            let stdout = py_dir.join(format!("stdout-{i}"));
            let r = measure::timed(
                python,
                &args,
                &env,
                &stdout,
                &py_dir.join(format!("stderr-{i}")),
            )?;
            progress(&format!("litellm.py run {}: {}", i + 1, r.summary()));
            if i == 0 {
                let text = std::fs::read_to_string(&stdout)
                    .map_err(|e| BenchError::setup("litellm.py output", e))?;
                report.python_summary = text.lines().next().map(str::to_owned);
            }
            report.python.push(r);
        }
    }
    if opts.profile {
        if profile::available() {
            progress("profiling one more backtest with perf record");
            report.hot_spots = profile::hot_spots(&opts.costwatch, &args, &env, &dir, 12)?;
        } else {
            progress("perf is not installed: no profile (apt-get install linux-perf)");
        }
    }
    Ok(report)
}

/// The report as text or Markdown: the figures, the targets, the hot spots.
pub fn render_report(r: &LitellmReport, markdown: bool) -> String {
    let window = humantime::format_duration(r.window).to_string();
    let mut out = format!(
        "{} days, {} sessions ({} calls as spend-log rows), read with {window} windows ({} windows)\n\n",
        r.days, r.sessions, r.calls, r.windows
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
        "costwatch backtest (LiteLLM source)",
        &r.costwatch,
        format!("{} findings", r.findings),
    )];
    if !r.python.is_empty() {
        rows.push(row(
            "litellm.py",
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
    if !r.hot_spots.is_empty() {
        out.push_str(&format!(
            "\nWhere costwatch's CPU goes (`perf record` of one more backtest; each function's own samples, top {}):\n\n",
            r.hot_spots.len()
        ));
        let rows: Vec<Vec<String>> = r
            .hot_spots
            .iter()
            .map(|h| {
                vec![
                    format!("{:.1}%", h.percent),
                    h.object.clone(),
                    if markdown {
                        format!("`{}`", h.symbol)
                    } else {
                        h.symbol.clone()
                    },
                ]
            })
            .collect();
        out.push_str(&render(&["self", "object", "function"], &rows, markdown));
    }
    out
}

/// The targets for the LiteLLM source.
pub fn targets(r: &LitellmReport) -> Vec<Target> {
    let mut out = Vec::new();
    let window = humantime::format_duration(r.window).to_string();
    if let Some(ratio) = r.ratio() {
        out.push(Target {
            what: format!(">= {MIN_RATIO:.0}x less CPU than litellm.py with {window} windows"),
            result: format!(
                "{ratio:.1}x ({:.2} vs {:.2} s)",
                Medians::of(&r.python).cpu_secs,
                Medians::of(&r.costwatch).cpu_secs
            ),
            met: ratio >= MIN_RATIO,
        });
    }
    let us = r.us_per_call(&r.costwatch);
    out.push(Target {
        what: format!("<= {MAX_US_PER_CALL:.0} us of CPU per call, all in"),
        result: format!("{us:.1} us"),
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

    fn report(costwatch: f64, python: f64) -> LitellmReport {
        LitellmReport {
            days: 2,
            sessions: 10,
            calls: 100_000,
            window: Duration::from_secs(900),
            windows: 192,
            costwatch: vec![run(costwatch)],
            findings: 3,
            python: vec![run(python)],
            python_summary: Some("100000 calls: no_cache 1".into()),
            hot_spots: Vec::new(),
        }
    }

    #[test]
    fn the_targets_are_per_call_and_against_the_script() {
        let met = targets(&report(1.0, 9.0));
        assert_eq!(met.len(), 2);
        assert!(met.iter().all(|t| t.met), "{met:?}");
        assert_eq!(met[1].result, "10.0 us");
        let missed = targets(&report(1.3, 9.0));
        assert!(!missed[0].met && !missed[1].met, "{missed:?}");
        let text = render_report(&report(1.0, 9.0), true);
        assert!(
            text.contains("| costwatch backtest (LiteLLM source) |"),
            "{text}"
        );
        assert!(text.contains("9.0x"), "{text}");
    }
}
