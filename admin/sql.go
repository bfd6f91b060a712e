package admin

// The package's static statements. Statements over a kind's table are built in the files that use
// them, from the registry's sanitised identifiers.
const (
	kindsSQL = `SELECT name, table_schema, table_name, unique_columns, key_columns, job_order, max_attempts, key_limit
FROM jobpipe_kinds`

	// $1 is the sanitised table name; to_regclass resolves it on the search path as the dispatcher's
	// statements do, and gives NULL (no rows) for a missing table.
	columnsSQL = `SELECT a.attname::text, t.typname::text, NOT a.attnotnull, a.atthasdef OR a.attidentity <> '',
	format_type(a.atttypid, a.atttypmod), a.atttypmod
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

	// probeIntervalSQL asks PostgreSQL to read $1 as an interval.
	probeIntervalSQL = `SELECT $1::text::interval IS NOT NULL`
)
