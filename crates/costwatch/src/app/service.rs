//! `costwatch run`: ticks on the cron schedule, outbox delivery between
//! ticks, SIGHUP reloads, readiness and watchdog for systemd, and the
//! `/metrics` + `/healthz` endpoint with the status page at `/`, until
//! SIGTERM.

use super::any::AnySource;
use super::{App, AppError, chain};
use crate::alerting::DELIVERY_INTERVAL;
use crate::config;
use crate::daemon::TickReport;
use crate::logtools::WindowCalls;
use crate::mcp_server::McpServer;
use crate::mcp_server::http::Access;
use crate::ops::http::{HealthFn, HealthReport};
use crate::ops::stall::TickWatch;
use crate::ops::status::{Parts, ReplicaFn, ReplicaView, StatusPage};
use crate::ops::systemd;
use crate::pipeline::Schedule;
use crate::store::SqlStore;
use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

/// How long an in-flight tick may finish after SIGTERM before it is abandoned
/// (a window is one transaction: abandoning it loses nothing).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What `/healthz` and the status page read: updated after every tick.
#[derive(Debug, Default)]
struct Health {
    last_tick: Option<DateTime<Utc>>,
    watermark: Option<DateTime<Utc>>,
    source_error: Option<String>,
    /// Whether the last tick held the detection job.
    leader: bool,
    /// Ticks in a row, holding the job, whose read of the gateway failed.
    failed_reads_in_row: u32,
}

fn note_tick(health: &Mutex<Health>, at: DateTime<Utc>, r: &TickReport) {
    if let Ok(mut h) = health.lock() {
        h.last_tick = Some(at);
        h.watermark = r.watermark;
        h.source_error = r.source_error.clone();
        h.leader = r.leader;
        // Only the job's holder reads the gateway.
        if r.leader {
            h.failed_reads_in_row = match r.source_error {
                Some(_) => h.failed_reads_in_row.saturating_add(1),
                None => 0,
            };
        }
    }
}

fn watch_signal(kind: SignalKind, name: &str) -> Result<Signal, AppError> {
    signal(kind).map_err(|e| AppError::failed(format!("cannot watch {name}"), e))
}

impl App {
    /// The next scheduled tick after `after`.
    fn next_tick(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.config.schedule.next_after(after)
    }

    /// What the status page reads: the state database, the main job and
    /// the investigation budget of the running configuration.
    fn status_parts(&self) -> Parts {
        Parts {
            store: self.daemon.store().clone(),
            schedule: Schedule::main(&self.config.windows),
            investigations: self.config.investigation.enabled,
            day_cap_usd: self.config.investigation.caps.max_usd_per_day,
        }
    }

    /// What `/mcp` serves with `server.mcp`: the log tools over the source
    /// (answering from the pipeline's what the last window read) and
    /// costwatch's own over the state database, to the token's holders.
    /// Made again on every reload.
    async fn mcp_served(
        &self,
    ) -> Result<Option<(McpServer<AnySource, SqlStore>, Access)>, AppError> {
        if !self.config.server.mcp {
            return Ok(None);
        }
        let window_source: Arc<dyn WindowCalls> = Arc::new(self.daemon.source().clone());
        let server = super::mcp_server(
            &self.config,
            Some(self.daemon.store().clone()),
            Some(window_source),
            self.shared.clock.clone(),
        )
        .await?;
        let access = super::mcp_access(&self.config);
        tracing::info!(token = access.token.is_some(), "serving MCP at /mcp");
        Ok(Some((server, access)))
    }

