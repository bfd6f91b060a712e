package dispatcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// claimTx is a claim pass's transaction on a connection of the pool. Its BEGIN goes in the round trip
// of its first statement, and its COMMIT may go in that of its last (commitIn): a pgx.Tx takes a
// round trip of its own for each. A keyed pass is a handful of round trips between which the
// dispatcher waits, its row locks held, so two round trips fewer are a real share of the pass.
//
// The statements sent ahead of the first one share its pipeline: when one of them fails, the server
// skips the rest up to the pipeline's end and the first read of the caller's results returns the
// error. A claimTx is used by one goroutine.
type claimTx struct {
	conn      *pgxpool.Conn
	begin     []string // sent ahead of the first statement
	begun     bool     // the BEGIN has been sent
	committed bool     // a batch's COMMIT succeeded (commitIn)
	released  bool     // the connection has been given back
}

// beginClaim acquires a connection for a claim transaction that begins with begin (which must start
// with BEGIN), sent with the transaction's first statement.
func beginClaim(ctx context.Context, pool *pgxpool.Pool, begin ...string) (*claimTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &claimTx{conn: conn, begin: begin}, nil
}

// withBegin returns b's statements after the transaction's BEGIN statements when they are still to
// be sent, and how many were put ahead.
func (t *claimTx) withBegin(b *pgx.Batch) (*pgx.Batch, int) {
	if t.begun {
		return b, 0
	}
	t.begun = true
	full := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(t.begin)+len(b.QueuedQueries))}
	for _, sql := range t.begin {
		full.Queue(sql)
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	return full, len(t.begin)
}

// SendBatch sends b in one round trip, after the BEGIN if it is still to be sent. The results are
// b's own.
func (t *claimTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	full, ahead := t.withBegin(b)
	br := t.conn.SendBatch(ctx, full)
	for range ahead {
		// An error here is kept by br and returned by the caller's first read.
		if _, err := br.Exec(); err != nil {
			break
		}
	}
	return br
}

// Query runs sql, in the BEGIN's round trip if it is still to be sent.
func (t *claimTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun {
		return t.conn.Query(ctx, sql, args...)
	}
	br := t.sendFirst(ctx, sql, args)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, batch: br}, nil
}

// Exec runs sql, in the BEGIN's round trip if it is still to be sent.
func (t *claimTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	br := t.sendFirst(ctx, sql, args)
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// sendFirst sends the BEGIN statements and sql, the transaction's first statement, in one batch;
// its results are sql's.
func (t *claimTx) sendFirst(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.SendBatch(ctx, b)
}

// commitIn queues the COMMIT at the end of b, a batch of the transaction's last statements. Read its
// result with readCommit.
func (t *claimTx) commitIn(b *pgx.Batch) { b.Queue("COMMIT") }

// readCommit reads the result of the COMMIT that commitIn queued, the batch's next result. Once it
// succeeds the transaction has ended: Commit and Rollback only give the connection back.
func (t *claimTx) readCommit(br pgx.BatchResults) error {
	tag, err := br.Exec()
	if err = commitResult(tag, err); err == nil {
		t.committed = true
	}
	return err
}

// commitResult is the error of a COMMIT that returned tag and err: a COMMIT of a transaction that
// had failed rolls it back and says so in its tag.
func commitResult(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return err
}

// Commit commits the transaction unless a batch did (commitIn), and gives the connection back.
func (t *claimTx) Commit(ctx context.Context) error {
	return commitResult(t.end(ctx, "COMMIT"))
}

// Rollback rolls the transaction back unless it has ended, and gives the connection back. A
// connection left inside a transaction (the ROLLBACK failed) is closed by the pool, not reused.
func (t *claimTx) Rollback(ctx context.Context) error {
	if _, err := t.end(ctx, "ROLLBACK"); err != nil {
		return fmt.Errorf("dispatcher: rolling a claim back: %w", err)
	}
	return nil
}

// end sends sql (COMMIT or ROLLBACK) if the transaction has begun and not ended, then gives the
// connection back; after the first call it does nothing.
func (t *claimTx) end(ctx context.Context, sql string) (pgconn.CommandTag, error) {
	if t.released {
		return pgconn.CommandTag{}, nil
	}
	defer t.release()
	if !t.begun || t.committed {
		return pgconn.CommandTag{}, nil
	}
	return t.conn.Exec(ctx, sql)
}

func (t *claimTx) release() {
	t.released = true
	t.conn.Release()
}

// batchRows are the rows of a batch's one query; closing them closes the batch.
type batchRows struct {
	pgx.Rows
	batch    pgx.BatchResults
	closeErr error
	closed   bool
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.closeErr = r.batch.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}
