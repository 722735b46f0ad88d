//! Escalation: the firing alerts of flagged incidents that match the policy
//! get a capped LLM investigation before they are stored and sent. The
//! investigation's summary, cost and transcript (tool results shortened)
//! travel with the alert; the whole record is kept in the state database.
//!
//! Only flagged windows are escalated; everything else stays free. Each
//! investigation is stored under the key of the notification it explains,
//! so a crash between investigating and enqueueing reuses it at the next
//! tick instead of paying again. The daily budget lives in the state
//! database, shared by every replica, and so does what the model's prompt
//! estimator learned (`token_calibration`): it is merged in before each
//! investigation and written after one that taught it something, so a
//! restarted process or another replica starts calibrated.

use crate::clock::Clock;
use crate::config::EscalateConfig;
use crate::investigate::budget::{Caps, Prices};
use crate::investigate::model::ModelClient;
use crate::investigate::run::{RunOptions, investigate};
use crate::investigate::transcript::step_log_jsonl;
use crate::investigate::{BudgetLedger, CalibrationStore, InvestigationReport, Tools};
use crate::notify::{Alert, AlertStatus};
use crate::store::{Store, StoreError, StoredInvestigation};
use chrono::Duration as ChronoDuration;
use std::sync::Arc;

/// Everything an escalation needs.
pub struct Escalation {
    /// The read-only log tools, allowlisted: the gateway's over MCP, or
    /// costwatch's own over the source (`investigation.log_tools`).
    pub tools: Tools,
    /// The investigating model.
    pub model: ModelClient,
    /// Hard caps per run and per day.
    pub caps: Caps,
    /// The model's prices.
    pub prices: Prices,
    /// Tools offered (in order) and per-call settings.
    pub options: RunOptions,
    /// Which incidents are escalated, and how many an hour.
    pub policy: EscalateConfig,
}

impl EscalateConfig {
    /// Whether the policy escalates this alert.
    pub fn wants(&self, a: &Alert) -> bool {
        a.status == AlertStatus::Firing
            && a.severity >= self.min_severity
            && a.kind.waste().is_some_and(|k| self.kinds.contains(&k))
    }
}

impl Escalation {
    /// Whether the policy escalates this alert.
    pub fn wants(&self, a: &Alert) -> bool {
        self.policy.wants(a)
    }

    /// Investigates the alerts the policy wants (within the hourly limit),
    /// attaching each investigation to its alert. Returns how many ran and
    /// what they cost.
    pub async fn enrich<St: Store + BudgetLedger + CalibrationStore>(
        &self,
        store: &St,
        alerts: &mut [Alert],
        clock: &Arc<dyn Clock>,
    ) -> Result<(usize, f64), StoreError> {
        let (mut ran, mut spent) = (0usize, 0.0);
        for alert in alerts.iter_mut().filter(|a| self.wants(a)) {
            let key = alert.idempotency_key();
            if let Some(stored) = store.investigation_for(&key).await? {
                alert.investigation = Some(stored);
                continue;
            }
            let now = clock.now();
            if store
                .investigations_since(now - ChronoDuration::hours(1))
                .await?
                >= self.policy.max_per_hour
            {
                tracing::info!(fingerprint = %alert.fingerprint, "investigation skipped: escalate.max_per_hour reached");
                continue;
            }
            self.load_calibration(store).await;
            let inv = investigate(
                alert,
                &self.tools,
                &self.model,
                store,
                &self.caps,
                &self.prices,
                clock.as_ref(),
                &self.options,
            )
            .await;
            self.save_calibration(store, clock.as_ref()).await;
            let report = InvestigationReport::of(&inv);
            let steps = step_log_jsonl(&inv);
            for line in steps.lines() {
                tracing::info!(target: "costwatch::investigation::steps", step = %line, "investigation step");
            }
            store
                .save_investigation(&StoredInvestigation {
                    key: key.clone(),
                    fingerprint: alert.fingerprint.clone(),
                    started_at: inv.started_at,
                    report: report.clone(),
                    record_json: serde_json::to_string(&inv).ok(),
                    step_log: steps,
                })
                .await?;
            tracing::info!(
                fingerprint = %alert.fingerprint,
                run_id = %inv.run_id,
                stop = inv.stop_reason.code(),
                cost_usd = inv.totals.cost_usd,
                "investigation done"
            );
            ran += 1;
            spent += inv.totals.cost_usd;
            alert.investigation = Some(report);
        }
        Ok((ran, spent))
    }
}

impl Escalation {
    /// Merges what the state database holds of the model's calibration
    /// into its estimator. A failure only leaves the estimator as it was.
    async fn load_calibration<St: CalibrationStore>(&self, store: &St) {
        let estimator = self.model.estimator();
        match store
            .load_calibration(self.model.model(), estimator.method())
            .await
        {
            Ok(samples) => estimator.merge(samples),
            Err(e) => tracing::warn!(
                error = %e,
                "the token calibration could not be read; estimates go on from what this process learned"
            ),
        }
    }

    /// Writes the estimator's calibration when a run taught it something,
    /// merged with what other replicas stored since it was read.
    async fn save_calibration<St: CalibrationStore>(&self, store: &St, clock: &dyn Clock) {
        let estimator = self.model.estimator();
        if !estimator.unsaved() {
            return;
        }
        let (model, method) = (self.model.model(), estimator.method());
        if let Ok(stored) = store.load_calibration(model, method).await {
            estimator.merge(stored);
        }
        let samples = estimator.samples();
        match store
            .save_calibration(model, method, &samples, clock.now().timestamp_millis())
            .await
        {
            Ok(()) => estimator.saved(),
            Err(e) => tracing::warn!(
                error = %e,
                "the token calibration could not be written; it is kept in memory and written after the next run"
            ),
        }
    }
}
