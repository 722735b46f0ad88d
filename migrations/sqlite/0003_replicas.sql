-- Leases: a replica holds a named lease (the detection job) until it
-- expires; another replica takes over an expired one.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- Outbox rows are claimed by one replica for a while before sending.
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claim_until_ms BIGINT;

-- The investigation budget per UTC day, shared by every replica.
CREATE TABLE investigation_budget (
    day       TEXT PRIMARY KEY,
    spent_usd DOUBLE PRECISION NOT NULL
);
