package uniqueness

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// InsertMany inserts rows in one round trip and reports each row's outcome in order. Either every row is
// inserted (or resolved as a duplicate) or none is, and an error says why.
//
// Kinds without unique fields use COPY, with ids reserved from the table's identity sequence first, so
// the ids come back in input order. Kinds with unique fields send one INSERT ... ON CONFLICT per row in a
// single pipelined batch, which runs as one implicit transaction: each row is resolved against the rows
// before it, and the Error strategy reports a *DuplicateError in that row's Result.Err instead of failing
// the batch.
func (in *Inserter) InsertMany(ctx context.Context, db jobinfo.DB, rows []Row, s Strategy) ([]Result, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	for i, r := range rows {
		if len(r.Values) != len(in.info.Fields) {
			return nil, fmt.Errorf("uniqueness: row %d: kind %q takes %d values, got %d", i, in.info.Name, len(in.info.Fields), len(r.Values))
		}
	}
	if len(in.info.Unique) == 0 {
		return in.copyRows(ctx, db, rows)
	}
	return in.batchRows(ctx, db, rows, s)
}

const reserveIDsSQL = `SELECT now(), array_agg(nextval(pg_get_serial_sequence($1, 'id'))) FROM generate_series(1, $2)`

// copyRows reserves ids, copies the rows and notifies, in one transaction (a savepoint when db is one
// already), so that the batch is enqueued whole or not at all.
func (in *Inserter) copyRows(ctx context.Context, db jobinfo.DB, rows []Row) ([]Result, error) {
	results := make([]Result, len(rows))
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var now time.Time
		var ids []int64
		if err := tx.QueryRow(ctx, reserveIDsSQL, in.info.Table.Sanitize(), len(rows)).Scan(&now, &ids); err != nil {
			return err
		}
		src := make([][]any, len(rows))
		for i, r := range rows {
			var after any
			if at, delay := r.schedule(); at != nil {
				after = *at
			} else if delay != nil {
				after = now.Add(*delay)
			}
			vals := make([]any, 0, len(r.Values)+2)
			src[i] = append(append(append(vals, ids[i]), r.Values...), after)
			results[i] = Result{ID: ids[i]}
		}
		if _, err := tx.CopyFrom(ctx, in.info.Table, in.copy, pgx.CopyFromRows(src)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT "+notifyCall(in.info.Name))
		return err
	})
	if err != nil {
		return nil, in.wrap(err)
	}
	return results, nil
}

func (in *Inserter) batchRows(ctx context.Context, db jobinfo.DB, rows []Row, s Strategy) ([]Result, error) {
	q, err := in.statement(s)
	if err != nil {
		return nil, err
	}
	batch := &pgx.Batch{}
	for _, r := range rows {
		args, _ := in.args(r)
		batch.Queue(q, args...)
	}
	br := db.SendBatch(ctx, batch)
	results := make([]Result, len(rows))
	for i := range rows {
		if err := br.QueryRow().Scan(&results[i].ID, &results[i].Duplicate); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("uniqueness: row %d: %w", i, in.wrap(err))
		}
		if results[i].Duplicate && s == Error {
			results[i].Err = &DuplicateError{Kind: in.info.Name, ExistingID: results[i].ID}
		}
	}
	if err := br.Close(); err != nil {
		return nil, in.wrap(err)
	}
	return results, nil
}
