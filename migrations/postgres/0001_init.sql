-- Processing progress per job: every window before `watermark_ms` is done.
CREATE TABLE jobs (
    job          TEXT PRIMARY KEY,
    watermark_ms BIGINT NOT NULL,
    updated_ms   BIGINT NOT NULL
);

-- One row per processed window (and per window that failed and waits).
CREATE TABLE windows (
    job          TEXT NOT NULL,
    start_ms     BIGINT NOT NULL,
    end_ms       BIGINT NOT NULL,
    status       TEXT NOT NULL,            -- 'done' | 'failed'
    sessions     BIGINT NOT NULL DEFAULT 0,
    pages        BIGINT NOT NULL DEFAULT 0,
    findings     BIGINT NOT NULL DEFAULT 0,
    attempts     BIGINT NOT NULL DEFAULT 0,
    last_error   TEXT,
    updated_ms   BIGINT NOT NULL,
    PRIMARY KEY (job, start_ms)
);

-- Per peer group: a bounded sample of recent sessions (JSON).
CREATE TABLE baselines (
    group_key  TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- Models seen carrying traffic, to tell premium models from the cheap ones in use.
CREATE TABLE models_seen (
    model        TEXT PRIMARY KEY,
    last_seen_ms BIGINT NOT NULL
);

-- One row per (session, kind): a session seen again later updates its figures.
CREATE TABLE findings (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id      TEXT NOT NULL,
    kind            TEXT NOT NULL,
    rule            TEXT NOT NULL,
    severity        TEXT NOT NULL,
    group_key       TEXT NOT NULL,
    labels          TEXT NOT NULL,
    window_start_ms BIGINT NOT NULL,
    window_end_ms   BIGINT NOT NULL,
    last_window_ms  BIGINT NOT NULL,
    cost_usd        DOUBLE PRECISION NOT NULL,
    impact_usd      DOUBLE PRECISION NOT NULL,
    evidence        TEXT NOT NULL,
    explanation     TEXT NOT NULL,
    created_ms      BIGINT NOT NULL,
    updated_ms      BIGINT NOT NULL,
    UNIQUE (session_id, kind)
);
CREATE INDEX findings_window ON findings (window_start_ms);
