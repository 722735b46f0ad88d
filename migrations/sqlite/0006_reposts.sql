-- Firing alerts are posted again to receivers that forget them otherwise
-- (Alertmanager). `starts_ms` is the incident episode a firing notification
-- belongs to (its alert's starts_at; NULL for resolved notifications), and
-- `reposted_ms` when it was last posted again.
ALTER TABLE outbox ADD COLUMN starts_ms BIGINT;
ALTER TABLE outbox ADD COLUMN reposted_ms BIGINT;

-- The current firing notification of every firing incident goes on being
-- posted after the upgrade.
UPDATE outbox SET starts_ms = (
    SELECT i.started_ms FROM incidents i
    WHERE i.fingerprint = outbox.fingerprint AND i.status = 'firing'
      AND outbox.idempotency_key = i.fingerprint || ':firing:' || CAST(i.sequence AS TEXT)
);
