//! The read-only queries of the operator's commands.

use super::incidents::incident_from_row;
use super::outbox::{deliveries, due_rows, repost_rows};
use super::*;
use crate::store::inspect::{
    FindingQuery, IncidentQuery, IncidentRow, Inspect, NotificationRow, StoredInvestigation,
};

const FINDING_COLUMNS: &str = "session_id, kind, rule, severity, group_key, labels, window_start_ms, \
     window_end_ms, cost_usd, impact_usd, evidence, explanation";

pub(super) const INCIDENT_COLUMNS: &str = "fingerprint, kind, rule, group_key, labels, severity, status, started_ms, \
     last_finding_ms, session_count, impact_usd, sequence, notified_ms, notified_sessions, last_error, updated_ms, reopen_until_ms";

/// A value bound to a placeholder of a query built from fixed fragments.
enum Arg {
    Text(String),
    Int(i64),
}

/// `WHERE` conditions and their values, numbered in order.
#[derive(Default)]
struct Conditions {
    sql: Vec<String>,
    args: Vec<Arg>,
}

impl Conditions {
    /// Adds a condition; `fragment` has `{}` where the next placeholder goes.
    fn add(&mut self, fragment: &str, arg: Arg) {
        self.args.push(arg);
        self.sql
            .push(fragment.replace("{}", &format!("${}", self.args.len())));
    }

    /// `column IN (...)` over `values`; nothing when empty.
    fn any_of(&mut self, column: &str, values: impl IntoIterator<Item = String>) {
        let mut places = Vec::new();
        for v in values {
            self.args.push(Arg::Text(v));
            places.push(format!("${}", self.args.len()));
        }
        if !places.is_empty() {
            self.sql
                .push(format!("{column} IN ({})", places.join(", ")));
        }
    }

    fn where_clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.sql.join(" AND "))
        }
    }

    /// ` LIMIT $n` when `limit` is set.
    fn limit(&mut self, limit: Option<usize>) -> String {
        match limit {
            Some(n) => {
                self.args
                    .push(Arg::Int(i64::try_from(n).unwrap_or(i64::MAX)));
                format!(" LIMIT ${}", self.args.len())
            }
            None => String::new(),
        }
    }

    async fn fetch(self, store: &SqlStore, sql: String) -> Result<Vec<AnyRow>, StoreError> {
        // Only fixed fragments and numbered placeholders are formatted in;
        // every value is bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for a in self.args {
            q = match a {
                Arg::Text(s) => q.bind(s),
                Arg::Int(i) => q.bind(i),
            };
        }
        q.fetch_all(&store.pool).await.map_err(unavailable)
    }
}

pub(super) fn incident_row(r: &AnyRow) -> Result<IncidentRow, StoreError> {
    Ok(IncidentRow {
        incident: incident_from_row(r)?,
        updated_at: from_ms(r.try_get("updated_ms").map_err(corrupt)?)?,
    })
}

fn optional_ms(r: &AnyRow, column: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    r.try_get::<Option<i64>, _>(column)
        .map_err(corrupt)?
        .map(from_ms)
        .transpose()
}

impl Inspect for SqlStore {
    async fn list_findings(&self, q: &FindingQuery) -> Result<Vec<Finding>, StoreError> {
        let mut c = Conditions::default();
        c.any_of("kind", q.kinds.iter().map(|k| k.as_str().to_owned()));
        if let Some(g) = &q.group {
            c.add("group_key = {}", Arg::Text(g.clone()));
        }
        if let Some(t) = q.since {
            c.add("window_start_ms >= {}", Arg::Int(ms(t)));
        }
        if let Some(t) = q.until {
            c.add("window_start_ms < {}", Arg::Int(ms(t)));
        }
        let filter = c.where_clause();
        let limit = c.limit(q.limit);
        let sql = format!(
            "SELECT {FINDING_COLUMNS} FROM findings{filter} ORDER BY window_start_ms DESC, id DESC{limit}"
        );
        let rows = c.fetch(self, sql).await?;
        rows.iter().map(finding_from_row).collect()
    }

    async fn list_incidents(&self, q: &IncidentQuery) -> Result<Vec<IncidentRow>, StoreError> {
        let mut c = Conditions::default();
        c.any_of("kind", q.kinds.iter().cloned());
        if let Some(g) = &q.group {
            c.add("group_key = {}", Arg::Text(g.clone()));
        }
        if let Some(open) = q.open {
            let status = if open { "firing" } else { "resolved" };
            c.add("status = {}", Arg::Text(status.to_owned()));
        }
        if let Some(t) = q.since {
            c.add("last_finding_ms >= {}", Arg::Int(ms(t)));
        }
        if let Some(t) = q.until {
            c.add("started_ms < {}", Arg::Int(ms(t)));
        }
        let filter = c.where_clause();
        let limit = c.limit(q.limit);
        let sql = format!(
            "SELECT {INCIDENT_COLUMNS} FROM incidents{filter} \
             ORDER BY last_finding_ms DESC, started_ms DESC, fingerprint{limit}"
        );
        let rows = c.fetch(self, sql).await?;
        rows.iter().map(incident_row).collect()
    }

