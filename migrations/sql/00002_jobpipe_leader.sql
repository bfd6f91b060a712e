-- The lease that elects one dispatcher node to run maintenance (rescue of expired leases, and later
-- pruning and recurring jobs). A node holds it while expires_at is in the future and renews it well
-- before then; any node may take it once it has expired.

-- +goose Up
CREATE TABLE jobpipe_leaders (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    elected_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

COMMENT ON TABLE jobpipe_leaders IS 'jobpipe: leader leases for maintenance work';

-- +goose Down
DROP TABLE jobpipe_leaders;
