-- The flows that have a failure, for a redrive to find those it resumes (`flows_redrive_*`).
CREATE INDEX IF NOT EXISTS tasuki_flows_failed ON tasuki_flows (id) WHERE failure IS NOT NULL;
