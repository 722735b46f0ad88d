//! The SQL store, over SQLite or PostgreSQL through sqlx's `Any` driver.

use super::{Delivery, IncidentUpdate, OutboxRow, Store, StoreError, WindowCommit, WindowRow};
use crate::config::Severity;
use crate::detect::{Finding, GroupBaseline, Kind};
use crate::incidents::{self, Incident};
use crate::investigate::{InvestigationReport, LedgerError};
use crate::notify::Alert;
use crate::source::Window;
use chrono::{DateTime, TimeZone, Utc};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::collections::HashMap;
use std::time::Duration;

/// Which database is behind the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// State in SQLite or PostgreSQL.
#[derive(Debug, Clone)]
pub struct SqlStore {
    pool: AnyPool,
    backend: Backend,
}

fn unavailable(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Configuration(_) | sqlx::Error::Migrate(_) => {
            StoreError::Rejected(e.to_string())
        }
        other => StoreError::Unavailable(other.to_string()),
    }
}

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_ms(v: i64) -> Result<DateTime<Utc>, StoreError> {
    Utc.timestamp_millis_opt(v)
        .single()
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp {v} out of range")))
}

/// `sqlite://x.db` creates the file when missing, like any embedded store.
fn normalise_url(url: &str) -> (Backend, String) {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return (Backend::Postgres, url.to_owned());
    }
    let mut u = url.to_owned();
    if !u.contains("mode=") && !u.contains(":memory:") {
        u.push(if u.contains('?') { '&' } else { '?' });
        u.push_str("mode=rwc");
    }
    (Backend::Sqlite, u)
}

