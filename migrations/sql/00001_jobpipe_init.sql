-- jobpipe's shared tables: the registry of kinds and the dynamic limits.
-- Applied migrations are never edited: later changes come as new files.

-- +goose Up
CREATE TABLE jobpipe_kinds (
    name           text PRIMARY KEY CHECK (name ~ '^[a-z_][a-z0-9_]{0,47}$'),
    table_schema   text,
    table_name     text NOT NULL,
    unique_columns text[] NOT NULL DEFAULT '{}',
    key_columns    text[] NOT NULL DEFAULT '{}',
    job_order      text NOT NULL DEFAULT 'created' CHECK (job_order IN ('created', 'process_after')),
    max_attempts   integer CHECK (max_attempts > 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE jobpipe_kinds IS 'jobpipe: one row per job kind and its table';

-- Limits changed at runtime. NULL means "use the kind's configured default".
CREATE TABLE jobpipe_kind_limits (
    kind        text PRIMARY KEY REFERENCES jobpipe_kinds (name) ON DELETE CASCADE,
    max_running integer CHECK (max_running >= 0),
    key_limit   integer CHECK (key_limit >= 0),
    paused      boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE jobpipe_kind_limits IS 'jobpipe: per kind running limits; 0 or paused halts the kind';

CREATE TABLE jobpipe_key_limits (
    kind       text NOT NULL REFERENCES jobpipe_kinds (name) ON DELETE CASCADE,
    key_value  text NOT NULL,
    key_limit  integer CHECK (key_limit >= 0),
    paused     boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key_value)
);

COMMENT ON TABLE jobpipe_key_limits IS 'jobpipe: per key overrides of the running limit; 0 or paused halts the key';

-- +goose Down
DROP TABLE jobpipe_key_limits;
DROP TABLE jobpipe_kind_limits;
DROP TABLE jobpipe_kinds;
