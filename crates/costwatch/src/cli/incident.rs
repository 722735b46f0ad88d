//! `costwatch incident show`: one incident's timeline, findings,
//! notifications with their delivery per channel, what silences held back,
//! and its investigations with their transcripts.

use super::Exit;
use super::inspect::{incident_json, silenced_by, status};
use super::output::jsonl_row;
use super::table::{Column, ShowFormat, Table, json_text, print, terminal_width};
use super::when::{rfc3339, short};
use anyhow::anyhow;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use costwatch::app;
use costwatch::clock::{Clock, SystemClock};
use costwatch::config;
use costwatch::detect::Finding;
use costwatch::printable::printable;
use costwatch::silence::Silence;
use costwatch::store::inspect::{IncidentRow, Inspect, NotificationRow, StoredInvestigation};
use costwatch::store::silences::Silenced;
use costwatch::store::{SilenceStore, StoreError};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::PathBuf;

/// `costwatch incident`.
#[derive(Debug, Subcommand)]
pub enum IncidentCommand {
    /// Show one incident: timeline, findings, notifications and their
    /// delivery, silences, investigation.
    Show(ShowArgs),
}

/// `costwatch incident show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The incident's fingerprint, or a unique beginning of it.
    pub fingerprint: String,
    /// Configuration file (its state database is read).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
    /// Findings listed, newest first.
    #[arg(long, default_value_t = 20)]
    pub findings: usize,
}

/// Everything shown about one incident.
struct Shown {
    row: IncidentRow,
    silence: Option<Silence>,
    findings: Vec<Finding>,
    findings_total: u64,
    notifications: Vec<Notification>,
    held_back: Vec<Silenced>,
    silences: Vec<Silence>,
    investigations: Vec<StoredInvestigation>,
}

/// One notification: its rows, one per channel, oldest first.
struct Notification {
    rows: Vec<NotificationRow>,
}

impl Notification {
    fn first(&self) -> Option<&NotificationRow> {
        self.rows.first()
    }
}

pub async fn incident(c: IncidentCommand) -> Result<(), Exit> {
    match c {
        IncidentCommand::Show(a) => show(a).await,
    }
}

async fn show(a: ShowArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let store = app::open_state(&cfg, false).await?;
    let now = SystemClock.now();
    let found = store
        .incidents_by_id(&a.fingerprint)
        .await
        .map_err(|e| anyhow::Error::new(e).context("cannot read the incidents"))?;
    let row = match <[IncidentRow; 1]>::try_from(found) {
        Ok([row]) => row,
        Err(found) if found.is_empty() => {
            return Err(anyhow!(
                "no incident with fingerprint {} (costwatch incidents lists them)",
                printable(&a.fingerprint)
            )
            .into());
        }
        Err(found) => {
            return Err(anyhow!(
                "{} incidents have fingerprints starting with {}: give more of it",
                found.len(),
                printable(&a.fingerprint)
            )
            .into());
        }
    };
    let shown = gather(&store, row, a.findings, now)
        .await
        .map_err(|e| anyhow::Error::new(e).context("cannot read the incident"))?;
    store.close().await;
    let text = match a.format {
        ShowFormat::Json => json_text(&as_json(&shown))? + "\n",
        ShowFormat::Text => as_text(&shown),
    };
    print(&text)?;
    Ok(())
}

async fn gather<St: Inspect + SilenceStore>(
    store: &St,
    row: IncidentRow,
    findings: usize,
    now: DateTime<Utc>,
) -> Result<Shown, StoreError> {
    let fp = row.incident.fingerprint.clone();
    let (found, findings_total) = store.findings_of(&row.incident, findings).await?;
    let mut notifications: Vec<Notification> = Vec::new();
    for r in store.notifications_of(&fp).await? {
        match notifications.iter_mut().find(|n| {
            n.first()
                .is_some_and(|f| f.idempotency_key == r.idempotency_key)
        }) {
            Some(n) => n.rows.push(r),
            None => notifications.push(Notification { rows: vec![r] }),
        }
    }
    let silences = store.silences(true, now).await?;
    let active = silenced_by(&silences, &row, now);
    Ok(Shown {
        silence: silences.iter().find(|s| Some(s.id) == active).cloned(),
        findings: found,
        findings_total,
        notifications,
        held_back: store.silenced_of(&fp).await?,
        investigations: store.investigations_of(&fp).await?,
        silences,
        row,
    })
}

