//! `costwatch demo`.

use super::backtest::default_detector;
use super::output::indent;
use super::{DemoArgs, Exit};
use costwatch::app;
use costwatch::backtest;
use costwatch::detect::{Detector, Finding, Kind};
use costwatch::printable::printable;
use costwatch::source::SourceKind;
use std::io::Write as _;

/// A line on stdout; a reader that went away (`costwatch demo | head`)
/// ends the demo quietly instead of panicking.
macro_rules! say {
    ($($arg:tt)*) => {
        if let Err(e) = writeln!(std::io::stdout().lock(), $($arg)*) {
            return closed(e);
        }
    };
}

/// [`say`] without the line's end.
macro_rules! say_part {
    ($($arg:tt)*) => {
        if let Err(e) = write!(std::io::stdout().lock(), $($arg)*) {
            return closed(e);
        }
    };
}

/// How a failed write ends the demo: a closed pipe is no error.
fn closed(e: std::io::Error) -> Result<(), Exit> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(Exit::Failed(e.into()))
    }
}

pub async fn demo(a: DemoArgs) -> Result<(), Exit> {
    let kind = a.source;
    if let Some(bind) = a.serve {
        return serve(a.seed, a.days, bind, kind).await;
    }
    let detector = default_detector(a.rules.as_deref())?;
    let form = kind.facts().reads;
    say!(
        "costwatch demo: the real pipeline against the built-in gateway simulator on 127.0.0.1,\n\
         read as {form} (source.kind: {kind})\n"
    );

    // 1. The seed window: one example of each kind of waste beside its fixed twin.
    let seed = app::seed_demo().await?;
    say!(
        "1. Seed window ({} .. {}), served at {}",
        seed.from.format("%Y-%m-%d %H:%M"),
        seed.to.format("%H:%M"),
        seed.sim.base_url()
    );
    let seed_truth = seed.truth.clone();
    let replay = seed.replay(detector.clone(), kind).await?;
    for f in &replay.findings {
        say!(
            "   {:<15} {:<30} +${:.5}  {}",
            f.kind.as_str(),
            printable(&f.session_id),
            f.impact_usd,
            printable(&f.explanation)
        );
    }
    say_part!(
        "{}",
        indent(&backtest::score_table(&backtest::score(
            &replay.findings,
            &seed_truth
        )))
    );
    investigation(&detector, kind).await?;

    // 2. Days of labelled traffic with incidents and look-alikes.
    let traffic = app::traffic_demo(a.seed, a.days);
    say!(
        "\n2. {} days of simulated traffic (seed {}): {} sessions, {} requests",
        traffic.params.days,
        traffic.params.seed,
        traffic.dataset.sessions.len(),
        traffic.dataset.request_count()
    );
    let (replay, elapsed) = traffic.replay(detector, kind).await?;
    say!(
        "   {} windows of 15 minutes, {} session rows, {} request drill-downs, {:.1} s",
        replay.windows,
        replay.sessions,
        replay.drilldowns,
        elapsed.as_secs_f64()
    );
    for kind in Kind::ALL {
        let of_kind: Vec<&Finding> = replay.findings.iter().filter(|f| f.kind == kind).collect();
        // A fold from +0.0: an empty float sum is -0.0, printed "$-0.0000".
        let impact = of_kind.iter().fold(0.0, |sum, f| sum + f.impact_usd);
        say!(
            "\n   {kind}: {} sessions, ${impact:.4} above their peers",
            of_kind.len()
        );
        let mut top = of_kind.clone();
        top.sort_by(|a, b| b.impact_usd.total_cmp(&a.impact_usd));
        for f in top.iter().take(3) {
            say!(
                "     {} {} +${:.5}\n       {}",
                f.window.start.format("%m-%d %H:%M"),
                printable(&f.session_id),
                f.impact_usd,
                printable(&f.explanation)
            );
        }
    }
    say!("\n   Against the simulator's truth:");
    say_part!(
        "{}",
        indent(&backtest::score_table(&backtest::score(
            &replay.findings,
            &traffic.truth
        )))
    );
    Ok(())
}

/// Alerts for the seed window through the real daemon tick, each escalated to
/// an investigation with the scripted model: the simulator's MCP tools for
/// the reference gateway, costwatch's own log tools for every other source.
async fn investigation(detector: &Detector, kind: SourceKind) -> Result<(), Exit> {
    let alerts = app::demo_investigation(detector, kind).await?;
    let tools = match kind {
        SourceKind::Reference => "the simulated gateway's MCP tools",
        _ => "costwatch's own log tools over the source",
    };
    say!("\n   Alerts, each escalated to an investigation ({tools}, scripted model):");
    for a in alerts {
        say!("   {}", printable(&a.title));
        if let Some(inv) = &a.investigation {
            say!(
                "     investigation: {}, {}, {} input + {} output tokens, ${:.6}, {}",
                costwatch::domain::counted(inv.rounds, "round"),
                costwatch::domain::counted(inv.tool_calls, "tool call"),
                inv.input_tokens,
                inv.output_tokens,
                inv.cost_usd,
                inv.stop_reason
            );
            say!("     answer: {}", printable(&inv.summary));
        }
    }
    Ok(())
}

/// `demo --serve`: the simulated traffic's gateway on `bind` until SIGINT or
/// SIGTERM, with what `costwatch run` needs to read it.
async fn serve(
    seed: u64,
    days: u32,
    bind: std::net::SocketAddr,
    kind: SourceKind,
) -> Result<(), Exit> {
    use tokio::signal::unix::{SignalKind, signal};
    if kind.is_otlp() {
        return Err(Exit::Failed(anyhow::anyhow!(
            "--serve serves the simulated traffic as an HTTP API that costwatch reads; \
             {kind} spans are sent to costwatch instead: try `costwatch demo --source {kind}` \
             or `costwatch backtest --simulate --source {kind}`"
        )));
    }
    let now = costwatch::clock::Clock::now(&costwatch::clock::SystemClock);
    let traffic = app::traffic_demo_until(seed, days, now);
    let sim = traffic.serve(bind).await?;
    let start = traffic.params.start;
    // Windows older than `windows.max_backfill` (7 days by default) are
    // skipped: longer traffic needs it longer.
    let backfill = if days >= 7 {
        format!("COSTWATCH_WINDOWS__MAX_BACKFILL={}d\n", days + 1)
    } else {
        String::new()
    };
    let (api_url, extra) = app::simulator_env(&sim, kind);
    say!(
        "costwatch demo: serving {} days of simulated traffic (seed {seed}, {} sessions, \
         the days before {}) until stopped\n\n\
         {extra}COSTWATCH_SOURCE__API_URL={api_url}\n\
         COSTWATCH_ADMIN_KEY={}\n\
         COSTWATCH_WINDOWS__START={}\n{backfill}",
        days,
        traffic.dataset.sessions.len(),
        (start + chrono::Duration::days(i64::from(days)))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        sim.admin_key(),
        start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    let mut term = signal(SignalKind::terminate()).map_err(|e| Exit::Failed(e.into()))?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(|e| Exit::Failed(e.into()))?,
        _ = term.recv() => {}
    }
    drop(sim);
    Ok(())
}
