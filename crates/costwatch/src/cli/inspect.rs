//! `costwatch findings` and `costwatch incidents`: what the state holds,
//! filtered, as a table, JSON or CSV.

use super::Exit;
use super::output::linked_row;
use super::table::{Column, ListFormat, Table, json_text, print, terminal_width};
use super::when::{When, parse_when, rfc3339, short};
use clap::{Args, ValueEnum};
use costwatch::app;
use costwatch::clock::{Clock, SystemClock};
use costwatch::config;
use costwatch::detect::{Finding, Kind};
use costwatch::silence::Silence;
use costwatch::store::SilenceStore;
use costwatch::store::inspect::{FindingQuery, IncidentQuery, IncidentRow, Inspect};
use serde_json::json;
use std::path::PathBuf;

/// The kind of an incident: a kind of waste, or the gateway's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum IncidentKind {
    /// Conversations that never read the prompt cache.
    NoCache,
    /// Premium models on tiny calls.
    OversizedModel,
    /// The same call again and again.
    RetryLoop,
    /// The gateway could not be read.
    SourceUnhealthy,
}

impl IncidentKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentKind::NoCache => Kind::NoCache.as_str(),
            IncidentKind::OversizedModel => Kind::OversizedModel.as_str(),
            IncidentKind::RetryLoop => Kind::RetryLoop.as_str(),
            IncidentKind::SourceUnhealthy => costwatch::incidents::SOURCE_UNHEALTHY,
        }
    }
}

/// Open or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Status {
    /// Going on (firing).
    #[value(alias = "firing")]
    Open,
    /// Over.
    Resolved,
}

