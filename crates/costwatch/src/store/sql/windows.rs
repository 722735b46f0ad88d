//! Watermarks, windows, their findings and the groups' baselines.

use super::incidents::upsert_incident;
use super::placeholders::{ROWS_PER_STATEMENT, value_tuples};
use super::*;

pub(super) async fn watermark(
    store: &SqlStore,
    job: &str,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let row = sqlx::query("SELECT watermark_ms FROM jobs WHERE job = $1")
        .bind(job)
        .fetch_optional(&store.pool)
        .await
        .map_err(unavailable)?;
    row.map(|r| {
        let v: i64 = r
            .try_get("watermark_ms")
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        from_ms(v)
    })
    .transpose()
}

pub(super) async fn init_watermark(
    store: &SqlStore,
    job: &str,
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, StoreError> {
    sqlx::query("INSERT INTO jobs (job, watermark_ms, updated_ms, evaluated_ms) VALUES ($1, $2, $3, $2) ON CONFLICT (job) DO NOTHING")
        .bind(job)
        .bind(ms(at))
        .bind(ms(now))
        .execute(&store.pool)
        .await
        .map_err(unavailable)?;
    store
        .watermark(job)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("job {job} has no watermark after insert")))
}

pub(super) async fn load_baselines(
    store: &SqlStore,
    groups: &[String],
) -> Result<HashMap<String, GroupBaseline>, StoreError> {
    let mut out = HashMap::new();
    for chunk in groups.chunks(200) {
        let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT group_key, state, packed FROM baselines WHERE group_key IN ({})",
            placeholders.join(", ")
        );
        // Only numbered placeholders are formatted in; the values are bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for g in chunk {
            q = q.bind(g.as_str());
        }
        for row in q.fetch_all(&store.pool).await.map_err(unavailable)? {
            let c = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
            let key: String = row.try_get("group_key").map_err(c)?;
            let packed: Option<Vec<u8>> = row.try_get("packed").map_err(c)?;
            let b = match packed {
                Some(bytes) if !bytes.is_empty() => GroupBaseline::from_bytes(&bytes),
                // Written before 0012: JSON in `state`.
                _ => {
                    let state: String = row.try_get("state").map_err(c)?;
                    serde_json::from_str(&state).map_err(|e| e.to_string())
                }
            }
            .map_err(|e| StoreError::Corrupt(format!("baseline of {key}: {e}")))?;
            out.insert(key, b);
        }
    }
    Ok(out)
}

/// Writes the baselines in `(group, baseline)` pairs, packed, a hundred
/// rows per statement.
async fn upsert_baselines(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    baselines: &[(&String, &GroupBaseline)],
    now: i64,
) -> Result<(), StoreError> {
    for chunk in baselines.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO baselines (group_key, state, packed, updated_ms) VALUES {} \
             ON CONFLICT (group_key) DO UPDATE SET state = excluded.state, packed = excluded.packed, \
             updated_ms = excluded.updated_ms",
            value_tuples(backend, chunk.len(), 4)
        );
        // Only numbered placeholders are formatted in; the values are bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (group, b) in chunk {
            q = q.bind(group.as_str()).bind("").bind(b.to_bytes()).bind(now);
        }
        q.execute(&mut **tx).await.map_err(unavailable)?;
    }
    Ok(())
}

/// Records when the models were last seen carrying traffic, a hundred rows
/// per statement.
async fn upsert_models_seen(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    models: &[&String],
    seen: i64,
) -> Result<(), StoreError> {
    for chunk in models.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO models_seen (model, last_seen_ms) VALUES {} \
             ON CONFLICT (model) DO UPDATE SET last_seen_ms = excluded.last_seen_ms",
            value_tuples(backend, chunk.len(), 2)
        );
        // Only numbered placeholders are formatted in; the values are bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for m in chunk {
            q = q.bind(m.as_str()).bind(seen);
        }
        q.execute(&mut **tx).await.map_err(unavailable)?;
    }
    Ok(())
}

pub(super) async fn models_in_use(
    store: &SqlStore,
    since: DateTime<Utc>,
) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query("SELECT model FROM models_seen WHERE last_seen_ms >= $1 ORDER BY model")
        .bind(ms(since))
        .fetch_all(&store.pool)
        .await
        .map_err(unavailable)?;
    rows.iter()
        .map(|r| {
            r.try_get::<String, _>("model")
                .map_err(|e| StoreError::Corrupt(e.to_string()))
        })
        .collect()
}

