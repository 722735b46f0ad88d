//! The outbox: alerts stored per channel before they are sent, claimed by
//! one replica at a time, and marked sent, retried or given up.

use super::*;
use crate::notify::AlertStatus;

pub(super) async fn enqueue(
    store: &SqlStore,
    evaluated: Option<Evaluated<'_>>,
    updates: &[IncidentUpdate],
    alerts: &[Alert],
    channels: &[String],
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut tx = store.pool.begin().await.map_err(unavailable)?;
    if let Some(e) = evaluated {
        // Never backwards: an evaluation that saw an older watermark (a
        // replica that lost the lease) does not shrink the next span.
        sqlx::query(
            "UPDATE jobs SET evaluated_ms = CASE WHEN evaluated_ms IS NULL OR evaluated_ms < $1 \
             THEN $1 ELSE evaluated_ms END WHERE job = $2",
        )
        .bind(ms(e.to))
        .bind(e.job)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
    }
    for u in updates {
        sqlx::query(
            "UPDATE incidents SET status = $1, notified_ms = $2, notified_sessions = $3, sequence = $4, \
             updated_ms = $5, reopen_until_ms = $7 WHERE fingerprint = $6",
        )
        .bind(if u.firing { "firing" } else { "resolved" })
        .bind(u.notified.map(ms))
        .bind(u.notified_sessions as i64)
        .bind(i64::from(u.sequence))
        .bind(ms(now))
        .bind(u.fingerprint.as_str())
        .bind(u.reopen_until.map(ms))
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
    }
    for a in alerts {
        let body = json(a)?;
        // The episode a firing notification belongs to, for re-posts.
        let starts = (a.status == AlertStatus::Firing).then(|| ms(a.starts_at));
        for channel in channels {
            sqlx::query(
                "INSERT INTO outbox (idempotency_key, channel, fingerprint, alert, status, attempts, \
                 next_attempt_ms, deadline_ms, created_ms, starts_ms) \
                 VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6, $5, $7) \
                 ON CONFLICT (idempotency_key, channel) DO NOTHING",
            )
            .bind(a.idempotency_key())
            .bind(channel.as_str())
            .bind(a.fingerprint.as_str())
            .bind(body.as_str())
            .bind(ms(now))
            .bind(ms(deadline))
            .bind(starts)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        }
    }
    tx.commit().await.map_err(unavailable)
}

/// The ids of the outbox rows due for delivery at the placeholder `now`
/// (`SELECT o.id FROM outbox o WHERE ...`, to be ordered and limited): what
/// a claim takes, and what `costwatch alerts` shows without claiming.
///
/// A row waits while an earlier row of the same incident and channel is
/// pending (perhaps in backoff) or claimed (perhaps being re-posted), so
/// each channel gets an incident's notifications in their order.
pub(super) fn due_rows(now: &str) -> String {
    format!(
        "SELECT o.id FROM outbox o WHERE o.status = 'pending' AND o.next_attempt_ms <= {now} \
         AND (o.claim_until_ms IS NULL OR o.claim_until_ms < {now}) \
         AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.fingerprint = o.fingerprint \
         AND e.channel = o.channel AND e.id < o.id \
         AND (e.status = 'pending' OR e.claim_until_ms >= {now}))"
    )
}

/// The ids of the firing alerts due to be posted again to the placeholder
/// `channel`, last posted before `before`, at `now` (to be ordered and
/// limited).
///
/// The incident is firing and the row is a firing notification of its
/// current episode, the latest one the channel got: no later row of the
/// incident and channel was sent, resolves it, or is being sent. (A later
/// firing notification still waiting in backoff leaves this one going.)
pub(super) fn repost_rows(channel: &str, before: &str, now: &str) -> String {
    format!(
        "SELECT o.id FROM outbox o JOIN incidents i ON i.fingerprint = o.fingerprint \
         WHERE o.channel = {channel} AND o.status = 'sent' AND i.status = 'firing' \
         AND o.starts_ms = i.started_ms \
         AND COALESCE(o.reposted_ms, o.sent_ms) <= {before} \
         AND (o.claim_until_ms IS NULL OR o.claim_until_ms < {now}) \
         AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.fingerprint = o.fingerprint \
         AND e.channel = o.channel AND e.id > o.id \
         AND (e.status = 'sent' OR e.starts_ms IS NULL OR e.claim_until_ms >= {now}))"
    )
}

/// Key of the PostgreSQL advisory lock that serializes claims across replicas.
const CLAIM_LOCK: i64 = 0x636f_7374_7761_7463;

/// A transaction for one claim. On PostgreSQL it holds a transaction-level
/// advisory lock, so claims by different replicas run one after the other:
/// each sees every claim committed before it, which the delivery order needs
/// (a row is held back while an earlier row of its incident is claimed).
/// SQLite has one writer at a time anyway.
async fn claim_tx(store: &SqlStore) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
    let mut tx = store.pool.begin().await.map_err(unavailable)?;
    if store.backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(CLAIM_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
    }
    Ok(tx)
}