/// `costwatch findings`.
#[derive(Debug, Args)]
pub struct FindingsArgs {
    /// Configuration file (its state database is read).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Only this kind (repeat for several).
    #[arg(long, value_enum)]
    pub kind: Vec<Kind>,
    /// Only this peer group, as shown (`feature=batch`).
    #[arg(long)]
    pub group: Option<String>,
    /// First seen in a window starting at or after this: RFC 3339, or a
    /// duration ago (`24h`).
    #[arg(long, value_parser = parse_when)]
    pub since: Option<When>,
    /// First seen in a window starting before this: RFC 3339, or a duration ago.
    #[arg(long, value_parser = parse_when)]
    pub until: Option<When>,
    /// At most this many, newest first; 0 for all.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

/// `costwatch incidents`.
#[derive(Debug, Args)]
pub struct IncidentsArgs {
    /// Configuration file (its state database is read).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Only this kind (repeat for several).
    #[arg(long, value_enum)]
    pub kind: Vec<IncidentKind>,
    /// Only this peer group, as shown (`feature=batch`).
    #[arg(long)]
    pub group: Option<String>,
    /// Only open or only resolved incidents.
    #[arg(long, value_enum)]
    pub status: Option<Status>,
    /// Active (last finding) at or after this: RFC 3339, or a duration ago (`24h`).
    #[arg(long, value_parser = parse_when)]
    pub since: Option<When>,
    /// Active (started) before this: RFC 3339, or a duration ago.
    #[arg(long, value_parser = parse_when)]
    pub until: Option<When>,
    /// At most this many, most recently active first; 0 for all.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

/// One more than the limit is read, to tell whether there were more.
fn one_more(limit: usize) -> Option<usize> {
    (limit > 0).then(|| limit.saturating_add(1))
}

/// Cuts `rows` to `limit` and says on stderr when some were left out.
fn keep<T>(rows: &mut Vec<T>, limit: usize, what: &str) {
    if limit > 0 && rows.len() > limit {
        rows.truncate(limit);
        eprintln!("showing the {limit} most recent {what}; --limit 0 shows all");
    }
}

fn usd(v: f64) -> String {
    format!("${v:.4}")
}

pub async fn findings(a: FindingsArgs) -> Result<(), Exit> {
    let mut cfg = config::load(&a.config)?;
    if a.format == ListFormat::Json {
        app::complete_links(&mut cfg).await;
    }
    let store = app::open_state(&cfg, false).await?;
    let now = SystemClock.now();
    let q = FindingQuery {
        kinds: a.kind.clone(),
        group: a.group.clone(),
        since: a.since.map(|w| w.at(now)),
        until: a.until.map(|w| w.at(now)),
        limit: one_more(a.limit),
    };
    let mut rows = store
        .list_findings(&q)
        .await
        .map_err(|e| anyhow::Error::new(e).context("cannot read the findings"))?;
    store.close().await;
    keep(&mut rows, a.limit, "findings");
    let text = match a.format {
        ListFormat::Json => {
            let links = cfg.alerts.session_links.as_ref();
            let all: Vec<serde_json::Value> = rows.iter().map(|f| linked_row(f, links)).collect();
            json_text(&all)? + "\n"
        }
        ListFormat::Csv => findings_csv(&rows).csv(),
        ListFormat::Table if rows.is_empty() => {
            eprintln!("no findings match");
            String::new()
        }
        ListFormat::Table => findings_table(&rows).render(terminal_width()),
    };
    print(&text)?;
    Ok(())
}

fn findings_table(rows: &[Finding]) -> Table {
    let mut t = Table::new(&[
        Column::fixed("WINDOW"),
        Column::fixed("KIND"),
        Column::fixed("SEVERITY"),
        Column::cut("SESSION", 2),
        Column::cut("GROUP", 1),
        Column::number("COST"),
        Column::number("IMPACT"),
        Column::cut("EXPLANATION", 3),
    ]);
    for f in rows {
        t.push(vec![
            short(f.window.start),
            f.kind.as_str().to_owned(),
            f.severity.as_str().to_owned(),
            f.session_id.clone(),
            f.group.clone(),
            usd(f.cost_usd),
            format!("+{}", usd(f.impact_usd)),
            f.explanation.clone(),
        ]);
    }
    t
}

fn findings_csv(rows: &[Finding]) -> Table {
    let mut t = Table::new(
        &[
            "WINDOW START",
            "WINDOW END",
            "KIND",
            "SEVERITY",
            "RULE",
            "GROUP",
            "SESSION ID",
            "COST USD",
            "IMPACT USD",
            "EXPLANATION",
        ]
        .map(Column::fixed),
    );
    for f in rows {
        t.push(vec![
            rfc3339(f.window.start),
            rfc3339(f.window.end),
            f.kind.as_str().to_owned(),
            f.severity.as_str().to_owned(),
            f.rule.clone(),
            f.group.clone(),
            f.session_id.clone(),
            f.cost_usd.to_string(),
            f.impact_usd.to_string(),
            f.explanation.clone(),
        ]);
    }
    t
}

pub async fn incidents(a: IncidentsArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let store = app::open_state(&cfg, false).await?;
    let now = SystemClock.now();
    let q = IncidentQuery {
        kinds: a.kind.iter().map(|k| k.as_str().to_owned()).collect(),
        group: a.group.clone(),
        open: a.status.map(|s| s == Status::Open),
        since: a.since.map(|w| w.at(now)),
        until: a.until.map(|w| w.at(now)),
        limit: one_more(a.limit),
    };
    let read = async {
        let rows = store.list_incidents(&q).await?;
        let silences = store.silences(false, now).await?;
        Ok::<_, costwatch::store::StoreError>((rows, silences))
    };
    let (mut rows, silences) = read
        .await
        .map_err(|e| anyhow::Error::new(e).context("cannot read the incidents"))?;
    store.close().await;
    keep(&mut rows, a.limit, "incidents");
    let silenced = |r: &IncidentRow| silenced_by(&silences, r, now);
    let text = match a.format {
        ListFormat::Json => {
            let all: Vec<serde_json::Value> =
                rows.iter().map(|r| incident_json(r, silenced(r))).collect();
            json_text(&all)? + "\n"
        }
        ListFormat::Csv => {
            let mut t = Table::new(
                &[
                    "FINGERPRINT",
                    "STATUS",
                    "KIND",
                    "SEVERITY",
                    "RULE",
                    "GROUP",
                    "SESSIONS",
                    "IMPACT USD",
                    "STARTED",
                    "LAST FINDING",
                    "NOTIFICATIONS",
                    "SILENCED BY",
                    "UPDATED",
                ]
                .map(Column::fixed),
            );
            for r in &rows {
                let i = &r.incident;
                t.push(vec![
                    i.fingerprint.clone(),
                    status(i.firing).to_owned(),
                    i.kind.clone(),
                    i.severity.as_str().to_owned(),
                    i.rule.clone(),
                    i.group.clone(),
                    i.session_count.to_string(),
                    i.impact_usd.to_string(),
                    rfc3339(i.started),
                    rfc3339(i.last_finding),
                    i.sequence.to_string(),
                    silenced(r).map(|s| s.to_string()).unwrap_or_default(),
                    rfc3339(r.updated_at),
                ]);
            }
            t.csv()
        }
        ListFormat::Table if rows.is_empty() => {
            eprintln!("no incidents match");
            String::new()
        }
        ListFormat::Table => {
            // Narrow enough for a terminal: the fingerprint's first 12
            // characters (`incident show` takes them), times without the
            // year; severity and rule are in JSON, CSV and `incident show`.
            let mut t = Table::new(&[
                Column::fixed("INCIDENT"),
                Column::fixed("STATUS"),
                Column::fixed("KIND"),
                Column::cut("GROUP", 1),
                Column::number("SESSIONS"),
                Column::number("IMPACT"),
                Column::fixed("STARTED"),
                Column::fixed("LAST FINDING"),
                Column::number("SENT"),
                Column::fixed("SILENCED"),
            ]);
            for r in &rows {
                let i = &r.incident;
                t.push(vec![
                    i.fingerprint.chars().take(12).collect(),
                    status(i.firing).to_owned(),
                    i.kind.clone(),
                    i.group.clone(),
                    i.session_count.to_string(),
                    format!("+{}", usd(i.impact_usd)),
                    i.started.format("%m-%d %H:%M").to_string(),
                    i.last_finding.format("%m-%d %H:%M").to_string(),
                    i.sequence.to_string(),
                    silenced(r).map_or_else(|| "-".to_owned(), |s| s.to_string()),
                ]);
            }
            t.render(terminal_width())
        }
    };
    print(&text)?;
    Ok(())
}

/// `open` or `resolved`.
pub fn status(firing: bool) -> &'static str {
    if firing { "open" } else { "resolved" }
}

/// The active silence matching an open incident now.
pub fn silenced_by(
    silences: &[Silence],
    r: &IncidentRow,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<i64> {
    if !r.incident.firing {
        return None;
    }
    silences
        .iter()
        .find(|s| s.is_active(now) && s.matches(&r.incident))
        .map(|s| s.id)
}

/// An incident as JSON.
pub fn incident_json(r: &IncidentRow, silenced_by: Option<i64>) -> serde_json::Value {
    let i = &r.incident;
    json!({
        "fingerprint": i.fingerprint,
        "status": status(i.firing),
        "kind": i.kind,
        "rule": i.rule,
        "group": i.group,
        "labels": i.labels,
        "severity": i.severity,
        "started": rfc3339(i.started),
        "last_finding": rfc3339(i.last_finding),
        "session_count": i.session_count,
        "impact_usd": i.impact_usd,
        "notifications": i.sequence,
        "last_notified": i.notified.map(rfc3339),
        "notified_sessions": i.notified_sessions,
        "last_error": i.last_error,
        "silenced_by": silenced_by,
        "updated_at": rfc3339(r.updated_at),
    })
}
