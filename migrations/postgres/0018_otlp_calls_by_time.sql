-- Received calls are keyed by (created_ms, span_id), the order windows read
-- them in, instead of the span id alone. A span's start never changes, so
-- an exporter's retry or a replica's copy still meets its first copy and is
-- stored once; but each export no longer rewrites pages all over a second,
-- random index of span ids.
DROP INDEX otlp_calls_created;
CREATE UNIQUE INDEX otlp_calls_created ON otlp_calls (created_ms, span_id);
ALTER TABLE otlp_calls DROP CONSTRAINT otlp_calls_pkey;
