// Package migrations owns jobpipe's own database schema and the runner that applies it.
//
// jobpipe's shared tables (the registry of job kinds in jobpipe_kinds and the dynamic limits in
// jobpipe_kind_limits and jobpipe_key_limits) are created by the goose SQL migrations embedded from
// sql/. Applied migrations are never edited; later changes come as new files.
//
// jobpipe records its versions in its own goose version table, jobpipe_db_version ([VersionTable]),
// so an application that uses goose's default table goose_db_version ([AppVersionTable]) for its own
// migrations in the same schema does not collide with it.
//
// [Up] applies jobpipe's migrations to a pool and is what tests, the demo and the benchmarks use. A
// [Runner] handles jobpipe's migrations together with an application's migration directory, in the
// order their dependencies demand: up applies jobpipe's first, because the application's per-kind
// tables refer to jobpipe's; down rolls back one step of the application's before touching
// jobpipe's. [Create] writes a new, empty migration file for an application.
//
// Every write takes a PostgreSQL session advisory lock (one per schema and version table), so two
// concurrent runs of "jobpipe migrate up" against the same schema apply each migration once.
package migrations
