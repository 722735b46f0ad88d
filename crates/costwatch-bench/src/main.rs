//! `costwatch-bench`: the detection-quality report and the performance
//! benchmark behind BENCHMARKS.md (`crates/costwatch-bench/regenerate.sh` runs both).

use anyhow::{Context, anyhow};
use clap::{Args, Parser, Subcommand};
use costwatch_bench::compact::{self, CompactParams, Mix};
use costwatch_bench::perf::{self, PerfOptions};
use costwatch_bench::quality;
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
}

#[derive(Debug, Args)]
struct QualityArgs {
    /// Scenario seeds.
    #[arg(long, value_delimiter = ',', default_value = "7,11,23,42,99")]
    seeds: Vec<u64>,
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
    /// Seconds the idle daemon is sampled; 0 skips it.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// Runs over a second window with the scenario's feature shares (more
    /// candidates than `detection.max_candidates`); 0 skips them.
    #[arg(long, default_value_t = 3)]
    scenario_runs: usize,
    /// Where configs, outputs and reports go.
    #[arg(long, default_value = "target/bench")]
    workdir: PathBuf,
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
}

fn parse_mix(s: &str) -> Result<Mix, String> {
    Mix::parse(s).ok_or_else(|| format!("unknown mix `{s}` (lean or scenario)"))
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
    }
}

async fn quality_cmd(a: QualityArgs) -> anyhow::Result<()> {
    let mut results = Vec::new();
    for seed in &a.seeds {
        let started = Instant::now();
        let r = quality::run_seed(*seed, a.days, &a.rules)
            .await
            .with_context(|| format!("seed {seed}"))?;
        eprintln!(
            "quality: seed {seed}: {} sessions, {} calls; replay {:.1} s, seed {:.1} s",
            r.sessions,
            r.requests,
            r.replay_secs,
            started.elapsed().as_secs_f64()
        );
        results.push(r);
    }
    print!("{}", quality::table(&results, a.markdown));
    println!();
    print!(
        "{}",
        quality::targets_table(&quality::targets(&results), a.markdown)
    );
    Ok(())
}

async fn perf_cmd(a: PerfArgs) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("cannot find this binary")?;
    let dir = me
        .parent()
        .ok_or_else(|| anyhow!("this binary has no folder"))?;
    let abs = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    let opts = PerfOptions {
        sessions: a.sessions,
        seed: a.seed,
        runs: a.runs.max(1),
        costwatch: a.costwatch.unwrap_or_else(|| dir.join("costwatch")),
        bench: me.clone(),
        python: a.python,
        reference: abs(a.reference),
        rules: abs(a.rules),
        idle: Duration::from_secs(a.idle_secs),
        scenario_runs: a.scenario_runs,
        workdir: abs(a.workdir),
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

async fn serve_cmd(a: ServeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let dataset = compact::generate(&CompactParams {
        mix: a.mix,
        ..CompactParams::new(a.sessions, a.seed)
    });
    let secs = started.elapsed().as_secs_f64();
    if let Some(path) = &a.truth {
        let text = serde_json::to_string(&dataset.truth.by_kind)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let (sessions, requests) = (dataset.sessions.len(), dataset.request_count());
    let opts = SimOptions {
        bind: std::net::SocketAddr::from(([127, 0, 0, 1], a.port)),
        ..SimOptions::default()
    };
    let sim = SimServer::start(Arc::new(dataset), opts)
        .await
        .context("cannot start the simulator")?;
    println!(
        "{}",
        perf::serve_announcement(&sim.base_url(), sim.admin_key(), sessions, requests, secs)
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
