//! The command line: `check`, `once`, `backtest`, `demo`, `schema`.

use crate::backtest::{self, Replay};
use crate::clock::{Clock, SystemClock};
use crate::config::{self, Config, ConfigError, Rules};
use crate::detect::{Detector, Finding, Kind};
use crate::pipeline::{Pipeline, Schedule, WindowReport};
use crate::secret::Secret;
use crate::source::gateway::GatewaySource;
use crate::source::{HttpLimits, Labels};
use crate::store::SqlStore;
use anyhow::{Context, anyhow};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use costwatch_sim::dataset::Dataset;
use costwatch_sim::scenario::{self, ScenarioParams};
use costwatch_sim::server::{SimOptions, SimServer};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Finds wasted LLM spend in an LLM gateway's logs.
#[derive(Debug, Parser)]
#[command(name = "costwatch", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "COSTWATCH_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// More log output (-v: debug, -vv: trace). `COSTWATCH_LOG` takes a full filter.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (journald adds its own timestamps).
    Text,
    /// One JSON object per line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a configuration and its rules offline; exit 2 on any problem.
    Check(CheckArgs),
    /// Run as a service: the detection job on its cron schedule, alerts, delivery.
    Run(RunArgs),
    /// Process every window that is due, store the results, print new findings.
    Once(OnceArgs),
    /// Send a sample alert through every configured channel and report each result.
    TestAlert(RunArgs),
    /// Replay a historical range through the pipeline with throwaway state.
    Backtest(BacktestArgs),
    /// Run the whole pipeline against the built-in gateway simulator.
    Demo(DemoArgs),
    /// Print the JSON Schema of rule files.
    Schema,
}

impl Command {
    /// Commands that print their own results log only warnings unless asked.
    pub fn quiet_by_default(&self) -> bool {
        matches!(
            self,
            Command::Backtest(_) | Command::Demo(_) | Command::Check(_) | Command::Schema
        )
    }
}

/// `costwatch check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Configuration file (its rules are checked too).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Rule files or directories to check on their own.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
    /// Also connect: to the state database (`SELECT 1`, no migration) and,
    /// when an admin key is set, to the gateway (`GET /models`).
    #[arg(long, requires = "config")]
    pub online: bool,
}

/// `costwatch run` and `costwatch test-alert`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// `costwatch once`.
#[derive(Debug, Args)]
pub struct OnceArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Process windows due at this time (RFC 3339) instead of now.
    #[arg(long)]
    pub at: Option<DateTime<Utc>>,
}

/// Output format of findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// An aligned table for people.
    Table,
    /// One JSON object per finding per line.
    Jsonl,
}

/// `costwatch backtest`.
#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// Configuration file (gateway, windows, groups, rules). Optional with `--simulate`.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Start of the range (RFC 3339); rounded down to a window boundary.
    #[arg(long)]
    pub from: Option<DateTime<Utc>>,
    /// End of the range (RFC 3339, exclusive).
    #[arg(long)]
    pub to: Option<DateTime<Utc>>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// State database; default a throwaway in-memory one.
    #[arg(long, default_value = "sqlite::memory:")]
    pub state: String,
    /// Replay the built-in simulator's labelled traffic instead of a gateway,
    /// and score the findings against its truth.
    #[arg(long)]
    pub simulate: bool,
    /// Simulation seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Simulated days.
    #[arg(long, default_value_t = 4)]
    pub days: u32,
    /// Rules to use without a configuration file.
    #[arg(long, default_value = "rules")]
    pub rules: PathBuf,
    /// Also replay the alerts and estimate what escalating them to
    /// investigations would cost (`investigation` section), calling no model.
    #[arg(long)]
    pub spend_preview: bool,
    /// Also replay the alerts and really investigate the escalated ones with
    /// the configured MCP endpoint and model (paid, under the caps).
    #[arg(long, requires = "config")]
    pub investigate: bool,
}

/// `costwatch demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Simulation seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Simulated days.
    #[arg(long, default_value_t = 4)]
    pub days: u32,
    /// Rules to use.
    #[arg(long, default_value = "rules")]
    pub rules: PathBuf,
}

