//! [`RowSource`]: a [`Source`] over a [`RowReader`].

use super::{RowReader, RowSettings};
use crate::source::prices::PriceTable;
use crate::source::{
    ModelPrice, ReadStats, RequestRecord, SessionRecord, Source, SourceError, Window,
};

/// Sessions built from a row reader's calls.
pub struct RowSource<R> {
    reader: R,
    settings: RowSettings,
    prices: PriceTable,
}

impl<R: RowReader> RowSource<R> {
    /// A source over `reader`, pricing unpriced calls from `prices`.
    pub fn new(reader: R, settings: RowSettings, prices: PriceTable) -> RowSource<R> {
        RowSource {
            reader,
            settings,
            prices,
        }
    }
}

impl<R: RowReader> Source for RowSource<R> {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        let _ = (&self.settings, &self.prices);
        self.reader.models().await
    }

    async fn sessions<F>(&self, _window: Window, _sink: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        Err(SourceError::Rejected("row sources are being built".into()))
    }

    async fn session_requests(&self, _session_id: &str) -> Result<Vec<RequestRecord>, SourceError> {
        Err(SourceError::Rejected("row sources are being built".into()))
    }
}
