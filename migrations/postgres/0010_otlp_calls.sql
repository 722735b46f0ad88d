-- Model calls received as OpenTelemetry GenAI spans (`source.kind: otlp`),
-- already mapped to the row sources' call shape. The span id is the key:
-- an exporter that retries, or several replicas that each receive a copy,
-- store a call once. Times are epoch milliseconds.
CREATE TABLE otlp_calls (
    span_id            TEXT PRIMARY KEY,  -- lowercase hex
    trace_id           TEXT NOT NULL,     -- lowercase hex
    conversation_id    TEXT,              -- the span's own gen_ai.conversation.id (or session.id)
    fallback_session   TEXT,              -- source.session_fallback's value; NULL: judged alone
    created_ms         BIGINT NOT NULL,   -- the span's start
    model              TEXT NOT NULL,
    failed             BIGINT NOT NULL,   -- 1: span status ERROR
    http_status        BIGINT,
    error_type         TEXT,
    input_tokens       BIGINT NOT NULL,   -- the whole prompt, cache included
    cached_tokens      BIGINT NOT NULL,
    cache_reported     BIGINT NOT NULL,   -- 1: the span carried a cache-read count
    cache_write_tokens BIGINT NOT NULL,
    output_tokens      BIGINT NOT NULL,
    labels             TEXT NOT NULL,     -- JSON object of strings
    received_ms        BIGINT NOT NULL
);
-- Windows are read in (created_ms, span_id) order, page by page.
CREATE INDEX otlp_calls_created ON otlp_calls (created_ms, span_id);
-- Drill-downs read one session, however it was named.
CREATE INDEX otlp_calls_conversation ON otlp_calls (conversation_id);
CREATE INDEX otlp_calls_fallback ON otlp_calls (fallback_session);
CREATE INDEX otlp_calls_trace ON otlp_calls (trace_id, created_ms);

-- A conversation id seen on any span of a trace (the official OpenAI
-- instrumentation writes it on the `invoke_agent` span, not on the model
-- calls under it): the session of the trace's calls that carry none, if it
-- arrived before a window could have read any of them (`applies`, decided
-- once, when it arrives). The first one seen for a trace wins.
CREATE TABLE otlp_conversations (
    trace_id        TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    applies         BIGINT NOT NULL,      -- 1: names the trace's calls
    seen_ms         BIGINT NOT NULL       -- when received
);
CREATE INDEX otlp_conversations_id ON otlp_conversations (conversation_id);
CREATE INDEX otlp_conversations_seen ON otlp_conversations (seen_ms);
