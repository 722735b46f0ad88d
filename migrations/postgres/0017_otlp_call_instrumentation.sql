-- What wrote a received call's usage: the span's service.name and
-- instrumentation scope (name and version), as a JSON array. The official
-- OpenAI instrumentation leaves a cache-read count of 0 out, so a call
-- without one reads 0 cached where the same instrumentation reported cache
-- reads on other calls. NULL for spans without a scope name, and for calls
-- stored before this column (they stay "not reported").
ALTER TABLE otlp_calls ADD COLUMN instrumentation TEXT;