/// How a command failed.
#[derive(Debug)]
pub enum Exit {
    /// Bad configuration or rules (exit 2).
    Config(ConfigError),
    /// Anything else (exit 1).
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Exit {
    fn from(e: anyhow::Error) -> Self {
        Exit::Failed(e)
    }
}

impl From<ConfigError> for Exit {
    fn from(e: ConfigError) -> Self {
        Exit::Config(e)
    }
}

/// Sets up logging on stderr. `COSTWATCH_LOG` (a tracing filter) overrides `-v`.
pub fn init_tracing(format: LogFormat, verbose: u8, quiet: bool) {
    let default = match verbose {
        0 if quiet => "warn",
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("COSTWATCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<(), Exit> {
    match cli.command {
        Command::Check(a) => check(a).await,
        Command::Run(a) => {
            crate::app::run(&a.config)
                .await
                .map_err(|e| match e.downcast::<ConfigError>() {
                    Ok(c) => Exit::Config(c),
                    Err(e) => Exit::Failed(e),
                })
        }
        Command::TestAlert(a) => test_alert(a).await,
        Command::Once(a) => once(a).await,
        Command::Backtest(a) => backtest_cmd(a).await,
        Command::Demo(a) => demo(a).await,
        Command::Schema => {
            let text = serde_json::to_string_pretty(&config::rules_schema())
                .context("cannot print the schema")?;
            println!("{text}");
            Ok(())
        }
    }
}

async fn check(a: CheckArgs) -> Result<(), Exit> {
    if a.config.is_none() && a.rules.is_empty() {
        return Err(Exit::Failed(anyhow!(
            "nothing to check: give --config FILE and/or --rules PATH"
        )));
    }
    if let Some(path) = &a.config {
        let cfg = config::load(path)?;
        println!("{}: ok ({})", path.display(), rules_summary(&cfg.rules));
        if cfg.source.admin_key.is_none() {
            println!(
                "note: no admin key is set (COSTWATCH_ADMIN_KEY or source.admin_key_file); commands that read the gateway will refuse to start"
            );
        }
        if a.online {
            check_online(&cfg).await?;
        }
    }
    if !a.rules.is_empty() {
        let rules = config::load_rules(&a.rules)?;
        println!("rules: ok ({})", rules_summary(&rules));
    }
    Ok(())
}

async fn check_online(cfg: &Config) -> Result<(), Exit> {
    if let Some(path) = sqlite_path(&cfg.state.url).filter(|p| !p.exists()) {
        println!(
            "state database: {} does not exist yet; it is created at the first start",
            path.display()
        );
    } else {
        let backend = SqlStore::ping(&cfg.state.url)
            .await
            .map_err(|e| anyhow!("state.url: {e}"))?;
        println!("state database: ok ({backend:?})");
    }
    if cfg.source.admin_key.is_some() {
        use crate::source::Source;
        let models = gateway(cfg)?
            .models()
            .await
            .map_err(|e| anyhow!("source.api_url: {e}"))?;
        println!("gateway: ok ({} models in the catalogue)", models.len());
    }
    Ok(())
}

/// The file of a `sqlite:` URL (none for other schemes or in-memory databases).
fn sqlite_path(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let file = rest.split('?').next().unwrap_or(rest);
    (!file.is_empty() && !file.contains(":memory:")).then(|| PathBuf::from(file))
}

fn rules_summary(r: &Rules) -> String {
    format!(
        "{} no_cache, {} oversized_model, {} retry_loop rules",
        r.no_cache.len(),
        r.oversized_model.len(),
        r.retry_loop.len()
    )
}

/// The detector a configuration describes.
pub fn detector(cfg: &Config) -> Detector {
    Detector {
        rules: cfg.rules.clone(),
        group_by: cfg.group_by.clone(),
        baseline_samples: cfg.detection.baseline_samples,
        max_candidates: cfg.detection.max_candidates,
    }
}

/// A gateway client for a configuration; fails without an admin key.
pub fn gateway(cfg: &Config) -> anyhow::Result<GatewaySource> {
    let key = cfg.source.admin_key.as_ref().ok_or_else(|| {
        anyhow!(
            "no admin key: set COSTWATCH_ADMIN_KEY or source.admin_key_file in {}",
            cfg.path.display()
        )
    })?;
    let s = &cfg.source;
    let limits = HttpLimits {
        timeout: s.timeout,
        connect_timeout: s.connect_timeout,
        max_retries: s.max_retries,
        retry_base: s.retry_base,
        retry_max: s.retry_max,
        max_body_bytes: s.max_body_bytes,
    };
    Ok(GatewaySource::new(
        s.api_url.clone(),
        key,
        s.page_limit,
        s.labels.clone(),
        limits,
    )?)
}

async fn once(a: OnceArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = a.at.unwrap_or_else(|| clock.now());
    let pipeline = main_pipeline(&cfg, clock).await?;
    let mut out = std::io::stdout().lock();
    let mut printed = 0usize;
    let result = pipeline
        .run_due(now, |r| {
            for f in &r.new_findings {
                let _ = writeln!(out, "{}", table_row(f));
                printed += 1;
            }
        })
        .await;
    match result {
        Ok(reports) => {
            eprintln!(
                "{} windows processed, {printed} new findings",
                reports.len()
            );
            Ok(())
        }
        Err(e) => Err(Exit::Failed(anyhow!(e).context(
            "stopped; the failed window stays due and is retried on the next run",
        ))),
    }
}

async fn test_alert(a: RunArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let channels = crate::app::channels(&cfg)?;
    if channels.is_empty() {
        return Err(Exit::Failed(anyhow!(
            "no channel is configured (notify.email, notify.webhooks)"
        )));
    }
    let alert = crate::notify::sample_alert(Utc::now());
    let mut failed = 0;
    for c in &channels {
        match c.send_boxed(&alert).await {
            Ok(()) => println!("{}: sent", c.name()),
            Err(e) => {
                failed += 1;
                println!("{}: FAILED: {e}", c.name());
            }
        }
    }
    if failed > 0 {
        return Err(Exit::Failed(anyhow!(
            "{failed} of {} channels failed",
            channels.len()
        )));
    }
    Ok(())
}

/// The pipeline of the `main` job a configuration describes: its state
/// database (opened and migrated), gateway, detector and windows.
pub async fn main_pipeline(
    cfg: &Config,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Pipeline<GatewaySource, SqlStore>> {
    let store = SqlStore::open_with(&cfg.state.url, cfg.state.max_connections)
        .await
        .context("cannot open the state database")?;
    let schedule = Schedule {
        job: "main".to_owned(),
        size: cfg.windows.size,
        settle_lag: cfg.windows.settle_lag,
        start: cfg.windows.start,
        max_backfill: cfg.windows.max_backfill,
    };
    Ok(Pipeline::new(
        gateway(cfg)?,
        store,
        detector(cfg),
        schedule,
        cfg.detection.drilldown_concurrency,
        clock,
    ))
}

/// One finding as a JSON line with the documented fields.
pub fn jsonl_row(f: &Finding) -> serde_json::Value {
    serde_json::json!({
        "kind": f.kind,
        "session_id": f.session_id,
        "window_start": f.window.start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "window_end": f.window.end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "severity": f.severity,
        "rule": f.rule,
        "group": f.group,
        "labels": f.labels,
        "cost_usd": f.cost_usd,
        "impact_usd": f.impact_usd,
        "evidence": f.evidence,
        "explanation": f.explanation,
    })
}

fn table_row(f: &Finding) -> String {
    format!(
        "{}  {:<15} {:<8} {:<34} {:<26} +${:<9.5} {}",
        f.window.start.format("%Y-%m-%d %H:%M"),
        f.kind.as_str(),
        f.severity.as_str(),
        f.session_id,
        f.group,
        f.impact_usd,
        f.explanation
    )
}

/// Rules and settings used when no configuration file is given.
fn default_detector(rules_path: &std::path::Path) -> Result<Detector, Exit> {
    let rules = config::load_rules(&[rules_path.to_path_buf()])?;
    Ok(Detector {
        rules,
        group_by: vec!["feature".to_owned()],
        baseline_samples: 512,
        max_candidates: 10_000,
    })
}

async fn backtest_cmd(a: BacktestArgs) -> Result<(), Exit> {
    let cfg = a.config.as_ref().map(|p| config::load(p)).transpose()?;
    let (detector, window, concurrency) = match &cfg {
        Some(c) => (
            detector(c),
            c.windows.size,
            c.detection.drilldown_concurrency,
        ),
        None if a.simulate => (default_detector(&a.rules)?, Duration::from_secs(900), 4),
        None => {
            return Err(Exit::Failed(anyhow!(
                "backtest needs --config FILE (or --simulate)"
            )));
        }
    };
    let mut progress = Progress::new(a.format);
    if a.simulate {
        let params = ScenarioParams {
            seed: a.seed,
            days: a.days,
            ..ScenarioParams::default()
        };
        let from = a.from.unwrap_or(params.start);
        let to =
            a.to.unwrap_or(params.start + ChronoDuration::days(i64::from(params.days)));
        let dataset = Arc::new(scenario::generate(&params));
        let truth = dataset.truth.by_kind.clone();
        let sim = SimServer::start(dataset, SimOptions::default())
            .await
            .context("cannot start the simulator")?;
        let source = sim_source(&sim)?;
        let replay = backtest::replay(
            source,
            detector,
            &a.state,
            from,
            to,
            window,
            concurrency,
            Arc::new(SystemClock),
            |r| progress.window(r),
        )
        .await
        .map_err(|e| anyhow!(e))?;
        progress.done(&replay);
        let scores = backtest::score(&replay.findings, &truth);
        eprint!("\n{}", backtest::score_table(&scores));
        if a.spend_preview {
            let source = sim_source(&sim)?;
            let det = match &cfg {
                Some(c) => crate::cli::detector(c),
                None => default_detector(&a.rules)?,
            };
            alert_replay(&a, cfg.as_ref(), source, det, from, to, window).await?;
        }
        let _ = sim.shutdown().await;
        return Ok(());
    }
    let cfg = cfg.ok_or_else(|| anyhow!("backtest needs --config FILE"))?;
    let (Some(from), Some(to)) = (a.from, a.to) else {
        return Err(Exit::Failed(anyhow!("backtest needs --from and --to")));
    };
    let replay = backtest::replay(
        gateway(&cfg)?,
        detector,
        &a.state,
        from,
        to,
        window,
        concurrency,
        Arc::new(SystemClock),
        |r| progress.window(r),
    )
    .await
    .map_err(|e| anyhow!(e))?;
    progress.done(&replay);
    if a.spend_preview || a.investigate {
        alert_replay(
            &a,
            Some(&cfg),
            gateway(&cfg)?,
            crate::cli::detector(&cfg),
            from,
            to,
            cfg.windows.size,
        )
        .await?;
    }
    Ok(())
}

/// `--spend-preview` and `--investigate`: the range again through the
/// daemon's tick, reporting escalations and what they cost (or would).
async fn alert_replay<S>(
    a: &BacktestArgs,
    cfg: Option<&Config>,
    source: S,
    det: Detector,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
) -> Result<(), Exit>
where
    S: crate::source::Source + Clone + 'static,
{
    use crate::investigate::budget::Prices;
    let inv = cfg.map(|c| c.investigation.clone());
    let policy = match cfg {
        Some(c) => crate::app::policy(c),
        None => crate::incidents::AlertPolicy {
            cooldown: Duration::from_secs(6 * 3600),
            realert_growth: 2.0,
            resolve_after: Duration::from_secs(2 * 3600),
            send_resolved: true,
            top_sessions: 5,
            summary_after_windows: 4,
            gateway_ui_url: None,
        },
    };
    let escalation = match (a.investigate, cfg) {
        (true, Some(c)) => {
            let mut c = c.clone();
            c.investigation.enabled = true;
            crate::app::escalation(&c).await?
        }
        _ => None,
    };
    let (kinds, min_severity, max_per_hour, per_run, per_day, model) = match &inv {
        Some(i) => (
            i.kinds.clone(),
            i.min_severity,
            i.max_per_hour,
            i.max_usd_per_run,
            i.max_usd_per_day,
            i.model.clone(),
        ),
        None => (
            Kind::ALL.to_vec(),
            crate::config::Severity::Warning,
            6,
            0.05,
            1.0,
            "gpt-6-luna".to_owned(),
        ),
    };
    let prices = match inv.as_ref().and_then(|i| i.prices) {
        Some((i, c, o)) => Prices {
            input_usd_per_mtok: i,
            cached_input_usd_per_mtok: c,
            output_usd_per_mtok: o,
        },
        None => {
            let models = source
                .models()
                .await
                .map_err(|e| anyhow!("model catalogue: {e}"))?;
            let m = models.iter().find(|m| m.id == model).ok_or_else(|| {
                anyhow!(
                    "investigation.model {model} is not in the catalogue: set investigation.prices"
                )
            })?;
            Prices::from_catalogue(m)
        }
    };
    let replay = backtest::replay_alerts(source, det, from, to, window, policy, escalation)
        .await
        .map_err(|e| anyhow!(e))?;
    let wants = |al: &crate::notify::Alert| {
        al.status == crate::notify::AlertStatus::Firing
            && al.severity >= min_severity
            && al.kind.waste().is_some_and(|k| kinds.contains(&k))
    };
    let p = backtest::spend_preview(
        &replay.alerts,
        wants,
        max_per_hour,
        &prices,
        per_run,
        per_day,
    );
    eprintln!(
        "\nalerts: {} over the range; {} would be investigated ({} more over escalate.max_per_hour)",
        replay.alerts.len(),
        p.investigations,
        p.over_hourly_limit
    );
    eprintln!(
        "spend preview on {model}: about ${:.4} expected (a typical run: {} prompt + {} completion tokens), ${:.4} at most (every run at its ${per_run} cap, days capped at ${per_day}); busiest day ${:.4}",
        p.typical_usd,
        backtest::TYPICAL_RUN_TOKENS.0,
        backtest::TYPICAL_RUN_TOKENS.1,
        p.worst_usd,
        p.busiest_day_usd
    );
    if a.investigate {
        eprintln!(
            "investigated: {} runs, ${:.6} spent",
            replay.investigations, replay.investigation_usd
        );
        for al in replay.alerts.iter().filter(|al| al.investigation.is_some()) {
            let inv = al.investigation.as_ref().map(|i| i.summary.as_str());
            println!("{}\t{}", al.title, inv.unwrap_or(""));
        }
    }
    Ok(())
}

/// A gateway client pointed at the simulator.
fn sim_source(sim: &SimServer) -> anyhow::Result<GatewaySource> {
    let url = url::Url::parse(&sim.base_url()).context("simulator url")?;
    let limits = HttpLimits {
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(5),
        max_retries: 3,
        retry_base: Duration::from_millis(100),
        retry_max: Duration::from_secs(5),
        max_body_bytes: 8 << 20,
    };
    Ok(GatewaySource::new(
        url,
        &Secret::new(sim.admin_key()),
        50,
        Labels::new(),
        limits,
    )?)
}

/// Prints findings as windows complete, and progress on stderr.
struct Progress {
    format: Format,
    windows: usize,
    findings: usize,
}

impl Progress {
    fn new(format: Format) -> Self {
        Progress {
            format,
            windows: 0,
            findings: 0,
        }
    }

    fn window(&mut self, r: &WindowReport) {
        self.windows += 1;
        self.findings += r.new_findings.len();
        let mut out = std::io::stdout().lock();
        for f in &r.new_findings {
            let _ = match self.format {
                Format::Jsonl => writeln!(out, "{}", jsonl_row(f)),
                Format::Table => writeln!(out, "{}", table_row(f)),
            };
        }
        if self.windows.is_multiple_of(96) {
            eprintln!(
                "backtest: {} windows up to {}, {} findings",
                self.windows, r.window.end, self.findings
            );
        }
    }

    fn done(&self, r: &Replay) {
        eprintln!(
            "backtest: {} windows, {} session rows, {} drill-downs, {} findings",
            r.windows,
            r.sessions,
            r.drilldowns,
            r.findings.len()
        );
    }
}

async fn demo(a: DemoArgs) -> Result<(), Exit> {
    let detector = default_detector(&a.rules)?;
    println!(
        "costwatch demo: the real pipeline against the built-in gateway simulator on 127.0.0.1\n"
    );

    // 1. The seed window: one example of each kind of waste beside its fixed twin.
    let seed = Dataset::from_fixture_str(SEED_WINDOW).context("embedded seed window")?;
    let (seed_from, seed_to) = seed
        .time_range()
        .ok_or_else(|| anyhow!("empty seed window"))?;
    let seed_truth = seed.truth.by_kind.clone();
    let sim = SimServer::start(Arc::new(seed), SimOptions::default())
        .await
        .context("cannot start the simulator")?;
    println!(
        "1. Seed window ({} .. {}), served at {}",
        seed_from.format("%Y-%m-%d %H:%M"),
        seed_to.format("%H:%M"),
        sim.base_url()
    );
    let hour = Duration::from_secs(3600);
    let replay = backtest::replay(
        sim_source(&sim)?,
        detector.clone(),
        "sqlite::memory:",
        seed_from,
        seed_to + ChronoDuration::hours(1),
        hour,
        4,
        Arc::new(SystemClock),
        |_| {},
    )
    .await
    .map_err(|e| anyhow!(e))?;
    let _ = sim.shutdown().await;
    for f in &replay.findings {
        println!(
            "   {:<15} {:<30} +${:.5}  {}",
            f.kind.as_str(),
            f.session_id,
            f.impact_usd,
            f.explanation
        );
    }
    print!(
        "{}",
        indent(&backtest::score_table(&backtest::score(
            &replay.findings,
            &seed_truth
        )))
    );
    demo_investigation(&detector).await?;

    // 2. Days of labelled traffic with incidents and look-alikes.
    let params = ScenarioParams {
        seed: a.seed,
        days: a.days,
        ..ScenarioParams::default()
    };
    let dataset = Arc::new(scenario::generate(&params));
    let truth = dataset.truth.by_kind.clone();
    println!(
        "\n2. {} days of simulated traffic (seed {}): {} sessions, {} requests",
        params.days,
        params.seed,
        dataset.sessions.len(),
        dataset.request_count()
    );
    let sim = SimServer::start(dataset, SimOptions::default())
        .await
        .context("cannot start the simulator")?;
    let from = params.start;
    let to = from + ChronoDuration::days(i64::from(params.days));
    let started = std::time::Instant::now();
    let replay = backtest::replay(
        sim_source(&sim)?,
        detector,
        "sqlite::memory:",
        from,
        to,
        Duration::from_secs(900),
        4,
        Arc::new(SystemClock),
        |_| {},
    )
    .await
    .map_err(|e| anyhow!(e))?;
    let _ = sim.shutdown().await;
    println!(
        "   {} windows of 15 minutes, {} session rows, {} request drill-downs, {:.1} s",
        replay.windows,
        replay.sessions,
        replay.drilldowns,
        started.elapsed().as_secs_f64()
    );
    for kind in Kind::ALL {
        let of_kind: Vec<&Finding> = replay.findings.iter().filter(|f| f.kind == kind).collect();
        let impact: f64 = of_kind.iter().map(|f| f.impact_usd).sum();
        println!(
            "\n   {kind}: {} sessions, ${impact:.4} above their peers",
            of_kind.len()
        );
        let mut top = of_kind.clone();
        top.sort_by(|a, b| b.impact_usd.total_cmp(&a.impact_usd));
        for f in top.iter().take(3) {
            println!(
                "     {} {} +${:.5}\n       {}",
                f.window.start.format("%m-%d %H:%M"),
                f.session_id,
                f.impact_usd,
                f.explanation
            );
        }
    }
    println!("\n   Against the simulator's truth:");
    print!(
        "{}",
        indent(&backtest::score_table(&backtest::score(
            &replay.findings,
            &truth
        )))
    );
    Ok(())
}

/// Alerts for the seed window through the real daemon tick, each escalated to
/// an investigation: the simulator's MCP tools and its scripted model.
async fn demo_investigation(detector: &Detector) -> Result<(), Exit> {
    use crate::clock::FakeClock;
    use crate::daemon::{Daemon, DaemonSettings};
    use crate::escalate::Escalation;
    use crate::investigate::budget::{Caps, Prices};
    use crate::investigate::mcp::McpClient;
    use crate::investigate::model::ModelClient;
    use crate::investigate::run::RunOptions;
    use crate::notify::outbox::{Channel, RetryPolicy};
    use costwatch_sim::model::{Script, ScriptedModelServer};

    let seed = Dataset::from_fixture_str(SEED_WINDOW).context("embedded seed window")?;
    let sim = SimServer::start(Arc::new(seed), SimOptions::default())
        .await
        .context("cannot start the simulator")?;
    let model = ScriptedModelServer::start(Script::Investigator)
        .await
        .context("cannot start the scripted model")?;
    let limits = HttpLimits {
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base: Duration::from_millis(100),
        retry_max: Duration::from_secs(5),
        max_body_bytes: 4 << 20,
    };
    let url = |u: String| url::Url::parse(&u).context("simulator url");
    let options = RunOptions::default();
    let escalation = Escalation {
        tools: McpClient::new(
            url(sim.mcp_url())?,
            &Secret::new(sim.admin_key()),
            options.tools.clone(),
            Duration::from_secs(10),
        )
        .map_err(|e| anyhow!("mcp: {e}"))?,
        model: ModelClient::new(
            url(model.base_url())?,
            &Secret::new(model.inference_key()),
            "gpt-6-luna",
            limits,
        )
        .map_err(|e| anyhow!("model: {e}"))?,
        caps: Caps::default(),
        prices: Prices {
            input_usd_per_mtok: 0.10,
            cached_input_usd_per_mtok: 0.01,
            output_usd_per_mtok: 0.40,
        },
        options,
        kinds: Kind::ALL.to_vec(),
        min_severity: crate::config::Severity::Info,
        max_per_hour: 10,
    };
    let collected = Arc::new(Collect::default());
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(SEED_DAY_END));
    let store = SqlStore::open("sqlite::memory:").await.context("state")?;
    let schedule = Schedule {
        job: "main".to_owned(),
        size: Duration::from_secs(3600),
        settle_lag: Duration::from_secs(120),
        start: Some(SEED_DAY_END - ChronoDuration::minutes(65)),
        max_backfill: Duration::from_secs(86_400),
    };
    let pipeline = Pipeline::new(
        sim_source(&sim)?,
        store,
        detector.clone(),
        schedule,
        4,
        clock.clone(),
    );
    let settings = DaemonSettings {
        policy: crate::incidents::AlertPolicy {
            cooldown: Duration::from_secs(6 * 3600),
            realert_growth: 2.0,
            resolve_after: Duration::from_secs(2 * 3600),
            send_resolved: true,
            top_sessions: 5,
            summary_after_windows: 4,
            gateway_ui_url: None,
        },
        max_catch_up_windows: 10,
        max_backfill: Duration::from_secs(86_400),
        delivery_deadline: Duration::from_secs(3600),
        retry: RetryPolicy {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
        },
        channels: vec![collected.clone() as Arc<dyn Channel>],
        metrics: Arc::new(crate::ops::metrics::Metrics::new()),
        replica: "demo".to_owned(),
        lease_ttl: Duration::from_secs(60),
        claim_ttl: Duration::from_secs(40),
        escalation: Some(Arc::new(escalation)),
    };
    let daemon = Daemon::new(pipeline, settings, clock);
    daemon.tick().await.map_err(|e| anyhow!(e))?;
    println!(
        "\n   Alerts, each escalated to an investigation (simulated MCP tools, scripted model):"
    );
    for a in collected.0.lock().map(|v| v.clone()).unwrap_or_default() {
        println!("   {}", a.title);
        if let Some(inv) = &a.investigation {
            println!(
                "     investigation: {} rounds, {} tool calls, {} input + {} output tokens, ${:.6}, {}",
                inv.rounds,
                inv.tool_calls,
                inv.input_tokens,
                inv.output_tokens,
                inv.cost_usd,
                inv.stop_reason
            );
            println!("     answer: {}", inv.summary);
        }
    }
    let _ = model.shutdown().await;
    let _ = sim.shutdown().await;
    Ok(())
}

/// The end of the seed window's hour plus the settle lag.
const SEED_DAY_END: DateTime<Utc> = match DateTime::from_timestamp(1_791_720_300, 0) {
    Some(t) => t,
    None => DateTime::<Utc>::UNIX_EPOCH,
};

/// A channel that keeps what it is sent (for the demo's printout).
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<crate::notify::Alert>>);

impl crate::notify::Notifier for Collect {
    fn name(&self) -> &str {
        "demo"
    }

    async fn send(&self, alert: &crate::notify::Alert) -> Result<(), crate::notify::NotifyError> {
        if let Ok(mut v) = self.0.lock() {
            v.push(alert.clone());
        }
        Ok(())
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}

/// The seed window: 26 sessions, one example of each kind of waste beside its fixed twin.
use costwatch_sim::SEED_WINDOW;
