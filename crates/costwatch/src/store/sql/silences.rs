//! Silences and the notifications they held back.

use super::*;
use crate::silence::{NewSilence, Silence};
use crate::store::silences::{EndedSilence, ExpireError, SilenceStore, Silenced};

pub(super) const COLUMNS: &str =
    "id, kind, group_key, matchers, starts_ms, ends_ms, expired_ms, author, reason, created_ms";

pub(super) fn silence_from_row(r: &AnyRow) -> Result<Silence, StoreError> {
    let expired: Option<i64> = r.try_get("expired_ms").map_err(corrupt)?;
    Ok(Silence {
        id: r.try_get("id").map_err(corrupt)?,
        kind: r.try_get("kind").map_err(corrupt)?,
        group: r.try_get("group_key").map_err(corrupt)?,
        matchers: serde_json::from_str(&r.try_get::<String, _>("matchers").map_err(corrupt)?)
            .map_err(corrupt)?,
        starts_at: from_ms(r.try_get("starts_ms").map_err(corrupt)?)?,
        ends_at: from_ms(r.try_get("ends_ms").map_err(corrupt)?)?,
        expired_at: expired.map(from_ms).transpose()?,
        author: r.try_get("author").map_err(corrupt)?,
        reason: r.try_get("reason").map_err(corrupt)?,
        created_at: from_ms(r.try_get("created_ms").map_err(corrupt)?)?,
    })
}

fn silenced_from_row(r: &AnyRow) -> Result<Silenced, StoreError> {
    Ok(Silenced {
        silence_id: r.try_get("silence_id").map_err(corrupt)?,
        fingerprint: r.try_get("fingerprint").map_err(corrupt)?,
        kind: r.try_get("kind").map_err(corrupt)?,
        episode: from_ms(r.try_get("episode_ms").map_err(corrupt)?)?,
        status: r.try_get("status").map_err(corrupt)?,
        title: r.try_get("title").map_err(corrupt)?,
        at: from_ms(r.try_get("created_ms").map_err(corrupt)?)?,
    })
}

async fn silence_by_id(store: &SqlStore, id: i64) -> Result<Option<Silence>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM silences WHERE id = $1");
    // Only the fixed column list is formatted in; the values are bound.
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(&store.pool)
        .await
        .map_err(unavailable)?
        .as_ref()
        .map(silence_from_row)
        .transpose()
}

impl SilenceStore for SqlStore {
    async fn add_silence(
        &self,
        new: &NewSilence,
        now: DateTime<Utc>,
    ) -> Result<Silence, StoreError> {
        let sql = format!(
            "INSERT INTO silences (kind, group_key, matchers, starts_ms, ends_ms, author, reason, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COLUMNS}"
        );
        // Only the fixed column list is formatted in; the values are bound.
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(new.kind.as_deref())
            .bind(new.group.as_deref())
            .bind(json(&new.matchers)?)
            .bind(ms(new.starts_at))
            .bind(ms(new.ends_at))
            .bind(new.author.as_str())
            .bind(new.reason.as_str())
            .bind(ms(now))
            .fetch_one(&self.pool)
            .await
            .map_err(unavailable)?;
        silence_from_row(&row)
    }

    async fn silences(&self, all: bool, now: DateTime<Utc>) -> Result<Vec<Silence>, StoreError> {
        // Without `all`: those active now (a silence always starts when it
        // is added, so "not ended" is "active").
        let filter = if all {
            ""
        } else {
            " WHERE ends_ms > $1 AND starts_ms <= $1"
        };
        let sql = format!("SELECT {COLUMNS} FROM silences{filter} ORDER BY id");
        // Only fixed text is formatted in; the values are bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        if !all {
            q = q.bind(ms(now));
        }
        let rows = q.fetch_all(&self.pool).await.map_err(unavailable)?;
        rows.iter().map(silence_from_row).collect()
    }

    async fn expire_silence(&self, id: i64, now: DateTime<Utc>) -> Result<Silence, ExpireError> {
        let changed = sqlx::query(
            "UPDATE silences SET ends_ms = $1, expired_ms = $1 WHERE id = $2 AND ends_ms > $1",
        )
        .bind(ms(now))
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        let silence = silence_by_id(self, id)
            .await?
            .ok_or(ExpireError::NotFound(id))?;
        if changed.rows_affected() == 1 {
            Ok(silence)
        } else {
            Err(ExpireError::AlreadyEnded {
                id,
                ended: silence.ends_at,
            })
        }
    }

    async fn record_silenced(&self, held: &[Silenced]) -> Result<Vec<Silenced>, StoreError> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let mut first = Vec::new();
        for h in held {
            let done = sqlx::query(
                "INSERT INTO silenced_alerts (silence_id, fingerprint, episode_ms, status, kind, title, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (silence_id, fingerprint, episode_ms, status) DO NOTHING",
            )
            .bind(h.silence_id)
            .bind(h.fingerprint.as_str())
            .bind(ms(h.episode))
            .bind(h.status.as_str())
            .bind(h.kind.as_str())
            .bind(h.title.as_str())
            .bind(ms(h.at))
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
            if done.rows_affected() == 1 {
                first.push(h.clone());
            }
        }
        tx.commit().await.map_err(unavailable)?;
        Ok(first)
    }

    async fn silenced_of(&self, fingerprint: &str) -> Result<Vec<Silenced>, StoreError> {
        let rows = sqlx::query(
            "SELECT silence_id, fingerprint, kind, episode_ms, status, title, created_ms \
             FROM silenced_alerts WHERE fingerprint = $1 ORDER BY created_ms, silence_id",
        )
        .bind(fingerprint)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter().map(silenced_from_row).collect()
    }

    async fn take_ended_silences(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Vec<EndedSilence>, StoreError> {
        let sql = format!(
            "UPDATE silences SET end_noticed_ms = $1 \
             WHERE ends_ms <= $1 AND end_noticed_ms IS NULL RETURNING {COLUMNS}"
        );
        // Only the fixed column list is formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ms(now))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        let mut ended = Vec::new();
        for r in &rows {
            let silence = silence_from_row(r)?;
            let open = sqlx::query(
                "SELECT DISTINCT s.fingerprint FROM silenced_alerts s \
                 JOIN incidents i ON i.fingerprint = s.fingerprint \
                 WHERE s.silence_id = $1 AND i.status = 'firing' ORDER BY s.fingerprint",
            )
            .bind(silence.id)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
            let still_open = open
                .iter()
                .map(|r| r.try_get::<String, _>("fingerprint").map_err(corrupt))
                .collect::<Result<_, _>>()?;
            ended.push(EndedSilence {
                silence,
                still_open,
            });
        }
        ended.sort_by_key(|e| e.silence.id);
        Ok(ended)
    }
}
