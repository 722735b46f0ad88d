//! Investigations, stored under the key of the notification they explain:
//! the report the alert carries, the whole run record and the step log.

use super::*;
use crate::store::StoredInvestigation;

pub(super) async fn save_investigation(
    store: &SqlStore,
    inv: &StoredInvestigation,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO investigations (idempotency_key, fingerprint, run_id, created_ms, cost_usd, stop_reason, \
         alert_json, step_log, record_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (idempotency_key) DO NOTHING",
    )
    .bind(&inv.key)
    .bind(&inv.fingerprint)
    .bind(&inv.report.run_id)
    .bind(ms(inv.started_at))
    .bind(inv.report.cost_usd)
    .bind(inv.report.stop_reason.as_str())
    .bind(json(&inv.report)?)
    .bind(&inv.step_log)
    .bind(inv.record_json.as_deref())
    .execute(&store.pool)
    .await
    .map_err(unavailable)?;
    Ok(())
}

pub(super) async fn investigation_for(
    store: &SqlStore,
    key: &str,
) -> Result<Option<InvestigationReport>, StoreError> {
    let row = sqlx::query("SELECT alert_json FROM investigations WHERE idempotency_key = $1")
        .bind(key)
        .fetch_optional(&store.pool)
        .await
        .map_err(unavailable)?;
    row.map(|r| {
        let text: String = r.try_get("alert_json").map_err(corrupt)?;
        serde_json::from_str(&text).map_err(corrupt)
    })
    .transpose()
}

pub(super) async fn investigations_since(
    store: &SqlStore,
    since: DateTime<Utc>,
) -> Result<u64, StoreError> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM investigations WHERE created_ms >= $1")
        .bind(ms(since))
        .fetch_one(&store.pool)
        .await
        .map_err(unavailable)?;
    Ok(row.try_get::<i64, _>("n").map_err(corrupt)? as u64)
}

fn stored(row: &AnyRow) -> Result<StoredInvestigation, StoreError> {
    let report: String = row.try_get("alert_json").map_err(corrupt)?;
    Ok(StoredInvestigation {
        key: row.try_get("idempotency_key").map_err(corrupt)?,
        fingerprint: row.try_get("fingerprint").map_err(corrupt)?,
        started_at: from_ms(row.try_get("created_ms").map_err(corrupt)?)?,
        report: serde_json::from_str(&report).map_err(corrupt)?,
        step_log: row.try_get("step_log").map_err(corrupt)?,
        record_json: row.try_get("record_json").map_err(corrupt)?,
    })
}

pub(super) async fn stored_investigation(
    store: &SqlStore,
    id: &str,
) -> Result<Option<StoredInvestigation>, StoreError> {
    let row = sqlx::query(
        "SELECT idempotency_key, fingerprint, created_ms, alert_json, step_log, record_json \
         FROM investigations WHERE run_id = $1 OR idempotency_key = $1 \
         ORDER BY created_ms DESC LIMIT 1",
    )
    .bind(id)
    .fetch_optional(&store.pool)
    .await
    .map_err(unavailable)?;
    row.as_ref().map(stored).transpose()
}

pub(super) async fn stored_investigations(
    store: &SqlStore,
    limit: u32,
) -> Result<Vec<StoredInvestigation>, StoreError> {
    let rows = sqlx::query(
        "SELECT idempotency_key, fingerprint, created_ms, alert_json, step_log, record_json \
         FROM investigations ORDER BY created_ms DESC, run_id DESC LIMIT $1",
    )
    .bind(i64::from(limit))
    .fetch_all(&store.pool)
    .await
    .map_err(unavailable)?;
    rows.iter().map(stored).collect()
}
