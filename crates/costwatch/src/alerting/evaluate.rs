//! Incident evaluation over the state: which open incidents need a
//! notification at this tick, and storing those alerts in the outbox together
//! with the incidents' new state.

use crate::incidents::{
    AlertPolicy, Decision, SOURCE_UNHEALTHY, TickSpan, alert_session, build_alert, decide,
    summary_alert,
};
use crate::notify::Alert;
use crate::store::{IncidentUpdate, Store, StoreError};
use chrono::{DateTime, Utc};

/// The notifications an evaluation decided on, not yet stored.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// New notification state of the incidents.
    pub updates: Vec<IncidentUpdate>,
    /// The alerts to send.
    pub alerts: Vec<Alert>,
}

impl Plan {
    /// Stores the alerts in the outbox (one row per channel) together with
    /// the incidents' new state, in one transaction.
    pub async fn enqueue<St: Store>(
        &self,
        store: &St,
        channels: &[String],
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if self.updates.is_empty() {
            return Ok(());
        }
        store
            .enqueue(&self.updates, &self.alerts, channels, now, deadline)
            .await
    }
}

/// Turns the incidents' state into notifications and stores them: [`plan`]
/// then [`Plan::enqueue`]. Returns the alerts enqueued.
#[allow(clippy::too_many_arguments)]
pub async fn evaluate<St: Store>(
    store: &St,
    policy: &AlertPolicy,
    data_now: DateTime<Utc>,
    source_healthy: bool,
    tick: TickSpan,
    channels: &[String],
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> Result<Vec<Alert>, StoreError> {
    let p = plan(store, policy, data_now, source_healthy, tick, now).await?;
    p.enqueue(store, channels, now, deadline).await?;
    Ok(p.alerts)
}

/// Decides the notifications the incidents need at data time `data_now`
/// (the watermark); `source_healthy` says whether the last read of the
/// gateway succeeded. Nothing is stored.
pub async fn plan<St: Store>(
    store: &St,
    policy: &AlertPolicy,
    data_now: DateTime<Utc>,
    source_healthy: bool,
    tick: TickSpan,
    now: DateTime<Utc>,
) -> Result<Plan, StoreError> {
    let catch_up = tick.windows > policy.summary_after_windows;
    let mut updates = Vec::new();
    let mut source_alerts = Vec::new();
    let mut finding_alerts = Vec::new();
    for i in store.open_incidents().await? {
        let decision = if i.kind == SOURCE_UNHEALTHY {
            match (source_healthy, i.notified) {
                (true, notified) => Some(Decision::Resolve {
                    notify: policy.send_resolved && notified.is_some(),
                }),
                (false, None) => Some(Decision::Fire),
                (false, Some(_)) => None,
            }
        } else {
            decide(&i, data_now, policy)
        };
        let Some(mut decision) = decision else {
            continue;
        };
        // An incident that began and ended inside a catch-up was never told:
        // it goes into the summary rather than vanishing.
        if catch_up
            && i.kind != SOURCE_UNHEALTHY
            && decision == (Decision::Resolve { notify: false })
        {
            decision = Decision::Resolve { notify: true };
        }
        let notify = !matches!(decision, Decision::Resolve { notify: false });
        let resolving = matches!(decision, Decision::Resolve { .. });
        let at = if i.kind == SOURCE_UNHEALTHY {
            now
        } else {
            data_now
        };
        updates.push(IncidentUpdate {
            fingerprint: i.fingerprint.clone(),
            firing: !resolving,
            notified: if notify { Some(at) } else { i.notified },
            notified_sessions: if notify {
                i.session_count
            } else {
                i.notified_sessions
            },
            sequence: if notify { i.sequence + 1 } else { i.sequence },
        });
        if !notify {
            continue;
        }
        let sessions = if i.kind == SOURCE_UNHEALTHY {
            Vec::new()
        } else {
            store
                .incident_findings(&i, policy.top_sessions)
                .await?
                .into_iter()
                .map(|f| alert_session(f, policy.gateway_ui_url.as_deref()))
                .collect()
        };
        let alert = build_alert(&i, decision, sessions, at, now);
        if i.kind == SOURCE_UNHEALTHY {
            source_alerts.push(alert);
        } else {
            finding_alerts.push(alert);
        }
    }
    let mut alerts = source_alerts;
    match tick.span {
        Some(span) if catch_up && !finding_alerts.is_empty() => {
            alerts.push(summary_alert(&finding_alerts, tick.windows, span, now));
        }
        _ => alerts.extend(finding_alerts),
    }
    Ok(Plan { updates, alerts })
}
