//! The status page's queries: each one bounded by a key or a `LIMIT`.

use super::inspect::{INCIDENT_COLUMNS, incident_row};
use super::silences::{COLUMNS as SILENCE_COLUMNS, silence_from_row};
use super::*;
use crate::notify::Alert;
use crate::silence::Silence;
use crate::store::inspect::IncidentRow;
use crate::store::status::{DayImpact, GroupImpact, JobRow, LeaseRow, StatusStore, WindowState};

const DAY_MS: i64 = 86_400_000;

const WINDOW_COLUMNS: &str =
    "start_ms, end_ms, status, sessions, findings, attempts, last_error, updated_ms";

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count(r: &AnyRow, column: &str) -> Result<u64, StoreError> {
    Ok(u64::try_from(r.try_get::<i64, _>(column).map_err(corrupt)?).unwrap_or(0))
}

fn kind(r: &AnyRow) -> Result<Kind, StoreError> {
    let name: String = r.try_get("kind").map_err(corrupt)?;
    Kind::parse(&name).ok_or_else(|| StoreError::Corrupt(format!("unknown kind {name}")))
}

fn window_state(r: &AnyRow) -> Result<WindowState, StoreError> {
    Ok(WindowState {
        row: WindowRow {
            window: Window {
                start: from_ms(r.try_get("start_ms").map_err(corrupt)?)?,
                end: from_ms(r.try_get("end_ms").map_err(corrupt)?)?,
            },
            status: r.try_get("status").map_err(corrupt)?,
            sessions: count(r, "sessions")?,
            findings: count(r, "findings")?,
            attempts: count(r, "attempts")?,
            last_error: r.try_get("last_error").map_err(corrupt)?,
        },
        updated_at: from_ms(r.try_get("updated_ms").map_err(corrupt)?)?,
    })
}

impl StatusStore for SqlStore {
    async fn jobs(&self, n: usize) -> Result<Vec<JobRow>, StoreError> {
        let rows =
            sqlx::query("SELECT job, watermark_ms, evaluated_ms FROM jobs ORDER BY job LIMIT $1")
                .bind(limit(n))
                .fetch_all(&self.pool)
                .await
                .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                let evaluated: Option<i64> = r.try_get("evaluated_ms").map_err(corrupt)?;
                Ok(JobRow {
                    job: r.try_get("job").map_err(corrupt)?,
                    watermark: from_ms(r.try_get("watermark_ms").map_err(corrupt)?)?,
                    evaluated: evaluated.map(from_ms).transpose()?,
                })
            })
            .collect()
    }

    async fn recent_windows(&self, job: &str, n: usize) -> Result<Vec<WindowState>, StoreError> {
        let sql = format!(
            "SELECT {WINDOW_COLUMNS} FROM windows WHERE job = $1 ORDER BY start_ms DESC LIMIT $2"
        );
        // Only the fixed column list is formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job)
            .bind(limit(n))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.iter().map(window_state).collect()
    }

    async fn last_done_window(&self, job: &str) -> Result<Option<WindowState>, StoreError> {
        let sql = format!(
            "SELECT {WINDOW_COLUMNS} FROM windows WHERE job = $1 AND status = 'done' \
             ORDER BY start_ms DESC LIMIT 1"
        );
        // Only the fixed column list is formatted in; the values are bound.
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?
            .as_ref()
            .map(window_state)
            .transpose()
    }

    async fn incident(&self, fingerprint: &str) -> Result<Option<IncidentRow>, StoreError> {
        let sql = format!("SELECT {INCIDENT_COLUMNS} FROM incidents WHERE fingerprint = $1");
        // Only the fixed column list is formatted in; the values are bound.
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(fingerprint)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?
            .as_ref()
            .map(incident_row)
            .transpose()
    }

    async fn active_silences(
        &self,
        now: DateTime<Utc>,
        n: usize,
    ) -> Result<Vec<Silence>, StoreError> {
        let sql = format!(
            "SELECT {SILENCE_COLUMNS} FROM silences WHERE ends_ms > $1 AND starts_ms <= $1 \
             ORDER BY ends_ms, id LIMIT $2"
        );
        // Only the fixed column list is formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ms(now))
            .bind(limit(n))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.iter().map(silence_from_row).collect()
    }

    async fn latest_alert(&self, fingerprint: &str) -> Result<Option<Alert>, StoreError> {
        // `outbox_sequence` (fingerprint, channel, id) bounds the rows read.
        sqlx::query("SELECT alert FROM outbox WHERE fingerprint = $1 ORDER BY id DESC LIMIT 1")
            .bind(fingerprint)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?
            .map(|r| alert_from(&r.try_get::<String, _>("alert").map_err(corrupt)?))
            .transpose()
    }

    async fn lease(&self, name: &str) -> Result<Option<LeaseRow>, StoreError> {
        sqlx::query("SELECT holder, expires_ms FROM leases WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?
            .map(|r| {
                Ok(LeaseRow {
                    holder: r.try_get("holder").map_err(corrupt)?,
                    expires_at: from_ms(r.try_get("expires_ms").map_err(corrupt)?)?,
                })
            })
            .transpose()
    }

    async fn daily_impact(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DayImpact>, StoreError> {
        // An integer divided by an integer: the UTC day since the epoch
        // (86,400,000 ms a day, `DAY_MS`), on both backends.
        let rows = sqlx::query(
            "SELECT window_start_ms / 86400000 AS day, kind, COUNT(*) AS sessions, \
             SUM(impact_usd) AS impact FROM findings \
             WHERE window_start_ms >= $1 AND window_start_ms < $2 \
             GROUP BY window_start_ms / 86400000, kind ORDER BY day, kind",
        )
        .bind(ms(from))
        .bind(ms(to))
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                let day: i64 = r.try_get("day").map_err(corrupt)?;
                Ok(DayImpact {
                    day: from_ms(day.saturating_mul(DAY_MS))?.date_naive(),
                    kind: kind(r)?,
                    sessions: count(r, "sessions")?,
                    impact_usd: r.try_get("impact").map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn top_groups(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        n: usize,
    ) -> Result<Vec<GroupImpact>, StoreError> {
        let rows = sqlx::query(
            "SELECT group_key, kind, COUNT(*) AS sessions, SUM(impact_usd) AS impact \
             FROM findings WHERE window_start_ms >= $1 AND window_start_ms < $2 \
             GROUP BY group_key, kind ORDER BY impact DESC, group_key, kind LIMIT $3",
        )
        .bind(ms(from))
        .bind(ms(to))
        .bind(limit(n))
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                Ok(GroupImpact {
                    group: r.try_get("group_key").map_err(corrupt)?,
                    kind: kind(r)?,
                    sessions: count(r, "sessions")?,
                    impact_usd: r.try_get("impact").map_err(corrupt)?,
                })
            })
            .collect()
    }
}
