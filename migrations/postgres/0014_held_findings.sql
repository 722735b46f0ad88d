-- no_cache findings of sessions still going at their window's end, held
-- until a later window shows how the session went on (detect::held): one
-- row per job and session, with when a cache lifetime will have passed
-- since the session's last call, whether the finding counted alone
-- (1: held one window) or rests on a single missed read (0: held until
-- the session ends), and the finding as JSON. Replaced by the commit of
-- each window that changes them, in its transaction.
CREATE TABLE held_findings (
    job         TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    quiet_at_ms BIGINT NOT NULL,
    alone       BIGINT NOT NULL,
    finding     TEXT NOT NULL,
    PRIMARY KEY (job, session_id)
);
