package dispatcher

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/heads"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

type planJob struct {
	N int64 `jobpipe:"n"`
}

type keyedPlanJob struct {
	K int64 `jobpipe:"k,key"`
	N int64 `jobpipe:"n"`
}

// planMoment is a table's state when a connection plans a statement it then keeps the generic plan
// of: a kind's first jobs, never analyzed, or a large table just analyzed.
type planMoment struct {
	jobs    int
	analyze bool
}

var planMoments = []planMoment{{20, false}, {100000, true}}

// planTable creates, in a schema of its own, the table of kind holding m.jobs jobs made by insert (a
// statement with one %d for the count), analyzed if m says so.
func planTable[T any](t *testing.T, kind *jobinfo.Kind[T], insert string, m planMoment) *pgxpool.Pool {
	t.Helper()
	ctx := t.Context()
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{ddl, fmt.Sprintf(insert, m.jobs)}
	if m.analyze {
		stmts = append(stmts, "ANALYZE "+kind.Info().Table.Sanitize())
	}
	for _, stmt := range stmts {
		if _, err := s.Pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	return s.Pool
}

// startJobs marks the jobs ids of table as running under a lease of a minute, each on the slot
// that the SQL expression slot gives it (of the row's columns, id among them).
func startJobs(t *testing.T, db *pgxpool.Pool, table, slot string, ids ...int64) {
	t.Helper()
	if _, err := db.Exec(t.Context(), fmt.Sprintf(`UPDATE %s SET lease_expires_at = now() + interval '1 minute', lease_owner = 'test',
		attempts_made = 1, started_at = now(), lock_slot = %s WHERE id = ANY ($1)`, table, slot), ids); err != nil {
		t.Fatal(err)
	}
}

// keyedProducer is a producer of the keyed kind info with nothing started: enough to run its claim
// pass's statements.
func keyedProducer(info *jobinfo.Info) *producer {
	return &producer{kindRunner: &kindRunner{info: info, sql: buildSQL(info), keyed: true}}
}

// TestClaimPlanNeverReadsTheTable checks the plan a pooled connection keeps for a plain kind's claim.
// pgx prepares it once per connection, and PostgreSQL keeps its generic plan, made with the table's
// size of that moment, until the table is next analyzed: the plan must not read the whole table
// whatever that size was. Two moments: a kind's first claims, on a table of 20 jobs never analyzed
// (where a lookup of the claimed ids by array alone was planned as a sequential scan), and 100,000
// waiting jobs just analyzed (where a join of the claimed rows to the table was planned as a hash
// join over a sequential scan, which every claim pays again as the table grows).
func TestClaimPlanNeverReadsTheTable(t *testing.T) {
	for _, m := range planMoments {
		t.Run(fmt.Sprintf("%d jobs", m.jobs), func(t *testing.T) {
			kind := jobinfo.MustDefine[planJob]("plan_job")
			db := planTable(t, kind, "INSERT INTO plan_job (n) SELECT g FROM generate_series(1, %d) g", m)
			plan := genericPlan(t.Context(), t, db, buildSQL(kind.Info()).claimPlain, "1000, 300, 'node', 0")
			if strings.Contains(plan, "Seq Scan") {
				t.Errorf("the claim's generic plan reads the table sequentially:\n%s", plan)
			}
		})
	}
}

// TestKeyedHeadsGenericPlansNeverReadTheTable checks the generic plans of a keyed kind's heads
// statements. pgx prepares them once per connection, and PostgreSQL may keep a prepared statement's
// generic plan, made with the table of that moment, once it judges it as cheap as a custom one:
// neither may read the whole table, whether that was at a kind's first jobs or at 100,000 jobs over
// 1,000 keys.
func TestKeyedHeadsGenericPlansNeverReadTheTable(t *testing.T) {
	for _, m := range planMoments {
		t.Run(fmt.Sprintf("%d jobs", m.jobs), func(t *testing.T) {
			kind := jobinfo.MustDefine[keyedPlanJob]("keyed_plan_job", jobinfo.KeyLimit(3))
			db := planTable(t, kind, "INSERT INTO keyed_plan_job (k, n) SELECT g %% 1000, g FROM generate_series(1, %d) g", m)
			fast, scan := heads.Queries(kind.Info())
			for _, st := range []struct{ name, sql, args string }{
				{"fast walk", fast, "100, 3, 500, 'keyed_plan_job'"},
				{"key scan", scan, "100, 3, '{1,2}', 'keyed_plan_job'"},
			} {
				if plan := genericPlan(t.Context(), t, db, st.sql, st.args); strings.Contains(plan, "Seq Scan on keyed_plan_job") {
					t.Errorf("the %s's generic plan reads the table sequentially:\n%s", st.name, plan)
				}
			}
		})
	}
}

// genericPlan returns the generic plan of sql executed with args, on a connection of db.
func genericPlan(ctx context.Context, t *testing.T, db *pgxpool.Pool, sql, args string) string {
	t.Helper()
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A prepared statement outlives its transaction: deallocated after the rollback, before the
	// connection goes back to the pool.
	defer conn.Exec(ctx, "DEALLOCATE planned")
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE planned AS " + sql} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	return explain(ctx, t, tx, "EXECUTE planned("+args+")")
}

// TestKeyedClaimProbesEachRowsSlot checks the plan of a keyed kind's claim, as its passes run it
// (planned for its arguments): whether a claimed row's slot is held by a running job of its key is
// one probe of the running-slots index per row. Written as EXISTS, it was planned as a hashed
// subplan that read every running job's index entry, and those of jobs that ran before, once per
// claim: the larger the kind's concurrency, the more each claim read.
func TestKeyedClaimProbesEachRowsSlot(t *testing.T) {
	kind := jobinfo.MustDefine[keyedPlanJob]("keyed_claim_plan_job")
	// 2,000 running jobs over 2,000 keys, and 250 waiting jobs of 250 other keys.
	db := planTable(t, kind, `INSERT INTO keyed_claim_plan_job (k, n, lease_expires_at, lock_slot, started_at, attempts_made)
		SELECT g, g, now() + interval '1 hour', 0, now(), 1 FROM generate_series(1, %d) g`, planMoment{jobs: 2000, analyze: false})
	ctx := t.Context()
	if _, err := db.Exec(ctx, `INSERT INTO keyed_claim_plan_job (k, n) SELECT 10000 + g, g FROM generate_series(1, 250) g;
		ANALYZE keyed_claim_plan_job`); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := db.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM keyed_claim_plan_job WHERE lease_expires_at IS NULL`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	plan := explain(ctx, t, db, buildSQL(kind.Info()).claimIDs, claimArgs(ids)...)
	if !regexp.MustCompile(`Index Cond: \(\(k = \w+\.k\) AND \(lock_slot = \w+\.slot\)\)`).MatchString(plan) {
		t.Errorf("the claim does not probe the running-slots index by key and slot:\n%s", plan)
	}
}

// TestKeyProbesUseTheRunningSlotsIndex checks that the statements that look up a key's running jobs
// (a claim's slot check, a finish's check of a lowered limit, the busy slots of keys) read them in
// the running-slots index, planned as a dispatcher plans them, in the moment that misled the planner:
// the table analyzed while nothing ran, then hundreds of jobs started. Both partial indexes are then
// priced as empty, the lease index was the shallower, and the probes walked it, reading every running
// job and every dead entry for each key. The rescue and the counts of running jobs still use it.
func TestKeyProbesUseTheRunningSlotsIndex(t *testing.T) {
	kind := jobinfo.MustDefine[keyedPlanJob]("key_probe_plan_job", jobinfo.KeyLimit(10))
	db := planTable(t, kind, "INSERT INTO key_probe_plan_job (k, n) SELECT g %% 100, g FROM generate_series(1, %d) g", planMoment{jobs: 20000, analyze: true})
	ctx := t.Context()
	// 500 running jobs, five of each key, on slots 0 to 4.
	if _, err := db.Exec(ctx, `UPDATE key_probe_plan_job t SET lease_expires_at = now() + interval '1 hour', lease_owner = 'node',
		started_at = now(), attempts_made = 1, lock_token = 1, lock_slot = (t.n - 1) / 100
		WHERE t.n <= 500`); err != nil {
		t.Fatal(err)
	}
	var running, waiting []int64
	if err := db.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FILTER (WHERE lease_expires_at IS NOT NULL),
		(array_agg(id ORDER BY id) FILTER (WHERE lease_expires_at IS NULL))[1:100] FROM key_probe_plan_job`).Scan(&running, &waiting); err != nil {
		t.Fatal(err)
	}
	q := buildSQL(kind.Info())
	slots := make([]int32, len(running))
	for i := range slots {
		slots[i] = int32(i / 100)
	}
	for _, st := range []struct {
		name, sql string
		args      []any
		probes    bool // whether it looks up keys' running jobs
	}{
		{"claim", q.claimIDs, claimArgs(waiting), true},
		{"finish", q.finish, finishArgs(kind.Info(), running, slots), true},
		{"busy slots", q.busySlots, []any{waiting}, true},
		{"rescue", q.rescue, []any{3, []float64{1, 2, 3}, 0}, false},
		{"count running", q.countRunning, nil, false},
	} {
		plan := explain(ctx, t, db, st.sql, st.args...)
		if lease := leaseProbes.FindString(plan); lease != "" {
			t.Errorf("%s: looks a key up in the lease index (%s):\n%s", st.name, lease, plan)
		}
		if slotsIndex := strings.Contains(plan, "key_probe_plan_job_running_slots"); slotsIndex != st.probes {
			t.Errorf("%s: reads the running-slots index: %v, want %v:\n%s", st.name, slotsIndex, st.probes, plan)
		}
		if lease := strings.Contains(plan, "key_probe_plan_job_lease"); !st.probes && !lease {
			t.Errorf("%s: does not read the lease index:\n%s", st.name, plan)
		}
	}
}

