//! `costwatch status`: how the daemon stands, read from the state database
//! as the status page reads it: the watermark and its lag, the source's
//! health, the open incidents and the day's investigation budget.

use super::Exit;
use super::table::{ShowFormat, json_text};
use clap::Args;
use costwatch::app;
use costwatch::clock::{Clock, SystemClock};
use costwatch::config;
use costwatch::ops::status::data::{
    BudgetView, Capped, IncidentView, JobView, Section, SourceView,
};
use costwatch::ops::status::html::{span, usd, when};
use costwatch::ops::status::{Parts, ReplicaView};
use costwatch::pipeline::Schedule;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `costwatch status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
}

/// What `status --format json` prints: the status page's sections of the
/// same names.
#[derive(Debug, Serialize)]
struct Report {
    generated_at: chrono::DateTime<chrono::Utc>,
    /// The daemon's job: watermark, lag, windows due, last evaluation.
    job: Option<JobView>,
    source: Section<SourceView>,
    incidents: Section<Capped<IncidentView>>,
    budget: Section<BudgetView>,
}

pub async fn status(a: StatusArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let store = app::open_state(&cfg, false).await?;
    let parts = Parts {
        store: store.clone(),
        schedule: Schedule::main(&cfg.windows),
        investigations: cfg.investigation.enabled,
        day_cap_usd: cfg.investigation.caps.max_usd_per_day,
    };
    let now = SystemClock.now();
    let read = costwatch::ops::status::data::read(&parts, now, ReplicaView::default()).await;
    store.close().await;
    let job_name = parts.schedule.job;
    let job = match read.jobs {
        Section::Read(jobs) => jobs.items.into_iter().find(|j| j.job == job_name),
        Section::Failed { error } => {
            return Err(anyhow::anyhow!("cannot read the jobs: {error}").into());
        }
    };
    let report = Report {
        generated_at: now,
        job,
        source: read.source,
        incidents: read.incidents,
        budget: read.budget,
    };
    let text = match a.format {
        ShowFormat::Json => json_text(&report)? + "\n",
        ShowFormat::Text => as_text(&report),
    };
    print!("{text}");
    Ok(())
}

fn as_text(r: &Report) -> String {
    let mut out = String::new();
    let now = r.generated_at;
    match &r.job {
        None => out.push_str("windows    none read yet (`costwatch run` or `once` reads them)\n"),
        Some(j) => {
            let lag = chrono::Duration::seconds(j.lag_seconds);
            let _ = write!(
                out,
                "windows    read up to {} ({} behind)",
                when(j.watermark),
                span(lag)
            );
            if let Some(due) = j.windows_due {
                let _ = write!(out, ", {due} due");
            }
            match j.evaluated {
                Some(e) if e < j.watermark => {
                    let _ = write!(out, "; incidents evaluated up to {}", when(e));
                }
                _ => {}
            }
            out.push('\n');
        }
    }
    match &r.source {
        Section::Read(s) => {
            let health = if s.healthy { "healthy" } else { "UNHEALTHY" };
            let _ = write!(out, "source     {health}");
            if let Some(t) = s.last_read {
                let _ = write!(out, ", last read whole {}", when(t));
            }
            if let Some(i) = s.incident.as_ref().filter(|i| i.open) {
                let _ = write!(out, ", failing since {}", when(i.since));
                if let Some(e) = &i.last_error {
                    let _ = write!(out, ": {e}");
                }
            }
            if let (Some(holder), Some(until)) = (&s.lease_holder, s.lease_expires) {
                let state = if until > now { "holds" } else { "held" };
                let _ = write!(out, "; {holder} {state} the job until {}", when(until));
            }
            out.push('\n');
        }
        Section::Failed { error } => {
            let _ = writeln!(out, "source     cannot be read: {error}");
        }
    }
    match &r.incidents {
        Section::Read(list) => {
            let more = if list.more { " (more not shown)" } else { "" };
            let _ = writeln!(out, "incidents  {} open{more}", list.items.len());
            for i in &list.items {
                let told = if i.notified { "told" } else { "not told yet" };
                let _ = writeln!(
                    out,
                    "  {}  {} in {}: {} sessions, {} since {}, {told}",
                    i.fingerprint,
                    i.kind,
                    i.group,
                    i.sessions,
                    usd(i.impact_usd),
                    when(i.since)
                );
            }
        }
        Section::Failed { error } => {
            let _ = writeln!(out, "incidents  cannot be read: {error}");
        }
    }
    match &r.budget {
        Section::Read(b) if b.enabled => {
            let _ = writeln!(
                out,
                "budget     {} of {} spent on {} ({} investigations)",
                usd(b.spent_usd),
                usd(b.cap_usd),
                b.day,
                b.investigations
            );
        }
        Section::Read(_) => out.push_str("budget     investigations are off\n"),
        Section::Failed { error } => {
            let _ = writeln!(out, "budget     cannot be read: {error}");
        }
    }
    out
}
