-- Keyed kinds waiting for their Redis lock nodes. A dispatcher whose lock calls for a kind keep
-- failing for want of a quorum of nodes records it here (one row per kind and dispatcher), refreshes
-- the row every minute while it lasts, and deletes it when the calls succeed again or it stops. The
-- command line and the dashboard show the kind as waiting; they ignore rows not refreshed for two
-- minutes, which a dispatcher that crashed left behind.

-- +goose Up
CREATE TABLE jobpipe_lock_waits (
    kind       text NOT NULL REFERENCES jobpipe_kinds (name) ON DELETE CASCADE,
    -- the dispatcher's Config.NodeName
    node_name  text NOT NULL,
    -- when its lock calls for the kind began to fail, on the dispatcher's clock
    since      timestamptz NOT NULL,
    -- the nodes that do not answer and their errors, or the lock calls' error when every node answers
    error      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, node_name)
);

COMMENT ON TABLE jobpipe_lock_waits IS 'jobpipe: keyed kinds whose dispatchers wait for a quorum of Redis lock nodes';

-- +goose Down
DROP TABLE jobpipe_lock_waits;
