-- The whole record of each investigation (every tool result as the model saw
-- it), beside the shorter report its alert carries, and lookups by run id
-- for `costwatch investigation show`. Rows stored before hold NULL.
ALTER TABLE investigations ADD COLUMN record_json TEXT;
CREATE INDEX investigations_run_id ON investigations (run_id);
