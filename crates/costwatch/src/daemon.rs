//! `costwatch run`: the detection job on a cron schedule, alert evaluation
//! after every tick, and durable delivery.
//!
//! Scheduling is built on croner directly rather than tokio-cron-scheduler:
//! croner gives DST-correct next fire times in any IANA time zone, and the
//! loop here adds what a long-running service needs and that scheduler lacks
//! (no overlapping runs, 5- and 6-field expressions, a bounded catch-up, a
//! clean shutdown). Missed ticks are harmless: every tick processes every
//! window due since the watermark.

use crate::alerting::{self, DeliveryReport};
use crate::clock::Clock;
use crate::escalate::Escalation;
use crate::incidents::AlertPolicy;
use crate::investigate::{BudgetLedger, CalibrationStore};
use crate::notify::Alert;
use crate::notify::outbox::{Channel, RetryPolicy};
use crate::ops::metrics::Metrics;
use crate::ops::stall::TickWatch;
use crate::pipeline::{Deadline, Pipeline, PipelineError};
use crate::source::{Source, Window};
use crate::store::silences::{SilenceStore, Silenced};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use std::sync::Arc;
use std::time::Duration;

/// Everything a tick needs besides the pipeline.
#[derive(Clone)]
pub struct DaemonSettings {
    /// How findings become alerts and how long their delivery is tried
    /// (`alerts`).
    pub policy: AlertPolicy,
    /// `schedule.max_catch_up_windows`.
    pub max_catch_up_windows: usize,
    /// `schedule.tick_timeout`.
    pub tick_timeout: Duration,
    /// Where a tick marks its window phase, for `/healthz` and the watchdog.
    pub tick_watch: TickWatch,
    /// `windows.max_backfill`: older windows are skipped rather than caught
    /// up.
    pub max_backfill: Duration,
    /// Channels alerts go to.
    pub channels: Vec<Arc<dyn Channel>>,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// This replica's name in leases and outbox claims: never shared by two
    /// live processes, kept across restarts where it can be (`app::Replica`).
    pub replica: String,
    /// `state.lease_ttl`.
    pub lease_ttl: Duration,
    /// How long a claim on an outbox row lasts: longer than any channel's
    /// timeout.
    pub claim_ttl: Duration,
    /// LLM investigation of flagged incidents; `None` when disabled (then no
    /// model is ever called).
    pub escalation: Option<Arc<Escalation>>,
}

/// Windows processed between two renewals of the job lease.
const WINDOWS_PER_LEASE_RENEWAL: usize = 16;

/// A name for this replica: host, process id and the start time's nanoseconds.
pub fn replica_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned());
    let nanos = crate::clock::SystemClock.now().timestamp_subsec_nanos();
    format!("{host}-{}-{nanos:08x}", std::process::id())
}

/// What one tick did.
#[derive(Debug, Clone, Default)]
pub struct TickReport {
    /// Windows processed.
    pub windows: usize,
    /// Windows skipped as older than the maximum backfill.
    pub skipped_windows: i64,
    /// Whether this replica held the job lease (only the holder processes
    /// windows and evaluates incidents; every replica delivers).
    pub leader: bool,
    /// New findings.
    pub new_findings: usize,
    /// Why the gateway could not be read, if it could not.
    pub source_error: Option<String>,
    /// Alerts enqueued.
    pub alerts: Vec<Alert>,
    /// Notifications silences held back in this tick's evaluation.
    pub silenced: Vec<Silenced>,
    /// Investigations run (not counting ones reused after a restart).
    pub investigations: usize,
    /// Deliveries made.
    pub delivery: DeliveryReport,
    /// The watermark after the tick.
    pub watermark: Option<DateTime<Utc>>,
}

/// The detection job with its alerting.
pub struct Daemon<S, St> {
    pipeline: Pipeline<S, St>,
    settings: DaemonSettings,
    clock: Arc<dyn Clock>,
}

