-- Until when (data time) a finding continues the episode of a resolved
-- incident instead of opening a new one (alerts.reopen_within after its
-- resolution). NULL: a new finding opens a new episode.
ALTER TABLE incidents ADD COLUMN reopen_until_ms BIGINT;
