//! `costwatch investigation`: the investigations kept in a state database.

use super::Exit;
use anyhow::anyhow;
use clap::{Args, Subcommand};
use costwatch::config;
use costwatch::investigate::run::Investigation;
use costwatch::investigate::transcript::render_text;
use costwatch::notify::render::transcript_text;
use costwatch::printable::printable;
use costwatch::store::{SqlStore, Store};
use std::path::PathBuf;

/// `costwatch investigation`.
#[derive(Debug, Args)]
pub struct InvestigationArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: InvestigationAction,
}

/// What `costwatch investigation` does.
#[derive(Debug, Subcommand)]
pub enum InvestigationAction {
    /// Print one investigation's whole record: every round, every tool call
    /// and every result as the model saw it.
    Show {
        /// The run id (as alerts and `list` show it) or the notification's key.
        id: String,
        /// Where the investigations are kept.
        #[command(flatten)]
        state: StateArgs,
        /// Print the record as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// List the latest investigations, newest first.
    List {
        /// Where the investigations are kept.
        #[command(flatten)]
        state: StateArgs,
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

/// Which state database to read.
#[derive(Debug, Args)]
pub struct StateArgs {
    /// Configuration file: its state database is read.
    #[arg(long, short, required_unless_present = "state")]
    pub config: Option<PathBuf>,
    /// A state database URL instead (e.g. a backtest's `--state`).
    #[arg(long, conflicts_with = "config")]
    pub state: Option<String>,
}

impl StateArgs {
    async fn open(&self) -> Result<SqlStore, Exit> {
        let url = match (&self.state, &self.config) {
            (Some(url), _) => url.clone(),
            (None, Some(path)) => config::load(path)?.sections.state.url,
            (None, None) => return Err(Exit::Failed(anyhow!("give --config FILE or --state URL"))),
        };
        SqlStore::open(&url)
            .await
            .map_err(|e| Exit::Failed(anyhow!("cannot open the state database: {e}")))
    }
}

pub async fn investigation(a: InvestigationArgs) -> Result<(), Exit> {
    match a.action {
        InvestigationAction::Show { id, state, json } => {
            let store = state.open().await?;
            let stored = store
                .stored_investigation(&id)
                .await
                .map_err(|e| Exit::Failed(e.into()))?
                .ok_or_else(|| {
                    anyhow!("no investigation {} in this state database", printable(&id))
                })?;
            let record = stored
                .record_json
                .as_deref()
                .and_then(|j| serde_json::from_str::<Investigation>(j).ok());
            let text = match (json, &record) {
                (true, _) => stored
                    .record_json
                    .clone()
                    .map_or_else(|| serde_json::to_string(&stored.report), Ok)
                    .map_err(|e| anyhow!("cannot print the record: {e}"))?,
                (false, Some(inv)) => render_text(inv),
                (false, None) => format!(
                    "(kept before whole records were: tool results as the alert carried them)\n{}",
                    transcript_text(&stored.report)
                ),
            };
            for line in text.lines() {
                println!("{}", printable(line));
            }
            Ok(())
        }
        InvestigationAction::List { state, limit } => {
            let store = state.open().await?;
            let all = store
                .stored_investigations(limit)
                .await
                .map_err(|e| Exit::Failed(e.into()))?;
            for s in &all {
                let r = &s.report;
                println!(
                    "{}  {}  {}  ${:.6}  {} input tokens  {}",
                    s.started_at.format("%Y-%m-%dT%H:%M:%SZ"),
                    printable(&r.run_id),
                    r.stop_reason,
                    r.cost_usd,
                    r.input_tokens,
                    printable(&s.fingerprint)
                );
            }
            if all.is_empty() {
                eprintln!("no investigations kept here");
            }
            Ok(())
        }
    }
}
