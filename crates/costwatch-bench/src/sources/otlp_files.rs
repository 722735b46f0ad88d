//! The OTLP files source over a Collector file exporter's folder, and its
//! memory as the folder grows.
//!
//! The simulator writes days of the scenario (the sweep's, by default two
//! days at 12,000 base sessions a day) as OpenTelemetry GenAI spans, in
//! export requests of 512 spans as a batch span processor sends them,
//! into a folder as the Collector's file exporter writes them
//! (`format: json`, one request per line, rotated at 100 MB by default:
//! `costwatch_sim::otlp::write_json_lines`). `costwatch backtest` with
//! `source.kind: otlp_files` reads the range with 15-minute windows under
//! `/usr/bin/time -v` (CPU = user + system of the whole process, peak
//! RSS). The same is done again over folders of the same scenario two and
//! four times as long, to show whether memory stays flat as the folder
//! grows. Each folder is deleted once measured.

use super::compare::{backtests, profile_backtest, window_config};
use super::profile::{self, HotSpot};
use crate::BenchError;
use crate::measure::TimeReport;
use crate::perf::sweep::scenario_params;
use crate::perf::{Medians, backtest_args, run_dir};
use crate::quality::{Target, render, targets_table};
use costwatch_sim::otlp::{export_requests, write_json_lines};
use std::path::PathBuf;
use std::time::Duration;

/// The target: peak RSS over the 2-day folder, in MB.
pub const MAX_RSS_MB: f64 = 100.0;
/// How much more the peak RSS over the longest folder may be than over
/// the first, and still count as flat.
pub const MAX_GROWTH: f64 = 1.2;
/// Spans per export request, as a batch span processor sends them.
pub const SPANS_PER_REQUEST: usize = 512;

/// What to measure and with which programs.
#[derive(Debug, Clone)]
pub struct FilesOptions {
    /// Days of the scenario in the first folder.
    pub days: u32,
    /// Base sessions per day.
    pub per_day: u32,
    /// Scenario seed.
    pub seed: u64,
    /// The window size.
    pub window: Duration,
    /// How many times as long each folder is as the first (`1, 2, 4`).
    pub multiples: Vec<u32>,
    /// Megabytes a file grows to before the exporter rotates it.
    pub file_megabytes: u64,
    /// Runs of the backtest over each folder (medians are reported).
    pub runs: usize,
    /// Whether to profile one more backtest over the first folder.
    pub profile: bool,
    /// The `costwatch` binary.
    pub costwatch: PathBuf,
    /// The rules directory.
    pub rules: PathBuf,
    /// Where configs, folders and reports go.
    pub workdir: PathBuf,
}

/// The backtests over one folder.
#[derive(Debug, Clone)]
pub struct FolderRun {
    /// How many times as long as the first folder.
    pub multiple: u32,
    /// Days of the scenario it holds.
    pub days: u32,
    /// Calls (spans) it holds.
    pub calls: usize,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its files.
    pub files: usize,
    /// Windows in its range.
    pub windows: usize,
    /// `costwatch backtest` runs.
    pub runs: Vec<TimeReport>,
    /// Findings of the first run.
    pub findings: usize,
}

impl FolderRun {
    /// Microseconds of CPU per call, of the runs' median.
    pub fn us_per_call(&self) -> f64 {
        Medians::of(&self.runs).cpu_secs * 1e6 / self.calls.max(1) as f64
    }

    /// The median peak RSS in MB (10^6 bytes).
    pub fn rss_mb(&self) -> f64 {
        Medians::of(&self.runs).max_rss_mib * 1_048_576.0 / 1e6
    }
}

/// What was measured.
#[derive(Debug, Clone)]
pub struct FilesReport {
    /// The window size.
    pub window: Duration,
    /// Base sessions per day.
    pub per_day: u32,
    /// Megabytes per file before rotation.
    pub file_megabytes: u64,
    /// One entry per folder, the first folder first.
    pub folders: Vec<FolderRun>,
    /// The first folder's backtest's functions with the most samples of
    /// their own.
    pub hot_spots: Vec<HotSpot>,
}

