//! Wires the parts of `costwatch run` together from a configuration, and runs
//! them until SIGTERM: ticks on the cron schedule, outbox delivery between
//! ticks, SIGHUP reloads, readiness and watchdog for systemd, and the
//! `/metrics` + `/healthz` endpoint.

use crate::clock::{Clock, SystemClock};
use crate::config::{self, Config};
use crate::daemon::{Daemon, DaemonSettings, TickReport};
use crate::escalate::Escalation;
use crate::incidents::AlertPolicy;
use crate::investigate::budget::{Caps, Prices};
use crate::investigate::mcp::McpClient;
use crate::investigate::model::ModelClient;
use crate::investigate::run::RunOptions;
use crate::notify::email::{EmailNotifier, EmailSettings};
use crate::notify::outbox::{Channel, RetryPolicy};
use crate::notify::webhook::{WebhookNotifier, WebhookSettings};
use crate::ops::http::{HealthFn, HealthReport};
use crate::ops::{metrics::Metrics, systemd};
use crate::source::gateway::GatewaySource;
use crate::store::SqlStore;
use anyhow::{Context, anyhow};
use chrono::{DateTime, Utc};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// How often the outbox is looked at between ticks.
const DELIVERY_INTERVAL: Duration = Duration::from_secs(15);
/// How long an in-flight tick may finish after SIGTERM before it is abandoned
/// (a window is one transaction: abandoning it loses nothing).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The built service.
pub struct App {
    /// The configuration it was built from.
    pub config: Config,
    /// The detection job.
    pub daemon: Daemon<GatewaySource, SqlStore>,
}

/// The alert channels a configuration names.
pub fn channels(cfg: &Config) -> anyhow::Result<Vec<Arc<dyn Channel>>> {
    let mut out: Vec<Arc<dyn Channel>> = Vec::new();
    if let Some(e) = &cfg.notify.email {
        let extra_ca_pem = e
            .ca_file
            .as_ref()
            .map(|p| {
                std::fs::read(p)
                    .with_context(|| format!("cannot read notify.email.ca_file {}", p.display()))
            })
            .transpose()?;
        let n = EmailNotifier::new(EmailSettings {
            host: e.host.clone(),
            port: e.port,
            security: e.security,
            extra_ca_pem,
            username: e.username.clone(),
            password: e.password.clone(),
            from: e.from.clone(),
            to: e.to.clone(),
            timeout: e.timeout,
        })
        .map_err(|err| anyhow!("notify.email: {err}"))?;
        out.push(Arc::new(n));
    }
    for w in &cfg.notify.webhooks {
        let n = WebhookNotifier::new(WebhookSettings {
            name: w.name.clone(),
            url: w.url.clone(),
            shape: w.shape,
            secret: w.secret.clone(),
            timeout: w.timeout,
        })
        .map_err(|err| anyhow!("notify.webhooks {}: {err}", w.name))?;
        out.push(Arc::new(n));
    }
    Ok(out)
}

/// How long an outbox claim lasts: the slowest channel's timeout and a margin.
pub fn claim_ttl(cfg: &Config) -> Duration {
    let slowest = cfg
        .notify
        .webhooks
        .iter()
        .map(|w| w.timeout)
        .chain(cfg.notify.email.as_ref().map(|e| e.timeout))
        .max()
        .unwrap_or(Duration::from_secs(30));
    slowest + Duration::from_secs(10)
}

