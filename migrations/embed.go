package migrations

import (
	"embed"
	"io/fs"

	"github.com/pressly/goose/v3"
)

const (
	// VersionTable is the goose version table that records jobpipe's own migrations. It is not
	// goose's default so that an application's goose migrations in the same schema keep theirs.
	VersionTable = "jobpipe_db_version"

	// AppVersionTable is the goose version table of an application's migration directory: goose's
	// default, so a directory migrated by the goose command before keeps its history.
	AppVersionTable = goose.DefaultTablename
)

// Source names, as reported in [Result], [MigrationStatus] and [SourceVersion].
const (
	// SourceJobpipe is jobpipe's own embedded migrations.
	SourceJobpipe = "jobpipe"
	// SourceApp is the application's migration directory given to [NewRunner].
	SourceApp = "app"
)

//go:embed sql/*.sql
var embedded embed.FS

// ownDir is how messages name the place jobpipe's migrations come from.
const ownDir = "jobpipe's embedded migrations (migrations/sql)"

// FS returns jobpipe's embedded migrations at the root of a file system, exactly what goose reads:
// for applications that run goose themselves (recording versions in [VersionTable], so a later
// [Runner] or [Up] finds them applied), and for tests that follow the migration list as it grows.
func FS() fs.FS {
	sub, err := fs.Sub(embedded, "sql")
	if err != nil {
		// fs.Sub fails only for an invalid path, and "sql" is valid.
		panic(err)
	}
	return sub
}

// ownFS returns jobpipe's migrations at the root of a file system, where goose looks for them.
func ownFS() fs.FS { return FS() }
