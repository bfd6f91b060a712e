package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/heads"
	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// chosen is what one pass chose: the heads' ids and key texts, and how many the fast walk found.
type chosen struct {
	ids  []int64
	keys []string
	fast int
}

// headWay is one way of choosing up to 1,000 heads with a key limit of 1, run inside a transaction.
type headWay struct {
	key, name, sql string
	run            func(ctx context.Context, tx pgx.Tx) (chosen, error)
	explain        func() []explainable
}

// explainable is one statement of a way with its parameters, for EXPLAIN.
type explainable struct {
	what, args, sql string
	params          []any
}

// headWays returns the three ways select compares: the dispatcher's pass (its own code, package
// heads), the dispatcher's key scan alone, and the bench's key-order skip scan. The error is for a
// kind without a key.
func headWays(info *jobinfo.Info) ([]headWay, error) {
	fast, scan := heads.Queries(info)
	pass, err := heads.New(info)
	if err != nil {
		return nil, err
	}
	skip := skipScanSQL(info)
	return []headWay{
		{key: "pass", name: "the dispatcher's pass", sql: fast + ";\n" + scan,
			run: func(ctx context.Context, tx pgx.Tx) (chosen, error) {
				picked, fromWalk, err := pass.Pick(ctx, tx, maxHeadsPerPass, 1)
				c := chosen{fast: fromWalk}
				for _, h := range picked {
					c.ids, c.keys = append(c.ids, h.ID), append(c.keys, h.Key)
				}
				return c, err
			},
			explain: func() []explainable {
				walk := heads.Walk(maxHeadsPerPass)
				return []explainable{{"the dispatcher's fast walk", fmt.Sprintf("$1 = %d, $2 = 1, $3 = %d, $4 = %q", maxHeadsPerPass, walk, info.Name),
					fast, []any{maxHeadsPerPass, 1, walk, info.Name}}}
			}},
		{key: "scan", name: "the dispatcher's key scan alone", sql: scan,
			run: func(ctx context.Context, tx pgx.Tx) (chosen, error) {
				return queryHeads(ctx, tx, scan, maxHeadsPerPass, 1, []int64{}, info.Name)
			},
			explain: func() []explainable {
				return []explainable{{"the dispatcher's key scan", fmt.Sprintf("$1 = %d, $2 = 1, $3 = '{}', $4 = %q", maxHeadsPerPass, info.Name),
					scan, []any{maxHeadsPerPass, 1, []int64{}, info.Name}}}
			}},
		{key: "skipscan", name: "the key-order skip scan", sql: skip,
			run: func(ctx context.Context, tx pgx.Tx) (chosen, error) {
				return queryHeads(ctx, tx, skip, maxHeadsPerPass, 1)
			},
			explain: func() []explainable {
				return []explainable{{"the key-order skip scan (bench)", fmt.Sprintf("$1 = %d, $2 = 1", maxHeadsPerPass),
					skip, []any{maxHeadsPerPass, 1}}}
			}},
	}, nil
}

// queryHeads runs a head statement and reads the id and key text of each row; further columns (the
// dispatcher's busy slots, key limit, position, first job and walk counts) are read and dropped.
func queryHeads(ctx context.Context, tx pgx.Tx, sql string, args ...any) (chosen, error) {
	var c chosen
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var key string
		var busy []int32
		var limit, pos, first, walked, picked int64
		dest := []any{&id, &key, &busy, &limit, &pos, &first, &walked, &picked}[:len(rows.FieldDescriptions())]
		if err := rows.Scan(dest...); err != nil {
			return c, err
		}
		c.ids, c.keys = append(c.ids, id), append(c.keys, key)
	}
	return c, rows.Err()
}

// skipScanSQL walks the key-ordered ready index one key at a time (a loose index scan: one index probe
// per key, never a scan of every waiting row), takes each key's first waiting job, keeps those that
// are due and whose key runs fewer than $2 jobs, and stops as soon as it has $1 of them, locking them
// like the dispatcher's statements. Unlike the dispatcher's key scan it does not sort the heads in the
// kind's order across keys (jobpipe promises order within a key only): it serves keys in key
// order, so its cost is O($1 + keys skipped) rather than O(keys).
func skipScanSQL(info *jobinfo.Info) string { return kindsql.SkipScan(info) }
