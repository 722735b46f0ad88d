//! The OTLP receiver of `costwatch run` (`source.kind: otlp`) and the
//! retention sweep of what it stored.

use super::AppError;
use crate::clock::Clock;
use crate::config::Config;
use crate::ingest::{self as receiver, ReceiverSettings};
use crate::ops::metrics::Metrics;
use crate::pipeline::Schedule;
use crate::store::{CallStore, SqlStore, Store, StoreError};
use chrono::{DateTime, TimeDelta, Utc};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Connections the receiver holds on PostgreSQL, apart from the detection
/// job's (one on SQLite: [`SqlStore::open_writer`]).
const RECEIVER_CONNECTIONS: u32 = 2;
/// Exports decoded and stored at once.
const MAX_IN_FLIGHT: usize = 4;
/// Spans starting this far ahead of the receiver's clock are refused.
const ACCEPT_FUTURE: Duration = Duration::from_secs(3600);
/// How long one export may wait on the database.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often old calls are deleted.
const SWEEP_INTERVAL: Duration = Duration::from_secs(600);
/// Calls deleted per statement.
const SWEEP_BATCH: u32 = 10_000;

/// Starts the receiver and its retention sweep when the source is `otlp`;
/// both stop when `stop` becomes `true`. Returns the bound address.
pub(super) async fn start(
    cfg: &Config,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
) -> Result<Option<SocketAddr>, AppError> {
    let crate::config::KindConfig::Otlp(o, mapping, rows) = &cfg.source.of_kind else {
        return Ok(None);
    };
    let store = SqlStore::open_writer(&cfg.state.url, RECEIVER_CONNECTIONS)
        .await
        .map_err(|e| AppError::failed("cannot open the state database for the receiver", e))?;
    let settings = ReceiverSettings {
        receiver: o.clone(),
        mapping: mapping.clone(),
        max_in_flight: MAX_IN_FLIGHT,
        accept_future: ACCEPT_FUTURE,
        store_timeout: STORE_TIMEOUT,
        job: Schedule::main(&cfg.windows).job,
        settle_lag: cfg.windows.settle_lag,
    };
    let (addr, _task) = receiver::serve(
        settings,
        store.clone(),
        clock.clone(),
        metrics,
        stop.clone(),
    )
    .await
    .map_err(|e| {
        AppError::failed(
            format!(
                "cannot listen for OTLP on {}, source.listen's address; another daemon may hold it",
                o.listen
            ),
            e,
        )
    })?;
    let retention = Retention {
        keep: o.retention,
        lookback: rows.session_lookback,
        job: Schedule::main(&cfg.windows).job,
    };
    tokio::spawn(sweep_until_stopped(store, retention, clock, stop));
    Ok(Some(addr))
}

/// What the sweep keeps.
#[derive(Debug, Clone)]
pub struct Retention {
    /// `source.retention`.
    pub keep: Duration,
    /// `source.session_lookback`: what a window reads before its start.
    pub lookback: Duration,
    /// The detection job whose unread windows are never swept.
    pub job: String,
}

impl Retention {
    /// Calls that started before this may go: older than the retention,
    /// and older than what the next window of the job still reads (its
    /// watermark minus the lookback), so a stalled job loses nothing.
    pub fn cutoff(
        &self,
        now: DateTime<Utc>,
        watermark: Option<DateTime<Utc>>,
    ) -> Option<DateTime<Utc>> {
        let by_age = now - TimeDelta::from_std(self.keep).ok()?;
        // No watermark yet: the job has read nothing, keep everything.
        let unread = watermark? - TimeDelta::from_std(self.lookback).ok()?;
        Some(by_age.min(unread))
    }
}

/// Deletes the calls `retention` lets go, in batches; returns how many.
pub async fn sweep<S: CallStore + Store>(
    store: &S,
    retention: &Retention,
    now: DateTime<Utc>,
) -> Result<u64, StoreError> {
    let watermark = store.watermark(&retention.job).await?;
    let Some(cutoff) = retention.cutoff(now, watermark) else {
        return Ok(0);
    };
    let mut deleted = 0;
    loop {
        let n = store.delete_calls_before(cutoff, SWEEP_BATCH).await?;
        deleted += n;
        if n < u64::from(SWEEP_BATCH) {
            return Ok(deleted);
        }
        // Let the receiver and the tick in between batches.
        tokio::task::yield_now().await;
    }
}

async fn sweep_until_stopped(
    store: SqlStore,
    retention: Retention,
    clock: Arc<dyn Clock>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        match sweep(&store, &retention, clock.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "old received calls deleted (source.retention)"),
            Err(e) => tracing::warn!(error = %e, "retention sweep failed; trying again later"),
        }
        tokio::select! {
            _ = tokio::time::sleep(SWEEP_INTERVAL) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