/// The escalation a configuration describes; `None` when disabled. Prices
/// come from `investigation.prices`, else from the gateway's catalogue.
pub async fn escalation(cfg: &Config) -> anyhow::Result<Option<Escalation>> {
    let inv = &cfg.investigation;
    if !inv.enabled {
        return Ok(None);
    }
    let (Some(inference_key), Some(admin_key)) = (&inv.inference_key, &cfg.source.admin_key) else {
        return Err(anyhow!(
            "investigation.enabled needs both an inference key and the admin key"
        ));
    };
    let prices = match inv.prices {
        Some((input, cached, output)) => Prices {
            input_usd_per_mtok: input,
            cached_input_usd_per_mtok: cached,
            output_usd_per_mtok: output,
        },
        None => {
            use crate::source::Source;
            let models = crate::cli::gateway(cfg)?
                .models()
                .await
                .context("investigation: cannot read the model catalogue for prices (or set investigation.prices)")?;
            let m = models
                .iter()
                .find(|m| m.id == inv.model)
                .ok_or_else(|| anyhow!("investigation.model {} is not in the gateway's catalogue: set investigation.prices", inv.model))?;
            Prices::from_catalogue(m)
        }
    };
    let limits = crate::source::HttpLimits {
        timeout: inv.wall_timeout,
        connect_timeout: cfg.source.connect_timeout,
        max_retries: 2,
        retry_base: cfg.source.retry_base,
        retry_max: cfg.source.retry_max,
        max_body_bytes: 4 << 20,
    };
    let tools = McpClient::new(
        inv.mcp_url.clone(),
        admin_key,
        inv.tools.clone(),
        Duration::from_secs(20),
    )
    .map_err(|e| anyhow!("investigation.mcp_url: {e}"))?;
    let model = ModelClient::new(
        inv.llm_url.clone(),
        inference_key,
        inv.model.clone(),
        limits,
    )
    .map_err(|e| anyhow!("investigation.llm_url: {e}"))?;
    Ok(Some(Escalation {
        tools,
        model,
        caps: Caps {
            max_rounds: inv.max_rounds,
            max_tool_calls: inv.max_tool_calls,
            max_input_tokens: inv.max_input_tokens,
            max_output_tokens: inv.max_output_tokens,
            max_usd_per_run: inv.max_usd_per_run,
            max_usd_per_day: inv.max_usd_per_day,
            max_tool_result_bytes: inv.max_tool_result_bytes,
            wall_timeout: inv.wall_timeout,
        },
        prices,
        options: RunOptions {
            tools: inv.tools.clone(),
            ..RunOptions::default()
        },
        kinds: inv.kinds.clone(),
        min_severity: inv.min_severity,
        max_per_hour: inv.max_per_hour,
    }))
}

/// The alert policy a configuration describes.
pub fn policy(cfg: &Config) -> AlertPolicy {
    let a = &cfg.alerts;
    AlertPolicy {
        cooldown: a.cooldown,
        realert_growth: a.realert_growth,
        resolve_after: a.resolve_after,
        send_resolved: a.send_resolved,
        top_sessions: a.top_sessions,
        summary_after_windows: a.summary_after_windows,
        gateway_ui_url: a.gateway_ui_url.as_ref().map(|u| u.to_string()),
    }
}

impl App {
    /// Builds the service: opens (and migrates) the state database, the
    /// gateway client and the channels.
    pub async fn build(
        cfg: Config,
        metrics: Arc<Metrics>,
        clock: Arc<dyn Clock>,
        replica: &str,
    ) -> anyhow::Result<App> {
        let pipeline = crate::cli::main_pipeline(&cfg, clock.clone()).await?;
        let settings = DaemonSettings {
            policy: policy(&cfg),
            max_catch_up_windows: cfg.schedule.max_catch_up_windows,
            max_backfill: cfg.windows.max_backfill,
            delivery_deadline: cfg.alerts.delivery_deadline,
            retry: RetryPolicy {
                base: cfg.alerts.retry_base,
                max: cfg.alerts.retry_max,
            },
            channels: channels(&cfg)?,
            metrics,
            replica: replica.to_owned(),
            lease_ttl: cfg.state.lease_ttl,
            claim_ttl: claim_ttl(&cfg),
            // A gateway that is down at start must not keep the daemon from
            // running: without its catalogue, investigations wait for a reload.
            escalation: match escalation(&cfg).await {
                Ok(e) => e.map(Arc::new),
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "investigations are disabled until the next reload");
                    None
                }
            },
        };
        Ok(App {
            daemon: Daemon::new(pipeline, settings, clock.clone()),
            config: cfg,
        })
    }

    /// The next scheduled tick after `after`.
    fn next_tick(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.config.schedule.next_after(after)
    }
}

/// What `/healthz` reads: updated after every tick.
#[derive(Debug, Default)]
struct Health {
    last_tick: Option<DateTime<Utc>>,
    watermark: Option<DateTime<Utc>>,
    source_error: Option<String>,
}

fn note_tick(health: &Mutex<Health>, at: DateTime<Utc>, r: &TickReport) {
    if let Ok(mut h) = health.lock() {
        h.last_tick = Some(at);
        h.watermark = r.watermark;
        h.source_error = r.source_error.clone();
    }
}

