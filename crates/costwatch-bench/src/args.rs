//! The command line: each subcommand's arguments, and how the paths the
//! performance commands take are resolved.

use anyhow::{Context, anyhow};
use clap::{Args, Parser, Subcommand};
use costwatch::detect::Kind;
use costwatch_bench::compact::Mix;
use costwatch_bench::family::{Family, Split};
use costwatch_bench::quality::Serving;
use std::path::PathBuf;
use std::time::Duration;

/// Measures costwatch: detection quality against a static baseline, and
/// whole-process CPU and memory against a Python reference.
#[derive(Debug, Parser)]
#[command(name = "costwatch-bench", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Precision, recall, F1 and alerts per incident over labelled
    /// scenarios, costwatch beside the static-threshold baseline.
    Quality(QualityArgs),
    /// Whole-process CPU, wall time and peak RSS of `costwatch backtest`
    /// over one window of a million sessions, the Python reference over the
    /// same data, and the idle daemon.
    Perf(PerfArgs),
    /// Serve the large dataset with the built-in simulator until stdin
    /// closes (used by `perf`, so the simulator is not in the measured
    /// process).
    Serve(ServeArgs),
    /// Whole-process CPU of `costwatch backtest` over many small windows:
    /// a sweep of window sizes beside the Python reference, the fixed cost
    /// per window (a slope, and empty windows with each kind of state),
    /// and a 90-day backtest at 5-minute windows.
    Sweep(SweepArgs),
    /// On tuning seeds only: each truly wasteful session costwatch did not
    /// flag, each session it flagged wrongly, with their calls, and the
    /// incidents no alert told of (held-out seeds are refused).
    Misses(MissesArgs),
    /// Whole-process CPU and peak RSS of `costwatch backtest` reading days
    /// of the scenario as a LiteLLM proxy's spend logs, beside
    /// `crates/costwatch-bench/litellm.py` over the same pages, and where
    /// costwatch's CPU goes (`perf`).
    Litellm(SourceArgs),
    /// Whole-process CPU and peak RSS of `costwatch backtest` reading days
    /// of the scenario as a Langfuse project's generations, beside
    /// `crates/costwatch-bench/langfuse.py` over the same observations,
    /// and where costwatch's CPU goes (`perf`).
    Langfuse(SourceArgs),
    /// Whole-process CPU and peak RSS of `costwatch backtest` reading days
    /// of the scenario as a Collector file exporter's folder, and again
    /// over folders two and four times as long.
    OtlpFiles(OtlpFilesArgs),
    /// Spans stored per CPU-second by `costwatch run`'s OTLP/HTTP receiver
    /// under the exporter's own batches (protobuf and JSON bodies of 512
    /// spans), and the detection tick's latency during the flood.
    OtlpReceiver(OtlpReceiverArgs),
    /// Fetch every page a source of costwatch requests over a range with
    /// its HTTP client and parse nothing but the paging fields: the floor
    /// of the page path, measured by `perf`, `litellm` and `langfuse` (the
    /// admin, master or secret key from `COSTWATCH_ADMIN_KEY`).
    FetchPages(FetchPagesArgs),
}

#[derive(Debug, Args)]
pub(crate) struct FetchPagesArgs {
    /// Whose pages: the reference gateway's sessions, a LiteLLM proxy's
    /// spend logs or a Langfuse project's generations.
    #[arg(long, value_enum, default_value_t = FloorSource::Reference)]
    pub(crate) source: FloorSource,
    /// The gateway's API base URL (the reference gateway's `.../v1`; the
    /// proxy's or the Langfuse host's base URL).
    #[arg(long)]
    pub(crate) url: String,
    /// Start of the range (RFC 3339).
    #[arg(long)]
    pub(crate) from: chrono::DateTime<chrono::Utc>,
    /// End of the range, exclusive (RFC 3339).
    #[arg(long)]
    pub(crate) to: chrono::DateTime<chrono::Utc>,
    /// Read the range window by window, as `costwatch backtest` with this
    /// window size does (default: the range as one window).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) window: Option<Duration>,
    /// The Langfuse project's public key (with `--source langfuse`).
    #[arg(long)]
    pub(crate) public_key: Option<String>,
}

/// Whose pages `fetch-pages` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FloorSource {
    /// `GET /sessions`, by `next_cursor`.
    Reference,
    /// `GET /spend/logs/v2`, by page number, as costwatch's LiteLLM source.
    Litellm,
    /// `GET /api/public/v2/observations`, by `meta.cursor`, as costwatch's
    /// Langfuse source.
    Langfuse,
}

#[derive(Debug, Args)]
pub(crate) struct SourceArgs {
    #[command(flatten)]
    pub(crate) scenario: ScenarioArgs,
    /// Window size of both readers.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    pub(crate) window: Duration,
    /// Runs of each measured program (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Profile one more backtest with `perf record` (skipped when perf is
    /// not installed).
    #[arg(long)]
    pub(crate) profile: bool,
    /// The script a user would write (default: the source's own beside
    /// this crate, `crates/costwatch-bench/<source>.py`; `--reference` is
    /// not read here).
    #[arg(long)]
    pub(crate) script: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    pub(crate) markdown: bool,
}

