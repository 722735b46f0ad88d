//! Durable delivery: alerts wait in the state database's outbox, one row per
//! channel, and are marked sent only after the channel accepted them.
//!
//! Delivery is at least once: a crash between sending and marking sends the
//! alert again on restart, with the same idempotency key, so receivers can
//! drop the duplicate. Each channel is delivered on its own task, so a dead
//! webhook never holds up email.

use crate::notify::NotifyError;
use crate::notify::outbox::{Channel, RetryPolicy};
use crate::store::{Delivery, Store, StoreError};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// What one delivery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Deliveries accepted by their channel.
    pub sent: usize,
    /// Deliveries that will be tried again.
    pub retrying: usize,
    /// Deliveries given up (rejected, past the deadline, or channel gone).
    pub failed: usize,
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
        let due = store.claim_deliveries(holder, now, until, 1000).await?;
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
    for d in deliveries {
        let outcome = channel.send_boxed(&d.alert).await;
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