/// Runs `costwatch run --config path` until SIGTERM or SIGINT.
pub async fn run(path: &Path) -> anyhow::Result<()> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let metrics = Arc::new(Metrics::new());
    let replica = crate::daemon::replica_name();
    let mut app = App::build(
        config::load(path)?,
        metrics.clone(),
        clock.clone(),
        &replica,
    )
    .await?;
    let health = Arc::new(Mutex::new(Health::default()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let _endpoint = match app.config.server.listen {
        Some(listen) => {
            let h = health.clone();
            let f: HealthFn = Arc::new(move || health_report(&h));
            Some(
                crate::ops::http::serve(listen, metrics.clone(), f, stop_rx.clone())
                    .await
                    .context("cannot listen for /metrics")?,
            )
        }
        None => None,
    };
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut sighup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
    spawn_watchdog(stop_rx.clone());
    let _ = systemd::notify_ready();
    tracing::info!(config = %path.display(), schedule = %app.config.schedule.cron_text, "costwatch is running");

    // The first tick runs at once, so a restart catches up without waiting.
    let mut next = Some(clock.now());
    loop {
        let wait = next
            .map(|t| (t - clock.now()).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(Duration::MAX)
            .min(DELIVERY_INTERVAL);
        let due_now = next.is_some_and(|t| t <= clock.now());
        if due_now {
            let tick = app.daemon.tick();
            tokio::pin!(tick);
            let outcome = tokio::select! {
                r = &mut tick => Some(r),
                _ = sigterm.recv() => None,
                _ = sigint.recv() => None,
            };
            match outcome {
                Some(Ok(r)) => note_tick(&health, clock.now(), &r),
                Some(Err(e)) => {
                    tracing::error!(error = %e, "tick failed: the state database is unavailable; retrying at the next tick")
                }
                None => {
                    tracing::info!("stopping: letting the current tick finish");
                    let _ = systemd::notify_stopping();
                    let _ = tokio::time::timeout(SHUTDOWN_GRACE, &mut tick).await;
                    break;
                }
            }
            next = app.next_tick(clock.now());
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {
                if let Err(e) = app.daemon.deliver().await {
                    tracing::error!(error = %e, "alert delivery could not read the outbox");
                }
            }
            _ = sighup.recv() => {
                let _ = systemd::notify_reloading();
                app = reload(app, path, metrics.clone(), clock.clone(), &replica).await;
                next = app.next_tick(clock.now());
                let _ = systemd::notify_ready();
            }
            _ = sigterm.recv() => { let _ = systemd::notify_stopping(); break; }
            _ = sigint.recv() => { let _ = systemd::notify_stopping(); break; }
        }
    }
    let _ = stop_tx.send(true);
    if let Err(e) = app.daemon.release().await {
        tracing::warn!(error = %e, "could not release the job lease; another replica takes over when it expires");
    }
    tracing::info!("costwatch stopped");
    Ok(())
}

/// Loads the configuration again; on any problem keeps the running one.
async fn reload(
    app: App,
    path: &Path,
    metrics: Arc<Metrics>,
    clock: Arc<dyn Clock>,
    replica: &str,
) -> App {
    let cfg = match config::load(path) {
        Ok(cfg) => cfg,
        Err(e) => {
            tracing::error!(problems = %e, "reload refused: the new configuration is invalid; keeping the old one");
            return app;
        }
    };
    match App::build(cfg, metrics, clock, replica).await {
        Ok(new) => {
            tracing::info!(config = %path.display(), "configuration reloaded");
            new
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "reload refused; keeping the old configuration");
            app
        }
    }
}

fn health_report(h: &Mutex<Health>) -> HealthReport {
    let Ok(h) = h.lock() else {
        return HealthReport {
            healthy: false,
            reason: Some("health state poisoned".into()),
            ..HealthReport::default()
        };
    };
    HealthReport {
        healthy: h.source_error.is_none(),
        reason: h.source_error.clone(),
        watermark: h.watermark,
        last_tick: h.last_tick,
    }
}

/// Pings the systemd watchdog while the runtime is alive.
fn spawn_watchdog(mut stop: watch::Receiver<bool>) {
    let Some(every) = systemd::watchdog_interval() else {
        return;
    };
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = interval.tick() => { let _ = systemd::notify_watchdog(); }
                _ = stop.wait_for(|s| *s) => break,
            }
        }
    });
}
