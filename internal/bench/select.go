package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/heads"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// selectTarget is the bound on one dispatch pass at 1M pending rows.
const selectTarget = 20 * time.Millisecond

// selectSize is what one table size measured. Times are milliseconds.
type selectSize struct {
	Rows       int     `json:"rows"`
	Keys       int     `json:"keys"`
	InsertS    float64 `json:"insert_s"`
	PassP50    float64 `json:"pass_p50_ms"`
	PassP95    float64 `json:"pass_p95_ms"`
	PassMin    float64 `json:"pass_min_ms"`
	Ratio      float64 `json:"pass_p50_ratio_to_smallest"`
	FastHeads  int     `json:"fast_walk_heads"`
	Walk       int     `json:"fast_walk_length"` // waiting jobs the pass's fast walk looks at
	ScanP50    float64 `json:"key_scan_p50_ms"`
	ScanP95    float64 `json:"key_scan_p95_ms"`
	SkipP50    float64 `json:"skipscan_p50_ms"`
	SkipP95    float64 `json:"skipscan_p95_ms"`
	Missing    int64   `json:"missing_rows"`   // rows not in the table after the insert
	DupKeys    int     `json:"duplicate_keys"` // keys chosen twice in one pass, over the three ways
	BadHeads   int     `json:"bad_heads"`      // rows chosen that are not their key's head, or heads missing
	ScanFaster bool    `json:"-"`
}

// runSelect times one dispatch pass choosing 1,000 heads over tables of each size, three ways: the
// dispatcher's pass (its fast walk, and its key scan when the walk falls short), the dispatcher's key
// scan alone, and a key-order skip scan that stops at 1,000 heads (an alternative that keeps order within a key only).
// Every pass runs in a transaction that is rolled back.
func runSelect(ctx context.Context, s *session) error {
	o, r := s.opts, s.report
	kind, err := createKind[keyedJob](ctx, s, "bench_select")
	if err != nil {
		return err
	}
	ways, err := headWays(kind.Info())
	if err != nil {
		return err
	}
	for _, w := range ways {
		r.Details["sql_"+w.key] = w.sql
	}
	var sizes []selectSize
	for i, size := range o.Sizes {
		if i > 0 {
			if err := s.truncate(ctx, kind.Info().Table); err != nil {
				return err
			}
		}
		m, err := s.selectSize(ctx, kind, size, ways)
		if err != nil {
			return fmt.Errorf("%d rows: %w", size, err)
		}
		m.Ratio = 1
		if len(sizes) > 0 && sizes[0].PassP50 > 0 {
			m.Ratio = round(m.PassP50/sizes[0].PassP50, 2)
		}
		sizes = append(sizes, m)
	}
	if r.Explain, err = s.explain(ctx, ways, o.Sizes[len(o.Sizes)-1]); err != nil {
		return err
	}
	r.Details["sizes"] = sizes
	recordSelect(r, sizes)
	return nil
}

// selectSize fills the table with size pending rows over min(Keys, size) keys and times each way.
func (s *session) selectSize(ctx context.Context, kind *jobinfo.Kind[keyedJob], size int, ways []headWay) (selectSize, error) {
	keys := min(s.opts.Keys, size)
	m := selectSize{Rows: size, Keys: keys}
	var done atomic.Int64
	start := time.Now()
	if err := insert(ctx, s, kind, 0, int64(size), &done, func(n int64) keyedJob { return keyedJobFor(n, int64(keys)) }); err != nil {
		return m, err
	}
	m.InsertS = round(time.Since(start).Seconds(), 2)
	table := kind.Info().Table.Sanitize()
	var rows int64
	if err := s.db.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&rows); err != nil {
		return m, err
	}
	m.Missing = int64(size) - rows
	// As autovacuum would have by the time a table this size is worked: statistics and visibility map.
	if err := s.analyze(ctx, kind.Info().Table, true); err != nil {
		return m, err
	}
	times := make([][]time.Duration, len(ways))
	for i, w := range ways {
		c, err := s.checkHeads(ctx, table, w, min(keys, maxHeadsPerPass))
		if err != nil {
			return m, fmt.Errorf("%s: %w", w.name, err)
		}
		m.DupKeys, m.BadHeads = m.DupKeys+c.dupKeys, m.BadHeads+c.bad
		if w.key == "pass" {
			m.FastHeads = c.fast
		}
		if times[i], err = s.timePasses(ctx, w); err != nil {
			return m, fmt.Errorf("%s: %w", w.name, err)
		}
		if w.key == "pass" {
			m.Walk = heads.Walk(maxHeadsPerPass)
		}
	}
	m.PassP50, m.PassP95, m.PassMin = ms(pct(times[0], 50)), ms(pct(times[0], 95)), ms(times[0][0])
	m.ScanP50, m.ScanP95 = ms(pct(times[1], 50)), ms(pct(times[1], 95))
	m.SkipP50, m.SkipP95 = ms(pct(times[2], 50)), ms(pct(times[2], 95))
	fmt.Fprintf(s.opts.Log, "select %8d rows: dispatcher pass p50 %.2f ms, key scan p50 %.2f ms, key-order skip scan p50 %.2f ms\n",
		size, m.PassP50, m.ScanP50, m.SkipP50)
	return m, nil
}

