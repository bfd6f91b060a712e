-- The configured per-key limit of each kind, recorded at registration so that tools can show the
-- limit in force where nothing is stored in jobpipe_kind_limits.
--
-- Every change to a dynamic limit notifies channel jobpipe_limits with the kind's name, whoever makes
-- it (the jobpipe CLI, the limits package, or plain SQL), so that running dispatchers apply it at once
-- instead of at their next cache refresh.

-- +goose Up
ALTER TABLE jobpipe_kinds ADD COLUMN key_limit integer CHECK (key_limit >= 0);

-- +goose StatementBegin
CREATE FUNCTION jobpipe_limits_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('jobpipe_limits', OLD.kind);
    ELSE
        PERFORM pg_notify('jobpipe_limits', NEW.kind);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobpipe_kind_limits_notify AFTER INSERT OR UPDATE OR DELETE ON jobpipe_kind_limits
    FOR EACH ROW EXECUTE FUNCTION jobpipe_limits_notify();

CREATE TRIGGER jobpipe_key_limits_notify AFTER INSERT OR UPDATE OR DELETE ON jobpipe_key_limits
    FOR EACH ROW EXECUTE FUNCTION jobpipe_limits_notify();

-- +goose Down
DROP TRIGGER jobpipe_key_limits_notify ON jobpipe_key_limits;
DROP TRIGGER jobpipe_kind_limits_notify ON jobpipe_kind_limits;
DROP FUNCTION jobpipe_limits_notify();
ALTER TABLE jobpipe_kinds DROP COLUMN key_limit;
