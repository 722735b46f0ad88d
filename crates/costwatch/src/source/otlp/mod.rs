//! OpenTelemetry GenAI spans as call rows: the pure core (decoding and
//! mapping) that the OTLP/HTTP receiver (`crate::ingest`, `source.kind:
//! otlp`) uses, and the files reader (`source.kind: otlp_files`).
//!
//! Followed from:
//! - the OTLP specification (`opentelemetry-proto`, `docs/specification.md`:
//!   OTLP/HTTP, binary protobuf and JSON encodings, gzip, partial success)
//!   and `opentelemetry/proto/trace/v1/trace.proto` (ids of 16 and 8
//!   bytes, all zeros invalid; status codes);
//! - the GenAI semantic conventions' attribute registry,
//!   `model/gen-ai/registry.yaml`, in `open-telemetry/semantic-conventions`
//!   until May 2026 (#3696) and in `open-telemetry/semantic-conventions-genai`
//!   since: `gen_ai.operation.name` (`chat`, `text_completion`,
//!   `generate_content` are model calls; `embeddings`, `execute_tool`,
//!   `invoke_agent`, `create_agent`, ... are not), `gen_ai.request.model`,
//!   `gen_ai.response.model`, `gen_ai.conversation.id`,
//!   `gen_ai.usage.input_tokens` ("SHOULD include all types of input
//!   tokens, including cached tokens"), `gen_ai.usage.output_tokens`,
//!   `gen_ai.usage.cache_read.input_tokens` and
//!   `gen_ai.usage.cache_creation.input_tokens`; and its deprecated
//!   registry (`gen_ai.usage.prompt_tokens`,
//!   `gen_ai.usage.completion_tokens`);
//! - what instrumentations write besides: OpenTelemetry's own OpenAI
//!   instrumentation, opentelemetry-instrumentation-openai-v2 2.4b0 with
//!   opentelemetry-util-genai 1.1b0 (read and run in
//!   `tests/it/otel_interop.rs`: no cache-read count at all on chat spans,
//!   so a missing count is unknown rather than 0; the conversation id only
//!   on the `invoke_agent` span around the calls, which the receiver and
//!   the files reader give to the calls of its trace; `error.type` written
//!   as `<class 'openai.RateLimitError'>`, the HTTP status only in the
//!   status message), and its successor
//!   opentelemetry-instrumentation-genai-openai 1.3b0 with
//!   opentelemetry-util-genai 1.3b0 (read and run in
//!   `tests/it/otel_genai_interop.rs`: the cache-read count only when above
//!   0, cache writes as `gen_ai.usage.cache_write.input_tokens`, the
//!   conversation id on the chat spans themselves inside a
//!   `TelemetryHandler().workflow(conversation_id=...)`, `error.type` as
//!   the class's name, `openai.RateLimitError`); OpenLLMetry
//!   (`llm.request.type`, `gen_ai.usage.cache_read_input_tokens`,
//!   `gen_ai.usage.cache_creation_input_tokens`) and OpenInference and
//!   the general session convention (`session.id`).
//!
//! Choices where the sources leave room:
//! - Only model-call spans are calls; every other span is counted and
//!   dropped, never rejected.
//! - A model-call span is rejected (and counted) when it has no usable
//!   span or trace id, no start time or one outside the accepted range, no
//!   model, a session id or model over 256 bytes, or a token count that is
//!   not a whole number from 0 to `u32::MAX`. Token counts may arrive as
//!   `intValue`, `doubleValue` or `stringValue`.
//! - The prompt is made whole as `source.input_tokens` says (see
//!   [`InputTokens`]); missing cache counts are 0, and a missing cache-read
//!   count marks the call's cache reads as not reported
//!   (`CallRow::cache_reported`) on the span itself. Every call names its
//!   instrumentation (`CallRow::instrumentation`: scope name and version,
//!   provider, `server.address` and model, whatever the service), from
//!   which the row source decides: where the same instrumentation
//!   reported a cache-read count on another call of the window or its
//!   lookback, to the same endpoint's model, a call without one read 0
//!   (see `crate::source::rows`). A span without any
//!   token count is a call of 0 tokens, counted in
//!   [`Mapped::without_usage`] unless it failed.
//! - Status `ERROR` is a failed call: `error.type`, else the status
//!   message (cut at 200 characters); the HTTP status from
//!   `http.response.status_code`, else from an `error.type` that is a
//!   3-digit status.
//! - Calls carry no cost: costwatch prices them from its price table.

mod attrs;
mod decode;
mod files;
mod json_lenient;
mod map;
mod settings;
mod usage;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

/// Spans received over OTLP/HTTP, as the registry knows them: pages of the
/// state database's received calls; spans name attributes
/// (`span.<key>`, `resource.<key>`), not row fields.
pub const RECEIVER_KIND: super::KindFacts = super::KindFacts {
    name: "otlp",
    reads: "OpenTelemetry GenAI spans posted over OTLP/HTTP to costwatch's receiver",
    default_page_limit: 5000,
    max_page_limit: 10_000,
    label_fields: &[],
    session_page: None,
    ui_on_api_host: false,
};

/// Spans in OTLP/JSON files, as the registry knows them; pages as the
/// receiver's.
pub const FILES_KIND: super::KindFacts = super::KindFacts {
    name: "otlp_files",
    reads: "OpenTelemetry GenAI spans in the Collector's OTLP/JSON files",
    ..RECEIVER_KIND
};

pub use self::decode::{DecodeError, Encoding, decode_json_line, decode_request, encode_response};
pub use self::files::{DEFAULT_MAX_CACHED_CALLS, OtlpFilesReader, files_root};
pub use self::map::{Mapped, SpanCall, map_spans};
pub use self::settings::{AttrRef, Files, InputTokens, Receiver, SessionFallback, SpanMapping};
