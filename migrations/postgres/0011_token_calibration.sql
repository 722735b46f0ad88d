-- What the prompt-token estimator learned from the model's reported usage,
-- per model and counting method (`o200k_base`, `cl100k_base`, or the
-- bound's `pieces-v1`): a JSON array of at most 64 recent calls (kind,
-- run, raw counts, reported count). Loaded before each investigation and
-- written after it (one upsert per run, merged with what other replicas
-- wrote), so only the first call a deployment ever makes is uncalibrated.
CREATE TABLE token_calibration (
    model        TEXT NOT NULL,
    method       TEXT NOT NULL,
    samples_json TEXT NOT NULL,
    updated_ms   BIGINT NOT NULL,
    PRIMARY KEY (model, method)
);
