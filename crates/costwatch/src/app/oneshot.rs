//! The parts of `once`, `test-alert` and `check --online`.

use super::{AppError, channels, gateway, main_pipeline};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::notify::NotifyError;
use crate::pipeline::WindowReport;
use crate::source::{Source, SourceKind, Window};
use crate::store::SqlStore;
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::sync::Arc;

/// What `once` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnceReport {
    /// Windows processed.
    pub windows: usize,
    /// Alerts the incidents called for, queued for `run` to deliver.
    pub alerts: usize,
    /// The channels they are queued for (none: nothing will be sent).
    pub channels: usize,
}

/// Processes every window of the `main` job due at `at` (default now),
/// stores the results, then decides the incidents at the watermark it
/// reached and queues the alerts they call for, investigated as
/// `investigation` says, as `run`'s tick does, without sending them (the
/// next tick of `run` does); `on_window` sees each window.
pub async fn once(
    cfg: &Config,
    at: Option<DateTime<Utc>>,
    on_window: impl FnMut(&WindowReport),
) -> Result<OnceReport, AppError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = at.unwrap_or_else(|| clock.now());
    let pipeline = main_pipeline(cfg, clock.clone()).await?;
    pipeline
        .skip_older_than(now, cfg.windows.max_backfill)
        .await
        .map_err(|e| AppError::failed("cannot read the watermark", e))?;
    let reports = pipeline.run_due(now, on_window).await.map_err(|e| {
        AppError::failed(
            "stopped; the failed window stays due and is retried on the next run",
            e,
        )
    })?;
    let window_source: Arc<dyn crate::logtools::WindowCalls> = Arc::new(pipeline.source().clone());
    let escalation = super::escalation(cfg, Some(window_source)).await?;
    let mut linked = cfg.clone();
    super::complete_links(&mut linked).await;
    let names: Vec<String> = channels(cfg)?.iter().map(|c| c.name().to_owned()).collect();
    let alerts = queue_alerts(
        &linked,
        pipeline.store(),
        escalation.as_ref(),
        &names,
        &clock,
    )
    .await?;
    Ok(OnceReport {
        windows: reports.len(),
        alerts,
        channels: names.len(),
    })
}

/// Decides the incidents of the `main` job at its watermark and stores the
/// alerts they call for in the outbox, with the incidents' new state: the
/// evaluation of `run`'s tick, without its delivery.
async fn queue_alerts(
    cfg: &Config,
    store: &SqlStore,
    escalation: Option<&crate::escalate::Escalation>,
    channels: &[String],
    clock: &Arc<dyn Clock>,
) -> Result<usize, AppError> {
    use crate::store::WindowStore;
    let now = clock.now();
    let job = crate::pipeline::Schedule::main(&cfg.windows).job;
    let Some(data_now) = store.watermark(&job).await? else {
        return Ok(0);
    };
    let policy = &cfg.alerts;
    crate::alerting::silences::notice_ended(store, now).await?;
    let mut plan = crate::alerting::plan(store, &job, policy, data_now, true, now).await?;
    if let Some(escalation) = escalation {
        escalation.enrich(store, &mut plan.alerts, clock).await?;
    }
    let deadline = now
        + chrono::Duration::from_std(policy.delivery_deadline).unwrap_or(chrono::Duration::days(1));
    plan.enqueue(store, channels, now, deadline).await?;
    crate::alerting::silences::record_held_back(store, &plan).await?;
    Ok(plan.alerts.len())
}

/// Sends a sample alert through every configured channel: each channel's
/// name and result, in order. Fails when no channel is configured.
pub async fn test_alert(cfg: &Config) -> Result<Vec<(String, Result<(), NotifyError>)>, AppError> {
    let channels = channels(cfg)?;
    if channels.is_empty() {
        return Err(AppError::NoChannel);
    }
    let alert = crate::notify::sample_alert(SystemClock.now());
    let mut out = Vec::new();
    for c in &channels {
        out.push((c.name().to_owned(), c.send_boxed(&alert).await));
    }
    Ok(out)
}

/// Connects to the state database (`SELECT 1`, no migration): the backend (`Sqlite`, `Postgres`)
/// that answered, or the file of a SQLite database that does not exist yet
/// (it is created at the first start).
pub async fn check_state(cfg: &Config) -> Result<Result<String, PathBuf>, AppError> {
    if let Some(path) = sqlite_path(&cfg.state.url).filter(|p| !p.exists()) {
        return Ok(Err(path));
    }
    let backend = SqlStore::ping(&cfg.state.url)
        .await
        .map_err(|e| AppError::setup("state.url", e))?;
    Ok(Ok(format!("{backend:?}")))
}

/// What `check --online` learnt from the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The source's kind.
    pub kind: SourceKind,
    /// Models priced (the source's catalogue, plus the price table for row
    /// sources).
    pub models: usize,
    /// The range read: the last hour.
    pub window: Window,
    /// Sessions with a call in it.
    pub sessions: u64,
    /// Calls read (row sources) or session rows (reference).
    pub rows: u64,
    /// Calls without a session id.
    pub calls_without_session: u64,
    /// Calls priced by neither the source nor the price table.
    pub unpriced_calls: u64,
    /// Sessions none of whose calls reported cache reads (OpenTelemetry
    /// instrumentations that do not record them): no_cache cannot judge them.
    pub cache_unreported_sessions: u64,
    /// Cache-capable models carrying traffic in the hour whose minimum
    /// cacheable prefix or cache lifetime neither their prices nor the
    /// shipped caching facts give (the rules' defaults stand in), in name
    /// order.
    pub models_without_caching_facts: Vec<String>,
    /// The caching facts of each cache-capable model in use, as no_cache
    /// judges with them (the first no_cache rule's), from the state
    /// database's evidence and the hour's reads; in name order.
    pub caching_facts: Vec<crate::detect::no_cache::CachingFacts>,
}

