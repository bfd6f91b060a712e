package metrics

// Metric names, for dashboards, alerts and tests.
const (
	// RunningJobs is the gauge of a kind's running jobs, across all dispatchers.
	RunningJobs = "jobpipe_running_jobs"
	// MaxRunningJobs is the gauge of a kind's total limit in force: +Inf when it has none, 0 when it
	// is paused or its limit is 0.
	MaxRunningJobs = "jobpipe_max_running_jobs"
	// RemainingWorkCount is the gauge of a kind's jobs not started or waiting to run again: due,
	// scheduled and retrying.
	RemainingWorkCount = "jobpipe_remaining_work_count"
	// KeysAtLimit is the gauge of a kind's keys running as many jobs as their limit allows, or more,
	// counted up to dispatcher.MaxKeysAtLimit.
	KeysAtLimit = "jobpipe_keys_at_limit"
	// ScrapeErrors counts the Collector's failed reads (a kind, or the list of kinds).
	ScrapeErrors = "jobpipe_scrape_errors_total"

	// JobsFinished counts finished attempts by kind and outcome.
	JobsFinished = "jobpipe_jobs_finished_total"
	// JobDuration is the histogram of handler run times by kind and outcome, in seconds.
	JobDuration = "jobpipe_job_duration_seconds"
	// ScheduleLag is the histogram of how late jobs start, by kind, in seconds: the claim's time minus
	// the time the job was due.
	ScheduleLag = "jobpipe_schedule_lag_seconds"
	// LockAcquire counts Redis lock attempts by kind and result (acquired, taken, unavailable).
	LockAcquire = "jobpipe_lock_acquire_total"
	// KeyRuns counts a keyed kind's key runs that ended, by kind and why (ended: one of
	// dispatcher.RunEnds): a run takes about the kind's finished jobs over its runs on average.
	KeyRuns = "jobpipe_key_runs_total"
	// PausesMissed counts a keyed kind's claim passes that went on without pausing their
	// dispatcher's finish statements, which did not end in time (a slow database), by kind: key
	// runs may then end early. A kind's series appears at its first key run's end or missed pause.
	PausesMissed = "jobpipe_claim_pauses_missed_total"
	// RescuedJobs counts jobs taken back after their lease expired, by kind.
	RescuedJobs = "jobpipe_rescued_jobs_total"
	// LockNodesUp is the gauge of Redis lock nodes that answered the latest PING of this process's
	// dispatchers, and LockNodes the gauge of how many nodes they have, each summed over the running
	// dispatchers that watch their nodes (those with a keyed kind): with one such dispatcher, its
	// nodes up and its nodes.
	LockNodesUp = "jobpipe_lock_nodes_up"
	LockNodes   = "jobpipe_lock_nodes"
	// LockQuorumWaiting is the gauge of this process's dispatchers in which a kind's keyed jobs wait
	// for a quorum of Redis lock nodes (its lock calls keep failing), by kind: 0, or 1 per such
	// dispatcher.
	LockQuorumWaiting = "jobpipe_lock_quorum_waiting"
)

// Label names. No other label is ever used.
const (
	LabelKind    = "kind"
	LabelOutcome = "outcome"
	LabelResult  = "result"
	LabelEnded   = "ended"
)
