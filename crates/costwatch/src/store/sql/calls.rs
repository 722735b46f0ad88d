//! The received OTLP calls (`otlp_calls`) and the conversations of their
//! traces (`otlp_conversations`).

use super::placeholders::{value_tuples, value_tuples_after};
use super::*;
use crate::source::RequestStatus;
use crate::source::otlp::SpanCall;
use crate::source::rows::CallRow;
use crate::store::calls::{CallCursor, CallStore};

/// What a read selects: the call, its session resolved (the span's own
/// conversation, the trace's, the fallback).
const SELECT: &str = "SELECT c.span_id, \
     COALESCE(c.conversation_id, t.conversation_id, c.fallback_session) AS session_id, \
     c.created_ms, c.model, c.failed, c.http_status, c.error_type, c.input_tokens, \
     c.cached_tokens, c.cache_reported, c.cache_write_tokens, c.output_tokens, c.labels, c.provider, \
     c.instrumentation \
     FROM otlp_calls c \
     LEFT JOIN otlp_conversations t ON t.trace_id = c.trace_id AND t.applies = 1";

/// The columns an insert writes, in bind order.
const INSERT_COLUMNS: &str = "span_id, trace_id, conversation_id, fallback_session, created_ms, \
     model, failed, http_status, error_type, input_tokens, cached_tokens, cache_reported, \
     cache_write_tokens, output_tokens, labels, received_ms, provider, instrumentation";
const INSERT_ARITY: usize = 18;

/// Rows per INSERT: 18 bound values each stays well under SQLite's and
/// PostgreSQL's limits on bound parameters.
const INSERT_CHUNK: usize = 400;

fn tokens(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn count(r: &AnyRow, column: &str) -> Result<u64, StoreError> {
    let v: i64 = r.try_get(column).map_err(corrupt)?;
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("otlp_calls.{column} = {v}")))
}

fn call_from_row(r: &AnyRow) -> Result<CallRow, StoreError> {
    let failed: i64 = r.try_get("failed").map_err(corrupt)?;
    let http: Option<i64> = r.try_get("http_status").map_err(corrupt)?;
    let labels: String = r.try_get("labels").map_err(corrupt)?;
    Ok(CallRow {
        request_id: r.try_get("span_id").map_err(corrupt)?,
        session_id: r.try_get("session_id").map_err(corrupt)?,
        created_at: from_ms(r.try_get("created_ms").map_err(corrupt)?)?,
        model: r.try_get("model").map_err(corrupt)?,
        status: if failed != 0 {
            RequestStatus::Error
        } else {
            RequestStatus::Success
        },
        http_status: http.and_then(|h| u16::try_from(h).ok()),
        error_type: r.try_get("error_type").map_err(corrupt)?,
        input_tokens: count(r, "input_tokens")?,
        cached_tokens: count(r, "cached_tokens")?,
        cache_reported: r.try_get::<i64, _>("cache_reported").map_err(corrupt)? != 0,
        cache_write_tokens: count(r, "cache_write_tokens")?,
        output_tokens: count(r, "output_tokens")?,
        cost_usd: None,
        labels: serde_json::from_str(&labels)
            .map_err(|e| StoreError::Corrupt(format!("otlp_calls.labels: {e}")))?,
        provider: r.try_get("provider").map_err(corrupt)?,
        instrumentation: r
            .try_get::<Option<String>, _>("instrumentation")
            .map_err(corrupt)?
            .map(std::sync::Arc::from),
    })
}

fn insert_sql(backend: Backend, rows: usize) -> String {
    format!(
        "INSERT INTO otlp_calls ({INSERT_COLUMNS}) VALUES {} ON CONFLICT (created_ms, span_id) DO NOTHING",
        value_tuples(backend, rows, INSERT_ARITY)
    )
}

/// Conversations per statement (2 values each, 3 before them).
const CONVERSATION_CHUNK: usize = 500;

/// Stores traces' conversations, deciding once for each whether it names
/// the trace's calls: not when one of them, stored earlier, started long
/// enough ago that a window may have read it. `VALUES` names its columns
/// `column1`, `column2` on SQLite and PostgreSQL alike; the `WHERE true`
/// keeps SQLite from reading `ON CONFLICT` as a join's `ON`.
fn conversations_sql(backend: Backend, rows: usize) -> String {
    let (received_before, created_before, seen) = match backend {
        Backend::Sqlite => ("?", "?", "?"),
        Backend::Postgres => ("$1", "$2", "$3"),
    };
    format!(
        "INSERT INTO otlp_conversations (trace_id, conversation_id, applies, seen_ms) \
         SELECT v.column1, v.column2, CASE WHEN EXISTS (SELECT 1 FROM otlp_calls \
             WHERE trace_id = v.column1 AND received_ms < {received_before} \
             AND created_ms < {created_before}) THEN 0 ELSE 1 END, {seen} \
         FROM (VALUES {}) AS v WHERE true \
         ON CONFLICT (trace_id) DO NOTHING",
        value_tuples_after(backend, 3, rows, 2)
    )
}

