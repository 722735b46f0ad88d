-- What the traffic showed of each model's prompt cache (detect::caching):
-- the smallest cache reads, the longest pauses after which a call still
-- read, and how the model's sessions cache, as JSON. A window's commit
-- merges what it saw into its models' rows; restarts and replicas share
-- them.
CREATE TABLE model_caching (
    model TEXT PRIMARY KEY,
    facts TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
