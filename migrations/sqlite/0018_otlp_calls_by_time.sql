-- Received calls are keyed by (created_ms, span_id), the order windows read
-- them in, instead of the span id alone. A span's start never changes, so
-- an exporter's retry or a replica's copy still meets its first copy and is
-- stored once; but a new call now lands at the end of the table's key
-- rather than at a random place, and each export no longer rewrites pages
-- all over a second, random index of span ids. SQLite cannot drop a
-- primary key, so the table is made anew with its rows.
CREATE TABLE otlp_calls_by_time (
    span_id            TEXT NOT NULL,     -- lowercase hex
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
    received_ms        BIGINT NOT NULL,
    provider           TEXT,              -- gen_ai.provider.name
    instrumentation    TEXT               -- JSON [service.name, scope name, scope version]
);
INSERT INTO otlp_calls_by_time
    SELECT span_id, trace_id, conversation_id, fallback_session, created_ms, model, failed,
           http_status, error_type, input_tokens, cached_tokens, cache_reported,
           cache_write_tokens, output_tokens, labels, received_ms, provider, instrumentation
    FROM otlp_calls ORDER BY created_ms, span_id;
DROP TABLE otlp_calls;
ALTER TABLE otlp_calls_by_time RENAME TO otlp_calls;
-- Windows are read in (created_ms, span_id) order, page by page; the key.
CREATE UNIQUE INDEX otlp_calls_created ON otlp_calls (created_ms, span_id);
-- Drill-downs read one session, however it was named.
CREATE INDEX otlp_calls_conversation ON otlp_calls (conversation_id);
CREATE INDEX otlp_calls_fallback ON otlp_calls (fallback_session);
CREATE INDEX otlp_calls_trace ON otlp_calls (trace_id, created_ms);
