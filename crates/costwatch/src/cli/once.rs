//! `costwatch once`.

use super::output::table_row;
use super::{Exit, OnceArgs};
use costwatch::app;
use costwatch::config;
use std::collections::BTreeMap;
use std::io::Write;

pub async fn once(a: OnceArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let mut out = std::io::stdout().lock();
    let mut printed = 0usize;
    // Per kind: new findings and their impact.
    let mut kinds: BTreeMap<&'static str, (usize, f64)> = BTreeMap::new();
    let done = app::once(&cfg, a.at, |r| {
        for f in &r.new_findings {
            let _ = writeln!(out, "{}", table_row(f));
            printed += 1;
            let total = kinds.entry(f.kind.as_str()).or_default();
            total.0 += 1;
            total.1 += f.impact_usd;
        }
    })
    .await?;
    for (kind, (count, impact)) in &kinds {
        let impact = costwatch::notify::render::usd(*impact);
        eprintln!("{kind:<16} {count:>6} new findings  +{impact}");
    }
    let alerts = costwatch::domain::counted(done.alerts as u64, "alert");
    let queued = if done.channels == 0 && done.alerts > 0 {
        format!(
            "{alerts} decided, sent nowhere: no channel is configured (notify.email, notify.webhooks)"
        )
    } else {
        format!("{alerts} queued for `costwatch run` to send")
    };
    eprintln!(
        "{} windows processed, {printed} new findings, {queued}",
        done.windows
    );
    Ok(())
}