    /// Runs the service until SIGTERM or SIGINT; SIGHUP reloads the
    /// configuration file it was built from.
    pub async fn run_until_stopped(mut self) -> Result<(), AppError> {
        let clock = self.shared.clock.clone();
        let metrics = self.shared.metrics.clone();
        let health = Arc::new(Mutex::new(Health::default()));
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut status = None;
        let mut mcp = None;
        let _endpoint = match self.config.server.listen {
            Some(listen) => {
                let h = health.clone();
                let watch = self.shared.tick_watch.clone();
                let f: HealthFn =
                    Arc::new(move || health_report(&h, &watch, tokio::time::Instant::now()));
                let page = StatusPage::new(
                    self.status_parts(),
                    clock.clone(),
                    replica_view(
                        health.clone(),
                        self.shared.tick_watch.clone(),
                        self.shared.replica.name().to_owned(),
                    ),
                );
                status = Some(page.clone());
                let (routes, endpoint) = crate::mcp_server::http::router(self.mcp_served().await?);
                mcp = Some(endpoint);
                Some(
                    crate::ops::http::serve(
                        listen,
                        metrics,
                        f,
                        Some(page),
                        Some(routes),
                        stop_rx.clone(),
                    )
                    .await
                    .map_err(|e| {
                        AppError::failed(
                            format!(
                                "cannot listen on {listen}, server.listen's address (/metrics, \
                                 the status page and /mcp); another daemon may hold it"
                            ),
                            e,
                        )
                    })?,
                )
            }
            None => None,
        };
        // Changes to the receiver's settings take a restart, not SIGHUP.
        let _otlp = super::receiver::start(
            &self.config,
            clock.clone(),
            self.shared.metrics.clone(),
            stop_rx.clone(),
        )
        .await?;
        let mut sigterm = watch_signal(SignalKind::terminate(), "SIGTERM")?;
        let mut sigint = watch_signal(SignalKind::interrupt(), "SIGINT")?;
        let mut sighup = watch_signal(SignalKind::hangup(), "SIGHUP")?;
        self.shared.metrics.config_load(true, clock.now());
        spawn_watchdog(stop_rx.clone(), self.shared.tick_watch.clone());
        let _ = systemd::notify_ready();
        tracing::info!(config = %self.config.path.display(), schedule = %self.config.schedule.cron.text(), "costwatch is running");

        // The first tick runs at once, so a restart catches up without waiting.
        let mut next = Some(clock.now());
        loop {
            let wait = next
                .map(|t| (t - clock.now()).to_std().unwrap_or(Duration::ZERO))
                .unwrap_or(Duration::MAX)
                .min(DELIVERY_INTERVAL);
            let due_now = next.is_some_and(|t| t <= clock.now());
            if due_now {
                let tick = self.daemon.tick();
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
                next = self.next_tick(clock.now());
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {
                    if let Err(e) = self.daemon.deliver().await {
                        tracing::error!(error = %e, "alert delivery could not read the outbox");
                    }
                }
                _ = sighup.recv() => {
                    let _ = systemd::notify_reloading();
                    self = self.reload().await;
                    if let Some(page) = &status {
                        page.replace(self.status_parts());
                    }
                    if let Some(endpoint) = &mcp {
                        match self.mcp_served().await {
                            Ok(served) => endpoint.replace(served),
                            Err(e) => tracing::error!(error = %chain(&e), "/mcp keeps serving what it served before the reload"),
                        }
                    }
                    next = self.next_tick(clock.now());
                    let _ = systemd::notify_ready();
                }
                _ = sigterm.recv() => { let _ = systemd::notify_stopping(); break; }
                _ = sigint.recv() => { let _ = systemd::notify_stopping(); break; }
            }
        }
        let _ = stop_tx.send(true);
        if let Err(e) = self.daemon.release().await {
            tracing::warn!(error = %e, "could not release the job lease; another replica takes over when it expires");
        }
        tracing::info!("costwatch stopped");
        Ok(())
    }

    /// Loads the configuration again; on any problem keeps the running one
    /// and says so in the log and in `costwatch_config_last_reload_successful`.
    async fn reload(self) -> App {
        let path = self.config.path.clone();
        let metrics = self.shared.metrics.clone();
        let now = self.shared.clock.now();
        let cfg = match config::load(&path) {
            Ok(cfg) => cfg,
            Err(e) => {
                metrics.config_load(false, now);
                tracing::error!(problems = %e, "reload refused: the new configuration is invalid; keeping the old one");
                return self;
            }
        };
        match App::build_with(&cfg, self.shared.clone()).await {
            Ok(new) => {
                metrics.config_load(true, now);
                tracing::info!(config = %path.display(), "configuration reloaded");
                new
            }
            Err(e) => {
                metrics.config_load(false, now);
                tracing::error!(error = %chain(&e), "reload refused; keeping the old configuration");
                self
            }
        }
    }
}

