//! The command line: `check`, `run`, `once`, `test-alert`, `backtest`,
//! `demo`, `schema`, `investigation`, and the operator's `findings`,
//! `incidents`, `incident show`, `silence` and `alerts`, and `mcp`. It parses and
//! prints; [`costwatch::app`] builds and runs the parts.

mod alerts;
mod backtest;
mod check;
mod demo;
mod incident;
mod inspect;
mod investigation;
mod manual;
mod mcp;
mod once;
mod output;
mod silence;
mod status;
mod table;
#[cfg(test)]
mod tests_manual;
mod when;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use costwatch::app::{App, AppError};
use costwatch::config::{self, ConfigError};
use std::path::PathBuf;

/// Finds wasted LLM spend in an LLM gateway's logs.
#[derive(Debug, Parser)]
#[command(
    name = "costwatch",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("COSTWATCH_COMMIT"), ")"),
    about
)]
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
    /// Print the JSON Schema of rule files, or of configuration files.
    Schema(SchemaArgs),
    /// Print the configuration reference (markdown), the example file, or
    /// the rules reference.
    Reference(ReferenceArgs),
    /// Show the rules built into the binary.
    Rules(RulesArgs),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions(CompletionsArgs),
    /// Print the manual page (roff) on stdout, e.g. `costwatch man > costwatch.1`.
    Man,
    /// List the findings in the state database.
    Findings(inspect::FindingsArgs),
    /// List the incidents in the state database.
    Incidents(inspect::IncidentsArgs),
    /// How the daemon stands: the watermark and its lag, the source's
    /// health, the open incidents and the day's investigation budget.
    Status(status::StatusArgs),
    /// Look at one incident.
    #[command(subcommand)]
    Incident(incident::IncidentCommand),
    /// Add, list and expire silences: notifications of matching incidents
    /// are held back while one is active.
    #[command(subcommand)]
    Silence(silence::SilenceCommand),
    /// Show what the next tick would send (a dry run; with --render, as
    /// each channel would receive it).
    Alerts(alerts::AlertsArgs),
    /// Show the investigations kept in a state database (`show RUN_ID`, `list`).
    Investigation(investigation::InvestigationArgs),
    /// Serve costwatch's read-only tools over MCP on stdin and stdout.
    Mcp(mcp::McpArgs),
}

/// `costwatch completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells `completions` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// Bash: source it, or put it in /usr/share/bash-completion/completions/costwatch.
    Bash,
    /// Zsh: put it as `_costwatch` in a folder of `$fpath`.
    Zsh,
    /// Fish: put it in ~/.config/fish/completions/costwatch.fish.
    Fish,
}

/// `costwatch schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// The schema of configuration files instead of rule files.
    #[arg(long)]
    pub config: bool,
}

/// `costwatch reference`.
#[derive(Debug, Args)]
pub struct ReferenceArgs {
    /// The example configuration file, every key at its default, instead.
    #[arg(long, conflicts_with = "rules")]
    pub example: bool,
    /// The rules reference (every parameter of every kind of rule) instead.
    #[arg(long)]
    pub rules: bool,
}

/// `costwatch rules`.
#[derive(Debug, Args)]
pub struct RulesArgs {
    /// Print the built-in rule files, each after a `# file: NAME` line: the
    /// starting point for rules of your own.
    #[arg(long)]
    pub print_defaults: bool,
}

