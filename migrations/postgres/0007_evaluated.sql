-- The watermark at the job's last incident evaluation. The next evaluation
-- covers every window committed since (its catch-up summary included), so a
-- crash between a window's commit and the evaluation loses no alert.
ALTER TABLE jobs ADD COLUMN evaluated_ms BIGINT;
UPDATE jobs SET evaluated_ms = watermark_ms;
