-- Held findings of two kinds (detect::held): no_cache ones waiting for
-- their session to end, and oversized_model ones waiting for their
-- group's next sessions to show whether it moved to a premium model. A
-- session can have one of each, so the kind joins the key; group_move is
-- the run an oversized_model finding waits on, as JSON (NULL for
-- no_cache).
ALTER TABLE held_findings ADD COLUMN kind TEXT NOT NULL DEFAULT 'no_cache';
ALTER TABLE held_findings ADD COLUMN group_move TEXT;
ALTER TABLE held_findings DROP CONSTRAINT held_findings_pkey;
ALTER TABLE held_findings ADD PRIMARY KEY (job, session_id, kind);
ALTER TABLE held_findings ALTER COLUMN kind DROP DEFAULT;
