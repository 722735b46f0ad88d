-- Held findings of two kinds (detect::held): no_cache ones waiting for
-- their session to end, and oversized_model ones waiting for their
-- group's next sessions to show whether it moved to a premium model. A
-- session can have one of each, so the kind joins the key; group_move is
-- the run an oversized_model finding waits on, as JSON (NULL for
-- no_cache). SQLite cannot change a primary key in place: the table is
-- rebuilt with its rows.
CREATE TABLE held_findings_new (
    job         TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    quiet_at_ms BIGINT NOT NULL,
    alone       BIGINT NOT NULL,
    finding     TEXT NOT NULL,
    group_move  TEXT,
    PRIMARY KEY (job, session_id, kind)
);
INSERT INTO held_findings_new (job, session_id, kind, quiet_at_ms, alone, finding)
    SELECT job, session_id, 'no_cache', quiet_at_ms, alone, finding FROM held_findings;
DROP TABLE held_findings;
ALTER TABLE held_findings_new RENAME TO held_findings;
