//! `costwatch-bench`: the detection-quality report and the performance
//! benchmark behind BENCHMARKS.md (`crates/costwatch-bench/regenerate.sh` runs both).

use anyhow::{Context, anyhow};
use clap::{Args, Parser, Subcommand};
use costwatch::detect::Kind;
use costwatch_bench::causes;
use costwatch_bench::compact::{self, CompactParams, Mix};
use costwatch_bench::family::{self, Family, FamilyRun, Split};
use costwatch_bench::heldout::{self, HeldOut};
use costwatch_bench::misses;
use costwatch_bench::perf::sweep::{self, SweepOptions};
use costwatch_bench::perf::{self, PerfOptions};
use costwatch_bench::quality;
use costwatch_bench::quality::Serving;
use costwatch_bench::sources::compare::{self, ServedSource, SourceOptions};
use costwatch_bench::sources::langfuse::{self, LANGFUSE};
use costwatch_bench::sources::litellm::{self, LITELLM};
use costwatch_bench::sources::otlp_files::{self, FilesOptions};
use costwatch_bench::sources::receiver::{self as receiver_bench, ReceiverOptions};
use costwatch_sim::server::{SimOptions, SimServer};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Measures costwatch: detection quality against a static baseline, and
/// whole-process CPU and memory against a Python reference.
#[derive(Debug, Parser)]
#[command(name = "costwatch-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
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
struct FetchPagesArgs {
    /// Whose pages: the reference gateway's sessions, a LiteLLM proxy's
    /// spend logs or a Langfuse project's generations.
    #[arg(long, value_enum, default_value_t = FloorSource::Reference)]
    source: FloorSource,
    /// The gateway's API base URL (the reference gateway's `.../v1`; the
    /// proxy's or the Langfuse host's base URL).
    #[arg(long)]
    url: String,
    /// Start of the range (RFC 3339).
    #[arg(long)]
    from: chrono::DateTime<chrono::Utc>,
    /// End of the range, exclusive (RFC 3339).
    #[arg(long)]
    to: chrono::DateTime<chrono::Utc>,
    /// Read the range window by window, as `costwatch backtest` with this
    /// window size does (default: the range as one window).
    #[arg(long, value_parser = humantime::parse_duration)]
    window: Option<Duration>,
    /// The Langfuse project's public key (with `--source langfuse`).
    #[arg(long)]
    public_key: Option<String>,
}

/// Whose pages `fetch-pages` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FloorSource {
    /// `GET /sessions`, by `next_cursor`.
    Reference,
    /// `GET /spend/logs/v2`, by page number, as costwatch's LiteLLM source.
    Litellm,
    /// `GET /api/public/v2/observations`, by `meta.cursor`, as costwatch's
    /// Langfuse source.
    Langfuse,
}

#[derive(Debug, Args)]
struct SourceArgs {
    /// Days of the scenario served.
    #[arg(long, default_value_t = 2)]
    days: u32,
    /// Base sessions per day (the sweep's busier gateway).
    #[arg(long, default_value_t = 12_000)]
    per_day: u32,
    /// Window size of both readers.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    window: Duration,
    /// Dataset seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Runs of each measured program (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Profile one more backtest with `perf record` (skipped when perf is
    /// not installed).
    #[arg(long)]
    profile: bool,
    /// The script a user would write (default: the source's own beside
    /// this crate, `crates/costwatch-bench/<source>.py`; `--reference` is
    /// not read here).
    #[arg(long)]
    script: Option<PathBuf>,
    #[command(flatten)]
    programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    markdown: bool,
}

