//! Silences at evaluation time: recording the notifications they held back
//! (once per silence, incident episode and status, so a notification held
//! back at every evaluation is counted once), and noticing when one ended.
//!
//! Which notifications a silence holds back is decided in
//! [`plan`](super::plan); what happens when it ends is described there.

use super::Plan;
use crate::printable::printable;
use crate::store::StoreError;
use crate::store::silences::{EndedSilence, SilenceStore, Silenced};
use chrono::{DateTime, SecondsFormat, Utc};

/// Records what `plan` held back; returns what was held back for the first
/// time (each is logged with the silence's id), for the caller to count.
pub async fn record_held_back<St: SilenceStore>(
    store: &St,
    plan: &Plan,
) -> Result<Vec<Silenced>, StoreError> {
    let first = store.record_silenced(&plan.silenced).await?;
    for h in &plan.silenced {
        if first.contains(h) {
            tracing::info!(
                silence = h.silence_id,
                fingerprint = %h.fingerprint,
                kind = %h.kind,
                status = %h.status,
                title = %printable(&h.title),
                "notification held back by a silence"
            );
        } else {
            tracing::debug!(silence = h.silence_id, fingerprint = %h.fingerprint, status = %h.status, "notification still held back by a silence");
        }
    }
    Ok(first)
}

/// Notices the silences that ended by `now` (ran out, or were expired) and
/// logs each once, naming it: from this evaluation on, what it held back
/// is notified as usual.
pub async fn notice_ended<St: SilenceStore>(
    store: &St,
    now: DateTime<Utc>,
) -> Result<Vec<EndedSilence>, StoreError> {
    let ended = store.take_ended_silences(now).await?;
    for e in &ended {
        let s = &e.silence;
        let how = if s.expired_at.is_some() {
            "expired"
        } else {
            "ran out"
        };
        tracing::info!(
            silence = s.id,
            how,
            ended_at = %s.ends_at.to_rfc3339_opts(SecondsFormat::Secs, true),
            conditions = %printable(&s.conditions()),
            reason = %printable(&s.reason),
            author = %printable(&s.author),
            held_back_still_open = e.still_open.len(),
            "silence ended; the incidents it matched are notified as usual from this evaluation on"
        );
    }
    Ok(ended)
}
