-- Recurring jobs. A schedule attaches a cron spec to a kind; the elected leader of each schedule
-- enqueues its job at every instant the spec gives. next_run_at persists how far it has got, so that
-- a restart or a change of leader continues from there instead of skipping or repeating instants.
--
-- Each firing is recorded once per schedule and instant, in the transaction that enqueues its job and
-- advances next_run_at: the primary key makes a second firing of one instant impossible, even by two
-- nodes that both believe they lead.

-- +goose Up
CREATE TABLE jobpipe_schedules (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z_][a-z0-9_]{0,47}$'),
    kind        text NOT NULL REFERENCES jobpipe_kinds (name) ON DELETE CASCADE,
    spec        text NOT NULL,
    time_zone   text NOT NULL DEFAULT 'UTC',
    catch_up    text NOT NULL DEFAULT 'last' CHECK (catch_up IN ('none', 'last', 'all')),
    -- how late an instant may fire and still count as on time rather than missed (see catch_up)
    grace       interval NOT NULL DEFAULT '30 seconds',
    -- the job's data columns as a JSON object, for display only: the leader enqueues what its code says
    data        jsonb,
    -- the earliest instant not yet fired (or skipped by the catch-up policy)
    next_run_at timestamptz NOT NULL,
    last_run_at timestamptz,
    last_job_id bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- when the definition (spec, zone, catch-up, grace, kind or data) last changed
    updated_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE jobpipe_schedules IS 'jobpipe: recurring jobs: cron specs, their kind and next run';

CREATE TABLE jobpipe_schedule_firings (
    name     text NOT NULL REFERENCES jobpipe_schedules (name) ON DELETE CASCADE,
    instant  timestamptz NOT NULL,
    job_id   bigint NOT NULL,
    fired_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, instant)
);

COMMENT ON TABLE jobpipe_schedule_firings IS 'jobpipe: one row per schedule and fired instant; kept for a week';

-- +goose Down
DROP TABLE jobpipe_schedule_firings;
DROP TABLE jobpipe_schedules;