#[derive(Debug, Args)]
struct OtlpFilesArgs {
    /// Days of the scenario in the first folder.
    #[arg(long, default_value_t = 2)]
    days: u32,
    /// Base sessions per day (the sweep's busier gateway).
    #[arg(long, default_value_t = 12_000)]
    per_day: u32,
    /// Window size.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    window: Duration,
    /// Dataset seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// How many times as long each folder is as the first.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    multiples: Vec<u32>,
    /// Megabytes a file grows to before the exporter rotates it (the
    /// Collector's `rotation.max_megabytes` default).
    #[arg(long, default_value_t = 100)]
    file_megabytes: u64,
    /// Runs of the backtest over each folder (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Profile one more backtest over the first folder with `perf record`
    /// (skipped when perf is not installed).
    #[arg(long)]
    profile: bool,
    #[command(flatten)]
    programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    markdown: bool,
}

#[derive(Debug, Args)]
struct OtlpReceiverArgs {
    /// Days of the scenario posted.
    #[arg(long, default_value_t = 2)]
    days: u32,
    /// Base sessions per day (the sweep's busier gateway).
    #[arg(long, default_value_t = 12_000)]
    per_day: u32,
    /// Dataset seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Export requests in flight at once.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// Runs of each encoding (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Also measure with this PostgreSQL database as the state (its
    /// `public` schema is emptied before each run).
    #[arg(long)]
    postgres: Option<String>,
    /// Seconds of ticks measured before the flood.
    #[arg(long, default_value_t = 10)]
    quiet_secs: u64,
    #[command(flatten)]
    programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    markdown: bool,
}

#[derive(Debug, Args)]
struct MissesArgs {
    /// Scenario family: `base` or `adversarial`.
    #[arg(long, default_value = "adversarial", value_parser = parse_family)]
    family: Family,
    /// Seeds to look into (default: the family's tuning seeds); a held-out
    /// seed is refused.
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Kinds to show (default: all three).
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    kind: Vec<Kind>,
    /// Simulated days per seed.
    #[arg(long, default_value_t = 4)]
    days: u32,
    /// Calls shown per session.
    #[arg(long, default_value_t = 20)]
    max_calls: usize,
    /// Rules to use.
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
}

#[derive(Debug, Args)]
struct SweepArgs {
    /// Days of the scenario served for the sweep.
    #[arg(long, default_value_t = 2)]
    days: u32,
    /// Base sessions per day of the sweep's scenario (the simulator's
    /// default is 2,400; five times that is a busier gateway).
    #[arg(long, default_value_t = 12_000)]
    per_day: u32,
    /// Window sizes of the sweep.
    #[arg(long, value_delimiter = ',', default_value = "5m,15m,1h,6h", value_parser = humantime::parse_duration)]
    windows: Vec<Duration>,
    /// Days of the long backtest; 0 skips it.
    #[arg(long, default_value_t = 90)]
    long_days: u32,
    /// Base sessions per day of the long backtest.
    #[arg(long, default_value_t = 10_000)]
    long_per_day: u32,
    /// Window size of the long backtest.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    long_window: Duration,
    /// Days of the longer range of empty windows (the shorter is one day),
    /// read with the smallest window size; 0 or 1 skips them.
    #[arg(long, default_value_t = 8)]
    empty_days: u32,
    /// Dataset seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Runs of each measured program (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[command(flatten)]
    programs: ProgramArgs,
    /// Print Markdown tables.
    #[arg(long)]
    markdown: bool,
}

/// The programs the performance commands measure, and where they work.
#[derive(Debug, Args)]
struct ProgramArgs {
    /// The costwatch binary (default: beside this one).
    #[arg(long)]
    costwatch: Option<PathBuf>,
    /// Python interpreter with `requests` for crates/costwatch-bench/reference.py; leave out
    /// to skip the reference.
    #[arg(long)]
    python: Option<PathBuf>,
    /// The Python reference script.
    #[arg(long, default_value = "crates/costwatch-bench/reference.py")]
    reference: PathBuf,
    /// Rules to use.
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// Where configs, outputs and reports go.
    #[arg(long, default_value = "target/bench")]
    workdir: PathBuf,
}

