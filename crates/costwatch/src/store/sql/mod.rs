//! The SQL store, over SQLite or PostgreSQL through sqlx's `Any` driver.
//!
//! This file opens the pool and holds the row conversions; the statements
//! live with their job: [`windows`] (watermarks, windows, findings,
//! baselines), [`held`] (findings waiting for their session to end),
//! [`incidents`], [`outbox`] (alert delivery), [`leases`],
//! [`investigations`], [`budget`] (the day's investigation budget) and
//! [`calibration`] (what prompt-token estimators learned);
//! [`silences`], the calls received over OTLP ([`calls`]), the
//! operator's read-only [`inspect`] queries and the status page's
//! [`status`] queries implement traits of their own.

mod budget;
mod caching;
mod calibration;
mod calls;
mod held;
mod incidents;
mod inspect;
mod investigations;
mod leases;
mod outbox;
mod placeholders;
mod silences;
mod status;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
mod windows;

use super::{
    Delivery, Evaluated, IncidentUpdate, OutboxRow, Store, StoreError, StoredInvestigation,
    WindowCommit, WindowRow, WindowStore,
};
use crate::detect::{Finding, GroupBaseline, Kind};
use crate::domain::Severity;
use crate::incidents::{Incident, TickSpan};
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

/// Pages of write-ahead log (4 KiB each) between checkpoints: 40 MiB.
const WAL_CHECKPOINT_PAGES: u32 = 10_000;

/// The page cache of an SQLite writer's connection (SQLite's own is 2 MiB):
/// an export of 512 spans dirties pages of every index of `otlp_calls`, and
/// a smaller cache writes them out mid-transaction and reads them again.
const WRITER_CACHE_KIB: u32 = 32 * 1024;

impl SqlStore {
    /// Which database `url` names.
    pub fn backend_of(url: &str) -> Backend {
        normalise_url(url).0
    }

    /// Connects (at most 4 connections) and brings the schema up to date.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, 4).await
    }

    /// Connects with at most `max_connections` and brings the schema up to date.
    pub async fn open_with(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        Self::open_configured(url, max_connections, None).await
    }

    /// Connects for a writer that inserts all the time (the OTLP receiver):
    /// on SQLite one connection with a page cache of 32 MiB,
    /// since the file takes one writer at a time, and a second connection
    /// would only wait on its lock and drop its cache each time the other
    /// commits; on PostgreSQL `postgres_connections`.
    pub async fn open_writer(url: &str, postgres_connections: u32) -> Result<Self, StoreError> {
        match Self::backend_of(url) {
            Backend::Sqlite => Self::open_configured(url, 1, Some(WRITER_CACHE_KIB)).await,
            Backend::Postgres => Self::open_configured(url, postgres_connections, None).await,
        }
    }

    async fn open_configured(
        url: &str,
        max_connections: u32,
        cache_kib: Option<u32>,
    ) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (backend, url) = normalise_url(url);
        let in_memory = url.contains(":memory:");
        let pool = AnyPoolOptions::new()
            .max_connections(if in_memory { 1 } else { max_connections.max(1) })
            .acquire_timeout(Duration::from_secs(10))
            // A ping before each use guards against a server that dropped
            // the connection; an SQLite connection is a file handle in this
            // process, and the ping is one more round trip to its worker
            // thread for every statement a window runs.
            .test_before_acquire(backend == Backend::Postgres)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlx::query("PRAGMA busy_timeout = 10000")
                            .execute(&mut *conn)
                            .await?;
                        if let Some(kib) = cache_kib {
                            sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA cache_size = -{kib}")))
                                .execute(&mut *conn)
                                .await?;
                        }
                        // A multi-row insert keeps its statement journal
                        // (to undo a half-done statement) in memory, not in
                        // a temporary file.
                        sqlx::query("PRAGMA temp_store = MEMORY")
                            .execute(&mut *conn)
                            .await?;
                        if !in_memory {
                            sqlx::query("PRAGMA journal_mode = WAL")
                                .execute(&mut *conn)
                                .await?;
                            // The write-ahead log is copied into the database
                            // every WAL_CHECKPOINT_PAGES pages instead of
                            // SQLite's 1,000: a page written again before then
                            // (the received calls' indexes are, all the time)
                            // is copied once.
                            sqlx::query(sqlx::AssertSqlSafe(format!(
                                "PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}"
                            )))
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

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn alert_from(text: &str) -> Result<Alert, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("outbox alert: {e}")))
}

