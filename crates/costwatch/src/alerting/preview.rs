//! The dry run of the next evaluation and delivery pass, for
//! `costwatch alerts`: which notifications would go out now and how each
//! channel would get them, read from the state without changing it.
//!
//! It covers what the next tick would send over the windows already
//! processed: the evaluation's new firings, re-alerts, resolutions and
//! catch-up summary ([`plan`], which only reads), the notifications
//! already queued and due, and the firing alerts due to be posted again
//! to Alertmanager. Windows not yet read are not read; the gateway's
//! health is taken as last recorded (an open `source_unhealthy` incident
//! stays open). Investigations are not run: a stored one is attached, and
//! an alert the escalation policy would investigate says so.

use super::deliver::valid_for;
use super::plan;
use crate::config::EscalateConfig;
use crate::incidents::{AlertPolicy, SOURCE_UNHEALTHY};
use crate::notify::preview::{ChannelSpec, Rendered, render};
use crate::notify::{Alert, AlertStatus};
use crate::store::inspect::Inspect;
use crate::store::silences::{SilenceStore, Silenced};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde::Serialize;

/// Why a notification would be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The evaluation would decide it now.
    Evaluation,
    /// It is in the outbox and due.
    Queued,
    /// A firing alert posted again to a channel that forgets it otherwise.
    Repost,
}

/// How an investigation would go with a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InvestigationNote {
    /// None: investigations are off, or the policy does not want this one.
    None,
    /// A stored investigation is attached (the daemon would reuse it).
    Stored,
    /// The escalation policy would investigate it before it is sent (within
    /// its hourly limit and budget); not run in a dry run.
    WouldRun,
}

/// One notification that would go out, and what each channel would get.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Upcoming {
    /// Why it would go out.
    pub origin: Origin,
    /// The notification.
    pub alert: Alert,
    /// Its investigation.
    pub investigation: InvestigationNote,
    /// Per channel, what it would receive.
    pub channels: Vec<Rendered>,
    /// Channels it is queued for that are no longer configured (the
    /// delivery pass gives those up).
    pub unknown_channels: Vec<String>,
}

/// What the next tick would send.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    /// The wall time it was worked out for.
    pub now: DateTime<Utc>,
    /// The job's watermark: the data time the evaluation would be at
    /// (`None` before the first window).
    pub data_now: Option<DateTime<Utc>>,
    /// Windows committed since the last evaluation.
    pub windows: usize,
    /// The notifications, in the order they would be queued or sent.
    pub upcoming: Vec<Upcoming>,
    /// What silences would hold back.
    pub silenced: Vec<Silenced>,
}

/// Works out what the next tick of `job` would send at `now` to `channels`
/// (see the module documentation). Reads only.
pub async fn preview<St: Store + SilenceStore + Inspect>(
    store: &St,
    job: &str,
    policy: &AlertPolicy,
    channels: &[ChannelSpec],
    escalate: Option<&EscalateConfig>,
    now: DateTime<Utc>,
) -> Result<Preview, StoreError> {
    let data_now = store.watermark(job).await?;
    let mut upcoming = Vec::new();
    let mut silenced = Vec::new();
    let mut windows = 0;
    // Due deliveries go out first, in the pass after the evaluation has
    // queued its own behind them.
    let mut queued: Vec<Upcoming> = Vec::new();
    for d in store.deliveries_due(now).await? {
        let key = d.alert.idempotency_key();
        let at = match queued.iter().position(|u| u.alert.idempotency_key() == key) {
            Some(at) => at,
            None => {
                queued.push(Upcoming {
                    origin: Origin::Queued,
                    investigation: note(&d.alert, None),
                    alert: d.alert.clone(),
                    channels: Vec::new(),
                    unknown_channels: Vec::new(),
                });
                queued.len() - 1
            }
        };
        deliver_to(&mut queued[at], &d.channel, channels, now);
    }
    upcoming.extend(queued);
    if let Some(data_now) = data_now {
        let healthy = !store
            .open_incidents()
            .await?
            .iter()
            .any(|i| i.kind == SOURCE_UNHEALTHY);
        let p = plan(store, job, policy, data_now, healthy, now).await?;
        windows = p.span.windows;
        silenced = p.silenced;
        for mut alert in p.alerts {
            // The daemon reuses an investigation stored under the key.
            if escalate.is_some_and(|e| e.wants(&alert)) {
                alert.investigation = store.investigation_for(&alert.idempotency_key()).await?;
            }
            let investigation = note(&alert, escalate);
            let mut u = Upcoming {
                origin: Origin::Evaluation,
                investigation,
                alert,
                channels: Vec::new(),
                unknown_channels: Vec::new(),
            };
            for c in channels {
                deliver_to(&mut u, c.name(), channels, now);
            }
            upcoming.push(u);
        }
    }
    for c in channels {
        let Some(every) = c.repost_interval() else {
            continue;
        };
        let before = ChronoDuration::from_std(every)
            .ok()
            .and_then(|every| now.checked_sub_signed(every))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        for d in store.reposts_due(c.name(), before, now).await? {
            let mut u = Upcoming {
                origin: Origin::Repost,
                investigation: note(&d.alert, None),
                alert: d.alert,
                channels: Vec::new(),
                unknown_channels: Vec::new(),
            };
            deliver_to(&mut u, c.name(), channels, now);
            upcoming.push(u);
        }
    }
    Ok(Preview {
        now,
        data_now,
        windows,
        upcoming,
        silenced,
    })
}

/// Adds what `channel` would receive for `u`'s alert, as the delivery pass
/// sends it: a firing alert to a re-posting channel holds until now + 4 ×
/// its interval.
fn deliver_to(u: &mut Upcoming, channel: &str, channels: &[ChannelSpec], now: DateTime<Utc>) {
    let Some(spec) = channels.iter().find(|c| c.name() == channel) else {
        u.unknown_channels.push(channel.to_owned());
        return;
    };
    let mut alert = u.alert.clone();
    if alert.status == AlertStatus::Firing {
        alert.valid_until = spec.repost_interval().map(|every| {
            ChronoDuration::from_std(valid_for(every))
                .ok()
                .and_then(|hold| now.checked_add_signed(hold))
                .unwrap_or(DateTime::<Utc>::MAX_UTC)
        });
    }
    u.channels.push(render(&alert, spec));
}

/// The investigation of `alert`: attached already, or wanted by `escalate`.
fn note(alert: &Alert, escalate: Option<&EscalateConfig>) -> InvestigationNote {
    if alert.investigation.is_some() {
        InvestigationNote::Stored
    } else if escalate.is_some_and(|e| e.wants(alert)) {
        InvestigationNote::WouldRun
    } else {
        InvestigationNote::None
    }
}
