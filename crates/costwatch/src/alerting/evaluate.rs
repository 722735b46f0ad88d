//! Incident evaluation over the state: which open incidents need a
//! notification now, and storing those alerts in the outbox together with
//! the incidents' new state and how far the evaluation went.
//!
//! Windows are committed in their own transactions, before the evaluation
//! that covers them. The evaluation reads only stored state, and records the
//! watermark it reached in the transaction that stores its alerts, so a
//! crash anywhere between a window's commit and that transaction leaves the
//! windows to the next evaluation, which decides what the lost one would
//! have.
//!
//! # Silences
//!
//! An active silence (at the evaluation's wall time) that matches an
//! incident holds back the notification the evaluation decided for it, be
//! it a first firing, a re-alert or a resolution: nothing is queued, no
//! investigation is paid for, and the incident's notification state (last
//! notified, sessions then, sequence) stays as it was. The incident itself
//! goes on as usual: its findings and sessions are counted, and it resolves
//! when it goes quiet. So what was held back stays owed. The first
//! evaluation at or after the silence's end decides as if the silence had
//! never been: an incident still firing that nobody was told of fires then,
//! one told before the silence is re-alerted if it grew past the cooldown,
//! and one that went quiet under the silence was resolved without a word.
//! That evaluation stores its alerts with the incidents' new state in one
//! transaction, so the owed notification is queued once, never twice.

use crate::incidents::{
    AlertPolicy, Decision, Incident, SOURCE_UNHEALTHY, TickSpan, alert_session, build_alert,
    decide, meets_floor, reopen_until, summary_alert,
};
use crate::notify::chart::ChartSpec;
use crate::notify::{Alert, AlertStatus};
use crate::silence::Silence;
use crate::store::silences::{SilenceStore, Silenced};
use crate::store::{Evaluated, IncidentUpdate, Store, StoreError};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// The notifications an evaluation decided on, not yet stored.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// New notification state of the incidents.
    pub updates: Vec<IncidentUpdate>,
    /// The alerts to send.
    pub alerts: Vec<Alert>,
    /// The job whose windows were evaluated.
    pub job: String,
    /// Its watermark: the data time the incidents were evaluated at.
    pub data_now: DateTime<Utc>,
    /// The windows the evaluation covered.
    pub span: TickSpan,
    /// Notifications held back by a silence (not in `alerts`).
    pub silenced: Vec<Silenced>,
    /// Open incidents nobody was told of because they are below the floor,
    /// by kind.
    pub below_floor: BTreeMap<String, u64>,
}

impl Plan {
    /// Stores the alerts in the outbox (one row per channel) together with
    /// the incidents' new state and how far the evaluation went, in one
    /// transaction. Until then, the windows it covered stay unevaluated: a
    /// crash before it leaves them to the next evaluation, which decides
    /// the same.
    pub async fn enqueue<St: Store>(
        &self,
        store: &St,
        channels: &[String],
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if self.updates.is_empty() && self.span.windows == 0 {
            return Ok(());
        }
        let evaluated = Evaluated {
            job: &self.job,
            to: self.data_now,
        };
        store
            .enqueue(
                Some(evaluated),
                &self.updates,
                &self.alerts,
                channels,
                now,
                deadline,
            )
            .await
    }
}

