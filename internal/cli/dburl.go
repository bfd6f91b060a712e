package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// defaultDatabaseURL is the database of a local PostgreSQL that the postgres user may use without
	// a password: the fallback when neither --database-url nor DATABASE_URL is given.
	defaultDatabaseURL = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	// databaseURLForm is shown when a URL is malformed.
	databaseURLForm = "postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=disable"
	// connectTimeout bounds connecting when the URL sets no connect_timeout: an unreachable host
	// should fail in seconds, not hang until the operating system gives up.
	connectTimeout = 5 * time.Second
)

// databaseURLFlag defines --database-url on fs. Every command that connects uses it and
// env.connect, so all of them find the database alike.
func databaseURLFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", "", "PostgreSQL connection URL (default $DATABASE_URL, else "+defaultDatabaseURL+")")
}

// databaseURL is a connection URL and where it came from, for messages.
type databaseURL struct {
	value string
	from  string // "--database-url", "DATABASE_URL" or "the default"
}

// fromDefault is databaseURL.from for the fallback URL.
const fromDefault = "the default"

// databaseURL picks the URL: the flag's value, else $DATABASE_URL, else the default.
func (e *env) databaseURL(flagValue string) databaseURL {
	if flagValue != "" {
		return databaseURL{flagValue, "--database-url"}
	}
	if v := e.Getenv("DATABASE_URL"); v != "" {
		return databaseURL{v, "DATABASE_URL"}
	}
	if e.defaultDatabaseURL != "" {
		return databaseURL{e.defaultDatabaseURL, fromDefault}
	}
	return databaseURL{defaultDatabaseURL, fromDefault}
}

// usedDatabase is the database a command connected to, as the server names it, for messages that
// must say where a command looked: the default URL in particular is easy to use without noticing.
type usedDatabase struct {
	name   string // current_database()
	schema string // current_schema(): the first schema of the search_path that exists; "" for none
	addr   string // host:port
	from   string // where the URL came from, as databaseURL.from
}

// String names the database, its schema and its address.
func (d *usedDatabase) String() string {
	schema := "where no schema of the search_path exists"
	if d.schema != "" {
		schema = fmt.Sprintf("schema %q", d.schema)
	}
	return fmt.Sprintf("database %q, %s, on %s", d.name, schema, d.addr)
}

// origin says where the URL came from.
func (d *usedDatabase) origin() string {
	if d.from == fromDefault {
		return "the default URL, as neither --database-url nor DATABASE_URL is set"
	}
	return "URL from " + d.from
}

// poolConfig parses u. Its error never contains the URL, which may hold a password.
func (u databaseURL) poolConfig() (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(u.value)
	if err != nil {
		return nil, fmt.Errorf("the database URL (from %s) is malformed: %s; write it as %s",
			u.from, malformedReason(err), databaseURLForm)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	return cfg, nil
}

// malformedReason says what is wrong with a URL that failed to parse, without quoting the URL.
func malformedReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		// url.Error quotes the whole URL; its cause names only the bad part.
		return ue.Err.Error()
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		// "cannot parse `URL`: REASON": keep the reason only.
		msg := pe.Error()
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			return msg[i+len("`: "):]
		}
	}
	return "it cannot be parsed"
}

// connect opens a pool on the URL chosen by flagValue (see env.databaseURL) and checks that the
// database answers. The caller closes the pool.
func (e *env) connect(ctx context.Context, flagValue string) (*pgxpool.Pool, error) {
	u := e.databaseURL(flagValue)
	cfg, err := u.poolConfig()
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the database (URL from %s): %w", u.from, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectError(u, cfg, err)
	}
	e.used = &usedDatabase{addr: fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port), from: u.from,
		name: cfg.ConnConfig.Database}
	// The server's own names, search_path applied; a failure leaves the URL's database name.
	_ = pool.QueryRow(ctx, `SELECT current_database(), coalesce(current_schema(), '')`).Scan(&e.used.name, &e.used.schema)
	return pool, nil
}

// connectError says why connecting failed and what to do about it.
func connectError(u databaseURL, cfg *pgxpool.Config, err error) error {
	addr := fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The server answered and refused: the URL reaches PostgreSQL but says the wrong thing.
		return &wrapped{fmt.Sprintf("PostgreSQL at %s refused the connection (URL from %s): %s; "+
			"check the user, password and database name in the URL", addr, u.from, pe.Error()), err}
	}
	return &wrapped{fmt.Sprintf("PostgreSQL at %s is unreachable (URL from %s): %s; "+
		"start PostgreSQL at %s or point --database-url or DATABASE_URL at a running server",
		addr, u.from, dialCause(err), addr), err}
}

// dialCause is the one line that says why a connection failed. pgconn's own message spans a line
// per address tried (the same address twice with sslmode=prefer) and names user and database,
// which are not the problem.
func dialCause(err error) string {
	var op *net.OpError
	switch {
	case errors.As(err, &op):
		return op.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within the connect timeout"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// wrapped is an error with a message of its own that still unwraps to its cause.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
