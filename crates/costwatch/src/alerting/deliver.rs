//! Durable delivery: alerts wait in the state database's outbox, one row per
//! channel, and are marked sent only after the channel accepted them.
//!
//! Delivery is at least once: a crash between sending and marking sends the
//! alert again on restart, with the same idempotency key, so receivers can
//! drop the duplicate. Each channel is delivered on its own task, so a dead
//! webhook never holds up email.
//!
//! Receivers that forget a firing alert unless told again (Alertmanager,
//! [`Channel::repost_interval`]) get every firing alert posted again until
//! its incident resolves, the way Prometheus re-sends active alerts: every
//! `resend_delay` (default 1m), each post carrying `endsAt` = now + 4 ×
//! max(evaluation interval, resend delay), "to allow for two Eval or
//! Alertmanager send failures" (prometheus/prometheus `rules/alerting.go`,
//! `AlertingRule.sendAlerts`; `rules/manager.go` sends `ValidUntil` as
//! `EndsAt`). Here the interval is the channel's, and the evaluation
//! interval is [`DELIVERY_INTERVAL`], the longest time between two passes.
//! What is due is read from the outbox, so re-posts go on across restarts
//! and replicas share them through claims.

use crate::notify::outbox::{Channel, RetryPolicy};
use crate::notify::{AlertStatus, NotifyError};
use crate::store::{Delivery, Store, StoreError};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// How often a running service looks at the outbox between ticks: the
/// longest time between two delivery passes.
pub const DELIVERY_INTERVAL: Duration = Duration::from_secs(15);

/// How long a firing alert posted now holds at a receiver that gets it
/// again every `interval`: 4 × max([`DELIVERY_INTERVAL`], `interval`), as
/// Prometheus's `ValidUntil`.
pub fn valid_for(interval: Duration) -> Duration {
    interval.max(DELIVERY_INTERVAL).saturating_mul(4)
}

/// What one delivery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Deliveries accepted by their channel.
    pub sent: usize,
    /// Deliveries that will be tried again.
    pub retrying: usize,
    /// Deliveries given up (rejected, past the deadline, or channel gone).
    pub failed: usize,
    /// Firing alerts posted again (to receivers that forget them otherwise).
    pub reposted: usize,
    /// Per channel: (sent, failed) in this pass.
    pub by_channel: BTreeMap<String, (usize, usize)>,
}

/// Most claim-and-send rounds in one pass. A round sends at most one
/// notification per incident and channel (the next waits for it), so a
/// notification whose predecessor went out goes out in the next round.
const MAX_ROUNDS: usize = 8;

/// Claims and sends every delivery due at `now`, each channel on its own task.
/// `holder` names this replica; rows claimed by a live replica are left
/// alone. A claim lasts `claim_ttl`, which must exceed every channel's
/// timeout, so a replica that dies mid-send is taken over after it.
///
/// Per incident and channel, notifications go out in order: one waiting in
/// backoff holds back the later ones (see [`Store::claim_deliveries`]).
pub async fn deliver_due<St>(
    store: &St,
    channels: &[Arc<dyn Channel>],
    retry: RetryPolicy,
    holder: &str,
    claim_ttl: Duration,
    now: DateTime<Utc>,
) -> Result<DeliveryReport, StoreError>
where
    St: Store + Clone + 'static,
{
    let until = now + ChronoDuration::from_std(claim_ttl).unwrap_or(ChronoDuration::minutes(2));
    let mut report = DeliveryReport::default();
    for _ in 0..MAX_ROUNDS {
        let mut due = store.claim_deliveries(holder, now, until, 1000).await?;
        for c in channels {
            if let Some(every) = c.repost_interval() {
                let before = ChronoDuration::from_std(every)
                    .ok()
                    .and_then(|every| now.checked_sub_signed(every))
                    .unwrap_or(DateTime::<Utc>::MIN_UTC);
                let again = store
                    .claim_reposts(holder, c.name(), before, now, until, 1000)
                    .await?;
                due.extend(again);
            }
        }
        if due.is_empty() {
            break;
        }
        report.add(deliver_round(store, channels, retry, due, now).await?);
    }
    Ok(report)
}

