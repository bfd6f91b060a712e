package dispatcher

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

// roundTrips counts what a pool's connections send: each query outside a batch, and each batch, is
// one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// claimTxTable returns a pool on a schema of its own holding table t (id int primary key), and the
// count of its round trips.
func claimTxTable(t *testing.T) (*pgxpool.Pool, *roundTrips) {
	t.Helper()
	s := testenv.NewSchema(t)
	if _, err := s.Pool.Exec(t.Context(), "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	cfg := s.Pool.Config()
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, trips
}

// checkTrips fails unless the pool's connections made want round trips since the last check.
func checkTrips(t *testing.T, trips *roundTrips, what string, want int64) {
	t.Helper()
	if got := trips.n.Swap(0); got != want {
		t.Fatalf("%s took %d round trips, want %d", what, got, want)
	}
}

func tableIDs(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []int32 {
	t.Helper()
	rows, err := pool.Query(ctx, "SELECT id FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkReleased fails unless tx gave its connection back.
func checkReleased(t *testing.T, pool *pgxpool.Pool, tx *claimTx) {
	t.Helper()
	if !tx.released || pool.Stat().AcquiredConns() != 0 {
		t.Fatalf("released %t, connections still acquired %d: the claim transaction must give its connection back",
			tx.released, pool.Stat().AcquiredConns())
	}
}

// commitAndCheck commits tx and fails unless that took wantTrips round trips, gave the connection
// back, and left exactly wantIDs in the table.
func commitAndCheck(t *testing.T, pool *pgxpool.Pool, tx *claimTx, trips *roundTrips, what string, wantTrips int64, wantIDs []int32) {
	t.Helper()
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkTrips(t, trips, what, wantTrips)
	checkReleased(t, pool, tx)
	if ids := tableIDs(t.Context(), t, pool); !slices.Equal(ids, wantIDs) {
		t.Fatalf("rows after %s: %v, want %v", what, ids, wantIDs)
	}
}

// mustBegin starts a claim transaction on pool.
func mustBegin(t *testing.T, pool *pgxpool.Pool, begin ...string) *claimTx {
	t.Helper()
	tx, err := beginClaim(t.Context(), pool, begin...)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestClaimTxBeginsWithItsFirstStatement checks that the BEGIN statements run before the first
// statement, in the transaction: a SET LOCAL outside one has no effect.
func TestClaimTxBeginsWithItsFirstStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, trips := claimTxTable(t)
	tx := mustBegin(t, pool, "BEGIN", genericPlans)
	if status := tx.conn.Conn().PgConn().TxStatus(); status != 'I' {
		t.Fatalf("transaction status before the first statement %q, want 'I': nothing may be sent yet", status)
	}
	rows, err := tx.Query(ctx, "SELECT current_setting('plan_cache_mode')")
	if err != nil {
		t.Fatal(err)
	}
	mode, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	checkTrips(t, trips, "the BEGIN statements and the first query", 1)
	if mode != "force_generic_plan" {
		t.Fatalf("plan_cache_mode in the first statement %q, want force_generic_plan", mode)
	}
	if status := tx.conn.Conn().PgConn().TxStatus(); status != 'T' {
		t.Fatalf("transaction status after the first statement %q, want 'T'", status)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	checkTrips(t, trips, "a statement after the first", 1)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkTrips(t, trips, "the rollback", 1)
	checkReleased(t, pool, tx)
	if ids := tableIDs(ctx, t, pool); len(ids) != 0 {
		t.Fatalf("rows after the rollback %v, want none", ids)
	}
}

// TestClaimTxCommitsInItsLastBatch checks a COMMIT queued with a batch: it commits, and Commit
// afterwards only gives the connection back.
func TestClaimTxCommitsInItsLastBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, trips := claimTxTable(t)
	tx := mustBegin(t, pool, "BEGIN")
	b := &pgx.Batch{}
	b.Queue("INSERT INTO t VALUES (1), (2)")
	tx.commitIn(b)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		t.Fatal(err)
	}
	if err := tx.readCommit(br); err != nil {
		t.Fatal(err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if !tx.committed {
		t.Fatal("the batch's COMMIT succeeded but the transaction is not marked committed")
	}
	if status := tx.conn.Conn().PgConn().TxStatus(); status != 'I' {
		t.Fatalf("transaction status after the batch's COMMIT %q, want 'I'", status)
	}
	commitAndCheck(t, pool, tx, trips, "a transaction of one batch, with its BEGIN and COMMIT", 1, []int32{1, 2})
}

// TestClaimTxRefusedBatchDoesNotCommit runs claimBatch's sequence with a statement the database
// refuses: the COMMIT queued after it is skipped, the transaction rolls back to the savepoint and goes
// on, and its own Commit commits what came before and after the refusal.
func TestClaimTxRefusedBatchDoesNotCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, trips := claimTxTable(t)
	tx := mustBegin(t, pool, "BEGIN")
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT s")
	b.Queue("INSERT INTO t VALUES (1)") // a duplicate key: 23505
	b.Queue("RELEASE SAVEPOINT s")
	tx.commitIn(b)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Exec(); !isUniqueViolation(err) {
		t.Fatalf("duplicate insert: %v, want a unique violation", err)
	}
	if err := tx.readCommit(br); err == nil {
		t.Fatal("the COMMIT after a refused statement succeeded; it must be skipped")
	}
	_ = br.Close()
	if tx.committed {
		t.Fatal("the transaction is marked committed after a refused batch")
	}
	if status := tx.conn.Conn().PgConn().TxStatus(); status != 'E' {
		t.Fatalf("transaction status after the refused batch %q, want 'E' (failed, still open)", status)
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if ids := tableIDs(ctx, t, pool); len(ids) != 0 {
		t.Fatalf("rows seen outside the transaction before its commit %v, want none", ids)
	}
	trips.n.Store(0)
	commitAndCheck(t, pool, tx, trips, "the commit after the refused batch", 1, []int32{1, 2})
}

// TestClaimTxFailedBeginIsReportedAndReleased checks that a BEGIN statement the database refuses
// fails the first statement sent with it, and that the rollback gives a usable connection back.
func TestClaimTxFailedBeginIsReportedAndReleased(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _ := claimTxTable(t)
	tx := mustBegin(t, pool, "BEGIN", "SET LOCAL jobpipe_no_such_setting TO 1")
	rows, err := tx.Query(ctx, "SELECT 1")
	if err == nil {
		_, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err == nil {
		t.Fatal("the first statement after a refused BEGIN statement succeeded; want the BEGIN's error")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkReleased(t, pool, tx)
	var one int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("the pool after the rollback: %d, %v", one, err)
	}
}