/// Writes each folder, reads it with backtests, and profiles the first.
pub fn run(opts: &FilesOptions, mut progress: impl FnMut(&str)) -> Result<FilesReport, BenchError> {
    let dir = run_dir(&opts.workdir, "otlp-files")?;
    let mut report = FilesReport {
        window: opts.window,
        per_day: opts.per_day,
        file_megabytes: opts.file_megabytes,
        folders: Vec::new(),
        hot_spots: Vec::new(),
    };
    for (i, &multiple) in opts.multiples.iter().enumerate() {
        let days = opts.days * multiple;
        progress(&format!(
            "writing {days} days of the scenario at {} base sessions a day as Collector files",
            opts.per_day
        ));
        let params = scenario_params(opts.seed, days, opts.per_day);
        let from = params.start;
        let to = from + chrono::Duration::days(i64::from(days));
        let dataset = costwatch_sim::scenario::generate(&params);
        let calls = dataset.requests_in(from, to, &[], None).len();
        let requests = export_requests(&dataset, from, to, SPANS_PER_REQUEST);
        drop(dataset);
        let line_bytes = requests
            .first()
            .and_then(|r| serde_json::to_vec(r).ok())
            .map_or(1, |v| v.len() + 1);
        let per_file = (opts.file_megabytes * 1_000_000 / line_bytes as u64).max(1) as usize;
        let folder = dir.join(format!("traces-{multiple}x"));
        let _ = std::fs::remove_dir_all(&folder);
        let paths = write_json_lines(&folder, &requests, per_file)
            .map_err(|e| BenchError::setup("writing the Collector files", e))?;
        drop(requests);
        let bytes = paths
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        progress(&format!(
            "{} calls in {} files, {:.0} MB, at {}",
            calls,
            paths.len(),
            bytes as f64 / 1e6,
            folder.display()
        ));
        let windows = ((to - from).num_seconds().max(0) as u64)
            .div_ceil(opts.window.as_secs().max(1)) as usize;
        let run_dir = run_dir(&dir, &format!("run-{multiple}x"))?;
        let config = run_dir.join("costwatch.yaml");
        let source = format!("  kind: otlp_files\n  path: {}\n", folder.display());
        let yaml = window_config(
            &source,
            &opts.rules,
            &run_dir.join("unused.db"),
            opts.window,
        );
        std::fs::write(&config, yaml).map_err(|e| BenchError::setup("config", e))?;
        let args = backtest_args(&config, (from, to));
        let (runs, findings) = backtests(
            &opts.costwatch,
            &args,
            &[],
            opts.runs,
            windows,
            &run_dir,
            &mut progress,
        )?;
        if i == 0 && opts.profile {
            report.hot_spots =
                profile_backtest(&opts.costwatch, &args, &[], &run_dir, &mut progress)?;
        }
        let _ = std::fs::remove_dir_all(&folder);
        report.folders.push(FolderRun {
            multiple,
            days,
            calls,
            bytes,
            files: paths.len(),
            windows,
            runs,
            findings,
        });
    }
    Ok(report)
}

