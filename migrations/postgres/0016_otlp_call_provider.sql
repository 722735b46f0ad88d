-- The provider that served a received call (gen_ai.provider.name): a
-- prompt cache lives with one provider, so a no_cache finding names the
-- calls that missed it because the conversation moved to another. NULL
-- where the span did not say, and for calls stored before this column.
ALTER TABLE otlp_calls ADD COLUMN provider TEXT;