#[derive(Debug, Args)]
pub(crate) struct OtlpFilesArgs {
    #[command(flatten)]
    pub(crate) scenario: ScenarioArgs,
    /// Window size.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    pub(crate) window: Duration,
    /// How many times as long each folder is as the first.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub(crate) multiples: Vec<u32>,
    /// Megabytes a file grows to before the exporter rotates it (the
    /// Collector's `rotation.max_megabytes` default).
    #[arg(long, default_value_t = 100)]
    pub(crate) file_megabytes: u64,
    /// Runs of the backtest over each folder (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Profile one more backtest over the first folder with `perf record`
    /// (skipped when perf is not installed).
    #[arg(long)]
    pub(crate) profile: bool,
    #[command(flatten)]
    pub(crate) programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    pub(crate) markdown: bool,
}

#[derive(Debug, Args)]
pub(crate) struct OtlpReceiverArgs {
    #[command(flatten)]
    pub(crate) scenario: ScenarioArgs,
    /// Export requests in flight at once.
    #[arg(long, default_value_t = 2)]
    pub(crate) concurrency: usize,
    /// Runs of each encoding (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Also measure with this PostgreSQL database as the state (its
    /// `public` schema is emptied before each run).
    #[arg(long)]
    pub(crate) postgres: Option<String>,
    /// Seconds of ticks measured before the flood.
    #[arg(long, default_value_t = 10)]
    pub(crate) quiet_secs: u64,
    #[command(flatten)]
    pub(crate) programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    pub(crate) markdown: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MissesArgs {
    /// Scenario family: `base` or `adversarial`.
    #[arg(long, default_value = "adversarial", value_parser = parse_family)]
    pub(crate) family: Family,
    /// Seeds to look into (default: the family's tuning seeds); a held-out
    /// seed is refused.
    #[arg(long, value_delimiter = ',')]
    pub(crate) seeds: Vec<u64>,
    /// Kinds to show (default: all three).
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub(crate) kind: Vec<Kind>,
    /// Simulated days per seed.
    #[arg(long, default_value_t = 4)]
    pub(crate) days: u32,
    /// Calls shown per session.
    #[arg(long, default_value_t = 20)]
    pub(crate) max_calls: usize,
    /// Rules to use.
    #[arg(long, default_value = "rules")]
    pub(crate) rules: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    #[command(flatten)]
    pub(crate) scenario: ScenarioArgs,
    /// Window sizes of the sweep.
    #[arg(long, value_delimiter = ',', default_value = "5m,15m,1h,6h", value_parser = humantime::parse_duration)]
    pub(crate) windows: Vec<Duration>,
    /// Days of the long backtest; 0 skips it.
    #[arg(long, default_value_t = 90)]
    pub(crate) long_days: u32,
    /// Base sessions per day of the long backtest.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) long_per_day: u32,
    /// Window size of the long backtest.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub(crate) long_window: Duration,
    /// Days of the longer range of empty windows (the shorter is one day),
    /// read with the smallest window size; 0 or 1 skips them.
    #[arg(long, default_value_t = 8)]
    pub(crate) empty_days: u32,
    /// Runs of each measured program (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    #[command(flatten)]
    pub(crate) programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    pub(crate) markdown: bool,
}

/// The scenario the source and sweep commands serve: days of the
/// simulator's traffic, five times as busy as its default.
#[derive(Debug, Args)]
pub(crate) struct ScenarioArgs {
    /// Days of the scenario.
    #[arg(long, default_value_t = 2)]
    pub(crate) days: u32,
    /// Base sessions per day (the simulator's default is 2,400; five
    /// times that is a busier gateway).
    #[arg(long, default_value_t = 12_000)]
    pub(crate) per_day: u32,
    /// Dataset seed.
    #[arg(long, default_value_t = 7)]
    pub(crate) seed: u64,
}

/// The programs the performance commands measure, and where they work.
#[derive(Debug, Args)]
pub(crate) struct ProgramArgs {
    /// The costwatch binary (default: beside this one).
    #[arg(long)]
    pub(crate) costwatch: Option<PathBuf>,
    /// Python interpreter with `requests` for crates/costwatch-bench/reference.py; leave out
    /// to skip the reference.
    #[arg(long)]
    pub(crate) python: Option<PathBuf>,
    /// The Python reference script.
    #[arg(long, default_value = "crates/costwatch-bench/reference.py")]
    pub(crate) reference: PathBuf,
    /// Rules to use.
    #[arg(long, default_value = "rules")]
    pub(crate) rules: PathBuf,
    /// Where configs, outputs and reports go.
    #[arg(long, default_value = "target/bench")]
    pub(crate) workdir: PathBuf,
}

/// [`ProgramArgs`] with every path made absolute and the defaults filled in.
pub(crate) struct Programs {
    pub(crate) costwatch: PathBuf,
    pub(crate) bench: PathBuf,
    pub(crate) python: Option<PathBuf>,
    pub(crate) reference: PathBuf,
    pub(crate) rules: PathBuf,
    pub(crate) workdir: PathBuf,
}

impl ProgramArgs {
    pub(crate) fn resolve(self) -> anyhow::Result<Programs> {
        let me = std::env::current_exe().context("cannot find this binary")?;
        let dir = me
            .parent()
            .ok_or_else(|| anyhow!("this binary has no folder"))?;
        let abs = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
        Ok(Programs {
            costwatch: self.costwatch.unwrap_or_else(|| dir.join("costwatch")),
            bench: me.clone(),
            python: self.python,
            reference: abs(self.reference),
            rules: abs(self.rules),
            workdir: abs(self.workdir),
        })
    }
}

#[derive(Debug, Args)]
pub(crate) struct QualityArgs {
    /// Scenario seeds.
    #[arg(long, value_delimiter = ',', default_value = "7,11,23,42,99")]
    pub(crate) seeds: Vec<u64>,
    /// Scenario family: `base` (written with the detectors) or
    /// `adversarial` (built to break them).
    #[arg(long, default_value = "base", value_parser = parse_family)]
    pub(crate) family: Family,
    /// Take the family's `tuning` or `held-out` seeds instead of `--seeds`.
    #[arg(long, value_parser = parse_split)]
    pub(crate) split: Option<Split>,
    /// Serve `historical`ly (every call exists) or `live` (a window sees the
    /// calls made by its end plus the settle lag); default: the family's way.
    #[arg(long, value_parser = parse_serving)]
    pub(crate) serving: Option<Serving>,
    /// Report both families on their held-out seeds (ignores `--seeds`,
    /// `--family`, `--split` and `--serving`).
    #[arg(long)]
    pub(crate) held_out: bool,
    /// Simulated days per seed.
    #[arg(long, default_value_t = 4)]
    pub(crate) days: u32,
    /// Rules to use.
    #[arg(long, default_value = "rules")]
    pub(crate) rules: PathBuf,
    /// Print Markdown tables.
    #[arg(long)]
    pub(crate) markdown: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PerfArgs {
    /// Sessions in the window.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) sessions: usize,
    /// Dataset seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Runs of each measured program (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    #[command(flatten)]
    pub(crate) programs: ProgramArgs,
    /// Seconds the idle daemon is sampled; 0 skips it.
    #[arg(long, default_value_t = 60)]
    pub(crate) idle_secs: u64,
    /// Runs over a second window with the scenario's feature shares (more
    /// candidates than `detection.max_candidates`); 0 skips them.
    #[arg(long, default_value_t = 3)]
    pub(crate) scenario_runs: usize,
    /// Print Markdown tables.
    #[arg(long)]
    pub(crate) markdown: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Sessions to generate.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) sessions: usize,
    /// Dataset seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub(crate) port: u16,
    /// Write the truth (kind -> session ids) as JSON here.
    #[arg(long)]
    pub(crate) truth: Option<PathBuf>,
    /// Feature shares: `lean` (under 1% of sessions nominated) or
    /// `scenario` (the scenario's shares, about 10%).
    #[arg(long, default_value = "lean", value_parser = parse_mix)]
    pub(crate) mix: Mix,
    /// Serve this many days of the simulator's scenario (its features,
    /// incidents and daily curve) instead of one window of `--sessions`.
    #[arg(long)]
    pub(crate) scenario_days: Option<u32>,
    /// Base sessions per day of `--scenario-days`.
    #[arg(long, default_value_t = 2_400)]
    pub(crate) per_day: u32,
}

pub(crate) fn parse_mix(s: &str) -> Result<Mix, String> {
    Mix::parse(s).ok_or_else(|| format!("unknown mix `{s}` (lean or scenario)"))
}

pub(crate) fn parse_family(s: &str) -> Result<Family, String> {
    Family::parse(s).ok_or_else(|| format!("unknown family `{s}` (base or adversarial)"))
}

pub(crate) fn parse_kind(s: &str) -> Result<Kind, String> {
    Kind::parse(s)
        .ok_or_else(|| format!("unknown kind `{s}` (no_cache, oversized_model or retry_loop)"))
}

pub(crate) fn parse_split(s: &str) -> Result<Split, String> {
    Split::parse(s).ok_or_else(|| format!("unknown split `{s}` (tuning or held-out)"))
}

pub(crate) fn parse_serving(s: &str) -> Result<Serving, String> {
    match s {
        "historical" => Ok(Serving::Historical),
        "live" => Ok(Serving::Live),
        _ => Err(format!("unknown serving `{s}` (historical or live)")),
    }
}
