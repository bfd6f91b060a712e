package limits_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
	"github.com/jobpipe/jobpipe/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The kinds of the tests, one for each shape of key.
type (
	// webhook has a one-column key and a configured key limit of 3.
	webhook struct {
		CustomerID int64  `jobpipe:"customer_id,key"`
		URL        string `jobpipe:"url"`
	}
	// cleanup has no key: it has a total limit only.
	cleanup struct {
		Target string `jobpipe:"target"`
	}
	// tenantSync has a key of three columns: its key text is a JSON array.
	tenantSync struct {
		Tenant string `jobpipe:"tenant,key"`
		Shard  int64  `jobpipe:"shard,key"`
		Live   bool   `jobpipe:"live,key"`
	}
	// fresh is keyed, but registered only by the DDL that creates its table, as a migration from
	// "jobpipe kind new" does: no dispatcher has recorded its configured key limit yet.
	fresh struct {
		UserID int64 `jobpipe:"user_id,key"`
	}
)

// setup gives the test a migrated schema of its own with the four kinds, nothing stored in the limit
// tables.
func setup(t *testing.T) *testenv.Schema {
	t.Helper()
	s := testenv.NewSchema(t)
	if err := migrations.Up(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
	createKind[webhook](t, s, "webhook", jobinfo.KeyLimit(3))
	createKind[cleanup](t, s, "cleanup")
	createKind[tenantSync](t, s, "tenant_sync")
	createTable(t, s, jobinfo.MustDefine[fresh]("fresh").TableSpec()) // not registered: see fresh
	return s
}

// createKind defines kind name from T, creates its table and registers it, as a dispatcher that
// starts with it does.
func createKind[T any](t *testing.T, s *testenv.Schema, name string, opts ...jobinfo.Option) *jobinfo.Info {
	t.Helper()
	kind, err := jobinfo.Define[T](name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, s, kind.TableSpec())
	if err := kind.Register(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
	return kind.Info()
}

// createTable runs the kind's DDL, which also puts the kind in jobpipe_kinds (without its configured
// key limit: only Register records that).
func createTable(t *testing.T, s *testenv.Schema, spec jobinfo.TableSpec) {
	t.Helper()
	ddl, err := spec.CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
}

// assertRows checks the rows of jobpipe_kind_limits and jobpipe_key_limits exactly, as "kind
// max_running=N key_limit=N paused=B" and "kind "key" key_limit=N paused=B" (NULL for unset).
func assertRows(t *testing.T, s *testenv.Schema, wantKinds, wantKeys []string) {
	t.Helper()
	kinds := queryRows(t, s, `SELECT format('%s max_running=%s key_limit=%s paused=%s', kind,
    coalesce(max_running::text, 'NULL'), coalesce(key_limit::text, 'NULL'), paused::text)
FROM jobpipe_kind_limits ORDER BY kind`)
	keys := queryRows(t, s, `SELECT format('%s %s key_limit=%s paused=%s', kind, to_json(key_value),
    coalesce(key_limit::text, 'NULL'), paused::text)
FROM jobpipe_key_limits ORDER BY kind, key_value`)
	if !slices.Equal(kinds, wantKinds) || !slices.Equal(keys, wantKeys) { // nil and empty are equal
		t.Errorf("stored limits:\n got kinds %q\n     keys  %q\nwant kinds %q\n     keys  %q", kinds, keys, wantKinds, wantKeys)
	}
}

func queryRows(t *testing.T, s *testenv.Schema, sql string) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// kindString shows everything in k but UpdatedAt (whether it is set only) and its Effective*
// results, so that tests compare a Kind in one string.
func kindString(k limits.Kind) string {
	return fmt.Sprintf("%s key=%q max_running=%s key_limit=%s paused=%t configured=%s updated=%t effective_total=%d effective_key=%d",
		k.Name, k.KeyColumns, ptr(k.MaxRunning), ptr(k.KeyLimit), k.Paused, ptr(k.ConfiguredKeyLimit), !k.UpdatedAt.IsZero(),
		k.EffectiveMaxRunning(), k.EffectiveKeyLimit(limits.Key{}))
}

// keyString is kindString for a Key.
func keyString(k limits.Key) string {
	return fmt.Sprintf("%s %q limit=%s paused=%t updated=%t", k.Kind, k.Value, ptr(k.Limit), k.Paused, !k.UpdatedAt.IsZero())
}

func ptr(p *int) string {
	if p == nil {
		return "nil"
	}
	return strconv.Itoa(*p)
}

func intp(n int) *int { return &n }
