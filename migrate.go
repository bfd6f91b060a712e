package jobpipe

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// Migrate is migrations.Up: it applies jobpipe's own tables to the current schema of pool. It is
// idempotent and safe to call concurrently. A kind's table is the application's migration to run
// (`jobpipe kind new` writes it).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error { return migrations.Up(ctx, pool) }

// ErrNotMigrated is jobinfo.ErrNotMigrated: jobpipe's own tables are missing (see Migrate).
var ErrNotMigrated = jobinfo.ErrNotMigrated
