//! The findings held until their session has ended (`detect::held`), one
//! row per job, session and kind. The table's `group_move` column, written
//! when oversized_model findings waited on their group's next sessions, is
//! no longer read or written: such a row reads back as a finding waiting
//! for its session. `peer_wait` is what a finding of a group with too few
//! peers waits for, as JSON. A window's commit replaces them in its
//! transaction when they changed; skipping windows drops them, since the
//! skipped windows were never looked at.

use super::placeholders::{ROWS_PER_STATEMENT, value_tuples};
use super::*;
use crate::detect::Held;

pub(super) async fn held_findings(store: &SqlStore, job: &str) -> Result<Vec<Held>, StoreError> {
    let rows = sqlx::query(
        "SELECT quiet_at_ms, alone, finding, peer_wait FROM held_findings \
         WHERE job = $1 ORDER BY session_id, kind",
    )
    .bind(job)
    .fetch_all(&store.pool)
    .await
    .map_err(unavailable)?;
    let c = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    rows.iter()
        .map(|r| {
            let quiet_at = from_ms(r.try_get("quiet_at_ms").map_err(c)?)?;
            let alone: i64 = r.try_get("alone").map_err(c)?;
            let finding: String = r.try_get("finding").map_err(c)?;
            let finding: Finding = serde_json::from_str(&finding)
                .map_err(|e| StoreError::Corrupt(format!("held finding: {e}")))?;
            let peers: Option<String> = r.try_get("peer_wait").map_err(c)?;
            let peers = peers
                .map(|p| serde_json::from_str(&p))
                .transpose()
                .map_err(|e| StoreError::Corrupt(format!("held finding's peer wait: {e}")))?;
            Ok(Held {
                finding,
                quiet_at,
                alone: alone != 0,
                peers,
            })
        })
        .collect()
}

/// Replaces the job's held findings with `held`.
pub(super) async fn replace_held(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    job: &str,
    held: &[Held],
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM held_findings WHERE job = $1")
        .bind(job)
        .execute(&mut **tx)
        .await
        .map_err(unavailable)?;
    for chunk in held.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO held_findings (job, session_id, kind, quiet_at_ms, alone, finding, peer_wait) \
             VALUES {}",
            value_tuples(backend, chunk.len(), 7)
        );
        // Only numbered placeholders are formatted in; the values are bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for h in chunk {
            q = q
                .bind(job)
                .bind(h.finding.session_id.as_str())
                .bind(h.finding.kind.as_str())
                .bind(ms(h.quiet_at))
                .bind(i64::from(h.alone))
                .bind(json(&h.finding)?)
                .bind(h.peers.as_ref().map(json).transpose()?);
        }
        q.execute(&mut **tx).await.map_err(unavailable)?;
    }
    Ok(())
}