    async fn incidents_by_id(&self, id: &str) -> Result<Vec<IncidentRow>, StoreError> {
        let id = id.trim().to_ascii_lowercase();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(Vec::new());
        }
        let mut c = Conditions::default();
        c.add(
            &format!("substr(fingerprint, 1, {}) = {{}}", id.len()),
            Arg::Text(id),
        );
        let filter = c.where_clause();
        let sql = format!("SELECT {INCIDENT_COLUMNS} FROM incidents{filter} ORDER BY fingerprint");
        let rows = c.fetch(self, sql).await?;
        rows.iter().map(incident_row).collect()
    }

    async fn session_span(&self, session_id: &str) -> Result<Option<Window>, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(window_start_ms) AS first_ms, MAX(window_end_ms) AS last_ms \
             FROM findings WHERE session_id = $1",
        )
        .bind(session_id)
        .fetch_one(&self.pool)
        .await
        .map_err(unavailable)?;
        let c = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
        let first: Option<i64> = row.try_get("first_ms").map_err(c)?;
        let last: Option<i64> = row.try_get("last_ms").map_err(c)?;
        Ok(match (first, last) {
            (Some(start), Some(end)) => Some(Window {
                start: from_ms(start)?,
                end: from_ms(end)?,
            }),
            _ => None,
        })
    }

    async fn findings_of(
        &self,
        i: &Incident,
        limit: usize,
    ) -> Result<(Vec<Finding>, u64), StoreError> {
        let sql = format!(
            "SELECT {FINDING_COLUMNS} FROM findings WHERE kind = $1 AND rule = $2 AND group_key = $3 \
             ORDER BY window_start_ms DESC, id DESC LIMIT $4"
        );
        // Only the fixed column list is formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i.kind.as_str())
            .bind(i.rule.as_str())
            .bind(i.group.as_str())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        let findings = rows
            .iter()
            .map(finding_from_row)
            .collect::<Result<_, _>>()?;
        let total: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM findings WHERE kind = $1 AND rule = $2 AND group_key = $3",
        )
        .bind(i.kind.as_str())
        .bind(i.rule.as_str())
        .bind(i.group.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(unavailable)?
        .try_get("n")
        .map_err(corrupt)?;
        Ok((findings, u64::try_from(total).unwrap_or(0)))
    }

    async fn notifications_of(
        &self,
        fingerprint: &str,
    ) -> Result<Vec<NotificationRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, idempotency_key, channel, status, attempts, created_ms, next_attempt_ms, sent_ms, \
             reposted_ms, last_error, alert FROM outbox WHERE fingerprint = $1 OR alert LIKE $2 \
             ORDER BY id",
        )
        .bind(fingerprint)
        // The catch-up summaries that listed it (`Alert::incidents`); a
        // fingerprint is hexadecimal, so it holds no LIKE wildcard.
        .bind(format!(
            "%\"incidents\":[%\"fingerprint\":\"{}\"%",
            fingerprint.replace(['%', '_', '"'], "")
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                Ok(NotificationRow {
                    id: r.try_get("id").map_err(corrupt)?,
                    idempotency_key: r.try_get("idempotency_key").map_err(corrupt)?,
                    channel: r.try_get("channel").map_err(corrupt)?,
                    status: r.try_get("status").map_err(corrupt)?,
                    attempts: u32::try_from(r.try_get::<i64, _>("attempts").map_err(corrupt)?)
                        .unwrap_or(u32::MAX),
                    created_at: from_ms(r.try_get("created_ms").map_err(corrupt)?)?,
                    next_attempt_at: from_ms(r.try_get("next_attempt_ms").map_err(corrupt)?)?,
                    sent_at: optional_ms(r, "sent_ms")?,
                    reposted_at: optional_ms(r, "reposted_ms")?,
                    last_error: r.try_get("last_error").map_err(corrupt)?,
                    alert: alert_from(&r.try_get::<String, _>("alert").map_err(corrupt)?)?,
                })
            })
            .collect()
    }

    async fn investigations_of(
        &self,
        fingerprint: &str,
    ) -> Result<Vec<StoredInvestigation>, StoreError> {
        let rows = sqlx::query(
            "SELECT idempotency_key, created_ms, alert_json FROM investigations \
             WHERE fingerprint = $1 ORDER BY created_ms, idempotency_key",
        )
        .bind(fingerprint)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                Ok(StoredInvestigation {
                    idempotency_key: r.try_get("idempotency_key").map_err(corrupt)?,
                    created_at: from_ms(r.try_get("created_ms").map_err(corrupt)?)?,
                    report: serde_json::from_str(
                        &r.try_get::<String, _>("alert_json").map_err(corrupt)?,
                    )
                    .map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn deliveries_due(&self, now: DateTime<Utc>) -> Result<Vec<Delivery>, StoreError> {
        let due = due_rows("$1");
        let sql = format!(
            "SELECT id, channel, alert, attempts, deadline_ms FROM outbox WHERE id IN ({due}) ORDER BY id"
        );
        // Only fixed text and placeholders are formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ms(now))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        deliveries(&rows, false)
    }

    async fn reposts_due(
        &self,
        channel: &str,
        posted_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<Delivery>, StoreError> {
        let due = repost_rows("$1", "$2", "$3");
        let sql = format!(
            "SELECT id, channel, alert, attempts, deadline_ms FROM outbox WHERE id IN ({due}) ORDER BY id"
        );
        // Only fixed text and placeholders are formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(channel)
            .bind(ms(posted_before))
            .bind(ms(now))
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        deliveries(&rows, true)
    }
}
