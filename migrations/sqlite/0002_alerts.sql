-- Incidents: findings grouped by (kind, rule, group). Times are data time
-- (window ends), so catch-ups and replays behave like live runs.
CREATE TABLE incidents (
    fingerprint       TEXT PRIMARY KEY,
    kind              TEXT NOT NULL,
    rule              TEXT NOT NULL,
    group_key         TEXT NOT NULL,
    labels            TEXT NOT NULL,
    severity          TEXT NOT NULL,
    status            TEXT NOT NULL,             -- 'firing' | 'resolved'
    started_ms        BIGINT NOT NULL,           -- start of the first window with a finding
    last_finding_ms   BIGINT NOT NULL,           -- end of the latest window with a finding
    session_count     BIGINT NOT NULL,
    impact_usd        DOUBLE PRECISION NOT NULL,
    sequence          BIGINT NOT NULL,           -- notifications enqueued so far, all episodes
    notified_ms       BIGINT,                    -- data time of this episode's last notification
    notified_sessions BIGINT NOT NULL DEFAULT 0, -- session_count at that notification
    last_error        TEXT,                      -- for source_unhealthy: the latest failure
    updated_ms        BIGINT NOT NULL
);

-- Each alert, per channel, is stored before it is sent and marked after.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY,
    idempotency_key TEXT NOT NULL,
    channel         TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    alert           TEXT NOT NULL,
    status          TEXT NOT NULL,               -- 'pending' | 'sent' | 'failed'
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_ms BIGINT NOT NULL,
    deadline_ms     BIGINT NOT NULL,
    last_error      TEXT,
    created_ms      BIGINT NOT NULL,
    sent_ms         BIGINT,
    UNIQUE (idempotency_key, channel)
);
CREATE INDEX outbox_due ON outbox (status, next_attempt_ms);
