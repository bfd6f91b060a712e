package kindsql

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

type plainJob struct {
	N    int64  `jobpipe:"n"`
	Note string `jobpipe:"note"`
}

type keyedJob struct {
	Account string `jobpipe:"account,key"`
	N       int64  `jobpipe:"n"`
}

type twoKeyJob struct {
	Tenant  string `jobpipe:"tenant,key"`
	Account int64  `jobpipe:"account,key"`
	N       int64  `jobpipe:"n"`
}

type uniqueJob struct {
	UserID int64   `jobpipe:"user_id,unique"`
	Topic  *string `jobpipe:"topic,unique"`
	Text   string  `jobpipe:"text"`
}

type uniqueKeyJob struct {
	Account string `jobpipe:"account,unique"`
	Text    string `jobpipe:"text"`
}

// testKind is a kind's description and the spec of its table.
type testKind struct {
	info *jobinfo.Info
	spec jobinfo.TableSpec
}

func shape[T any](k *jobinfo.Kind[T]) testKind { return testKind{k.Info(), k.TableSpec()} }

// testKinds are the shapes of kind whose statements differ: without a key, with a key of one and of two
// columns, with unique fields that are no key and that are the key, and in process_after order.
func testKinds() []testKind {
	pa := jobinfo.WithOrder(jobinfo.OrderProcessAfter)
	return []testKind{
		shape(jobinfo.MustDefine[plainJob]("sql_plain")),
		shape(jobinfo.MustDefine[plainJob]("sql_plain_due", pa)),
		shape(jobinfo.MustDefine[keyedJob]("sql_keyed")),
		shape(jobinfo.MustDefine[keyedJob]("sql_keyed_due", pa)),
		shape(jobinfo.MustDefine[twoKeyJob]("sql_two_keys")),
		shape(jobinfo.MustDefine[uniqueJob]("sql_unique", jobinfo.NoKey())),
		shape(jobinfo.MustDefine[uniqueKeyJob]("sql_unique_key")),
		shape(jobinfo.MustDefine[uniqueKeyJob]("sql_unique_key_due", pa)),
	}
}

// statement is one rendered statement with arguments of its parameters' types, as SQL literals.
type statement struct {
	template, sql, args string
}

// statementsOf renders every statement of info, with arguments for EXPLAIN EXECUTE.
func statementsOf(info *jobinfo.Info) []statement {
	d := ForDispatcher(info, WriteCodes{Processed: 0, Retry: 1, Failed: 2, Snooze: 3, RunAgain: 4, Release: 5}, "jobpipe_enqueued")
	counts, keysAtLimit := Usage(info, 100)
	batch, maxID := Prune(info)
	name := "'" + info.Name + "'"
	out := []statement{
		{"claimPlain", d.ClaimPlain, "1000, 300, 'node', 0"},
		{"countRunning", d.CountRunning, ""},
		{"countDue", d.CountDue, ""},
		{"extend", d.Extend, "1, 1, 300"},
		{"nextDueAndNow", d.NextDueAndNow, ""},
		{"rescue", d.Rescue, "25, '{1,2,3}', 60"},
		{"usageCounts", counts, ""},
		{"pruneBatch", batch, "0, 1000, 86400, 604800"},
		{"pruneMaxID", maxID, ""},
	}
	a := ForAdmin(info, info.Columns(), 1000)
	out = append(out,
		statement{"adminJobs", a.Jobs, ""},
		statement{"adminSummary", a.Summary, ""},
		statement{"adminAction", a.Retry, "'{1,2}', 'jobpipe', " + name},
		statement{"adminAction", a.Discard, "'{1,2}', 'jobpipe', " + name + ", 'discarded'"},
		statement{"adminAction", a.RunNow, "'{1,2}', 'jobpipe', " + name},
		statement{"adminCountFailed", a.CountFailed, ""},
		statement{"adminNextFailed", a.NextFailed, "0, 1000"},
	)
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(info.Columns())+2), ", ")
	for _, dup := range []Duplicate{KeepDuplicate, ReplaceDuplicate, ReplaceDuplicateData, ReplaceDuplicateSchedule} {
		out = append(out, statement{"insert", Insert(info, dup, "jobpipe"), nulls}, statement{"insert", Insert(info, dup, ""), nulls})
	}
	if len(info.Key) == 0 {
		return append(out, statement{"finishSQL", d.Finish, "'{1}', '{1}', '{0}', '{NULL}', '{0}', false"})
	}
	fast, scan := Heads(info)
	return append(out,
		statement{"finishRunSQL", d.Finish, "'{1}', '{1}', '{0}', '{NULL}', '{0}', false, '{0}', 1, " + name + ", 300, 'node'"},
		statement{"finishSQL", d.FinishEnds, "'{1}', '{1}', '{0}', '{NULL}', '{0}', false"},
		statement{"busySlots", d.BusySlots, "'{1,2}'"},
		statement{"claimIDsSQL", d.ClaimIDs, "'{1,2}', '{0,0}', 300, 'node', '{1,2}'"},
		statement{"nextOfKeys", d.NextOfKeys, "'{1,2}', '{1,3}'"},
		statement{"usageKeysAtLimit", keysAtLimit, name + ", 1"},
		statement{"headsFast", fast, "1000, 1, 4000, " + name},
		statement{"headsScan", scan, "1000, 1, '{}', " + name},
		statement{"skipScan", SkipScan(info), "1000, 1"},
	)
}

// parts are the templates that other templates include, never run alone.
var parts = []string{"finishSet", "again", "headsKeys", "headsFinal", "duplicateSet",
	"adminDue", "adminActionSet", "adminActionCond", "adminActionDup", "adminDuplicates"}

// TestStatementsExplain plans every statement of every shape of kind against its table, created as
// jobinfo creates it, so that a change of a pipeline column, a state or an index that breaks a
// statement fails here. Each is prepared with the types PostgreSQL infers for its parameters, as pgx
// prepares it, and explained with arguments of those types.
func TestStatementsExplain(t *testing.T) {
	ctx := t.Context()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	explained := map[string]bool{}
	for _, k := range testKinds() {
		ddl, err := k.spec.CreateSQL()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool.Exec(ctx, ddl); err != nil {
			t.Fatalf("creating %s: %v", k.info.Name, err)
		}
		for _, st := range statementsOf(k.info) {
			t.Run(k.info.Name+"/"+st.template, func(t *testing.T) {
				explain(t, s.Pool, st)
			})
			explained[st.template] = true
		}
	}
	for _, tmpl := range statements.Templates() {
		if name := tmpl.Name(); name != "kindsql" && !explained[name] && !slices.Contains(parts, name) {
			t.Errorf("template %s is never explained: add it to statementsOf", name)
		}
	}
}

// explain prepares st and explains its execution with its arguments, in a transaction rolled back.
func explain(t *testing.T, db *pgxpool.Pool, st statement) {
	t.Helper()
	ctx := t.Context()
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A prepared statement outlives its transaction: deallocated after the rollback, before the
	// connection goes back to the pool.
	defer conn.Exec(context.WithoutCancel(ctx), "DEALLOCATE explained")
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "PREPARE explained AS "+st.sql); err != nil {
		t.Fatalf("preparing: %v\n%s", err, st.sql)
	}
	call := "EXPLAIN EXECUTE explained"
	if st.args != "" {
		call += "(" + st.args + ")"
	}
	rows, err := tx.Query(ctx, call)
	if err != nil {
		t.Fatalf("%s: %v\n%s", call, err, st.sql)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v\n%s", call, err, st.sql)
	}
	if len(plan) == 0 {
		t.Fatalf("no plan for\n%s", st.sql)
	}
}
