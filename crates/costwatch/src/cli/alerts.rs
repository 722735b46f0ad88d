//! `costwatch alerts [--render]`: the dry run of the next tick. Lists the
//! notifications it would send (new firings, re-alerts, resolutions,
//! catch-up summaries, queued ones due, re-posts due) and, with
//! `--render`, what each configured channel would receive. Nothing is sent
//! and the state is not changed.

use super::Exit;
use super::table::{ShowFormat, json_text, print};
use super::when::rfc3339;
use anyhow::Context;
use clap::Args;
use costwatch::alerting::preview::{InvestigationNote, Origin, Preview, Upcoming};
use costwatch::app;
use costwatch::clock::{Clock, SystemClock};
use costwatch::config;
use costwatch::notify::AlertStatus;
use costwatch::notify::preview::Rendered;
use costwatch::printable::printable;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `costwatch alerts`.
#[derive(Debug, Args)]
pub struct AlertsArgs {
    /// Configuration file (its state database and channels are used).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Show each notification as every configured channel would receive
    /// it: the email's subject and text body, each webhook's JSON.
    #[arg(long)]
    pub render: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
}

pub async fn alerts(a: AlertsArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let store = app::open_state(&cfg, false).await?;
    let now = SystemClock.now();
    let result = app::preview_alerts(&cfg, &store, now).await;
    store.close().await;
    let mut preview = result.context("cannot work out the next alerts")?;
    let text = match a.format {
        ShowFormat::Json => {
            if !a.render {
                for u in &mut preview.upcoming {
                    u.channels.clear();
                }
            }
            json_text(&preview)? + "\n"
        }
        ShowFormat::Text => as_text(&preview, a.render),
    };
    print(&text)?;
    Ok(())
}

fn origin(o: Origin) -> &'static str {
    match o {
        Origin::Evaluation => "new",
        Origin::Queued => "queued",
        Origin::Repost => "re-post",
    }
}

fn status(s: AlertStatus) -> &'static str {
    match s {
        AlertStatus::Firing => "firing",
        AlertStatus::Resolved => "resolved",
    }
}

fn as_text(p: &Preview, render: bool) -> String {
    let mut out = String::new();
    let evaluation = match p.data_now {
        Some(at) => format!(
            "evaluation over {} new window{} (data up to {})",
            p.windows,
            if p.windows == 1 { "" } else { "s" },
            rfc3339(at)
        ),
        None => "no window processed yet, nothing to evaluate".to_owned(),
    };
    let _ = writeln!(
        out,
        "Next tick at {}: {evaluation}; nothing is sent or stored",
        rfc3339(p.now)
    );
    if p.upcoming.is_empty() {
        let _ = writeln!(out, "No notification would be sent.");
    }
    for (n, u) in p.upcoming.iter().enumerate() {
        let _ = writeln!(out);
        heading(&mut out, n + 1, p.upcoming.len(), u);
        if render {
            for r in &u.channels {
                rendered(&mut out, r);
            }
        }
    }
    if !p.silenced.is_empty() {
        let _ = writeln!(out, "\nHeld back by silences:");
        for h in &p.silenced {
            let _ = writeln!(
                out,
                "  {} {} (incident {}): silence {}",
                h.status,
                printable(&h.title),
                h.fingerprint,
                h.silence_id
            );
        }
    }
    out
}

fn heading(out: &mut String, n: usize, of: usize, u: &Upcoming) {
    let a = &u.alert;
    let _ = writeln!(
        out,
        "== {n}/{of} {} {}: {}",
        origin(u.origin),
        status(a.status),
        printable(&a.title)
    );
    let channels: Vec<&str> = u
        .channels
        .iter()
        .map(|r| match r {
            Rendered::Email { channel, .. } | Rendered::Webhook { channel, .. } => channel.as_str(),
        })
        .collect();
    let _ = writeln!(
        out,
        "   incident {}, notification {}{}",
        a.fingerprint,
        a.idempotency_key(),
        if channels.is_empty() {
            String::new()
        } else {
            format!(", to {}", channels.join(", "))
        }
    );
    match u.investigation {
        InvestigationNote::None => {}
        InvestigationNote::Stored => {
            let _ = writeln!(out, "   carries its stored investigation");
        }
        InvestigationNote::WouldRun => {
            let _ = writeln!(
                out,
                "   would be investigated before it is sent (not run in a dry run; the rendering below has no investigation)"
            );
        }
    }
    for c in &u.unknown_channels {
        let _ = writeln!(
            out,
            "   queued for channel {} which is no longer configured: it would be given up",
            printable(c)
        );
    }
}

fn rendered(out: &mut String, r: &Rendered) {
    match r {
        Rendered::Email {
            channel,
            from,
            to,
            subject,
            text,
            attachment,
            chart,
        } => {
            let _ = writeln!(
                out,
                "-- {channel} (email) from {} to {}",
                printable(from),
                printable(&to.join(", "))
            );
            let _ = writeln!(out, "Subject: {subject}");
            let _ = writeln!(out);
            // The text body escapes gateway text already; a line break
            // of its own stays a line break.
            for line in text.lines() {
                let _ = writeln!(out, "{}", printable(line));
            }
            let _ = writeln!(
                out,
                "(also an HTML part{})",
                attachment
                    .as_deref()
                    .map(|a| format!(" and the attachment {a}"))
                    .unwrap_or_default()
            );
            if let Some(c) = chart {
                let _ = writeln!(
                    out,
                    "(the HTML part shows a chart inline: {}, {}x{}, {} bytes)",
                    c.content_type, c.width, c.height, c.bytes
                );
            }
        }
        Rendered::Webhook {
            channel,
            shape,
            headers,
            body,
        } => {
            let _ = writeln!(
                out,
                "-- {} (webhook, {shape} shape): POST with",
                printable(channel)
            );
            for (k, v) in headers {
                let _ = writeln!(out, "{k}: {}", printable(v));
            }
            let _ = writeln!(out);
            let body = json_text(body).unwrap_or_else(|e| format!("(body not printable: {e})"));
            let _ = writeln!(out, "{body}");
        }
    }
}
