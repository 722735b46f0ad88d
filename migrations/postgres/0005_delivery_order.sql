-- Notifications of one incident reach each channel in order: a row is not
-- claimed while an earlier row of its incident and channel is pending or
-- claimed. This index finds those earlier rows.
CREATE INDEX outbox_sequence ON outbox (fingerprint, channel, id);
