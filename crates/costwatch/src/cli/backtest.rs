//! `costwatch backtest`.

use super::output::Progress;
use super::{BacktestArgs, Exit};
use anyhow::anyhow;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use costwatch::app::{self, AppError};
use costwatch::backtest::{self, WindowRetries};
use costwatch::clock::SystemClock;
use costwatch::config::{self, Config};
use costwatch::detect::Detector;
use costwatch::domain::counted;
use costwatch::notify::render::transcript_text;
use costwatch::printable::printable;
use costwatch::source::Source;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The detector of `--rules` (the built-in rules when not given) with every
/// other setting at its default.
pub fn default_detector(rules: Option<&Path>) -> Result<Detector, Exit> {
    let rules = match rules {
        Some(path) => config::load_rules(&[path.to_path_buf()])?,
        None => config::builtin_rules()?,
    };
    Ok(app::default_detector(rules))
}

pub async fn backtest(a: BacktestArgs) -> Result<(), Exit> {
    let cfg = a.config.as_ref().map(|p| config::load(p)).transpose()?;
    let (detector, window, concurrency) = match &cfg {
        Some(c) => (
            app::detector(c),
            c.windows.size,
            c.detection.drilldown_concurrency,
        ),
        None if a.simulate => (
            default_detector(a.rules.as_deref())?,
            Duration::from_secs(900),
            4,
        ),
        None => {
            return Err(Exit::Failed(anyhow!(
                "backtest needs --config FILE (or --simulate)"
            )));
        }
    };
    let mut progress = Progress::new(a.format);
    if a.simulate {
        let traffic = app::traffic_demo(a.seed, a.days);
        let params = &traffic.params;
        let from = a.from.unwrap_or(params.start);
        let to =
            a.to.unwrap_or(params.start + ChronoDuration::days(i64::from(params.days)));
        let sim = app::start_simulator(traffic.dataset.clone()).await?;
        let truth = &traffic.truth;
        let source = app::simulator_source(&sim, a.source).await?;
        let retries = WindowRetries::like_source(&app::simulator_limits());
        let replay = backtest::replay(
            source,
            detector,
            &a.state,
            from,
            to,
            window,
            concurrency,
            Arc::new(SystemClock),
            &retries,
            |r| progress.window(r),
        )
        .await
        .map_err(AppError::from)?;
        progress.done(&replay);
        let scores = backtest::score(&replay.findings, truth);
        eprint!("\n{}", backtest::score_table(&scores));
        if a.spend_preview {
            let source = app::simulator_source(&sim, a.source).await?;
            let det = match &cfg {
                Some(c) => app::detector(c),
                None => default_detector(a.rules.as_deref())?,
            };
            spend(&a, cfg.as_ref(), source, det, from, to, window, &retries).await?;
        }
        let _ = sim.shutdown().await;
        return Ok(());
    }
    let cfg = cfg.ok_or_else(|| anyhow!("backtest needs --config FILE"))?;
    let (Some(from), Some(to)) = (a.from, a.to) else {
        return Err(Exit::Failed(anyhow!("backtest needs --from and --to")));
    };
    let retries = WindowRetries::like_source(&cfg.source.http);
    let replay = backtest::replay(
        app::gateway(&cfg).await?,
        detector,
        &a.state,
        from,
        to,
        window,
        concurrency,
        Arc::new(SystemClock),
        &retries,
        |r| progress.window(r),
    )
    .await
    .map_err(AppError::from)?;
    progress.done(&replay);
    if a.spend_preview || a.investigate {
        spend(
            &a,
            Some(&cfg),
            app::gateway(&cfg).await?,
            app::detector(&cfg),
            from,
            to,
            cfg.windows.size,
            &retries,
        )
        .await?;
    }
    Ok(())
}

/// `--spend-preview` and `--investigate`: the range again through the
/// daemon's tick, reporting escalations and what they cost (or would).
#[allow(clippy::too_many_arguments)]
async fn spend<S>(
    a: &BacktestArgs,
    cfg: Option<&Config>,
    source: S,
    det: Detector,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    window: Duration,
    retries: &WindowRetries,
) -> Result<(), Exit>
where
    S: Source + Clone + 'static,
{
    let r = app::replay_spend(
        cfg,
        a.investigate,
        Some(&a.state),
        source,
        det,
        from,
        to,
        window,
        retries,
    )
    .await?;
    let p = &r.preview;
    eprintln!(
        "\nalerts: {} over the range; {} would be investigated ({} more over escalate.max_per_hour)",
        r.alerts.len(),
        p.investigations,
        p.over_hourly_limit
    );
    eprintln!(
        "spend preview on {}: about ${:.4} expected (a typical run: {} prompt + {} completion tokens), ${:.4} at most (every run at its ${} cap, days capped at ${}); busiest day ${:.4}",
        r.model,
        p.typical_usd,
        backtest::TYPICAL_RUN_TOKENS.0,
        backtest::TYPICAL_RUN_TOKENS.1,
        p.worst_usd,
        r.max_usd_per_run,
        r.max_usd_per_day,
        p.busiest_day_usd
    );
    if a.investigate {
        eprintln!(
            "investigated: {}, ${:.6} spent",
            counted(r.investigations as u64, "run"),
            r.investigation_usd
        );
        if let Some(url) = &r.kept_in {
            eprintln!(
                "records kept in {}: costwatch investigation show RUN_ID --state URL",
                printable(url)
            );
        }
        for al in &r.alerts {
            let Some(inv) = &al.investigation else {
                continue;
            };
            println!("{}", printable(&al.title));
            println!(
                "  {}: {}{}; {}, {}; {} ({} cached{}) + {}; ${:.6}",
                inv.run_id,
                inv.stop_reason.as_str(),
                inv.stop_detail
                    .as_deref()
                    .map(|d| format!(" ({})", printable(d)))
                    .unwrap_or_default(),
                counted(inv.rounds, "round"),
                counted(inv.tool_calls, "tool call"),
                counted(inv.input_tokens, "input token"),
                inv.cached_tokens,
                inv.cached_share()
                    .map(|s| format!(", {:.0}%", s * 100.0))
                    .unwrap_or_default(),
                counted(inv.output_tokens, "output token"),
                inv.cost_usd
            );
            for line in transcript_text(inv).lines() {
                println!("    {}", printable(line));
            }
        }
    }
    Ok(())
}