/// The report as text or Markdown: each folder, the targets, the hot spots.
pub fn render_report(r: &FilesReport, markdown: bool) -> String {
    let window = humantime::format_duration(r.window).to_string();
    let mut out = format!(
        "The scenario at {} base sessions a day as Collector files (rotated at {} MB), read with {window} windows\n\n",
        r.per_day, r.file_megabytes
    );
    let rows: Vec<Vec<String>> = r
        .folders
        .iter()
        .map(|f| {
            let m = Medians::of(&f.runs);
            vec![
                format!("{}x: {} days", f.multiple, f.days),
                f.calls.to_string(),
                format!("{:.0} MB in {}", f.bytes as f64 / 1e6, f.files),
                f.windows.to_string(),
                f.runs.len().to_string(),
                format!("{:.2}", m.cpu_secs),
                format!("{:.2}", m.wall_secs),
                format!("{:.1}", f.us_per_call()),
                format!("{:.1}", m.max_rss_mib),
                f.findings.to_string(),
            ]
        })
        .collect();
    out.push_str(&render(
        &[
            "folder",
            "calls",
            "size, files",
            "windows",
            "runs",
            "CPU s",
            "wall s",
            "CPU us/call",
            "peak RSS MiB",
            "findings",
        ],
        &rows,
        markdown,
    ));
    out.push('\n');
    out.push_str(&targets_table(&targets(r), markdown));
    out.push_str(&profile::render_hot_spots(&r.hot_spots, markdown));
    out
}

/// The targets for the OTLP files source.
pub fn targets(r: &FilesReport) -> Vec<Target> {
    let mut out = Vec::new();
    let Some(first) = r.folders.first() else {
        return out;
    };
    out.push(Target {
        what: format!(
            "peak RSS <= {MAX_RSS_MB:.0} MB over the {}-day folder",
            first.days
        ),
        result: format!("{:.0} MB", first.rss_mb()),
        met: first.rss_mb() <= MAX_RSS_MB,
    });
    if let Some(last) = r.folders.last().filter(|l| l.multiple > first.multiple) {
        let growth = last.rss_mb() / first.rss_mb().max(1e-9);
        out.push(Target {
            what: format!(
                "flat as the folder grows: peak RSS over the {}-day folder <= {MAX_GROWTH}x the {}-day folder's",
                last.days, first.days
            ),
            result: format!(
                "{growth:.2}x ({:.0} vs {:.0} MB)",
                last.rss_mb(),
                first.rss_mb()
            ),
            met: growth <= MAX_GROWTH,
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn folder(multiple: u32, rss_mib: u64) -> FolderRun {
        FolderRun {
            multiple,
            days: 2 * multiple,
            calls: 100_000 * multiple as usize,
            bytes: 130_000_000 * u64::from(multiple),
            files: 2 * multiple as usize,
            windows: 192 * multiple as usize,
            runs: vec![TimeReport {
                user_secs: 1.0,
                sys_secs: 0.2,
                wall_secs: 1.5,
                max_rss_kib: rss_mib * 1024,
                exit_status: 0,
            }],
            findings: 7,
        }
    }

    fn report(rss: [u64; 3]) -> FilesReport {
        FilesReport {
            window: Duration::from_secs(900),
            per_day: 12_000,
            file_megabytes: 100,
            folders: vec![folder(1, rss[0]), folder(2, rss[1]), folder(4, rss[2])],
            hot_spots: Vec::new(),
        }
    }

    #[test]
    fn memory_is_held_to_the_cap_and_to_the_first_folder() {
        let flat = targets(&report([80, 82, 85]));
        assert_eq!(flat.len(), 2, "{flat:?}");
        assert!(flat.iter().all(|t| t.met), "{flat:?}");
        assert!(flat[1].what.contains("8-day folder"), "{flat:?}");
        // 96 MiB is 100.7 MB: over the cap.
        let over = targets(&report([96, 96, 96]));
        assert!(!over[0].met && over[1].met, "{over:?}");
        let growing = targets(&report([60, 120, 235]));
        assert!(growing[0].met && !growing[1].met, "{growing:?}");
        assert!(growing[1].result.starts_with("3.92x"), "{growing:?}");
    }

    #[test]
    fn the_report_has_a_row_per_folder() {
        let text = render_report(&report([80, 82, 85]), true);
        assert!(text.contains("| 4x: 8 days |"), "{text}");
        assert!(text.contains("| 130 MB in 2 |"), "{text}");
        assert!(text.contains("12.0"), "{text}");
    }
}