impl CallStore for SqlStore {
    async fn insert_calls(
        &self,
        calls: &[SpanCall],
        conversations: &[(String, String)],
        now: DateTime<Utc>,
        settle_lag: std::time::Duration,
    ) -> Result<u64, StoreError> {
        if calls.is_empty() && conversations.is_empty() {
            return Ok(0);
        }
        // Keys in one order in every transaction: two exports sharing a
        // trace, stored at once on PostgreSQL, each wait on the other's
        // uncommitted key otherwise (a deadlock, and a retried export). The
        // sorts are stable, so the first copy of a key still wins. Calls go
        // in by their key, (created_ms, span_id): at the table's end.
        let mut calls: Vec<&SpanCall> = calls.iter().collect();
        calls.sort_by(|a, b| {
            (ms(a.row.created_at), &a.row.request_id)
                .cmp(&(ms(b.row.created_at), &b.row.request_id))
        });
        let mut conversations: Vec<&(String, String)> = conversations.iter().collect();
        conversations.sort_by(|a, b| a.0.cmp(&b.0));
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let mut added = 0;
        for chunk in calls.chunks(INSERT_CHUNK) {
            // Only placeholders are formatted in; every value is bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(insert_sql(self.backend, chunk.len())));
            for call in chunk {
                let c = &call.row;
                let (own, fallback) = if call.conversation {
                    (c.session_id.as_deref(), None)
                } else {
                    (None, c.session_id.as_deref())
                };
                q = q
                    .bind(c.request_id.as_str())
                    .bind(call.trace_id.as_str())
                    .bind(own)
                    .bind(fallback)
                    .bind(ms(c.created_at))
                    .bind(c.model.as_str())
                    .bind(i64::from(c.status == RequestStatus::Error))
                    .bind(c.http_status.map(i64::from))
                    .bind(c.error_type.as_deref())
                    .bind(tokens(c.input_tokens))
                    .bind(tokens(c.cached_tokens))
                    .bind(i64::from(c.cache_reported))
                    .bind(tokens(c.cache_write_tokens))
                    .bind(tokens(c.output_tokens))
                    .bind(json(&c.labels)?)
                    .bind(ms(now))
                    .bind(c.provider.as_deref())
                    .bind(c.instrumentation.as_deref());
            }
            added += q
                .execute(&mut *tx)
                .await
                .map_err(unavailable)?
                .rows_affected();
        }
        let readable_before =
            ms(now).saturating_sub(i64::try_from(settle_lag.as_millis()).unwrap_or(i64::MAX));
        for chunk in conversations.chunks(CONVERSATION_CHUNK) {
            // Only placeholders are formatted in; every value is bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(conversations_sql(
                self.backend,
                chunk.len(),
            )))
            .bind(ms(now))
            .bind(readable_before)
            .bind(ms(now));
            for (trace, conversation) in chunk {
                q = q.bind(trace.as_str()).bind(conversation.as_str());
            }
            q.execute(&mut *tx).await.map_err(unavailable)?;
        }
        tx.commit().await.map_err(unavailable)?;
        Ok(added)
    }

    async fn calls_page(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        after: Option<&CallCursor>,
        limit: u32,
    ) -> Result<Vec<CallRow>, StoreError> {
        let rows = match after {
            None => {
                let sql = format!(
                    "{SELECT} WHERE c.created_ms >= $1 AND c.created_ms < $2 \
                     ORDER BY c.created_ms, c.span_id LIMIT $3"
                );
                // Only the fixed column list is formatted in; the values are bound.
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(ms(start))
                    .bind(ms(end))
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
            }
            Some(c) => {
                let sql = format!(
                    "{SELECT} WHERE c.created_ms < $2 \
                     AND (c.created_ms > $1 OR (c.created_ms = $1 AND c.span_id > $3)) \
                     AND c.created_ms >= $4 ORDER BY c.created_ms, c.span_id LIMIT $5"
                );
                // Only the fixed column list is formatted in; the values are bound.
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(ms(c.created_at))
                    .bind(ms(end))
                    .bind(c.request_id.as_str())
                    .bind(ms(start))
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
            }
        }
        .map_err(unavailable)?;
        rows.iter().map(call_from_row).collect()
    }

    async fn session_calls(
        &self,
        session_id: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<CallRow>, StoreError> {
        // The three ways a call belongs to the session, each by an index;
        // the outer test keeps a call whose own conversation is another.
        let sql = format!(
            "{SELECT} WHERE c.created_ms >= $2 AND c.created_ms < $3 \
             AND (c.conversation_id = $1 OR c.fallback_session = $1 \
                  OR c.trace_id IN (SELECT trace_id FROM otlp_conversations \
                                    WHERE conversation_id = $1 AND applies = 1)) \
             AND COALESCE(c.conversation_id, t.conversation_id, c.fallback_session) = $1 \
             ORDER BY c.created_ms, c.span_id"
        );
        // Only the fixed column list is formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(session_id)
            .bind(ms(start))
            .bind(ms(end))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.iter().map(call_from_row).collect()
    }

    async fn delete_calls_before(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError> {
        // In batches, so a large backlog never holds the write lock long.
        let done = sqlx::query(
            "DELETE FROM otlp_calls WHERE (created_ms, span_id) IN \
             (SELECT created_ms, span_id FROM otlp_calls WHERE created_ms < $1 \
              ORDER BY created_ms, span_id LIMIT $2)",
        )
        .bind(ms(before))
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        sqlx::query(
            "DELETE FROM otlp_conversations WHERE trace_id IN \
             (SELECT t.trace_id FROM otlp_conversations t WHERE t.seen_ms < $1 \
              AND NOT EXISTS (SELECT 1 FROM otlp_calls c WHERE c.trace_id = t.trace_id) \
              ORDER BY t.seen_ms LIMIT $2)",
        )
        .bind(ms(before))
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected())
    }
}
