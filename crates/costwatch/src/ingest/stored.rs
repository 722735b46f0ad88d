//! [`StoredCalls`]: the calls the OTLP receiver stored, read back as a
//! [`RowReader`] (`source.kind: otlp`).

use crate::source::rows::{CallRow, RowReader};
use crate::source::{ModelPrice, ReadStats, SourceError};
use crate::store::{CallCursor, CallStore, StoreError};
use chrono::{DateTime, Utc};

/// Calls read from the state database, page by page in start order.
#[derive(Debug, Clone)]
pub struct StoredCalls<S> {
    store: S,
    page_limit: u32,
}

impl<S: CallStore> StoredCalls<S> {
    /// Reads `store`'s calls `page_limit` at a time.
    pub fn new(store: S, page_limit: u32) -> StoredCalls<S> {
        StoredCalls {
            store,
            page_limit: page_limit.max(1),
        }
    }
}

/// A database that cannot be read now may be readable later: the window
/// stays due.
fn transient(e: StoreError) -> SourceError {
    SourceError::Transient(format!("reading received calls: {e}"))
}

impl<S: CallStore> RowReader for StoredCalls<S> {
    fn name(&self) -> &'static str {
        "OTLP receiver"
    }

    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        // The conventions carry no prices: the price table has them all.
        Ok(Vec::new())
    }

    async fn calls<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        mut sink: F,
    ) -> Result<ReadStats, SourceError>
    where
        F: FnMut(CallRow) -> Result<(), SourceError> + Send,
    {
        let mut stats = ReadStats::default();
        let mut after: Option<CallCursor> = None;
        loop {
            let page = self
                .store
                .calls_page(start, end, after.as_ref(), self.page_limit)
                .await
                .map_err(transient)?;
            stats.pages += 1;
            let full = page.len() >= self.page_limit as usize;
            if let Some(last) = page.last() {
                after = Some(CallCursor {
                    created_at: last.created_at,
                    request_id: last.request_id.clone(),
                });
            }
            for row in page {
                stats.rows += 1;
                sink(row)?;
            }
            if !full {
                return Ok(stats);
            }
        }
    }

    async fn session_calls(
        &self,
        session_id: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<CallRow>, SourceError> {
        self.store
            .session_calls(session_id, start, end)
            .await
            .map_err(transient)
    }
}
