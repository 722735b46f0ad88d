//! `costwatch once`.

use super::output::table_row;
use super::{Exit, OnceArgs};
use costwatch::app;
use costwatch::config;
use std::io::Write;

pub async fn once(a: OnceArgs) -> Result<(), Exit> {
    let cfg = config::load(&a.config)?;
    let mut out = std::io::stdout().lock();
    let mut printed = 0usize;
    let windows = app::once(&cfg, a.at, |r| {
        for f in &r.new_findings {
            let _ = writeln!(out, "{}", table_row(f));
            printed += 1;
        }
    })
    .await?;
    eprintln!("{windows} windows processed, {printed} new findings");
    Ok(())
}