impl SqlStore {
    /// Connects (at most 4 connections) and brings the schema up to date.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, 4).await
    }

    /// Connects with at most `max_connections` and brings the schema up to date.
    pub async fn open_with(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (backend, url) = normalise_url(url);
        let in_memory = url.contains(":memory:");
        let pool = AnyPoolOptions::new()
            .max_connections(if in_memory { 1 } else { max_connections.max(1) })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlx::query("PRAGMA busy_timeout = 10000")
                            .execute(&mut *conn)
                            .await?;
                        if !in_memory {
                            sqlx::query("PRAGMA journal_mode = WAL")
                                .execute(&mut *conn)
                                .await?;
                        }
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot connect: {e}")))?;
        let migrator = match backend {
            Backend::Sqlite => sqlx::migrate!("../../migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("../../migrations/postgres"),
        };
        migrator
            .run(&pool)
            .await
            .map_err(|e| StoreError::Rejected(format!("migration failed: {e}")))?;
        Ok(SqlStore { pool, backend })
    }

    /// Connects without changing anything (no migration) and runs `SELECT 1`:
    /// for `costwatch check --online`. The error never repeats the URL.
    pub async fn ping(url: &str) -> Result<Backend, StoreError> {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let (backend, url) = normalise_url(url);
        // A check must not create an SQLite file that is not there yet.
        let url = if backend == Backend::Sqlite {
            url.replace("mode=rwc", "mode=ro")
        } else {
            url
        };
        let mut conn =
            tokio::time::timeout(Duration::from_secs(10), sqlx::AnyConnection::connect(&url))
                .await
                .map_err(|_| {
                    StoreError::Unavailable("cannot connect: no answer within 10 s".to_owned())
                })?
                .map_err(|e| StoreError::Unavailable(format!("cannot connect: {e}")))?;
        sqlx::query("SELECT 1")
            .execute(&mut conn)
            .await
            .map_err(unavailable)?;
        let _ = conn.close().await;
        Ok(backend)
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn finding_from_row(row: &AnyRow) -> Result<Finding, StoreError> {
    let get_s = |c: &str| {
        row.try_get::<String, _>(c)
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    };
    let get_i = |c: &str| {
        row.try_get::<i64, _>(c)
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    };
    let get_f = |c: &str| {
        row.try_get::<f64, _>(c)
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    };
    let kind_s = get_s("kind")?;
    let kind = Kind::parse(&kind_s)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown kind {kind_s}")))?;
    let severity: Severity = serde_json::from_value(serde_json::Value::String(get_s("severity")?))
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(Finding {
        kind,
        session_id: get_s("session_id")?,
        window: Window {
            start: from_ms(get_i("window_start_ms")?)?,
            end: from_ms(get_i("window_end_ms")?)?,
        },
        severity,
        rule: get_s("rule")?,
        group: get_s("group_key")?,
        labels: serde_json::from_str(&get_s("labels")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        cost_usd: get_f("cost_usd")?,
        impact_usd: get_f("impact_usd")?,
        evidence: serde_json::from_str(&get_s("evidence")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        explanation: get_s("explanation")?,
    })
}

/// Adds a new finding to its incident, opening a new episode when the
/// incident was resolved (or never existed).
async fn upsert_incident(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    f: &Finding,
    now: i64,
) -> Result<(), StoreError> {
    let fp = incidents::fingerprint(f.kind.as_str(), &f.rule, &f.group);
    let labels: crate::source::Labels = f
        .labels
        .iter()
        .filter(|(k, _)| {
            f.group
                .split(',')
                .any(|pair| pair.split('=').next() == Some(k.as_str()))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    sqlx::query(
        "INSERT INTO incidents (fingerprint, kind, rule, group_key, labels, severity, status, started_ms, \
         last_finding_ms, session_count, impact_usd, sequence, notified_ms, notified_sessions, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, 'firing', $7, $8, 1, $9, 0, NULL, 0, $10) \
         ON CONFLICT (fingerprint) DO UPDATE SET \
         severity = excluded.severity, \
         started_ms = CASE WHEN incidents.status = 'resolved' THEN excluded.started_ms ELSE incidents.started_ms END, \
         session_count = CASE WHEN incidents.status = 'resolved' THEN 1 ELSE incidents.session_count + 1 END, \
         impact_usd = CASE WHEN incidents.status = 'resolved' THEN excluded.impact_usd \
                      ELSE incidents.impact_usd + excluded.impact_usd END, \
         notified_ms = CASE WHEN incidents.status = 'resolved' THEN NULL ELSE incidents.notified_ms END, \
         notified_sessions = CASE WHEN incidents.status = 'resolved' THEN 0 ELSE incidents.notified_sessions END, \
         last_finding_ms = excluded.last_finding_ms, status = 'firing', updated_ms = excluded.updated_ms",
    )
    .bind(fp)
    .bind(f.kind.as_str())
    .bind(f.rule.as_str())
    .bind(f.group.as_str())
    .bind(json(&labels)?)
    .bind(f.severity.as_str())
    .bind(ms(f.window.start))
    .bind(ms(f.window.end))
    .bind(f.impact_usd)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(unavailable)?;
    Ok(())
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn incident_from_row(r: &AnyRow) -> Result<Incident, StoreError> {
    let severity: Severity = serde_json::from_value(serde_json::Value::String(
        r.try_get("severity").map_err(corrupt)?,
    ))
    .map_err(corrupt)?;
    let notified: Option<i64> = r.try_get("notified_ms").map_err(corrupt)?;
    Ok(Incident {
        fingerprint: r.try_get("fingerprint").map_err(corrupt)?,
        kind: r.try_get("kind").map_err(corrupt)?,
        rule: r.try_get("rule").map_err(corrupt)?,
        group: r.try_get("group_key").map_err(corrupt)?,
        labels: serde_json::from_str(&r.try_get::<String, _>("labels").map_err(corrupt)?)
            .map_err(corrupt)?,
        severity,
        firing: r.try_get::<String, _>("status").map_err(corrupt)? == "firing",
        started: from_ms(r.try_get("started_ms").map_err(corrupt)?)?,
        last_finding: from_ms(r.try_get("last_finding_ms").map_err(corrupt)?)?,
        session_count: r.try_get::<i64, _>("session_count").map_err(corrupt)? as u64,
        impact_usd: r.try_get("impact_usd").map_err(corrupt)?,
        sequence: r.try_get::<i64, _>("sequence").map_err(corrupt)? as u32,
        notified: notified.map(from_ms).transpose()?,
        notified_sessions: r.try_get::<i64, _>("notified_sessions").map_err(corrupt)? as u64,
        last_error: r.try_get("last_error").map_err(corrupt)?,
    })
}

fn alert_from(text: &str) -> Result<Alert, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("outbox alert: {e}")))
}

fn json(v: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl Store for SqlStore {
    async fn watermark(&self, job: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = sqlx::query("SELECT watermark_ms FROM jobs WHERE job = $1")
            .bind(job)
            .fetch_optional(&self.pool)
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

    async fn init_watermark(
        &self,
        job: &str,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, StoreError> {
        sqlx::query("INSERT INTO jobs (job, watermark_ms, updated_ms) VALUES ($1, $2, $3) ON CONFLICT (job) DO NOTHING")
            .bind(job)
            .bind(ms(at))
            .bind(ms(now))
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        self.watermark(job)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("job {job} has no watermark after insert")))
    }

    async fn load_baselines(
        &self,
        groups: &[String],
    ) -> Result<HashMap<String, GroupBaseline>, StoreError> {
        let mut out = HashMap::new();
        for chunk in groups.chunks(200) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT group_key, state FROM baselines WHERE group_key IN ({})",
                placeholders.join(", ")
            );
            // Only numbered placeholders are formatted in; the values are bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for g in chunk {
                q = q.bind(g.as_str());
            }
            for row in q.fetch_all(&self.pool).await.map_err(unavailable)? {
                let key: String = row
                    .try_get("group_key")
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let state: String = row
                    .try_get("state")
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let b: GroupBaseline = serde_json::from_str(&state)
                    .map_err(|e| StoreError::Corrupt(format!("baseline of {key}: {e}")))?;
                out.insert(key, b);
            }
        }
        Ok(out)
    }

    async fn models_in_use(&self, since: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        let rows =
            sqlx::query("SELECT model FROM models_seen WHERE last_seen_ms >= $1 ORDER BY model")
                .bind(ms(since))
                .fetch_all(&self.pool)
                .await
                .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                r.try_get::<String, _>("model")
                    .map_err(|e| StoreError::Corrupt(e.to_string()))
            })
            .collect()
    }

    async fn commit_window(
        &self,
        job: &str,
        window: Window,
        c: WindowCommit<'_>,
    ) -> Result<Vec<Finding>, StoreError> {
        let now = ms(c.now);
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let moved = sqlx::query("UPDATE jobs SET watermark_ms = $1, updated_ms = $2 WHERE job = $3 AND watermark_ms = $4")
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
        for (group, b) in c.baselines {
            sqlx::query(
                "INSERT INTO baselines (group_key, state, updated_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (group_key) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
            )
            .bind(group.as_str())
            .bind(json(b)?)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        }
        for m in c.models_seen {
            sqlx::query(
                "INSERT INTO models_seen (model, last_seen_ms) VALUES ($1, $2) \
                 ON CONFLICT (model) DO UPDATE SET last_seen_ms = excluded.last_seen_ms",
            )
            .bind(m.as_str())
            .bind(ms(window.end))
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
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

    async fn record_failure(
        &self,
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
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    async fn findings(
        &self,
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
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter().map(finding_from_row).collect()
    }

    async fn windows(&self, job: &str) -> Result<Vec<WindowRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT start_ms, end_ms, status, sessions, findings, attempts, last_error FROM windows \
             WHERE job = $1 ORDER BY start_ms",
        )
        .bind(job)
        .fetch_all(&self.pool)
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

    async fn skip_to(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let moved = sqlx::query("UPDATE jobs SET watermark_ms = $1, updated_ms = $2 WHERE job = $3 AND watermark_ms = $4")
            .bind(ms(to))
            .bind(ms(now))
            .bind(job)
            .bind(ms(from))
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        if moved.rows_affected() != 1 {
            return Err(StoreError::AlreadyProcessed(Window {
                start: from,
                end: to,
            }));
        }
        Ok(())
    }

    async fn open_incidents(&self) -> Result<Vec<Incident>, StoreError> {
        let rows = sqlx::query(
            "SELECT fingerprint, kind, rule, group_key, labels, severity, status, started_ms, last_finding_ms, \
             session_count, impact_usd, sequence, notified_ms, notified_sessions, last_error \
             FROM incidents WHERE status = 'firing' ORDER BY started_ms, fingerprint",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter().map(incident_from_row).collect()
    }

    async fn incident_findings(
        &self,
        i: &Incident,
        limit: usize,
    ) -> Result<Vec<Finding>, StoreError> {
        let rows = sqlx::query(
            "SELECT session_id, kind, rule, severity, group_key, labels, window_start_ms, window_end_ms, \
             cost_usd, impact_usd, evidence, explanation FROM findings \
             WHERE kind = $1 AND rule = $2 AND group_key = $3 AND window_start_ms >= $4 \
             ORDER BY impact_usd DESC, id LIMIT $5",
        )
        .bind(i.kind.as_str())
        .bind(i.rule.as_str())
        .bind(i.group.as_str())
        .bind(ms(i.started))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter().map(finding_from_row).collect()
    }

    async fn source_failed(
        &self,
        job: &str,
        error: &str,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let fp = incidents::fingerprint(incidents::SOURCE_UNHEALTHY, job, "gateway");
        sqlx::query(
            "INSERT INTO incidents (fingerprint, kind, rule, group_key, labels, severity, status, started_ms, \
             last_finding_ms, session_count, impact_usd, sequence, notified_ms, notified_sessions, last_error, updated_ms) \
             VALUES ($1, $2, $3, 'gateway', '{}', 'critical', 'firing', $4, $4, 0, 0, 0, NULL, 0, $5, $4) \
             ON CONFLICT (fingerprint) DO UPDATE SET \
             started_ms = CASE WHEN incidents.status = 'resolved' THEN excluded.started_ms ELSE incidents.started_ms END, \
             notified_ms = CASE WHEN incidents.status = 'resolved' THEN NULL ELSE incidents.notified_ms END, \
             last_finding_ms = excluded.last_finding_ms, last_error = excluded.last_error, \
             status = 'firing', updated_ms = excluded.updated_ms",
        )
        .bind(fp)
        .bind(incidents::SOURCE_UNHEALTHY)
        .bind(job)
        .bind(ms(at))
        .bind(error)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    async fn enqueue(
        &self,
        updates: &[IncidentUpdate],
        alerts: &[Alert],
        channels: &[String],
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        for u in updates {
            sqlx::query(
                "UPDATE incidents SET status = $1, notified_ms = $2, notified_sessions = $3, sequence = $4, \
                 updated_ms = $5 WHERE fingerprint = $6",
            )
            .bind(if u.firing { "firing" } else { "resolved" })
            .bind(u.notified.map(ms))
            .bind(u.notified_sessions as i64)
            .bind(i64::from(u.sequence))
            .bind(ms(now))
            .bind(u.fingerprint.as_str())
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        }
        for a in alerts {
            let body = json(a)?;
            for channel in channels {
                sqlx::query(
                    "INSERT INTO outbox (idempotency_key, channel, fingerprint, alert, status, attempts, \
                     next_attempt_ms, deadline_ms, created_ms) VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6, $5) \
                     ON CONFLICT (idempotency_key, channel) DO NOTHING",
                )
                .bind(a.idempotency_key())
                .bind(channel.as_str())
                .bind(a.fingerprint.as_str())
                .bind(body.as_str())
                .bind(ms(now))
                .bind(ms(deadline))
                .execute(&mut *tx)
                .await
                .map_err(unavailable)?;
            }
        }
        tx.commit().await.map_err(unavailable)
    }

    async fn claim_deliveries(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        // PostgreSQL: rows another replica is claiming right now are skipped,
        // not waited for. SQLite has one writer at a time, so no lock clause.
        let lock = match self.backend {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let sql = format!(
            "UPDATE outbox SET claimed_by = $1, claim_until_ms = $2 WHERE id IN (\
             SELECT id FROM outbox WHERE status = 'pending' AND next_attempt_ms <= $3 \
             AND (claim_until_ms IS NULL OR claim_until_ms < $3) ORDER BY id LIMIT $4{lock}) \
             RETURNING id, channel, alert, attempts, deadline_ms"
        );
        // Only a fixed lock clause is formatted in; the values are bound.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(holder)
            .bind(ms(claim_until))
            .bind(ms(now))
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        let mut out: Vec<Delivery> = rows
            .iter()
            .map(|r| {
                Ok(Delivery {
                    id: r.try_get("id").map_err(corrupt)?,
                    channel: r.try_get("channel").map_err(corrupt)?,
                    alert: alert_from(&r.try_get::<String, _>("alert").map_err(corrupt)?)?,
                    attempts: r.try_get::<i64, _>("attempts").map_err(corrupt)? as u32,
                    deadline: from_ms(r.try_get("deadline_ms").map_err(corrupt)?)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        out.sort_by_key(|d| d.id);
        Ok(out)
    }

    async fn try_lease(
        &self,
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
        .fetch_optional(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(row.is_some())
    }

    async fn save_investigation(
        &self,
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
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    async fn investigation_for(
        &self,
        key: &str,
    ) -> Result<Option<InvestigationReport>, StoreError> {
        let row = sqlx::query("SELECT alert_json FROM investigations WHERE idempotency_key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        row.map(|r| {
            let text: String = r.try_get("alert_json").map_err(corrupt)?;
            serde_json::from_str(&text).map_err(corrupt)
        })
        .transpose()
    }

    async fn investigations_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM investigations WHERE created_ms >= $1")
            .bind(ms(since))
            .fetch_one(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(row.try_get::<i64, _>("n").map_err(corrupt)? as u64)
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
            .bind(name)
            .bind(holder)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn delivered(&self, id: i64, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'sent', attempts = attempts + 1, sent_ms = $1, last_error = NULL, claim_until_ms = NULL WHERE id = $2")
            .bind(ms(now))
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn retry_later(
        &self,
        id: i64,
        next: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET attempts = attempts + 1, next_attempt_ms = $1, last_error = $2, claim_until_ms = NULL WHERE id = $3")
            .bind(ms(next))
            .bind(error)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn give_up(&self, id: i64, error: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'failed', attempts = attempts + 1, last_error = $1, claim_until_ms = NULL WHERE id = $2")
            .bind(error)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn outbox(&self) -> Result<Vec<OutboxRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, idempotency_key, channel, status, attempts, last_error, alert FROM outbox ORDER BY id",
        )
        .fetch_all(&self.pool)
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
}

impl crate::investigate::BudgetLedger for SqlStore {
    async fn reserve(
        &self,
        day: chrono::NaiveDate,
        usd: f64,
        cap: f64,
    ) -> Result<bool, LedgerError> {
        // One statement: the row lock (PostgreSQL) or the single writer
        // (SQLite) makes check-and-add atomic across replicas.
        let row = sqlx::query(
            "INSERT INTO investigation_budget (day, spent_usd) SELECT $1, $2 WHERE $2 <= $3 \
             ON CONFLICT (day) DO UPDATE SET spent_usd = investigation_budget.spent_usd + excluded.spent_usd \
             WHERE investigation_budget.spent_usd + excluded.spent_usd <= $3 \
             RETURNING spent_usd",
        )
        .bind(day.to_string())
        .bind(usd)
        .bind(cap)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        Ok(row.is_some())
    }

    async fn settle(
        &self,
        day: chrono::NaiveDate,
        reserved: f64,
        actual: f64,
    ) -> Result<(), LedgerError> {
        sqlx::query(
            "UPDATE investigation_budget SET spent_usd = spent_usd - $1 + $2 WHERE day = $3",
        )
        .bind(reserved)
        .bind(actual)
        .bind(day.to_string())
        .execute(&self.pool)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        Ok(())
    }

    async fn spent(&self, day: chrono::NaiveDate) -> Result<f64, LedgerError> {
        let row = sqlx::query("SELECT spent_usd FROM investigation_budget WHERE day = $1")
            .bind(day.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        match row {
            Some(r) => r
                .try_get::<f64, _>("spent_usd")
                .map_err(|e| LedgerError::Corrupt(e.to_string())),
            None => Ok(0.0),
        }
    }
}