/// [`ProgramArgs`] with every path made absolute and the defaults filled in.
struct Programs {
    costwatch: PathBuf,
    bench: PathBuf,
    python: Option<PathBuf>,
    reference: PathBuf,
    rules: PathBuf,
    workdir: PathBuf,
}

impl ProgramArgs {
    fn resolve(self) -> anyhow::Result<Programs> {
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
struct QualityArgs {
    /// Scenario seeds.
    #[arg(long, value_delimiter = ',', default_value = "7,11,23,42,99")]
    seeds: Vec<u64>,
    /// Scenario family: `base` (written with the detectors) or
    /// `adversarial` (built to break them).
    #[arg(long, default_value = "base", value_parser = parse_family)]
    family: Family,
    /// Take the family's `tuning` or `held-out` seeds instead of `--seeds`.
    #[arg(long, value_parser = parse_split)]
    split: Option<Split>,
    /// Serve `historical`ly (every call exists) or `live` (a window sees the
    /// calls made by its end plus the settle lag); default: the family's way.
    #[arg(long, value_parser = parse_serving)]
    serving: Option<Serving>,
    /// Report both families on their held-out seeds (ignores `--seeds`,
    /// `--family`, `--split` and `--serving`).
    #[arg(long)]
    held_out: bool,
    /// Simulated days per seed.
    #[arg(long, default_value_t = 4)]
    days: u32,
    /// Rules to use.
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// Print Markdown tables.
    #[arg(long)]
    markdown: bool,
}

#[derive(Debug, Args)]
struct PerfArgs {
    /// Sessions in the window.
    #[arg(long, default_value_t = 1_000_000)]
    sessions: usize,
    /// Dataset seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs of each measured program (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[command(flatten)]
    programs: ProgramArgs,
    /// Seconds the idle daemon is sampled; 0 skips it.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// Runs over a second window with the scenario's feature shares (more
    /// candidates than `detection.max_candidates`); 0 skips them.
    #[arg(long, default_value_t = 3)]
    scenario_runs: usize,
    /// Print Markdown tables.
    #[arg(long)]
    markdown: bool,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Sessions to generate.
    #[arg(long, default_value_t = 1_000_000)]
    sessions: usize,
    /// Dataset seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Write the truth (kind -> session ids) as JSON here.
    #[arg(long)]
    truth: Option<PathBuf>,
    /// Feature shares: `lean` (under 1% of sessions nominated) or
    /// `scenario` (the scenario's shares, about 10%).
    #[arg(long, default_value = "lean", value_parser = parse_mix)]
    mix: Mix,
    /// Serve this many days of the simulator's scenario (its features,
    /// incidents and daily curve) instead of one window of `--sessions`.
    #[arg(long)]
    scenario_days: Option<u32>,
    /// Base sessions per day of `--scenario-days`.
    #[arg(long, default_value_t = 2_400)]
    per_day: u32,
}

fn parse_mix(s: &str) -> Result<Mix, String> {
    Mix::parse(s).ok_or_else(|| format!("unknown mix `{s}` (lean or scenario)"))
}

fn parse_family(s: &str) -> Result<Family, String> {
    Family::parse(s).ok_or_else(|| format!("unknown family `{s}` (base or adversarial)"))
}

fn parse_kind(s: &str) -> Result<Kind, String> {
    Kind::parse(s)
        .ok_or_else(|| format!("unknown kind `{s}` (no_cache, oversized_model or retry_loop)"))
}

fn parse_split(s: &str) -> Result<Split, String> {
    Split::parse(s).ok_or_else(|| format!("unknown split `{s}` (tuning or held-out)"))
}

fn parse_serving(s: &str) -> Result<Serving, String> {
    match s {
        "historical" => Ok(Serving::Historical),
        "live" => Ok(Serving::Live),
        _ => Err(format!("unknown serving `{s}` (historical or live)")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("COSTWATCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    // The floor reads its pages on one thread, as `costwatch backtest` does.
    let mut builder = match cli.command {
        Cmd::FetchPages(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("costwatch-bench: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("costwatch-bench: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Cmd::Quality(a) => quality_cmd(a).await,
        Cmd::Perf(a) => perf_cmd(a).await,
        Cmd::Serve(a) => serve_cmd(a).await,
        Cmd::Sweep(a) => sweep_cmd(a).await,
        Cmd::Litellm(a) => source_cmd(&LITELLM, a),
        Cmd::Langfuse(a) => source_cmd(&LANGFUSE, a),
        Cmd::OtlpFiles(a) => otlp_files_cmd(a),
        Cmd::OtlpReceiver(a) => otlp_receiver_cmd(a).await,
        Cmd::Misses(a) => misses_cmd(a).await,
        Cmd::FetchPages(a) => fetch_pages_cmd(a).await,
    }
}

async fn fetch_pages_cmd(a: FetchPagesArgs) -> anyhow::Result<()> {
    let key = std::env::var("COSTWATCH_ADMIN_KEY").context("COSTWATCH_ADMIN_KEY is not set")?;
    let windows = perf::floor::windows(a.from, a.to, a.window);
    let f = match a.source {
        FloorSource::Reference => perf::floor::fetch_pages(&a.url, &key, &windows).await?,
        FloorSource::Litellm => litellm::fetch_pages(&a.url, &key, &windows).await?,
        FloorSource::Langfuse => {
            let public_key = a
                .public_key
                .context("--source langfuse needs --public-key")?;
            langfuse::fetch_pages(&a.url, &public_key, &key, &windows).await?
        }
    };
    println!("{}", f.line());
    Ok(())
}

async fn misses_cmd(a: MissesArgs) -> anyhow::Result<()> {
    let seeds = if a.seeds.is_empty() {
        a.family.seeds(Split::Tuning).to_vec()
    } else {
        a.seeds.clone()
    };
    misses::refuse_held_out(a.family, &seeds)?;
    let kinds = if a.kind.is_empty() {
        Kind::ALL.to_vec()
    } else {
        a.kind.clone()
    };
    for (i, seed) in seeds.iter().enumerate() {
        let review = misses::review_seed(a.family, *seed, a.days, &a.rules)
            .await
            .with_context(|| format!("{} seed {seed}", a.family.name()))?;
        if i > 0 {
            println!();
        }
        print!("{}", misses::render(&review, &kinds, a.max_calls));
    }
    Ok(())
}

async fn quality_cmd(a: QualityArgs) -> anyhow::Result<()> {
    if a.held_out {
        return held_out_cmd(&a).await;
    }
    let seeds = a
        .split
        .map_or(a.seeds.clone(), |s| a.family.seeds(s).to_vec());
    if seeds.is_empty() {
        return Err(anyhow!(
            "the {} family has no seeds in that split",
            a.family.name()
        ));
    }
    let mut results = Vec::new();
    let mut runs = HeldOut::default();
    for seed in &seeds {
        let r = quality_seed(a.family, *seed, &a, a.serving).await?;
        results.push(r.run.result.clone());
        runs.push(r);
    }
    print!("{}", quality::table(&results, a.markdown));
    println!();
    print!(
        "{}",
        quality::targets_table(&quality::targets(&results), a.markdown)
    );
    if !runs.situations().is_empty() {
        println!("\nPer situation (seeds summed):\n");
        print!("{}", heldout::situations_table(&runs, a.markdown));
    }
    println!("\nWhy the no_cache findings' calls missed the cache (seeds summed):\n");
    print!(
        "{}",
        causes::table(&causes::CauseTally::of_runs(&runs), a.markdown)
    );
    Ok(())
}

/// Runs one seed of a family, with a progress line.
async fn quality_seed(
    family: Family,
    seed: u64,
    a: &QualityArgs,
    serving: Option<Serving>,
) -> anyhow::Result<FamilyRun> {
    let started = Instant::now();
    let r = family::run_seed(family, seed, a.days, &a.rules, serving)
        .await
        .with_context(|| format!("{} seed {seed}", family.name()))?;
    let family_note = match family {
        Family::Base => String::new(),
        other => format!("{} ", other.name()),
    };
    let res = &r.run.result;
    eprintln!(
        "quality: {family_note}seed {seed}: {} sessions, {} calls; replay {:.1} s, seed {:.1} s",
        res.sessions,
        res.requests,
        res.replay_secs,
        started.elapsed().as_secs_f64()
    );
    Ok(r)
}

/// Both families on their held-out seeds.
async fn held_out_cmd(a: &QualityArgs) -> anyhow::Result<()> {
    let mut report = HeldOut::default();
    for f in Family::ALL {
        for seed in f.seeds(Split::HeldOut) {
            report.push(quality_seed(f, *seed, a, None).await?);
        }
    }
    let seeds = |f: Family| {
        let s: Vec<String> = f.seeds(Split::HeldOut).iter().map(u64::to_string).collect();
        s.join(", ")
    };
    println!(
        "Held-out seeds: base {}; adversarial {}.\n",
        seeds(Family::Base),
        seeds(Family::Adversarial)
    );
    print!("{}", heldout::summary_table(&report, a.markdown));
    println!();
    print!(
        "{}",
        quality::targets_table(&heldout::targets(&report), a.markdown)
    );
    println!(
        "\nWhere the adversarial family's sessions were found or missed (held-out seeds summed):\n"
    );
    print!("{}", heldout::situations_table(&report, a.markdown));
    println!("\nWhy the no_cache findings' calls missed the cache (held-out seeds summed):\n");
    print!(
        "{}",
        causes::table(&causes::CauseTally::of_runs(&report), a.markdown)
    );
    for f in Family::ALL {
        println!("\nPer seed, {} family:\n", f.name());
        print!("{}", quality::table(&report.results(f), a.markdown));
    }
    Ok(())
}

async fn perf_cmd(a: PerfArgs) -> anyhow::Result<()> {
    let p = a.programs.resolve()?;
    let opts = PerfOptions {
        sessions: a.sessions,
        seed: a.seed,
        runs: a.runs.max(1),
        costwatch: p.costwatch,
        bench: p.bench,
        python: p.python,
        reference: p.reference,
        rules: p.rules,
        idle: Duration::from_secs(a.idle_secs),
        scenario_runs: a.scenario_runs,
        workdir: p.workdir,
    };
    let report = perf::run(&opts, |m| eprintln!("perf: {m}")).await?;
    println!(
        "{} sessions ({} calls) in one window\n",
        report.sessions, report.requests
    );
    print!("{}", perf::table(&report, a.markdown));
    println!();
    print!("{}", perf::scores_table(&report, a.markdown));
    println!();
    print!(
        "{}",
        quality::targets_table(&perf::targets(&report), a.markdown)
    );
    if let Some(same) = report.python_matches_rust {
        println!(
            "\nreference.py flagged {:?}; the Rust implementation of the same rules flags {}",
            report.python_flagged,
            if same {
                "exactly the same sessions"
            } else {
                "DIFFERENT sessions"
            }
        );
    }
    Ok(())
}

async fn sweep_cmd(a: SweepArgs) -> anyhow::Result<()> {
    let p = a.programs.resolve()?;
    let opts = SweepOptions {
        days: a.days,
        per_day: a.per_day,
        windows: a.windows,
        long_days: a.long_days,
        long_per_day: a.long_per_day,
        long_window: a.long_window,
        empty_days: a.empty_days,
        seed: a.seed,
        runs: a.runs.max(1),
        costwatch: p.costwatch,
        bench: p.bench,
        python: p.python,
        reference: p.reference,
        rules: p.rules,
        workdir: p.workdir,
    };
    let report = sweep::run(&opts, |m| eprintln!("sweep: {m}"))?;
    print!("{}", sweep::render_report(&report, a.markdown));
    Ok(())
}

fn source_cmd(source: &ServedSource, a: SourceArgs) -> anyhow::Result<()> {
    let p = a.programs.resolve()?;
    let script = a
        .script
        .unwrap_or_else(|| PathBuf::from(format!("crates/costwatch-bench/{}.py", source.name)));
    let opts = SourceOptions {
        days: a.days,
        per_day: a.per_day,
        seed: a.seed,
        window: a.window,
        runs: a.runs.max(1),
        profile: a.profile,
        costwatch: p.costwatch,
        bench: p.bench,
        python: p.python,
        script: std::path::absolute(&script).unwrap_or(script),
        rules: p.rules,
        workdir: p.workdir,
    };
    let report = compare::run(source, &opts, |m| eprintln!("{}: {m}", source.name))?;
    print!("{}", compare::render_report(&report, a.markdown));
    Ok(())
}

fn otlp_files_cmd(a: OtlpFilesArgs) -> anyhow::Result<()> {
    let p = a.programs.resolve()?;
    let opts = FilesOptions {
        days: a.days,
        per_day: a.per_day,
        seed: a.seed,
        window: a.window,
        multiples: a.multiples,
        file_megabytes: a.file_megabytes,
        runs: a.runs.max(1),
        profile: a.profile,
        costwatch: p.costwatch,
        rules: p.rules,
        workdir: p.workdir,
    };
    let report = otlp_files::run(&opts, |m| eprintln!("otlp-files: {m}"))?;
    print!("{}", otlp_files::render_report(&report, a.markdown));
    Ok(())
}

async fn otlp_receiver_cmd(a: OtlpReceiverArgs) -> anyhow::Result<()> {
    let p = a.programs.resolve()?;
    let mut states = vec!["sqlite".to_owned()];
    states.extend(a.postgres);
    let opts = ReceiverOptions {
        days: a.days,
        per_day: a.per_day,
        seed: a.seed,
        concurrency: a.concurrency.max(1),
        runs: a.runs.max(1),
        states,
        costwatch: p.costwatch,
        workdir: p.workdir,
        quiet_secs: a.quiet_secs,
    };
    let report = receiver_bench::run(&opts, |m| eprintln!("otlp-receiver: {m}")).await?;
    print!("{}", receiver_bench::render_report(&report, a.markdown));
    Ok(())
}

async fn serve_cmd(a: ServeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let dataset = match a.scenario_days {
        Some(days) => {
            costwatch_sim::scenario::generate(&sweep::scenario_params(a.seed, days, a.per_day))
        }
        None => compact::generate(&CompactParams {
            mix: a.mix,
            ..CompactParams::new(a.sessions, a.seed)
        }),
    };
    let secs = started.elapsed().as_secs_f64();
    if let Some(path) = &a.truth {
        let text = serde_json::to_string(&dataset.truth.by_kind)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let (sessions, requests) = (dataset.sessions.len(), dataset.request_count());
    let in_range = match a.scenario_days {
        Some(days) => {
            let from = sweep::scenario_params(a.seed, days, a.per_day).start;
            let to = from + chrono::Duration::days(i64::from(days));
            dataset.requests_in(from, to, &[], None).len()
        }
        None => requests,
    };
    let opts = SimOptions {
        bind: std::net::SocketAddr::from(([127, 0, 0, 1], a.port)),
        ..SimOptions::default()
    };
    let sim = SimServer::start(Arc::new(dataset), opts)
        .await
        .context("cannot start the simulator")?;
    println!(
        "{}",
        perf::serve_announcement(
            &sim.base_url(),
            sim.admin_key(),
            (sessions, requests, in_range),
            secs
        )
    );
    // Serve until stdin closes (the parent exits or drops the pipe).
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await?;
    let _ = sim.shutdown().await;
    Ok(())
}