impl DeliveryReport {
    fn add(&mut self, r: DeliveryReport) {
        self.sent += r.sent;
        self.retrying += r.retrying;
        self.failed += r.failed;
        self.reposted += r.reposted;
        for (k, (s, f)) in r.by_channel {
            let e = self.by_channel.entry(k).or_default();
            e.0 += s;
            e.1 += f;
        }
    }
}

/// Sends claimed deliveries, each channel on its own task.
async fn deliver_round<St>(
    store: &St,
    channels: &[Arc<dyn Channel>],
    retry: RetryPolicy,
    due: Vec<Delivery>,
    now: DateTime<Utc>,
) -> Result<DeliveryReport, StoreError>
where
    St: Store + Clone + 'static,
{
    let mut by_channel: BTreeMap<String, Vec<Delivery>> = BTreeMap::new();
    for d in due {
        by_channel.entry(d.channel.clone()).or_default().push(d);
    }
    let mut tasks: JoinSet<Result<DeliveryReport, StoreError>> = JoinSet::new();
    let mut report = DeliveryReport::default();
    for (name, deliveries) in by_channel {
        let Some(channel) = channels.iter().find(|c| c.name() == name).cloned() else {
            for d in deliveries {
                store
                    .give_up(d.id, "channel is no longer configured")
                    .await?;
                report.failed += 1;
            }
            continue;
        };
        let store = store.clone();
        tasks.spawn(async move {
            deliver_channel(&store, channel.as_ref(), deliveries, retry, now).await
        });
    }
    while let Some(joined) = tasks.join_next().await {
        let r =
            joined.map_err(|e| StoreError::Unavailable(format!("delivery task failed: {e}")))??;
        report.add(r);
    }
    Ok(report)
}

async fn deliver_channel<St: Store>(
    store: &St,
    channel: &dyn Channel,
    deliveries: Vec<Delivery>,
    retry: RetryPolicy,
    now: DateTime<Utc>,
) -> Result<DeliveryReport, StoreError> {
    let mut report = DeliveryReport::default();
    let name = channel.name().to_owned();
    let valid_until = channel.repost_interval().map(|every| {
        ChronoDuration::from_std(valid_for(every))
            .ok()
            .and_then(|hold| now.checked_add_signed(hold))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    });
    for mut d in deliveries {
        if d.alert.status == AlertStatus::Firing {
            d.alert.valid_until = valid_until;
        }
        let outcome = channel.send_boxed(&d.alert).await;
        if d.repost {
            // A failed re-post is not retried early: the next one is an
            // interval away, well inside the time the last post holds.
            match &outcome {
                Ok(()) => report.reposted += 1,
                Err(e) => {
                    tracing::warn!(channel = %name, fingerprint = %d.alert.fingerprint, error = %e, "firing alert could not be posted again");
                }
            }
            store.reposted(d.id, now).await?;
            continue;
        }
        let entry = report.by_channel.entry(name.clone()).or_default();
        match outcome {
            Ok(()) => {
                store.delivered(d.id, now).await?;
                tracing::info!(channel = %name, fingerprint = %d.alert.fingerprint, key = %d.alert.idempotency_key(), "alert delivered");
                report.sent += 1;
                entry.0 += 1;
            }
            Err(NotifyError::Transient(e)) if now < d.deadline => {
                let next = now
                    + ChronoDuration::from_std(retry.delay(d.attempts))
                        .unwrap_or(ChronoDuration::hours(1));
                tracing::warn!(channel = %name, fingerprint = %d.alert.fingerprint, attempt = d.attempts + 1, next = %next, error = %e, "alert delivery failed; will retry");
                store.retry_later(d.id, next, &e).await?;
                report.retrying += 1;
            }
            Err(e) => {
                tracing::error!(channel = %name, fingerprint = %d.alert.fingerprint, attempts = d.attempts + 1, error = %e, "alert delivery given up");
                store.give_up(d.id, &e.to_string()).await?;
                report.failed += 1;
                entry.1 += 1;
            }
        }
    }
    Ok(report)
}