/// One line of the timeline.
struct Event {
    at: DateTime<Utc>,
    text: String,
    /// Per-channel lines under it.
    detail: Vec<String>,
}

fn timeline(s: &Shown) -> Vec<Event> {
    let i = &s.row.incident;
    let mut events = Vec::new();
    let mut episodes: Vec<DateTime<Utc>> = s
        .notifications
        .iter()
        .filter_map(|n| n.first().map(|r| r.alert.starts_at))
        .chain([i.started])
        .collect();
    episodes.sort();
    episodes.dedup();
    for start in episodes {
        events.push(Event {
            at: start,
            text: "episode began (start of its first window with a finding; data time)".into(),
            detail: Vec::new(),
        });
    }
    events.push(Event {
        at: i.last_finding,
        text: format!(
            "last finding so far (end of its window; data time): {} sessions in this episode",
            i.session_count
        ),
        detail: Vec::new(),
    });
    for n in &s.notifications {
        let Some(first) = n.first() else { continue };
        let a = &first.alert;
        let status = match a.status {
            costwatch::notify::AlertStatus::Firing => "firing",
            costwatch::notify::AlertStatus::Resolved => "resolved",
        };
        events.push(Event {
            at: first.created_at,
            text: format!(
                "{status} notification #{} queued: {}",
                a.sequence,
                printable(&a.title)
            ),
            detail: n.rows.iter().map(delivery_line).collect(),
        });
    }
    for h in &s.held_back {
        let reason = s
            .silences
            .iter()
            .find(|x| x.id == h.silence_id)
            .map(|x| format!(" ({})", printable(&x.reason)))
            .unwrap_or_default();
        events.push(Event {
            at: h.at,
            text: format!(
                "{} notification held back by silence {}{reason}",
                h.status, h.silence_id
            ),
            detail: Vec::new(),
        });
    }
    if !i.firing {
        events.push(Event {
            at: s.row.updated_at,
            text: "resolved: no finding for alerts.resolve_after".into(),
            detail: Vec::new(),
        });
    }
    events.sort_by_key(|e| e.at);
    events
}

fn delivery_line(r: &NotificationRow) -> String {
    let attempts = match r.attempts {
        1 => "1 attempt".to_owned(),
        n => format!("{n} attempts"),
    };
    let mut line = match r.status.as_str() {
        "sent" => format!(
            "{}: delivered {} ({attempts})",
            r.channel,
            r.sent_at.map(rfc3339).unwrap_or_default()
        ),
        "pending" => format!(
            "{}: queued, {attempts} so far, next {}",
            r.channel,
            rfc3339(r.next_attempt_at)
        ),
        other => format!("{}: {other}, given up after {attempts}", r.channel),
    };
    if let Some(at) = r.reposted_at {
        let _ = write!(line, ", last posted again {}", rfc3339(at));
    }
    if let Some(e) = &r.last_error {
        let _ = write!(line, "; last error: {}", printable(e));
    }
    line
}