pub(super) async fn claim_deliveries(
    store: &SqlStore,
    holder: &str,
    now: DateTime<Utc>,
    claim_until: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<Delivery>, StoreError> {
    // PostgreSQL: rows another replica is claiming right now are skipped,
    // not waited for. SQLite has one writer at a time, so no lock clause.
    let lock = match store.backend {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let due = due_rows("$3");
    let sql = format!(
        "UPDATE outbox SET claimed_by = $1, claim_until_ms = $2 WHERE id IN (\
         {due} ORDER BY o.id LIMIT $4{lock}) \
         RETURNING id, channel, alert, attempts, deadline_ms"
    );
    let mut tx = claim_tx(store).await?;
    // Only fixed text and placeholders are formatted in; the values are bound.
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(holder)
        .bind(ms(claim_until))
        .bind(ms(now))
        .bind(limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)?;
    deliveries(&rows, false)
}

pub(super) async fn claim_reposts(
    store: &SqlStore,
    holder: &str,
    channel: &str,
    posted_before: DateTime<Utc>,
    now: DateTime<Utc>,
    claim_until: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<Delivery>, StoreError> {
    let lock = match store.backend {
        Backend::Postgres => " FOR UPDATE OF o SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let due = repost_rows("$3", "$4", "$5");
    let sql = format!(
        "UPDATE outbox SET claimed_by = $1, claim_until_ms = $2 WHERE id IN (\
         {due} ORDER BY o.id LIMIT $6{lock}) \
         RETURNING id, channel, alert, attempts, deadline_ms"
    );
    let mut tx = claim_tx(store).await?;
    // Only fixed text and placeholders are formatted in; the values are bound.
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(holder)
        .bind(ms(claim_until))
        .bind(channel)
        .bind(ms(posted_before))
        .bind(ms(now))
        .bind(limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)?;
    deliveries(&rows, true)
}

pub(super) async fn reposted(
    store: &SqlStore,
    id: i64,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE outbox SET reposted_ms = $1, claim_until_ms = NULL WHERE id = $2")
        .bind(ms(at))
        .bind(id)
        .execute(&store.pool)
        .await
        .map_err(unavailable)?;
    Ok(())
}

/// Claimed rows as deliveries (re-posts or not), oldest first.
pub(super) fn deliveries(rows: &[AnyRow], repost: bool) -> Result<Vec<Delivery>, StoreError> {
    let mut out: Vec<Delivery> = rows
        .iter()
        .map(|r| {
            Ok(Delivery {
                id: r.try_get("id").map_err(corrupt)?,
                channel: r.try_get("channel").map_err(corrupt)?,
                alert: alert_from(&r.try_get::<String, _>("alert").map_err(corrupt)?)?,
                attempts: r.try_get::<i64, _>("attempts").map_err(corrupt)? as u32,
                deadline: from_ms(r.try_get("deadline_ms").map_err(corrupt)?)?,
                repost,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    out.sort_by_key(|d| d.id);
    Ok(out)
}

pub(super) async fn delivered(
    store: &SqlStore,
    id: i64,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE outbox SET status = 'sent', attempts = attempts + 1, sent_ms = $1, last_error = NULL, claim_until_ms = NULL WHERE id = $2")
        .bind(ms(now))
        .bind(id)
        .execute(&store.pool)
        .await
        .map_err(unavailable)?;
    Ok(())
}

pub(super) async fn retry_later(
    store: &SqlStore,
    id: i64,
    next: DateTime<Utc>,
    error: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE outbox SET attempts = attempts + 1, next_attempt_ms = $1, last_error = $2, claim_until_ms = NULL WHERE id = $3")
        .bind(ms(next))
        .bind(error)
        .bind(id)
        .execute(&store.pool)
        .await
        .map_err(unavailable)?;
    Ok(())
}

pub(super) async fn give_up(store: &SqlStore, id: i64, error: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE outbox SET status = 'failed', attempts = attempts + 1, last_error = $1, claim_until_ms = NULL WHERE id = $2")
        .bind(error)
        .bind(id)
        .execute(&store.pool)
        .await
        .map_err(unavailable)?;
    Ok(())
}

pub(super) async fn outbox(store: &SqlStore) -> Result<Vec<OutboxRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, idempotency_key, channel, status, attempts, last_error, alert FROM outbox ORDER BY id",
    )
    .fetch_all(&store.pool)
    .await
    .map_err(unavailable)?;
    rows.iter()
        .map(|r| {
            Ok(OutboxRow {
                id: r.try_get("id").map_err(corrupt)?,
                idempotency_key: r.try_get("idempotency_key").map_err(corrupt)?,
                channel: r.try_get("channel").map_err(corrupt)?,
                status: r.try_get("status").map_err(corrupt)?,
                attempts: r.try_get::<i64, _>("attempts").map_err(corrupt)? as u32,
                last_error: r.try_get("last_error").map_err(corrupt)?,
                alert: alert_from(&r.try_get::<String, _>("alert").map_err(corrupt)?)?,
            })
        })
        .collect()
}