// TestKeyLookupsUseTheKeyReadyIndex checks that the statements looking up one key's waiting jobs (a
// claim's check for earlier jobs of the key, a finish's claim of a run's next job, the next jobs of
// keys that run, the key scan) read them in the key-ready index whatever the statistics say, planned
// as a dispatcher plans them: in created and in process_after order, and with a key of two columns.
// The statistics are from a table that held one key's jobs, then from the same table analyzed again.
// With the first, PostgreSQL expects any key's jobs at the start of every index in the kind's order,
// and a lookup written as key equality walked the ready index, or the primary key, with the key as a
// filter, reading every other key's jobs for each lookup.
func TestKeyLookupsUseTheKeyReadyIndex(t *testing.T) {
	oneColumn := func(t *testing.T, order jobinfo.Order) (*jobinfo.Info, *pgxpool.Pool) {
		kind := jobinfo.MustDefine[keyedPlanJob]("key_ready_plan_job", jobinfo.KeyLimit(10), jobinfo.WithOrder(order))
		return kind.Info(), planTable(t, kind, "INSERT INTO key_ready_plan_job (k, n) SELECT 0, g FROM generate_series(1, %d) g", planMoment{jobs: 20000, analyze: true})
	}
	twoColumns := func(t *testing.T, order jobinfo.Order) (*jobinfo.Info, *pgxpool.Pool) {
		kind := jobinfo.MustDefine[twoKeyPlanJob]("key_ready_plan_job", jobinfo.KeyLimit(10), jobinfo.WithOrder(order))
		return kind.Info(), planTable(t, kind, "INSERT INTO key_ready_plan_job (a, b, n) SELECT 'x', 0, g FROM generate_series(1, %d) g", planMoment{jobs: 20000, analyze: true})
	}
	// 200,000 jobs over 1,000 other keys, in two halves (see keySpread).
	oneSpread := keySpread{"INSERT INTO key_ready_plan_job (k, n) SELECT 1 + g % 1000, g FROM generate_series(1, 200000) g", "k", "k BETWEEN 1 AND 500", "k > 500"}
	twoSpread := keySpread{"INSERT INTO key_ready_plan_job (a, b, n) SELECT 'k' || g % 10, 1 + g / 10 % 100, g FROM generate_series(1, 200000) g", "a, b", "b BETWEEN 1 AND 50", "b > 50"}
	for _, c := range []struct {
		name      string
		order     jobinfo.Order
		setup     func(*testing.T, jobinfo.Order) (*jobinfo.Info, *pgxpool.Pool)
		spread    keySpread
		reanalyze bool
	}{
		{"created order, one key's statistics", jobinfo.OrderCreated, oneColumn, oneSpread, false},
		{"process_after order, one key's statistics", jobinfo.OrderProcessAfter, oneColumn, oneSpread, false},
		{"key of two columns, one key's statistics", jobinfo.OrderCreated, twoColumns, twoSpread, false},
		{"created order, analyzed again", jobinfo.OrderCreated, oneColumn, oneSpread, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			info, db := c.setup(t, c.order)
			ctx := t.Context()
			// The other keys' jobs, then the first job of half of those keys started on slot 0.
			if _, err := db.Exec(ctx, c.spread.insert); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(ctx, fmt.Sprintf(`UPDATE key_ready_plan_job t SET lease_expires_at = now() + interval '1 hour', lease_owner = 'node',
				started_at = now(), attempts_made = 1, lock_token = 1, lock_slot = 0
				WHERE t.id IN (SELECT min(id) FROM key_ready_plan_job WHERE %s GROUP BY %s)`, c.spread.first, c.spread.key)); err != nil {
				t.Fatal(err)
			}
			if c.reanalyze {
				if _, err := db.Exec(ctx, "ANALYZE key_ready_plan_job"); err != nil {
					t.Fatal(err)
				}
			}
			var running, waiting []int64
			if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT array_agg(id ORDER BY id) FILTER (WHERE lease_expires_at IS NOT NULL),
				array_agg(id ORDER BY id) FILTER (WHERE lease_expires_at IS NULL AND n <= 1000 AND %s)
				FROM key_ready_plan_job`, c.spread.others)).Scan(&running, &waiting); err != nil {
				t.Fatal(err)
			}
			q := buildSQL(info)
			_, scan := heads.Queries(info)
			counts := make([]int32, len(waiting))
			for i := range counts {
				counts[i] = 2
			}
			for _, st := range []struct {
				name, sql string
				args      []any
			}{
				{"claim", q.claimIDs, claimArgs(waiting)},
				{"finish", q.finish, finishArgs(info, running, make([]int32, len(running)))},
				{"next of keys", q.nextOfKeys, []any{waiting, counts}},
				{"key scan", scan, []any{250, 10, []int64{}, info.Name}},
			} {
				plan := explain(ctx, t, db, st.sql, st.args...)
				if !strings.Contains(plan, "using key_ready_plan_job_key_ready on") {
					t.Errorf("%s: does not read the key-ready index:\n%s", st.name, plan)
				}
				if walks := keyWalks(plan, "key_ready_plan_job"); len(walks) > 0 {
					t.Errorf("%s: walks the table with the key as a filter (%q):\n%s", st.name, walks, plan)
				}
			}
		})
	}
}

// keySpread is how TestKeyLookupsUseTheKeyReadyIndex spreads jobs over many keys: the insert, the key
// columns, and the conditions selecting the keys whose first job starts and the others.
type keySpread struct{ insert, key, first, others string }

type twoKeyPlanJob struct {
	A string `jobpipe:"a,key"`
	B int64  `jobpipe:"b,key"`
	N int64  `jobpipe:"n"`
}

// keyWalks returns the scans of table in plan that look rows up neither by key nor by id: a
// sequential scan, or the ready index or the primary key read in order, with the key as a filter.
func keyWalks(plan, table string) []string {
	var walks []string
	lines := strings.Split(plan, "\n")
	for i, line := range lines {
		byID := i+1 < len(lines) && strings.Contains(lines[i+1], "Index Cond: (id = ")
		inOrder := strings.Contains(line, "using "+table+"_ready on") || strings.Contains(line, "using "+table+"_pkey on")
		if strings.Contains(line, "Seq Scan on "+table+" ") || inOrder && !byID {
			walks = append(walks, strings.TrimSpace(line))
		}
	}
	return walks
}

// claimArgs are the arguments of a keyed kind's claim of the waiting jobs ids, each on slot 0.
func claimArgs(ids []int64) []any {
	return []any{ids, make([]int32, len(ids)), 300.0, "node", ids}
}

// finishArgs are the arguments of a finish of the running jobs ids, each processed with token 0, that
// continues their key runs on slots.
func finishArgs(info *jobinfo.Info, ids []int64, slots []int32) []any {
	n := len(ids)
	outcomes := make([]int16, n)
	for i := range outcomes {
		outcomes[i] = int16(writeProcessed)
	}
	return []any{ids, make([]int64, n), outcomes, make([]string, n), make([]float64, n), false, slots, 10, info.Name, 300.0, "node"}
}

// leaseProbes finds a scan of the lease index filtered or searched by key.
var leaseProbes = regexp.MustCompile(`using \w+_lease on .*\n\s*(Index Cond|Filter): [^\n]*\bk = `)

// explain returns the plan of sql for args, planned for them, on db (a pool or a transaction).
func explain(ctx context.Context, t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) string {
	t.Helper()
	rows, err := db.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
