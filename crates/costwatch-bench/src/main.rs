//! `costwatch-bench`: the detection-quality report and the performance
//! benchmark behind BENCHMARKS.md (`crates/costwatch-bench/regenerate.sh` runs both).

use anyhow::{Context, anyhow};
use clap::Parser;
use costwatch::detect::Kind;
use costwatch_bench::causes;
use costwatch_bench::compact::{self, CompactParams};
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

mod args;

use args::*;

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
        days: a.scenario.days,
        per_day: a.scenario.per_day,
        windows: a.windows,
        long_days: a.long_days,
        long_per_day: a.long_per_day,
        long_window: a.long_window,
        empty_days: a.empty_days,
        seed: a.scenario.seed,
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
        days: a.scenario.days,
        per_day: a.scenario.per_day,
        seed: a.scenario.seed,
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
        days: a.scenario.days,
        per_day: a.scenario.per_day,
        seed: a.scenario.seed,
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
        days: a.scenario.days,
        per_day: a.scenario.per_day,
        seed: a.scenario.seed,
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