pub(super) async fn models_last_seen(
    store: &SqlStore,
) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
    let rows = sqlx::query("SELECT model, last_seen_ms FROM models_seen")
        .fetch_all(&store.pool)
        .await
        .map_err(unavailable)?;
    rows.iter()
        .map(|r| {
            let c = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
            let model: String = r.try_get("model").map_err(c)?;
            Ok((model, from_ms(r.try_get("last_seen_ms").map_err(c)?)?))
        })
        .collect()
}

pub(super) async fn commit_window(
    store: &SqlStore,
    job: &str,
    window: Window,
    c: WindowCommit<'_>,
) -> Result<Vec<Finding>, StoreError> {
    let now = ms(c.now);
    let mut tx = store.pool.begin().await.map_err(unavailable)?;
    let moved = sqlx::query(
        "UPDATE jobs SET watermark_ms = $1, updated_ms = $2 WHERE job = $3 AND watermark_ms = $4",
    )
    .bind(ms(window.end))
    .bind(now)
    .bind(job)
    .bind(ms(window.start))
    .execute(&mut *tx)
    .await
    .map_err(unavailable)?;
    if moved.rows_affected() != 1 {
        tx.rollback().await.map_err(unavailable)?;
        return Err(StoreError::AlreadyProcessed(window));
    }
    let mut new = Vec::new();
    for f in c.findings {
        let first_window: i64 = sqlx::query(
            "INSERT INTO findings (session_id, kind, rule, severity, group_key, labels, window_start_ms, \
             window_end_ms, last_window_ms, cost_usd, impact_usd, evidence, explanation, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $7, $9, $10, $11, $12, $13, $13) \
             ON CONFLICT (session_id, kind) DO UPDATE SET cost_usd = excluded.cost_usd, \
             impact_usd = excluded.impact_usd, evidence = excluded.evidence, explanation = excluded.explanation, \
             last_window_ms = excluded.last_window_ms, updated_ms = excluded.updated_ms \
             RETURNING window_start_ms",
        )
        .bind(f.session_id.as_str())
        .bind(f.kind.as_str())
        .bind(f.rule.as_str())
        .bind(f.severity.as_str())
        .bind(f.group.as_str())
        .bind(json(&f.labels)?)
        .bind(ms(f.window.start))
        .bind(ms(f.window.end))
        .bind(f.cost_usd)
        .bind(f.impact_usd)
        .bind(json(&f.evidence)?)
        .bind(f.explanation.as_str())
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(unavailable)?
        .try_get("window_start_ms")
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        if first_window == ms(window.start) {
            new.push(f.clone());
        }
    }
    for f in &new {
        upsert_incident(&mut tx, f, now).await?;
    }
    let mut baselines: Vec<(&String, &GroupBaseline)> = c.baselines.iter().collect();
    // In key order, so concurrent writers lock rows in the same order.
    baselines.sort_unstable_by(|a, b| a.0.cmp(b.0));
    upsert_baselines(&mut tx, store.backend, &baselines, now).await?;
    let models: Vec<&String> = c.models_seen.iter().collect();
    upsert_models_seen(&mut tx, store.backend, &models, ms(window.end)).await?;
    super::caching::merge_in(&mut tx, store.backend, c.caching, now).await?;
    if let Some(held) = c.held {
        super::held::replace_held(&mut tx, store.backend, job, held).await?;
    }
    sqlx::query(
        "INSERT INTO windows (job, start_ms, end_ms, status, sessions, pages, findings, attempts, last_error, updated_ms) \
         VALUES ($1, $2, $3, 'done', $4, $5, $6, 1, NULL, $7) \
         ON CONFLICT (job, start_ms) DO UPDATE SET status = 'done', sessions = excluded.sessions, \
         pages = excluded.pages, findings = excluded.findings, attempts = windows.attempts + 1, \
         updated_ms = excluded.updated_ms",
    )
    .bind(job)
    .bind(ms(window.start))
    .bind(ms(window.end))
    .bind(c.sessions as i64)
    .bind(c.pages as i64)
    .bind(new.len() as i64)
    .bind(now)
    .execute(&mut *tx)
    .await
    .map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)?;
    Ok(new)
}

pub(super) async fn record_failure(
    store: &SqlStore,
    job: &str,
    window: Window,
    error: &str,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO windows (job, start_ms, end_ms, status, attempts, last_error, updated_ms) \
         VALUES ($1, $2, $3, 'failed', 1, $4, $5) \
         ON CONFLICT (job, start_ms) DO UPDATE SET attempts = windows.attempts + 1, \
         last_error = excluded.last_error, updated_ms = excluded.updated_ms",
    )
    .bind(job)
    .bind(ms(window.start))
    .bind(ms(window.end))
    .bind(error)
    .bind(ms(now))
    .execute(&store.pool)
    .await
    .map_err(unavailable)?;
    Ok(())
}

