-- Silences: an operator's "tell nobody about these incidents for a while".
-- Kept here so every replica honours the same ones. Times are wall time.
-- AUTOINCREMENT: an id, once given, never names another silence.
CREATE TABLE silences (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT,                -- the incident kind matched; NULL: any
    group_key       TEXT,                -- the peer group matched; NULL: any
    matchers        TEXT NOT NULL,       -- JSON object: labels an incident must all carry
    starts_ms       BIGINT NOT NULL,
    ends_ms         BIGINT NOT NULL,     -- active in [starts_ms, ends_ms)
    expired_ms      BIGINT,              -- set when ended early by `silence expire`
    author          TEXT NOT NULL,
    reason          TEXT NOT NULL,
    created_ms      BIGINT NOT NULL,
    end_noticed_ms  BIGINT               -- when an evaluation noticed (and logged) its end
);
CREATE INDEX silences_ends ON silences (ends_ms);

-- Notifications an evaluation held back because a silence matched their
-- incident: one row per silence, incident episode and status.
CREATE TABLE silenced_alerts (
    silence_id  BIGINT NOT NULL,
    fingerprint TEXT NOT NULL,
    episode_ms  BIGINT NOT NULL,         -- start of the incident episode
    status      TEXT NOT NULL,           -- 'firing' | 'resolved'
    kind        TEXT NOT NULL,
    title       TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,         -- the first evaluation that held it back
    PRIMARY KEY (silence_id, fingerprint, episode_ms, status)
);
CREATE INDEX silenced_alerts_fingerprint ON silenced_alerts (fingerprint);
