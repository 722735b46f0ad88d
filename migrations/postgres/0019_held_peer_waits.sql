-- A no_cache finding of a group with too few peers to compare waits for
-- the group's next sessions (detect::held): peer_wait is what it waits
-- for, as JSON (NULL for a finding that waits only for its session to
-- end).
ALTER TABLE held_findings ADD COLUMN peer_wait TEXT;