impl Command {
    /// Commands that print their own results log only warnings unless asked.
    pub fn quiet_by_default(&self) -> bool {
        matches!(
            self,
            Command::Backtest(_)
                | Command::Once(_)
                | Command::Demo(_)
                | Command::Check(_)
                | Command::Schema(_)
                | Command::Reference(_)
                | Command::Rules(_)
                | Command::Completions(_)
                | Command::Man
                | Command::Findings(_)
                | Command::Incidents(_)
                | Command::Status(_)
                | Command::Incident(_)
                | Command::Silence(_)
                | Command::Alerts(_)
                | Command::Investigation(_)
                | Command::Mcp(_)
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
    /// With `--simulate`: read the simulated traffic in this gateway's form.
    #[arg(long, value_enum, default_value_t = costwatch::source::SourceKind::Reference, requires = "simulate")]
    pub source: costwatch::source::SourceKind,
    /// Simulation seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Simulated days.
    #[arg(long, default_value_t = 4)]
    pub days: u32,
    /// Rules to use without a configuration file (a file or folder); the
    /// built-in rules when left out.
    #[arg(long)]
    pub rules: Option<PathBuf>,
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
    /// Rules to use (a file or folder); the built-in rules when left out.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Only serve the simulated traffic's gateway (REST and MCP) on this
    /// address until stopped, for `costwatch run` to read: the `--days`
    /// before the current hour.
    #[arg(long, value_name = "ADDR", conflicts_with = "rules")]
    pub serve: Option<std::net::SocketAddr>,
    /// Read the simulated traffic in this gateway's form (with `--serve`:
    /// print the settings for it).
    #[arg(long, value_enum, default_value_t = costwatch::source::SourceKind::Reference)]
    pub source: costwatch::source::SourceKind,
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

impl From<AppError> for Exit {
    fn from(e: AppError) -> Self {
        match e {
            AppError::Config(c) => Exit::Config(c),
            e => Exit::Failed(e.into()),
        }
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
    let sink = LogSink::detect();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(sink == LogSink::Terminal);
    let _ = match (format, sink) {
        // The journal stamps every line itself.
        (LogFormat::Text, LogSink::Journal) => builder.without_time().try_init(),
        (LogFormat::Text, _) => builder.try_init(),
        (LogFormat::Json, _) => builder.json().flatten_event(true).try_init(),
    };
}

/// Where stderr goes, which decides colours and timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogSink {
    /// A person's terminal: colours.
    Terminal,
    /// systemd's journal (`JOURNAL_STREAM` names stderr): plain text, no
    /// timestamp of our own.
    Journal,
    /// A file or a pipe: plain text with timestamps.
    Plain,
}

impl LogSink {
    fn detect() -> LogSink {
        use std::io::IsTerminal;
        if journal_is_stderr(std::env::var("JOURNAL_STREAM").ok().as_deref()) {
            LogSink::Journal
        } else if std::io::stderr().is_terminal() {
            LogSink::Terminal
        } else {
            LogSink::Plain
        }
    }
}

/// Whether `JOURNAL_STREAM` (`device:inode`, set by systemd) names this
/// process's stderr, as sd_journal_stream_fd(3) advises checking.
fn journal_is_stderr(journal_stream: Option<&str>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) else {
        return false;
    };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    dev.parse::<u64>().ok() == Some(meta.dev()) && ino.parse::<u64>().ok() == Some(meta.ino())
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<(), Exit> {
    match cli.command {
        Command::Check(a) => check::check(a).await,
        Command::Run(a) => {
            let cfg = config::load(&a.config)?;
            App::build(&cfg).await?.run_until_stopped().await?;
            Ok(())
        }
        Command::TestAlert(a) => check::test_alert(a).await,
        Command::Once(a) => once::once(a).await,
        Command::Backtest(a) => backtest::backtest(a).await,
        Command::Demo(a) => demo::demo(a).await,
        Command::Schema(a) => manual::schema(a),
        Command::Reference(a) => manual::reference(a),
        Command::Rules(a) => check::rules(a),
        Command::Completions(a) => manual::completions(a.shell),
        Command::Man => manual::man(),
        Command::Findings(a) => inspect::findings(a).await,
        Command::Incidents(a) => inspect::incidents(a).await,
        Command::Status(a) => status::status(a).await,
        Command::Incident(c) => incident::incident(c).await,
        Command::Silence(c) => silence::silence(c).await,
        Command::Alerts(a) => alerts::alerts(a).await,
        Command::Investigation(a) => investigation::investigation(a).await,
        Command::Mcp(a) => mcp::mcp(a).await,
    }
}
