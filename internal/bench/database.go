package bench

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// databaseMarker is the comment a run puts on a database it creates: a database without it was not
// made by a run, and is never dropped.
const databaseMarker = "jobpipe bench: dropped at the end of the run"

// ownDatabase are the scenarios that run in a database of their own, created for the run and named
// after its schema: rate reads its transactions in pg_stat_database, which counts a whole
// database's, and other clients of a shared database would count too.
var ownDatabase = map[string]bool{"rate": true}

// createDatabase creates the database name afresh on the server of cfg, and returns cfg pointed at
// it and the function that drops it (unless keep). It refuses a database it did not create.
func createDatabase(ctx context.Context, cfg *pgxpool.Config, name string, keep bool, log io.Writer) (*pgxpool.Config, func(context.Context), error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var comment *string
	err = conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&comment)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, nil, err
	case comment == nil || *comment != databaseMarker:
		return nil, nil, fmt.Errorf("database %s exists and was not made by jobpipe bench: pick another --schema (this scenario runs in a database named after it)", name)
	}
	ident := pgx.Identifier{name}.Sanitize()
	// CREATE and DROP DATABASE refuse to run in a transaction block, so one statement per call.
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)", "CREATE DATABASE " + ident,
		"COMMENT ON DATABASE " + ident + " IS '" + databaseMarker + "'"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
				return nil, nil, fmt.Errorf("this scenario runs in a database of its own, so that pg_stat_database counts its "+
					"transactions alone, and creating database %s was refused: %w: give the user CREATEDB (ALTER ROLE ... CREATEDB)", name, err)
			}
			return nil, nil, fmt.Errorf("creating database %s: %w", name, err)
		}
	}
	own := cfg.Copy()
	own.ConnConfig.Database = name
	drop := func(ctx context.Context) {
		if keep {
			fmt.Fprintf(log, "bench: database %s kept (--keep)\n", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			conn.Close(ctx)
		}
		if err != nil {
			fmt.Fprintf(log, "bench: dropping database %s: %v\n", name, err)
		}
	}
	return own, drop, nil
}