fn as_text(s: &Shown) -> String {
    let i = &s.row.incident;
    let mut out = String::new();
    let _ = writeln!(out, "Incident {} ({})", i.fingerprint, status(i.firing));
    let labels: Vec<String> = i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let facts = [
        (
            "What",
            format!(
                "{}, rule {}, severity {}",
                i.kind,
                i.rule,
                i.severity.as_str()
            ),
        ),
        ("Group", i.group.clone()),
        ("Labels", labels.join(", ")),
        (
            "Episode",
            format!(
                "started {}, last finding {} (data time)",
                rfc3339(i.started),
                rfc3339(i.last_finding)
            ),
        ),
        (
            "Impact",
            format!(
                "{} sessions, +${:.4} above their peers",
                i.session_count, i.impact_usd
            ),
        ),
        (
            "Notified",
            match i.notified {
                Some(at) => format!(
                    "{} notifications in all; this episode last at {} with {} sessions",
                    i.sequence,
                    rfc3339(at),
                    i.notified_sessions
                ),
                None => format!(
                    "{} notifications in all; none yet in this episode",
                    i.sequence
                ),
            },
        ),
    ];
    for (name, value) in facts {
        let _ = writeln!(out, "  {:<10} {}", name, printable(&value));
    }
    if let Some(e) = &i.last_error {
        let _ = writeln!(out, "  {:<10} {}", "Error", printable(e));
    }
    if let Some(x) = &s.silence {
        let _ = writeln!(
            out,
            "  {:<10} by silence {} until {} ({}; {}): its notifications are held back",
            "Silenced",
            x.id,
            rfc3339(x.ends_at),
            printable(&x.conditions()),
            printable(&x.reason)
        );
    }

    let _ = writeln!(out, "\nTimeline");
    for e in timeline(s) {
        let _ = writeln!(out, "  {}  {}", rfc3339(e.at), e.text);
        for d in e.detail {
            let _ = writeln!(out, "  {:20}    {}", "", printable(&d));
        }
    }

    let _ = writeln!(
        out,
        "\nFindings ({} in all, {} shown, newest first)",
        s.findings_total,
        s.findings.len()
    );
    if !s.findings.is_empty() {
        let mut t = Table::new(&[
            Column::fixed("WINDOW"),
            Column::cut("SESSION", 2),
            Column::number("COST"),
            Column::number("IMPACT"),
            Column::cut("EXPLANATION", 3),
        ]);
        for f in &s.findings {
            t.push(vec![
                short(f.window.start),
                f.session_id.clone(),
                format!("${:.4}", f.cost_usd),
                format!("+${:.4}", f.impact_usd),
                f.explanation.clone(),
            ]);
        }
        for line in t
            .render(terminal_width().map(|w| w.saturating_sub(2)))
            .lines()
        {
            let _ = writeln!(out, "  {line}");
        }
    }

    let _ = writeln!(out, "\nInvestigations ({})", s.investigations.len());
    for inv in &s.investigations {
        let r = &inv.report;
        let _ = writeln!(
            out,
            "  {} for {} at {}: stopped: {}{}; cost ${:.4}; {}, {}; model {}",
            printable(&r.run_id),
            inv.idempotency_key,
            rfc3339(inv.created_at),
            r.stop_reason.as_str(),
            r.stop_detail
                .as_deref()
                .map(|d| format!(" ({})", printable(d)))
                .unwrap_or_default(),
            r.cost_usd,
            costwatch::domain::counted(r.rounds, "round"),
            costwatch::domain::counted(r.tool_calls, "tool call"),
            printable(&r.model)
        );
        let _ = writeln!(out, "  Summary:");
        for line in r.summary.lines() {
            let _ = writeln!(out, "    {}", printable(line));
        }
        let _ = writeln!(out, "  Transcript:");
        for line in costwatch::notify::render::transcript_text(r).lines() {
            let _ = writeln!(out, "    {}", printable(line));
        }
    }
    out
}

fn as_json(s: &Shown) -> Value {
    let notifications: Vec<Value> = s
        .notifications
        .iter()
        .filter_map(|n| {
            let first = n.first()?;
            Some(json!({
                "idempotency_key": first.idempotency_key,
                "status": first.alert.status,
                "sequence": first.alert.sequence,
                "title": first.alert.title,
                "episode_start": rfc3339(first.alert.starts_at),
                "queued_at": rfc3339(first.created_at),
                "channels": n.rows.iter().map(|r| json!({
                    "channel": r.channel,
                    "status": r.status,
                    "attempts": r.attempts,
                    "next_attempt_at": rfc3339(r.next_attempt_at),
                    "sent_at": r.sent_at.map(rfc3339),
                    "reposted_at": r.reposted_at.map(rfc3339),
                    "last_error": r.last_error,
                })).collect::<Vec<_>>(),
            }))
        })
        .collect();
    let timeline: Vec<Value> = timeline(s)
        .into_iter()
        .map(|e| json!({"at": rfc3339(e.at), "event": e.text, "detail": e.detail}))
        .collect();
    json!({
        "incident": incident_json(&s.row, s.silence.as_ref().map(|x| x.id)),
        "silence": s.silence,
        "timeline": timeline,
        "notifications": notifications,
        "held_back": s.held_back,
        "findings_total": s.findings_total,
        "findings": s.findings.iter().map(jsonl_row).collect::<Vec<_>>(),
        "investigations": s.investigations.iter().map(|i| json!({
            "idempotency_key": i.idempotency_key,
            "created_at": rfc3339(i.created_at),
            "report": i.report,
        })).collect::<Vec<_>>(),
    })
}
