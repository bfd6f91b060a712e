package admin_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// The kinds of the tests, one for each shape of key.
type (
	// notice has a one-column key (user_id), until-executed uniqueness on event_id, and 3 attempts.
	notice struct {
		UserID  int64  `jobpipe:"user_id,key"`
		EventID string `jobpipe:"event_id,unique"`
		Body    string `jobpipe:"body"`
	}
	// sweep has neither key nor unique fields.
	sweep struct {
		Target string `jobpipe:"target"`
	}
	// tenantSync has a key of two columns: its key text is a JSON array.
	tenantSync struct {
		Tenant string `jobpipe:"tenant,key"`
		Shard  int64  `jobpipe:"shard,key"`
	}
)

var (
	notices     = jobinfo.MustDefine[notice]("notice", jobinfo.MaxAttempts(3))
	sweeps      = jobinfo.MustDefine[sweep]("sweep", jobinfo.MaxAttempts(2))
	tenantSyncs = jobinfo.MustDefine[tenantSync]("tenant_sync")
)

// setup gives the test a migrated schema of its own with the kinds notice, sweep and tenant_sync,
// their tables empty.
func setup(t *testing.T) *testenv.Schema {
	t.Helper()
	s := testenv.NewSchema(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	register(t, s, notices)
	register(t, s, sweeps)
	register(t, s, tenantSyncs)
	return s
}

// register creates the kind's table and records the kind, as a dispatcher that starts with it does.
func register[T any](t *testing.T, s *testenv.Schema, kind *jobinfo.Kind[T]) {
	t.Helper()
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	exec(t, s, ddl)
	if err := kind.Register(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
}

// createSpec creates a kind's table from a spec written by hand, as `jobpipe kind new` does: the
// registry row comes with it, without max attempts.
func createSpec(t *testing.T, s *testenv.Schema, spec jobinfo.TableSpec) {
	t.Helper()
	ddl, err := spec.CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	exec(t, s, ddl)
}

func load(t *testing.T, s *testenv.Schema, name string) *admin.Kind {
	t.Helper()
	k, err := admin.LoadKind(context.Background(), s.Pool, name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func exec(t *testing.T, s *testenv.Schema, sql string, args ...any) {
	t.Helper()
	if _, err := s.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

func queryRows(t *testing.T, s *testenv.Schema, sql string, args ...any) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func queryInt(t *testing.T, s *testenv.Schema, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return n
}

// Pipeline columns that put a row in a state, for UPDATE ... SET.
const (
	setRunning = `attempts_made = attempts_made + 1, started_at = now(), lease_expires_at = now() + interval '1 minute',
	lease_owner = 'node-a', lock_token = lock_token + 1`
	setProcessed = `attempts_made = attempts_made + 1, started_at = now(), lock_token = lock_token + 1, processed_at = now()`
	setFailed    = `attempts_made = attempts_made + 1, started_at = now(), lock_token = lock_token + 1, failed_at = now(), last_error = 'boom'`
)

// pipelineRows shows every row of table by id as "id state attempts=N token=N slot=S after=A error=E":
// the state from the pipeline columns as docs/architecture.md defines it, A "null", "now" (at most
// a minute ago), "past" or "future".
func pipelineRows(t *testing.T, s *testenv.Schema, table string) []string {
	t.Helper()
	return queryRows(t, s, `SELECT format('%s %s attempts=%s token=%s slot=%s after=%s error=%s', id,
	CASE WHEN processed_at IS NOT NULL THEN 'processed' WHEN failed_at IS NOT NULL THEN 'failed'
		WHEN lease_expires_at IS NOT NULL THEN 'running' ELSE 'waiting' END,
	attempts_made, lock_token, coalesce(lock_slot::text, '-'),
	CASE WHEN process_after IS NULL THEN 'null' WHEN process_after > now() THEN 'future'
		WHEN process_after > now() - interval '1 minute' THEN 'now' ELSE 'past' END,
	coalesce(last_error, '-'))
FROM `+pgx.Identifier{table}.Sanitize()+` ORDER BY id`)
}

func assertRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// listen returns a connection listening on the channel, and a function that waits for a notification
// with the payload.
func listen(t *testing.T, s *testenv.Schema, channel string) func(payload string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, s.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return func(payload string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("no notification %q on %s: %v", payload, channel, err)
			}
			if n.Payload == payload {
				return
			}
		}
	}
}
