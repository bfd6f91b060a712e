package schedule

import "errors"

// ErrInvalid is returned for a spec that does not parse: a bad name, cron expression, time zone,
// catch-up policy or grace.
var ErrInvalid = errors.New("schedule: invalid")

// ErrNotFound is returned for a schedule that is not in jobpipe_schedules.
var ErrNotFound = errors.New("schedule: not found")