// pct is the p-th percentile of sorted durations (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// onePass runs one way in a transaction it rolls back, and returns what it chose and how long the
// statements took (sent until every row was read; BEGIN and ROLLBACK are not counted).
func (s *session) onePass(ctx context.Context, w headWay) (chosen, time.Duration, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return chosen{}, 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	start := time.Now()
	c, err := w.run(ctx, tx)
	return c, time.Since(start), err
}

// timePasses runs Repeat timed passes after a warm-up and returns their times, sorted.
func (s *session) timePasses(ctx context.Context, w headWay) ([]time.Duration, error) {
	var ds []time.Duration
	for i := range selectWarmupPasses + s.opts.Repeat {
		_, d, err := s.onePass(ctx, w)
		if err != nil {
			return nil, err
		}
		if i >= selectWarmupPasses {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return ds, nil
}

// headCheck is what one pass chose, checked.
type headCheck struct {
	fast    int // rows the fast walk found (the dispatcher's pass only)
	dupKeys int // keys chosen more than once
	bad     int // rows that are not their key's head, plus heads missing from a pass
}

// checkHeads runs one pass and checks what it chose: want rows, each of a different key, each the
// first of its key (Seq 0: nothing runs and every row is due).
func (s *session) checkHeads(ctx context.Context, table string, w headWay, want int) (headCheck, error) {
	c, _, err := s.onePass(ctx, w)
	if err != nil {
		return headCheck{}, err
	}
	distinct := len(slices.Compact(slices.Sorted(slices.Values(c.keys))))
	var firsts int
	err = s.db.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE id = ANY($1) AND seq = 0", c.ids).Scan(&firsts)
	if err != nil {
		return headCheck{}, err
	}
	n := len(c.ids)
	return headCheck{fast: c.fast, dupKeys: n - distinct, bad: n - firsts + max(0, want-n)}, nil
}

// explain returns EXPLAIN (ANALYZE, BUFFERS) of each way's statements at the given table size, each
// in a transaction that is rolled back.
func (s *session) explain(ctx context.Context, ways []headWay, size int) (string, error) {
	var b strings.Builder
	for _, w := range ways {
		for _, st := range w.explain() {
			fmt.Fprintf(&b, "EXPLAIN (ANALYZE, BUFFERS) of %s, %d pending rows, %s:\n", st.what, size, st.args)
			lines, err := s.explainOne(ctx, st.sql, st.params)
			if err != nil {
				return "", fmt.Errorf("EXPLAIN of %s: %w", st.what, err)
			}
			for _, l := range lines {
				b.WriteString("  " + l + "\n")
			}
		}
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func (s *session) explainOne(ctx context.Context, sql string, params []any) ([]string, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, params...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func recordSelect(r *Report, sizes []selectSize) {
	last := sizes[len(sizes)-1]
	rows := make([]int, len(sizes))
	r.result("scenario", "select")
	for i, m := range sizes {
		rows[i] = m.Rows
	}
	r.result("sizes", rows)
	r.result("keys", last.Keys)
	tab := Table{Title: fmt.Sprintf("select: one dispatch pass choosing up to %d heads (ms, %s)", maxHeadsPerPass, "p50/p95 of the timed passes"),
		Header: []string{"pending rows", "keys", "dispatcher pass p50", "p95", "ratio to smallest", "fast walk", "fast-walk heads",
			"key scan alone p50", "key-order skip scan p50", "p95", "faster"}}
	var missing int64
	var dups, bad int
	for _, m := range sizes {
		n := strconv.Itoa(m.Rows)
		r.result("p50_ms_"+n, m.PassP50)
		r.result("p95_ms_"+n, m.PassP95)
		r.result("scan_p50_ms_"+n, m.ScanP50)
		r.result("skipscan_p50_ms_"+n, m.SkipP50)
		r.result("walk_"+n, m.Walk)
		tab.Rows = append(tab.Rows, []string{format(m.Rows), format(m.Keys), format(m.PassP50), format(m.PassP95),
			format(m.Ratio), format(m.Walk), format(m.FastHeads), format(m.ScanP50), format(m.SkipP50), format(m.SkipP95), faster(m)})
		missing, dups, bad = missing+m.Missing, dups+m.DupKeys, bad+m.BadHeads
	}
	if missing > 0 {
		r.fail("%d pending rows missing after the inserts", missing)
	}
	if dups > 0 || bad > 0 {
		r.fail("the passes chose %d keys twice and %d rows that were not their key's head (or too few heads)", dups, bad)
	}
	r.result("ratio", last.Ratio)
	r.result("faster", faster(last))
	r.result("bad_heads", bad)
	r.result("duplicates", dups)
	r.result("lost", missing)
	r.table(tab)
	r.table(Table{Title: "select targets", Header: []string{"target", "measured"}, Rows: [][]string{
		{fmt.Sprintf("p50 <= %v at 1M pending rows", selectTarget), fmt.Sprintf("%.2f ms at %d rows", last.PassP50, last.Rows)},
		{"p50 <= 2x the 10k figure", fmt.Sprintf("%.2fx the %d-row figure", last.Ratio, sizes[0].Rows)},
	}})
}

// faster names the faster of the dispatcher's pass and the key-order skip scan at p50.
func faster(m selectSize) string {
	if m.SkipP50 < m.PassP50 {
		return "skipscan"
	}
	return "dispatcher"
}
