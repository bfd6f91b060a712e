// Package metrics exports jobpipe's metrics to Prometheus.
//
// Two sources feed them:
//
//   - A Collector (NewCollector) reads each registered kind's load from PostgreSQL when Prometheus
//     scrapes: jobpipe_running_jobs, jobpipe_max_running_jobs, jobpipe_remaining_work_count and
//     jobpipe_keys_at_limit, one series per kind. Any process with a database handle can serve
//     them (the jobpipe command's serve does); they describe the whole cluster, so serve them from
//     one place, or aggregate with max rather than sum.
//   - An Observer (NewObserver), set as dispatcher.Config.Observer, counts what that process's
//     dispatchers do: jobpipe_jobs_finished_total{kind,outcome}, jobpipe_job_duration_seconds,
//     jobpipe_schedule_lag_seconds, jobpipe_lock_acquire_total{kind,result},
//     jobpipe_rescued_jobs_total, jobpipe_key_runs_total{kind,ended},
//     jobpipe_claim_pauses_missed_total, and the gauges jobpipe_lock_nodes_up, jobpipe_lock_nodes and
//     jobpipe_lock_quorum_waiting{kind} (Redis lock nodes answering, and kinds waiting for a quorum
//     of them). Serve it from every worker process and sum.
//
// Labels are only kind, outcome (dispatcher.Outcomes), result (dispatcher.LockResults) and ended
// (dispatcher.RunEnds): never a key, a job id, a node or an error text, so the number of series is
// bounded by the number of kinds whatever the traffic.
//
// Handler and Mount serve a registry's metrics on /metrics in the user's own http.ServeMux.
package metrics