/// Unhealthy while the gateway cannot be read (the last tick's error) or
/// while the running tick is stuck past its deadline at `now`.
fn health_report(h: &Mutex<Health>, watch: &TickWatch, now: tokio::time::Instant) -> HealthReport {
    let Ok(h) = h.lock() else {
        return HealthReport {
            healthy: false,
            reason: Some("health state poisoned".into()),
            ..HealthReport::default()
        };
    };
    let reason = match watch.stalled_at(now) {
        Some(stall) => Some(stall.to_string()),
        None => h.source_error.clone(),
    };
    HealthReport {
        healthy: reason.is_none(),
        reason,
        watermark: h.watermark,
        last_tick: h.last_tick,
    }
}

/// This replica's own view for the status page: its name, its last tick
/// and why `/healthz` fails, if it does.
fn replica_view(health: Arc<Mutex<Health>>, watch: TickWatch, name: String) -> ReplicaFn {
    Arc::new(move || {
        let report = health_report(&health, &watch, tokio::time::Instant::now());
        let Ok(h) = health.lock() else {
            return ReplicaView {
                name: name.clone(),
                unhealthy: report.reason,
                ..ReplicaView::default()
            };
        };
        ReplicaView {
            name: name.clone(),
            last_tick: h.last_tick,
            leader: h.leader,
            failed_reads_in_row: h.failed_reads_in_row,
            unhealthy: (!report.healthy).then_some(report.reason).flatten(),
        }
    })
}

/// Pings the systemd watchdog while the runtime is alive and no tick is
/// stuck past its deadline: a stuck tick stops the pings, so systemd
/// restarts the service.
fn spawn_watchdog(mut stop: watch::Receiver<bool>, tick: TickWatch) {
    let Some(every) = systemd::watchdog_interval() else {
        return;
    };
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(every);
        let mut withheld = false;
        loop {
            tokio::select! {
                _ = interval.tick() => {
                    if watchdog_ping(&tick, tokio::time::Instant::now(), &mut withheld) {
                        let _ = systemd::notify_watchdog();
                    }
                }
                _ = stop.wait_for(|s| *s) => break,
            }
        }
    });
}

/// Whether the watchdog is pinged at `now`: not while the tick is stuck.
/// `withheld` remembers that pings stopped, so that is logged once.
fn watchdog_ping(tick: &TickWatch, now: tokio::time::Instant, withheld: &mut bool) -> bool {
    match tick.stalled_at(now) {
        None => {
            *withheld = false;
            true
        }
        Some(stall) => {
            if !*withheld {
                tracing::error!(%stall, "watchdog pings withheld: the tick is stuck");
            }
            *withheld = true;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::stall::STALL_GRACE;
    use tokio::time::Instant;

    #[test]
    fn healthz_is_unhealthy_while_the_gateway_fails_or_a_tick_is_stuck() {
        let health = Mutex::new(Health::default());
        let watch = TickWatch::new();
        let deadline = Instant::now();
        let late = deadline + STALL_GRACE + Duration::from_secs(1);
        assert!(health_report(&health, &watch, late).healthy);

        let reading = watch.reading(deadline, Duration::from_secs(60));
        assert!(health_report(&health, &watch, deadline).healthy);
        let r = health_report(&health, &watch, late);
        assert!(!r.healthy);
        let reason = r.reason.unwrap_or_default();
        assert!(reason.contains("the tick is stuck"), "{reason}");
        drop(reading);
        assert!(health_report(&health, &watch, late).healthy);

        if let Ok(mut h) = health.lock() {
            h.source_error = Some("gateway unavailable: 503".into());
        }
        let r = health_report(&health, &watch, late);
        assert_eq!(
            (r.healthy, r.reason.as_deref()),
            (false, Some("gateway unavailable: 503"))
        );
    }

    #[test]
    fn the_watchdog_is_not_pinged_while_a_tick_is_stuck() {
        let watch = TickWatch::new();
        let deadline = Instant::now();
        let late = deadline + STALL_GRACE + Duration::from_secs(1);
        let mut withheld = false;
        assert!(
            watchdog_ping(&watch, late, &mut withheld),
            "no tick running"
        );
        let reading = watch.reading(deadline, Duration::from_secs(60));
        assert!(
            watchdog_ping(&watch, deadline, &mut withheld),
            "within its deadline"
        );
        assert!(!watchdog_ping(&watch, late, &mut withheld), "stuck");
        assert!(withheld);
        assert!(!watchdog_ping(&watch, late, &mut withheld), "still stuck");
        drop(reading);
        assert!(watchdog_ping(&watch, late, &mut withheld), "the tick ended");
        assert!(!withheld);
    }
}