fn json(v: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}
impl WindowStore for SqlStore {
    async fn watermark(&self, job: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        windows::watermark(self, job).await
    }

    async fn init_watermark(
        &self,
        job: &str,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, StoreError> {
        windows::init_watermark(self, job, at, now).await
    }

    async fn load_baselines(
        &self,
        groups: &[String],
    ) -> Result<HashMap<String, GroupBaseline>, StoreError> {
        windows::load_baselines(self, groups).await
    }

    async fn held_findings(&self, job: &str) -> Result<Vec<crate::detect::Held>, StoreError> {
        held::held_findings(self, job).await
    }

    async fn models_in_use(&self, since: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        windows::models_in_use(self, since).await
    }

    async fn models_last_seen(&self) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        windows::models_last_seen(self).await
    }

    async fn caching_evidence(&self) -> Result<crate::detect::CachingEvidence, StoreError> {
        caching::load(self).await
    }

    async fn commit_window(
        &self,
        job: &str,
        window: Window,
        c: WindowCommit<'_>,
    ) -> Result<Vec<Finding>, StoreError> {
        windows::commit_window(self, job, window, c).await
    }

    async fn record_failure(
        &self,
        job: &str,
        window: Window,
        error: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        windows::record_failure(self, job, window, error, now).await
    }
}

impl Store for SqlStore {
    async fn findings(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Finding>, StoreError> {
        windows::findings(self, from, to).await
    }

    async fn windows(&self, job: &str) -> Result<Vec<WindowRow>, StoreError> {
        windows::windows(self, job).await
    }

    async fn skip_to(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        windows::skip_to(self, job, from, to, now).await
    }

    async fn open_incidents(&self) -> Result<Vec<Incident>, StoreError> {
        incidents::open_incidents(self).await
    }

    async fn incident_findings(
        &self,
        i: &Incident,
        limit: usize,
    ) -> Result<Vec<Finding>, StoreError> {
        incidents::incident_findings(self, i, limit).await
    }

    async fn source_failed(
        &self,
        job: &str,
        error: &str,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        incidents::source_failed(self, job, error, at).await
    }

    async fn evaluation_span(&self, job: &str) -> Result<TickSpan, StoreError> {
        windows::evaluation_span(self, job).await
    }

    async fn enqueue(
        &self,
        evaluated: Option<Evaluated<'_>>,
        updates: &[IncidentUpdate],
        alerts: &[Alert],
        channels: &[String],
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        outbox::enqueue(self, evaluated, updates, alerts, channels, now, deadline).await
    }

    async fn claim_deliveries(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        outbox::claim_deliveries(self, holder, now, claim_until, limit).await
    }

    async fn claim_reposts(
        &self,
        holder: &str,
        channel: &str,
        posted_before: DateTime<Utc>,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        outbox::claim_reposts(
            self,
            holder,
            channel,
            posted_before,
            now,
            claim_until,
            limit,
        )
        .await
    }

    async fn reposted(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        outbox::reposted(self, id, at).await
    }

    async fn try_lease(
        &self,
        name: &str,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        leases::try_lease(self, name, holder, now, until).await
    }

    async fn save_investigation(&self, inv: &StoredInvestigation) -> Result<(), StoreError> {
        investigations::save_investigation(self, inv).await
    }

    async fn stored_investigation(
        &self,
        id: &str,
    ) -> Result<Option<StoredInvestigation>, StoreError> {
        investigations::stored_investigation(self, id).await
    }

    async fn stored_investigations(
        &self,
        limit: u32,
    ) -> Result<Vec<StoredInvestigation>, StoreError> {
        investigations::stored_investigations(self, limit).await
    }

    async fn investigation_for(
        &self,
        key: &str,
    ) -> Result<Option<InvestigationReport>, StoreError> {
        investigations::investigation_for(self, key).await
    }

    async fn investigations_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError> {
        investigations::investigations_since(self, since).await
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        leases::release_lease(self, name, holder).await
    }

    async fn delivered(&self, id: i64, now: DateTime<Utc>) -> Result<(), StoreError> {
        outbox::delivered(self, id, now).await
    }

    async fn retry_later(
        &self,
        id: i64,
        next: DateTime<Utc>,
        error: &str,
    ) -> Result<(), StoreError> {
        outbox::retry_later(self, id, next, error).await
    }

    async fn give_up(&self, id: i64, error: &str) -> Result<(), StoreError> {
        outbox::give_up(self, id, error).await
    }

    async fn outbox(&self) -> Result<Vec<OutboxRow>, StoreError> {
        outbox::outbox(self).await
    }
}
