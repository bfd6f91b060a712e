package migrations

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// Up applies jobpipe's own migrations to the current schema of pool (the first existing schema of
// its search_path). It is idempotent and safe to call concurrently: later calls find nothing to
// apply. Applications that also migrate their own directory use a [Runner] instead.
func Up(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	// Closing db releases its connections to pool and leaves pool open.
	defer db.Close()
	r, err := NewRunner(ctx, db, "")
	if err != nil {
		return err
	}
	_, err = r.Up(ctx)
	return err
}
