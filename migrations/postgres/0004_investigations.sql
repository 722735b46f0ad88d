-- One row per investigation: the whole run (transcript, usage, cost) as JSON,
-- keyed by the notification it explains, so a restart reuses it instead of
-- paying for it again.
CREATE TABLE investigations (
    idempotency_key TEXT PRIMARY KEY,
    fingerprint     TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    created_ms      BIGINT NOT NULL,
    cost_usd        DOUBLE PRECISION NOT NULL,
    stop_reason     TEXT NOT NULL,
    alert_json      TEXT NOT NULL,
    step_log        TEXT NOT NULL
);
CREATE INDEX investigations_created ON investigations (created_ms);
