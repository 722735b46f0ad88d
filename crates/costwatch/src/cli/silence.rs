//! `costwatch silence add | list | expire`: silences kept in the state
//! database, so every replica honours them.

use super::Exit;
use super::inspect::IncidentKind;
use super::table::{Column, ListFormat, Table, json_text, print, terminal_width};
use super::when::{parse_duration, parse_time, rfc3339, short};
use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use costwatch::app;
use costwatch::clock::{Clock, SystemClock};
use costwatch::config;
use costwatch::printable::printable;
use costwatch::silence::{Silence, SilenceEnd, SilenceRequest};
use costwatch::store::SilenceStore;
use costwatch::store::inspect::{IncidentQuery, Inspect};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// `costwatch silence`.
#[derive(Debug, Subcommand)]
pub enum SilenceCommand {
    /// Hold back the notifications of matching incidents for a while; prints
    /// the new silence's id.
    Add(AddArgs),
    /// List the active silences (with --all, the ended ones too).
    List(ListArgs),
    /// End a silence now.
    Expire(ExpireArgs),
}

/// `costwatch silence add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// Configuration file (its state database keeps the silence).
    #[arg(long, short)]
    pub config: PathBuf,
    /// A label value the incident's group must have, e.g. `feature=batch`
    /// (repeat: all must hold). Only `group_by` labels can match.
    #[arg(long = "match", value_name = "LABEL=VALUE")]
    pub matchers: Vec<String>,
    /// Only incidents of this kind.
    #[arg(long, value_enum)]
    pub kind: Option<IncidentKind>,
    /// Only the incident of this peer group, as shown (`feature=batch`).
    #[arg(long)]
    pub group: Option<String>,
    /// How long, from now (`24h`, `90m`, `7d`).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration, conflicts_with = "until")]
    pub duration: Option<Duration>,
    /// Until when (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    pub until: Option<DateTime<Utc>>,
    /// Why: shown in `silence list`, `incident show` and the log.
    #[arg(long)]
    pub reason: Option<String>,
    /// Who; by default the user running the command.
    #[arg(long)]
    pub author: Option<String>,
}

/// `costwatch silence list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Configuration file (its state database is read).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Also the silences that ended.
    #[arg(long)]
    pub all: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

/// `costwatch silence expire`.
#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// The silence's id (from `silence add` or `silence list`).
    pub id: i64,
    /// Configuration file (its state database keeps the silence).
    #[arg(long, short)]
    pub config: PathBuf,
}

pub async fn silence(c: SilenceCommand) -> Result<(), Exit> {
    match c {
        SilenceCommand::Add(a) => add(a).await,
        SilenceCommand::List(a) => list(a).await,
        SilenceCommand::Expire(a) => expire(a).await,
    }
}

/// The user running the command.
fn user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}

async fn add(a: AddArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let now = SystemClock.now();
    let request = SilenceRequest {
        matchers: a.matchers,
        kind: a.kind.map(|k| k.as_str().to_owned()),
        group: a.group,
        end: match (a.duration, a.until) {
            (Some(d), _) => Some(SilenceEnd::For(d)),
            (None, Some(t)) => Some(SilenceEnd::Until(t)),
            (None, None) => None,
        },
        author: a.author.unwrap_or_else(user),
        reason: a.reason.unwrap_or_default(),
    };
    let new = request
        .check(now, &cfg.group_by)
        .map_err(anyhow::Error::new)?;
    let store = app::open_state(&cfg, true).await?;
    let s = store
        .add_silence(&new, now)
        .await
        .context("cannot store the silence")?;
    let open = store
        .list_incidents(&IncidentQuery {
            open: Some(true),
            ..IncidentQuery::default()
        })
        .await
        .context("cannot read the incidents")?;
    store.close().await;
    let matched = open.iter().filter(|r| s.matches(&r.incident)).count();
    println!("{}", s.id);
    eprintln!(
        "silence {} holds back the notifications of incidents matching {} until {} (it matches {matched} open incident{} now)",
        s.id,
        printable(&s.conditions()),
        rfc3339(s.ends_at),
        if matched == 1 { "" } else { "s" }
    );
    Ok(())
}

async fn list(a: ListArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let store = app::open_state(&cfg, false).await?;
    let now = SystemClock.now();
    let silences = store
        .silences(a.all, now)
        .await
        .context("cannot read the silences")?;
    store.close().await;
    let text = match a.format {
        ListFormat::Json => {
            let all: Vec<serde_json::Value> = silences.iter().map(|s| as_json(s, now)).collect();
            json_text(&all)? + "\n"
        }
        ListFormat::Csv => {
            let mut t = Table::new(
                &[
                    "ID", "STATE", "KIND", "GROUP", "MATCHERS", "STARTS", "ENDS", "EXPIRED",
                    "AUTHOR", "REASON",
                ]
                .map(Column::fixed),
            );
            for s in &silences {
                let matchers: Vec<String> =
                    s.matchers.iter().map(|(k, v)| format!("{k}={v}")).collect();
                t.push(vec![
                    s.id.to_string(),
                    s.state(now).to_owned(),
                    s.kind.clone().unwrap_or_default(),
                    s.group.clone().unwrap_or_default(),
                    matchers.join(" "),
                    rfc3339(s.starts_at),
                    rfc3339(s.ends_at),
                    s.expired_at.map(rfc3339).unwrap_or_default(),
                    s.author.clone(),
                    s.reason.clone(),
                ]);
            }
            t.csv()
        }
        ListFormat::Table if silences.is_empty() => {
            eprintln!("no {}silences", if a.all { "" } else { "active " });
            String::new()
        }
        ListFormat::Table => {
            let mut t = Table::new(&[
                Column::number("ID"),
                Column::fixed("STATE"),
                Column::cut("MATCHES", 2),
                Column::fixed("STARTS"),
                Column::fixed("ENDS"),
                Column::cut("AUTHOR", 1),
                Column::cut("REASON", 3),
            ]);
            for s in &silences {
                t.push(vec![
                    s.id.to_string(),
                    s.state(now).to_owned(),
                    s.conditions(),
                    short(s.starts_at),
                    short(s.ends_at),
                    s.author.clone(),
                    s.reason.clone(),
                ]);
            }
            t.render(terminal_width())
        }
    };
    print(&text)?;
    Ok(())
}

fn as_json(s: &Silence, now: DateTime<Utc>) -> serde_json::Value {
    json!({
        "id": s.id,
        "state": s.state(now),
        "kind": s.kind,
        "group": s.group,
        "matchers": s.matchers,
        "starts_at": rfc3339(s.starts_at),
        "ends_at": rfc3339(s.ends_at),
        "expired_at": s.expired_at.map(rfc3339),
        "author": s.author,
        "reason": s.reason,
        "created_at": rfc3339(s.created_at),
    })
}

async fn expire(a: ExpireArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let store = app::open_state(&cfg, false).await?;
    let now = SystemClock.now();
    let result = store.expire_silence(a.id, now).await;
    store.close().await;
    let s = result.map_err(anyhow::Error::new)?;
    println!(
        "silence {} expired at {} ({}); the next evaluation notifies what it held back, as usual",
        s.id,
        rfc3339(s.ends_at),
        printable(&s.conditions())
    );
    Ok(())
}
