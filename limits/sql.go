package limits

// The statements of the package. Those with %s take the column to change, one of the constant
// names in limits.go, never user input.
const (
	keyColumnsSQL = `SELECT key_columns FROM jobpipe_kinds WHERE name = $1`

	// $1 kind, $2 value.
	setKindSQL = `INSERT INTO jobpipe_kind_limits (kind, %[1]s) VALUES ($1, $2)
ON CONFLICT (kind) DO UPDATE SET %[1]s = EXCLUDED.%[1]s, updated_at = now()`
	resetKindSQL       = `UPDATE jobpipe_kind_limits SET %s = $2, updated_at = now() WHERE kind = $1`
	deleteEmptyKindSQL = `DELETE FROM jobpipe_kind_limits
WHERE kind = $1 AND max_running IS NULL AND key_limit IS NULL AND NOT paused`

	// $1 kind, $2 key value, $3 value.
	setKeySQL = `INSERT INTO jobpipe_key_limits (kind, key_value, %[1]s) VALUES ($1, $2, $3)
ON CONFLICT (kind, key_value) DO UPDATE SET %[1]s = EXCLUDED.%[1]s, updated_at = now()`
	resetKeySQL       = `UPDATE jobpipe_key_limits SET %s = $3, updated_at = now() WHERE kind = $1 AND key_value = $2`
	deleteEmptyKeySQL = `DELETE FROM jobpipe_key_limits
WHERE kind = $1 AND key_value = $2 AND key_limit IS NULL AND NOT paused`

	// Every registered kind, with what is stored for it (NULLs when nothing is); filtered by a WHERE
	// on k.name or not at all.
	listKindsSQL = `SELECT k.name, k.key_columns, l.max_running, l.key_limit, coalesce(l.paused, false), l.updated_at, k.key_limit
FROM jobpipe_kinds k LEFT JOIN jobpipe_kind_limits l ON l.kind = k.name `
	listKindsOrder = ` ORDER BY k.name`

	listKeysSQL   = `SELECT kind, key_value, key_limit, paused, updated_at FROM jobpipe_key_limits `
	listKeysOrder = ` ORDER BY kind, key_value`
)