impl<S, St> Daemon<S, St>
where
    S: Source + Clone + 'static,
    St: Store + SilenceStore + BudgetLedger + CalibrationStore + Clone + 'static,
{
    /// A daemon over `pipeline`.
    pub fn new(pipeline: Pipeline<S, St>, settings: DaemonSettings, clock: Arc<dyn Clock>) -> Self {
        Daemon {
            pipeline,
            settings,
            clock,
        }
    }

    /// The store.
    pub fn store(&self) -> &St {
        self.pipeline.store()
    }

    /// The source the windows are read through.
    pub fn source(&self) -> &S {
        self.pipeline.source()
    }

    fn channel_names(&self) -> Vec<String> {
        self.settings
            .channels
            .iter()
            .map(|c| c.name().to_owned())
            .collect()
    }

    /// One run of the job at the clock's time: skip what is older than the
    /// backfill, process due windows (bounded in number and by
    /// `tick_timeout`), evaluate incidents, deliver. Fails only when the
    /// state database does.
    ///
    /// The gateway is read until `tick_timeout` after the tick began. A
    /// window not read by then stays due, never committed empty. When the
    /// tick committed no window before, that counts as a failed read of the
    /// gateway, like an outage (`source_unhealthy`, `/healthz` 503); a
    /// catch-up that did commit windows just stops there, as it does at
    /// `max_catch_up_windows`.
    pub async fn tick(&self) -> Result<TickReport, StoreError> {
        let deadline = Deadline::after(self.settings.tick_timeout);
        let now = self.clock.now();
        let job = self.pipeline.schedule().job.clone();
        let mut report = TickReport::default();
        if !self.renew_lease(&job).await? {
            tracing::debug!(job = %job, "another replica holds the job; only delivering");
            report.delivery = self.deliver().await?;
            return Ok(report);
        }
        report.leader = true;
        report.skipped_windows = self.skip_old_windows(now).await?;
        let mut windows: Vec<Window> = Vec::new();
        let mut failure = None;
        let reading = self
            .settings
            .tick_watch
            .reading(deadline.at, self.settings.tick_timeout);
        while windows.len() < self.settings.max_catch_up_windows {
            let batch =
                WINDOWS_PER_LEASE_RENEWAL.min(self.settings.max_catch_up_windows - windows.len());
            let result = self
                .pipeline
                .run_due_bounded(now, batch, Some(deadline), |r| {
                    windows.push(r.window);
                    report.new_findings += r.new_findings.len();
                    let m = &self.settings.metrics;
                    m.windows_processed(1);
                    m.sessions_read(r.sessions);
                    m.drilldowns_skipped(r.drilldowns_skipped);
                    m.set_findings_held(r.held as u64);
                    for f in &r.new_findings {
                        m.finding(f.kind.as_str());
                    }
                })
                .await;
            match result {
                Ok(reports) if reports.len() < batch => break,
                Ok(_) => {
                    if !self.renew_lease(&job).await? {
                        tracing::warn!(job = %job, "lost the job lease mid-catch-up; stopping this tick");
                        return Ok(report);
                    }
                }
                // Another replica committed the window first: it has the job now.
                Err(PipelineError::Store(StoreError::AlreadyProcessed(w))) => {
                    tracing::warn!(window = %w, "window already processed by another replica");
                    return Ok(report);
                }
                // A catch-up that made progress: the gateway answers, the
                // rest waits for the next tick.
                Err(PipelineError::Deadline { .. }) if !windows.is_empty() => {
                    tracing::info!(
                        windows = windows.len(),
                        "schedule.tick_timeout reached during a catch-up; the remaining windows stay due"
                    );
                    break;
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        drop(reading);
        report.windows = windows.len();
        let healthy = match failure {
            None => true,
            Some(PipelineError::Store(e)) => return Err(e),
            Some(
                e @ (PipelineError::Source { .. }
                | PipelineError::Models(_)
                | PipelineError::Deadline { .. }),
            ) => {
                let message = e.to_string();
                self.settings.metrics.window_failed();
                self.settings.metrics.gateway_error(match &e {
                    PipelineError::Source { error: source, .. } | PipelineError::Models(source) => {
                        source_kind(source)
                    }
                    // The gateway did not answer in time.
                    PipelineError::Deadline { .. } => "transient",
                    PipelineError::Store(_) => "store",
                });
                tracing::warn!(error = %message, "gateway unavailable; windows stay due");
                self.store().source_failed(&job, &message, now).await?;
                report.source_error = Some(message);
                false
            }
        };
        let watermark = self.store().watermark(&job).await?;
        report.watermark = watermark;
        if let Some(data_now) = watermark {
            let deadline = now
                + ChronoDuration::from_std(self.settings.policy.delivery_deadline)
                    .unwrap_or(ChronoDuration::days(1));
            alerting::silences::notice_ended(self.store(), now).await?;
            let mut plan = alerting::plan(
                self.store(),
                &job,
                &self.settings.policy,
                data_now,
                healthy,
                now,
            )
            .await?;
            // Investigations can take a while: renew the lease first, so no
            // other replica pays for the same ones.
            if let Some(escalation) = &self.settings.escalation
                && self.renew_lease(&job).await?
            {
                let (ran, spent) = escalation
                    .enrich(self.store(), &mut plan.alerts, &self.clock)
                    .await?;
                report.investigations = ran;
                if spent > 0.0 {
                    self.settings.metrics.investigation_spend(spent);
                }
            }
            plan.enqueue(self.store(), &self.channel_names(), now, deadline)
                .await?;
            for h in alerting::silences::record_held_back(self.store(), &plan).await? {
                self.settings.metrics.alert_silenced(&h.kind);
            }
            self.settings.metrics.set_below_floor(&plan.below_floor);
            report.silenced = plan.silenced;
            report.alerts = plan.alerts;
        }
        for a in &report.alerts {
            self.settings.metrics.alert_enqueued(a.kind.as_str());
        }
        if let Some(w) = watermark {
            self.settings.metrics.set_watermark(w);
        }
        self.settings.metrics.set_now(now);
        self.settings.metrics.tick(healthy, now);
        report.delivery = self.deliver().await?;
        tracing::info!(
            windows = report.windows,
            new_findings = report.new_findings,
            alerts = report.alerts.len(),
            sent = report.delivery.sent,
            healthy,
            "tick done"
        );
        Ok(report)
    }

    /// Delivers every alert due now.
    pub async fn deliver(&self) -> Result<DeliveryReport, StoreError> {
        let r = alerting::deliver_due(
            self.store(),
            &self.settings.channels,
            RetryPolicy::from(&self.settings.policy),
            &self.settings.replica,
            self.settings.claim_ttl,
            self.clock.now(),
        )
        .await?;
        for (channel, (sent, failed)) in &r.by_channel {
            for _ in 0..*sent {
                self.settings.metrics.delivery(channel, true);
            }
            for _ in 0..*failed {
                self.settings.metrics.delivery(channel, false);
            }
        }
        Ok(r)
    }

    /// Takes or renews the job lease.
    async fn renew_lease(&self, job: &str) -> Result<bool, StoreError> {
        let now = self.clock.now();
        let ttl =
            ChronoDuration::from_std(self.settings.lease_ttl).unwrap_or(ChronoDuration::minutes(1));
        self.store()
            .try_lease(
                &format!("job:{job}"),
                &self.settings.replica,
                now,
                now + ttl,
            )
            .await
    }

    /// Gives the job lease up, so another replica can take over at once.
    pub async fn release(&self) -> Result<(), StoreError> {
        let job = &self.pipeline.schedule().job;
        self.store()
            .release_lease(&format!("job:{job}"), &self.settings.replica)
            .await
    }

    async fn skip_old_windows(&self, now: DateTime<Utc>) -> Result<i64, StoreError> {
        self.pipeline
            .skip_older_than(now, self.settings.max_backfill)
            .await
    }
}

fn source_kind(e: &crate::source::SourceError) -> &'static str {
    match e {
        crate::source::SourceError::Transient(_) => "transient",
        crate::source::SourceError::Rejected(_) => "rejected",
        crate::source::SourceError::Invalid(_) => "invalid",
    }
}
