//! Investigations, stored under the key of the notification they explain.

use super::*;

pub(super) async fn save_investigation(
    store: &SqlStore,
    key: &str,
    fingerprint: &str,
    report: &InvestigationReport,
    step_log: &str,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO investigations (idempotency_key, fingerprint, run_id, created_ms, cost_usd, stop_reason, \
         alert_json, step_log) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (idempotency_key) DO NOTHING",
    )
    .bind(key)
    .bind(fingerprint)
    .bind(&report.run_id)
    .bind(ms(at))
    .bind(report.cost_usd)
    .bind(report.stop_reason.as_str())
    .bind(json(report)?)
    .bind(step_log)
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