/// Turns the incidents' state into notifications and stores them: [`plan`]
/// then [`Plan::enqueue`]. Returns the alerts enqueued.
#[allow(clippy::too_many_arguments)]
pub async fn evaluate<St: Store + SilenceStore>(
    store: &St,
    job: &str,
    policy: &AlertPolicy,
    data_now: DateTime<Utc>,
    source_healthy: bool,
    channels: &[String],
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> Result<Vec<Alert>, StoreError> {
    let p = plan(store, job, policy, data_now, source_healthy, now).await?;
    p.enqueue(store, channels, now, deadline).await?;
    Ok(p.alerts)
}

/// Decides the notifications the incidents need at data time `data_now`
/// (the watermark of `job`); `source_healthy` says whether the last read of
/// the gateway succeeded. Nothing is stored.
///
/// Everything it decides on is stored state: the incidents, and the windows
/// of `job` committed since the last evaluation ([`Store::evaluation_span`])
/// rather than what this process happened to commit. A crash between a
/// window's commit and the evaluation's [`Plan::enqueue`] therefore changes
/// nothing: the next evaluation sees the same span and decides the same.
/// And an incident nobody was told of is told when it ends rather than
/// resolved in silence (in the summary after a catch-up).
///
/// Silences active at `now` hold notifications back (see the module
/// documentation); they are listed in [`Plan::silenced`].
pub async fn plan<St: Store + SilenceStore>(
    store: &St,
    job: &str,
    policy: &AlertPolicy,
    data_now: DateTime<Utc>,
    source_healthy: bool,
    now: DateTime<Utc>,
) -> Result<Plan, StoreError> {
    let tick = store.evaluation_span(job).await?;
    let silences = store.silences(false, now).await?;
    let mut silenced = Vec::new();
    let catch_up = tick.windows > policy.summary_after_windows;
    let mut updates = Vec::new();
    let mut source_alerts = Vec::new();
    let mut finding_alerts = Vec::new();
    let mut below_floor = BTreeMap::new();
    for i in store.open_incidents().await? {
        let worth_telling = meets_floor(&i, policy);
        if !worth_telling && i.notified.is_none() {
            *below_floor.entry(i.kind.clone()).or_insert(0) += 1;
        }
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
        // An incident that ended before anyone was told of it (it began and
        // ended inside a catch-up, or between evaluations a crash delayed)
        // is told now rather than vanishing: in the summary after a
        // catch-up, on its own otherwise. A catch-up's summary also lists
        // the incidents that ended in it. One below the floor ends as it
        // went: on record, untold.
        let untold = i.notified.is_none();
        let listed = catch_up && i.kind != SOURCE_UNHEALTHY;
        if decision == (Decision::Resolve { notify: false }) && (untold || listed) && worth_telling
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
        // A finding soon after the resolution continues this episode.
        let reopen = if resolving && i.kind != SOURCE_UNHEALTHY {
            reopen_until(at, policy)
        } else {
            None
        };
        if notify && let Some(s) = matching(&silences, &i, now) {
            // Held back: the incident goes on (or resolves), its
            // notification state stays as it was, so the notification is
            // still owed when the silence ends.
            let held = build_alert(&i, decision, Vec::new(), at, now);
            silenced.push(Silenced {
                silence_id: s.id,
                fingerprint: i.fingerprint.clone(),
                kind: i.kind.clone(),
                episode: i.started,
                status: status_name(held.status).to_owned(),
                title: held.title,
                at: now,
            });
            if resolving {
                updates.push(IncidentUpdate {
                    fingerprint: i.fingerprint.clone(),
                    firing: false,
                    notified: i.notified,
                    notified_sessions: i.notified_sessions,
                    sequence: i.sequence,
                    reopen_until: reopen,
                });
            }
            continue;
        }
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
            reopen_until: reopen,
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
                .map(|f| alert_session(f, policy.session_links.as_ref()))
                .collect()
        };
        let mut alert = build_alert(&i, decision, sessions, at, now);
        alert.chart = chart_of(store, &alert).await?;
        if i.kind == SOURCE_UNHEALTHY {
            source_alerts.push(alert);
        } else {
            finding_alerts.push(alert);
        }
    }
    let mut alerts = source_alerts;
    match tick.span {
        Some(span) if catch_up && !finding_alerts.is_empty() => {
            alerts.push(summary_alert(
                &finding_alerts,
                tick.windows,
                span,
                tick.first,
                now,
            ));
        }
        _ => alerts.extend(finding_alerts),
    }
    Ok(Plan {
        updates,
        alerts,
        job: job.to_owned(),
        data_now,
        span: tick,
        silenced,
        below_floor,
    })
}

/// The chart of a finding alert: its sessions against the group's stored
/// baseline, captured now so the alert renders the same at every send.
async fn chart_of<St: Store>(store: &St, alert: &Alert) -> Result<Option<ChartSpec>, StoreError> {
    let Some(kind) = alert.kind.waste() else {
        return Ok(None);
    };
    if alert.sessions.is_empty() {
        return Ok(None);
    }
    let baselines = store
        .load_baselines(std::slice::from_ref(&alert.group))
        .await?;
    Ok(baselines
        .get(&alert.group)
        .and_then(|b| ChartSpec::capture(kind, &alert.group, b, &alert.sessions)))
}

/// The first silence active at `now` that matches `i` (the oldest).
fn matching<'a>(silences: &'a [Silence], i: &Incident, now: DateTime<Utc>) -> Option<&'a Silence> {
    silences.iter().find(|s| s.is_active(now) && s.matches(i))
}

fn status_name(status: AlertStatus) -> &'static str {
    match status {
        AlertStatus::Firing => "firing",
        AlertStatus::Resolved => "resolved",
    }
}
