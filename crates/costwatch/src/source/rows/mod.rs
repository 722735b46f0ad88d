//! Sources that log one row per model call (the LiteLLM proxy's spend logs,
//! Langfuse's observations) rather than session aggregates.
//!
//! A [`RowReader`] speaks one system's API and turns each of its rows into
//! a gateway-agnostic [`CallRow`]: the session key resolved as
//! `source.session_key` says, labels picked as `source.labels` says, the
//! whole prompt in `input_tokens` (cache reads and writes included), the
//! gateway's cost when it reports one. [`RowSource`] groups those rows into
//! the [`SessionRecord`](super::SessionRecord)s the reference API would have
//! served for the same traffic, prices calls the gateway did not price, and
//! answers drill-downs from rows it already read.

mod aggregate;
mod reporters;
mod settings;
mod source;

pub use self::aggregate::{PER_CALL_LABEL, PER_CALL_VALUE, per_call_id};
pub use self::settings::{LabelField, RowKeys, RowSettings, Rows, SessionKey};
pub use self::source::RowSource;

use super::{Labels, ModelPrice, ReadStats, RequestStatus, SourceError};
use crate::pricing::table::PriceRules;
use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;

/// One model call as a row source reports it, already mapped.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRow {
    /// The gateway's id for the call; unique within the source.
    pub request_id: String,
    /// The session the call belongs to under `source.session_key`; `None`
    /// when the call carries none (it is then judged on its own).
    pub session_id: Option<String>,
    /// When the call started.
    pub created_at: DateTime<Utc>,
    /// Model called, as the provider answered it where known.
    pub model: String,
    /// Whether it succeeded.
    pub status: RequestStatus,
    /// HTTP status the provider answered, if known.
    pub http_status: Option<u16>,
    /// Kind of failure (`RateLimitError`, `Timeout`, ...).
    pub error_type: Option<String>,
    /// The whole prompt: uncached, cache-read and cache-write tokens.
    pub input_tokens: u64,
    /// Prompt tokens read from the provider's prompt cache (a part of
    /// `input_tokens`).
    pub cached_tokens: u64,
    /// Whether the system reported cache reads for this call (a count, 0
    /// included). An OpenTelemetry span without a cache-read attribute did
    /// not: its `cached_tokens` is 0 for want of a figure, not a measured 0
    /// (unless its `instrumentation` reports cache reads elsewhere, see
    /// [`RowSource`]).
    pub cache_reported: bool,
    /// What wrote the call's usage, where a row may leave a cache-read
    /// count of 0 out: for an OpenTelemetry span, its instrumentation
    /// scope (name and version) and the endpoint's model it called
    /// (provider, `server.address`, model), as the JSON array
    /// `["opentelemetry.instrumentation.genai.openai", "1.3b0", "openai", "api.openai.com", "gpt-4o"]`.
    /// `None` for systems that always report cache reads (LiteLLM,
    /// Langfuse) and for spans without a scope name. [`RowSource`] reads a
    /// call without a cache-read count as 0 cached when another call of
    /// the same instrumentation reported one. Shared by the calls of one
    /// scope.
    pub instrumentation: Option<Arc<str>>,
    /// Prompt tokens written to the prompt cache (a part of `input_tokens`).
    pub cache_write_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// What the gateway says the call cost, in dollars; `None` when it
    /// reports no cost (costwatch then prices it from its table).
    pub cost_usd: Option<f64>,
    /// Labels picked from the row as `source.labels` says.
    pub labels: Labels,
    /// The provider or deployment that served the call, where the system
    /// names one (see [`RequestRecord::provider`](super::RequestRecord)).
    pub provider: Option<String>,
}

/// What a system publishes about prices.
#[derive(Debug, Clone)]
pub enum Published {
    /// Prices by model name (LiteLLM's `/model/info`).
    Listed(Vec<ModelPrice>),
    /// A catalogue that matches calls by more than a model's name
    /// (Langfuse's model definitions).
    Rules(Arc<dyn PriceRules>),
}

/// One system's API, read as call rows.
pub trait RowReader: Send + Sync {
    /// What the system calls itself in messages (`LiteLLM proxy`).
    fn name(&self) -> &'static str;

    /// Prices the system publishes (may be empty or partial; the price
    /// table fills the rest).
    fn models(&self) -> impl Future<Output = Result<Vec<ModelPrice>, SourceError>> + Send;

    /// What the system publishes about prices: by default its list,
    /// [`RowReader::models`]; a system whose catalogue matches calls by a
    /// pattern, a date or their usage gives its [`PriceRules`] instead.
    fn published(&self) -> impl Future<Output = Result<Published, SourceError>> + Send {
        async move { self.models().await.map(Published::Listed) }
    }

    /// Streams every call that started in `[start, end)`, page by page,
    /// into `sink`, each call once. Any error means the range was not read
    /// completely; an error returned by `sink` stops the read and is
    /// returned as is.
    fn calls<F>(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        sink: F,
    ) -> impl Future<Output = Result<ReadStats, SourceError>> + Send
    where
        F: FnMut(CallRow) -> Result<(), SourceError> + Send;

    /// Every call of one session that started in `[start, end)`. The
    /// default reads the range and keeps the session's calls; a system that
    /// can filter by session on the server does that instead.
    fn session_calls(
        &self,
        session_id: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<CallRow>, SourceError>> + Send {
        async move {
            let mut out = Vec::new();
            self.calls(start, end, |row| {
                if row.session_id.as_deref() == Some(session_id) {
                    out.push(row);
                }
                Ok(())
            })
            .await?;
            Ok(out)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
