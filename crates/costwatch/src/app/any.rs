//! [`AnySource`]: the source `source.kind` names, behind one type.

use crate::ingest::StoredCalls;
use crate::source::langfuse::LangfuseReader;
use crate::source::litellm::LiteLlmReader;
use crate::source::otlp::OtlpFilesReader;
use crate::source::reference::ReferenceSource;
use crate::source::rows::RowSource;
use crate::source::{
    FoundCalls, ModelPrice, ReadStats, RequestQuery, RequestRecord, SessionRecord, Source,
    SourceError, Window,
};
use crate::store::SqlStore;

/// Whichever source the configuration names.
#[derive(Debug, Clone)]
pub enum AnySource {
    /// The reference gateway contract.
    Reference(Box<ReferenceSource>),
    /// The LiteLLM proxy's spend logs.
    Litellm(RowSource<LiteLlmReader>),
    /// Langfuse's observations.
    Langfuse(RowSource<LangfuseReader>),
    /// OpenTelemetry GenAI spans the receiver stored.
    Otlp(RowSource<StoredCalls<SqlStore>>),
    /// OpenTelemetry GenAI spans in OTLP/JSON files.
    OtlpFiles(RowSource<OtlpFilesReader>),
}

impl Source for AnySource {
    async fn models(&self) -> Result<Vec<ModelPrice>, SourceError> {
        match self {
            AnySource::Reference(s) => s.models().await,
            AnySource::Litellm(s) => s.models().await,
            AnySource::Langfuse(s) => s.models().await,
            AnySource::Otlp(s) => s.models().await,
            AnySource::OtlpFiles(s) => s.models().await,
        }
    }

    fn window_models(&self) -> Vec<ModelPrice> {
        match self {
            AnySource::Reference(s) => s.window_models(),
            AnySource::Litellm(s) => s.window_models(),
            AnySource::Langfuse(s) => s.window_models(),
            AnySource::Otlp(s) => s.window_models(),
            AnySource::OtlpFiles(s) => s.window_models(),
        }
    }

    async fn sessions<F>(&self, window: Window, sink: F) -> Result<ReadStats, SourceError>
    where
        F: FnMut(SessionRecord) + Send,
    {
        match self {
            AnySource::Reference(s) => s.sessions(window, sink).await,
            AnySource::Litellm(s) => s.sessions(window, sink).await,
            AnySource::Langfuse(s) => s.sessions(window, sink).await,
            AnySource::Otlp(s) => s.sessions(window, sink).await,
            AnySource::OtlpFiles(s) => s.sessions(window, sink).await,
        }
    }

    async fn session_requests(&self, session_id: &str) -> Result<Vec<RequestRecord>, SourceError> {
        match self {
            AnySource::Reference(s) => s.session_requests(session_id).await,
            AnySource::Litellm(s) => s.session_requests(session_id).await,
            AnySource::Langfuse(s) => s.session_requests(session_id).await,
            AnySource::Otlp(s) => s.session_requests(session_id).await,
            AnySource::OtlpFiles(s) => s.session_requests(session_id).await,
        }
    }

    async fn requests(&self, query: &RequestQuery) -> Result<FoundCalls, SourceError> {
        match self {
            AnySource::Reference(s) => s.requests(query).await,
            AnySource::Litellm(s) => s.requests(query).await,
            AnySource::Langfuse(s) => s.requests(query).await,
            AnySource::Otlp(s) => s.requests(query).await,
            AnySource::OtlpFiles(s) => s.requests(query).await,
        }
    }
}
