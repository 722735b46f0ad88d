//! The same labelled traffic as OpenTelemetry GenAI spans: each call of a
//! [`Dataset`](crate::Dataset) as the span an instrumented OpenAI client writes, sent as
//! OTLP export requests, written as the Collector's file exporter writes
//! them, or posted to an OTLP/HTTP receiver.
//!
//! Followed:
//! - `open-telemetry/opentelemetry-python-contrib` at commit `0047a9627e`,
//!   `instrumentation-genai/opentelemetry-instrumentation-openai-v2`
//!   (`__init__.py`, `patch.py`, `utils.py`, `response_extractors.py`) and
//!   `util/opentelemetry-util-genai` (`_invocation.py`,
//!   `_inference_invocation.py`): one CLIENT span per chat call named
//!   `chat <request model>`, from the tracer `get_tracer(__name__, "")`
//!   with schema 1.30.0; `gen_ai.operation.name`, `gen_ai.request.model`,
//!   `gen_ai.system` (the default conventions) and `gen_ai.provider.name`
//!   (the latest experimental ones), `server.address` and `server.port`
//!   (left out when 443) from the client's base URL; from the response,
//!   `gen_ai.response.model`, `gen_ai.response.id`,
//!   `gen_ai.usage.input_tokens` (`prompt_tokens`, the whole prompt),
//!   `gen_ai.usage.output_tokens`, and the prompt's
//!   `cached_tokens` and `cache_creation_input_tokens` as
//!   `gen_ai.usage.cache_read.input_tokens` and
//!   `gen_ai.usage.cache_creation.input_tokens`; on a failure, status
//!   `ERROR` with `str(error)` as its message and `error.type`, and no
//!   response or usage attribute (there is no response). Success leaves
//!   the status unset.
//! - `open-telemetry/semantic-conventions`, `model/gen-ai/registry.yaml`:
//!   `gen_ai.conversation.id`, set by the application, here the session id.
//! - `open-telemetry/opentelemetry-collector-contrib`,
//!   `exporter/fileexporter/README.md` (commit `1a1a3e1ac6`): with
//!   `format: json`, each line of the file is one JSON object; rotation
//!   renames the file by putting the time of rotation before its extension
//!   (`data.json` becomes `data-2022-09-14T05-02-14.173.json`, UTC unless
//!   `localtime`) and starts a new file at the configured path.
//! - The OTLP specification, <https://opentelemetry.io/docs/specs/otlp/#otlphttp>
//!   and <https://opentelemetry.io/docs/specs/otlp/#otlphttp-throttling>:
//!   binary protobuf `POST`, a 200 with an `ExportTraceServiceResponse`
//!   whose `partial_success` counts rejected spans, 429, 502, 503 and 504
//!   retryable with `Retry-After` honoured, other errors not retried; and
//!   <https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding>
//!   for the JSON (hex ids, 64-bit integers as strings, lowerCamelCase),
//!   which `opentelemetry-proto`'s serde implementation writes.
//!
//! How a dataset becomes spans: a session is one trace ([`trace_id`]) in
//! the process that served it, whose resource has `service.name` = the
//! `feature` label (else `agent`), every label of the session under its
//! own name, and `telemetry.sdk.name`/`telemetry.sdk.language`; a call is
//! one span ([`span_id`] from its request id) from `created_at` to
//! `created_at + latency_ms`, its `gen_ai.conversation.id` the session id
//! and its `gen_ai.response.id` the request id. Choices of the simulator
//! where the instrumentation leaves room: `server.address` and
//! `server.port` are the gateway's ([`SERVER_ADDRESS`], [`SERVER_PORT`]);
//! cache reads are written on every successful call, 0 included (as
//! `response_extractors.py` does whenever the API reports `cached_tokens`),
//! cache writes only when non-zero (OpenAI reports none); the conversation
//! id is on every call span (the chat path of openai-v2 2.4b0 writes
//! neither cache reads nor a conversation id on its spans: the simulator
//! models an instrumentation that reports both, as the conventions define
//! them; what 2.4b0 itself writes is tested against the real package in
//! `tests/it/otel_interop.rs`); `error.type` is the row's
//! error type (else its HTTP status), and a failure carries
//! `http.response.status_code`; the status message is the one OpenAI's
//! Python SDK gives the failure.
//!
//! Spans are handed over as a fleet of batch span processors exports
//! them: shortly after they end, so in the order they ended, stretch by
//! stretch of 5 seconds (the processor's default schedule delay,
//! `OTEL_BSP_SCHEDULE_DELAY` in the SDK configuration specification);
//! within one stretch, each session's spans in the order they ended,
//! sessions taking turns of a few spans in an order hashed from their
//! ids. So a request holds spans that ended close together, not in start
//! order. The sequence is cut into requests of at most
//! `spans_per_request` spans, each grouping its spans by resource
//! (`ResourceSpans`, one `ScopeSpans`).
//!
//! It never uses costwatch's types: it is the outside world.
//!
//! Layout: `spans` (calls as spans and requests), `files` (the file
//! exporter's files), `post` (the OTLP/HTTP client).

mod files;
mod post;
mod spans;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::files::{CURRENT_FILE, rotated_name, write_json_lines};
pub use self::post::{
    PROTOBUF, PostError, PostOptions, PostStats, post_protobuf, post_protobuf_with,
};
pub use self::spans::{
    DEFAULT_SERVICE, SCHEMA_URL, SCOPE_NAME, SERVER_ADDRESS, SERVER_PORT, export_requests,
    resource_attributes, span_id, trace_id,
};