pub(super) async fn findings(
    store: &SqlStore,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Finding>, StoreError> {
    let rows = sqlx::query(
        "SELECT session_id, kind, rule, severity, group_key, labels, window_start_ms, window_end_ms, \
         cost_usd, impact_usd, evidence, explanation FROM findings \
         WHERE window_start_ms >= $1 AND window_start_ms < $2 ORDER BY window_start_ms, id",
    )
    .bind(ms(from))
    .bind(ms(to))
    .fetch_all(&store.pool)
    .await
    .map_err(unavailable)?;
    rows.iter().map(finding_from_row).collect()
}

pub(super) async fn windows(store: &SqlStore, job: &str) -> Result<Vec<WindowRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT start_ms, end_ms, status, sessions, findings, attempts, last_error FROM windows \
         WHERE job = $1 ORDER BY start_ms",
    )
    .bind(job)
    .fetch_all(&store.pool)
    .await
    .map_err(unavailable)?;
    rows.iter()
        .map(|r| {
            let c = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
            Ok(WindowRow {
                window: Window {
                    start: from_ms(r.try_get("start_ms").map_err(c)?)?,
                    end: from_ms(r.try_get("end_ms").map_err(c)?)?,
                },
                status: r.try_get("status").map_err(c)?,
                sessions: r.try_get::<i64, _>("sessions").map_err(c)? as u64,
                findings: r.try_get::<i64, _>("findings").map_err(c)? as u64,
                attempts: r.try_get::<i64, _>("attempts").map_err(c)? as u64,
                last_error: r.try_get("last_error").map_err(c)?,
            })
        })
        .collect()
}

pub(super) async fn skip_to(
    store: &SqlStore,
    job: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut tx = store.pool.begin().await.map_err(unavailable)?;
    let moved = sqlx::query(
        "UPDATE jobs SET watermark_ms = $1, updated_ms = $2 WHERE job = $3 AND watermark_ms = $4",
    )
    .bind(ms(to))
    .bind(ms(now))
    .bind(job)
    .bind(ms(from))
    .execute(&mut *tx)
    .await
    .map_err(unavailable)?;
    if moved.rows_affected() != 1 {
        tx.rollback().await.map_err(unavailable)?;
        return Err(StoreError::AlreadyProcessed(Window {
            start: from,
            end: to,
        }));
    }
    // Nobody looked at the skipped windows: whether a held finding's
    // session made a call there is unknown.
    super::held::replace_held(&mut tx, store.backend, job, &[]).await?;
    tx.commit().await.map_err(unavailable)?;
    Ok(())
}

pub(super) async fn evaluation_span(store: &SqlStore, job: &str) -> Result<TickSpan, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(w.start_ms) AS windows, MIN(w.start_ms) AS first_ms, MAX(w.end_ms) AS last_ms \
         FROM jobs j JOIN windows w ON w.job = j.job \
         WHERE j.job = $1 AND w.status = 'done' \
         AND w.start_ms >= COALESCE(j.evaluated_ms, j.watermark_ms)",
    )
    .bind(job)
    .fetch_one(&store.pool)
    .await
    .map_err(unavailable)?;
    let c = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let windows: i64 = row.try_get("windows").map_err(c)?;
    let first: Option<i64> = row.try_get("first_ms").map_err(c)?;
    let last: Option<i64> = row.try_get("last_ms").map_err(c)?;
    // A first start: no window was done before the span.
    let earlier: i64 = sqlx::query(
        "SELECT COUNT(w.start_ms) AS earlier FROM jobs j JOIN windows w ON w.job = j.job \
         WHERE j.job = $1 AND w.status = 'done' \
         AND w.start_ms < COALESCE(j.evaluated_ms, j.watermark_ms)",
    )
    .bind(job)
    .fetch_one(&store.pool)
    .await
    .map_err(unavailable)?
    .try_get("earlier")
    .map_err(c)?;
    let span = match (first, last) {
        (Some(start), Some(end)) => Some(Window {
            start: from_ms(start)?,
            end: from_ms(end)?,
        }),
        _ => None,
    };
    Ok(TickSpan {
        windows: usize::try_from(windows).unwrap_or(0),
        span,
        first: earlier == 0,
    })
}