/// Reads the source's catalogue and its last hour when it can be read: an
/// HTTP API with its admin key set, or spans received or in files (`None`
/// for an HTTP API without a key). An error names the setting to fix.
pub async fn probe_source(cfg: &Config, now: DateTime<Utc>) -> Result<Option<Probe>, AppError> {
    if cfg.source.kind().is_http_api() && cfg.source.common.admin_key.is_none() {
        return Ok(None);
    }
    if let Some(url) = cfg.source.api_url() {
        reachable(url, cfg.source.http.connect_timeout)
            .await
            .map_err(|why| AppError::setup("source.api_url", why))?;
    }
    // Only the hour itself: a probe has no use for sessions' earlier calls.
    let mut probe_cfg = cfg.clone();
    if let Some(rows) = probe_cfg.source.rows_mut() {
        rows.session_lookback = std::time::Duration::ZERO;
    }
    let source = gateway(&probe_cfg).await?;
    let setting = |e| AppError::setup(format!("source ({})", cfg.source.kind()), e);
    let (prices, tabled) = crate::pricing::caching::fill(source.models().await.map_err(setting)?);
    let models = prices.len();
    let window = Window {
        start: now - chrono::TimeDelta::hours(1),
        end: now,
    };
    let (mut sessions, mut cache_unreported_sessions) = (0, 0);
    let mut in_use = std::collections::BTreeSet::new();
    // The caching facts as the pipeline has them: what the state database
    // kept, and what the hour's sessions show, noted as a window notes them.
    let mut catalogue = crate::detect::Catalogue::new(prices, []).with_tabled(tabled);
    catalogue.learn(&stored_caching_evidence(&cfg.state.url).await);
    let rule = cfg.rules.no_cache.first();
    let mut hour = crate::detect::CachingEvidence::default();
    let stats = source
        .sessions(window, |s| {
            sessions += 1;
            cache_unreported_sessions += u64::from(s.cache_unreported);
            hour.note_session(&s, &catalogue, rule);
            for m in s.by_model {
                in_use.insert(m.model);
            }
        })
        .await
        .map_err(setting)?;
    catalogue.learn(&hour);
    let models_without_caching_facts = in_use
        .iter()
        .filter(|&m| {
            catalogue
                .get(m)
                .is_some_and(crate::pricing::caching::lacks_facts)
        })
        .cloned()
        .collect();
    let caching_facts = match rule {
        Some(rule) => in_use
            .iter()
            .filter(|m| catalogue.supports_cache(m))
            .map(|m| crate::detect::no_cache::CachingFacts::of(m, &catalogue, rule))
            .collect(),
        None => Vec::new(),
    };
    Ok(Some(Probe {
        kind: cfg.source.kind(),
        models,
        window,
        sessions,
        rows: stats.rows,
        calls_without_session: stats.calls_without_session,
        unpriced_calls: stats.unpriced_calls,
        cache_unreported_sessions,
        models_without_caching_facts,
        caching_facts,
    }))
}

/// Whether `url`'s host resolves and takes a connection on its port, once
/// and at once: a typo in `source.api_url` is answered naming the URL, not
/// after every retry of every call. Behind a proxy (`HTTPS_PROXY` and the
/// like, which the client follows) the first call decides instead.
async fn reachable(url: &url::Url, timeout: std::time::Duration) -> Result<(), String> {
    const PROXIES: [&str; 6] = [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ];
    if PROXIES.iter().any(|v| std::env::var_os(v).is_some()) {
        return Ok(());
    }
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Ok(());
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    // Credentials and the query may be secret.
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    let url = shown;
    let at = format!("{host}:{port}");
    let addrs: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("{url}: cannot resolve {host}: {e}"))?
        .collect();
    let mut last = format!("{url}: {host} resolves to no address");
    for addr in addrs {
        match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => last = format!("{url}: cannot connect to {at}: {e}"),
            Err(_) => {
                let after = humantime::format_duration(timeout);
                last = format!("{url}: cannot connect to {at}: no answer in {after}");
            }
        }
    }
    Err(last)
}

/// What the state database kept of the models' caches; nothing where it
/// does not exist yet or cannot be read (a check creates nothing).
async fn stored_caching_evidence(url: &str) -> crate::detect::CachingEvidence {
    if sqlite_path(url).is_some_and(|p| !p.exists()) {
        return crate::detect::CachingEvidence::default();
    }
    match SqlStore::open(url).await {
        Ok(store) => {
            use crate::store::WindowStore;
            store.caching_evidence().await.unwrap_or_default()
        }
        Err(_) => crate::detect::CachingEvidence::default(),
    }
}

/// The file of a `sqlite:` URL (none for other schemes or in-memory databases).
pub(super) fn sqlite_path(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let file = rest.split('?').next().unwrap_or(rest);
    (!file.is_empty() && !file.contains(":memory:")).then(|| PathBuf::from(file))
}
