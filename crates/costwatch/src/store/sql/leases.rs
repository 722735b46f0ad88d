//! Leases: which replica runs the scheduled jobs.

use super::*;

pub(super) async fn try_lease(
    store: &SqlStore,
    name: &str,
    holder: &str,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "INSERT INTO leases (name, holder, expires_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms \
         WHERE leases.holder = excluded.holder OR leases.expires_ms < $4 \
         RETURNING holder",
    )
    .bind(name)
    .bind(holder)
    .bind(ms(until))
    .bind(ms(now))
    .fetch_optional(&store.pool)
    .await
    .map_err(unavailable)?;
    Ok(row.is_some())
}

pub(super) async fn release_lease(
    store: &SqlStore,
    name: &str,
    holder: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
        .bind(name)
        .bind(holder)
        .execute(&store.pool)
        .await
        .map_err(unavailable)?;
    Ok(())
}
