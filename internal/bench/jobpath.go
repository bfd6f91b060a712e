package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/states"
)

// jobTimes holds when each job's handler began and ended (Unix ns, local clock), by the job's n.
type jobTimes struct{ start, end []atomic.Int64 }

func newJobTimes(jobs int64) *jobTimes {
	return &jobTimes{start: make([]atomic.Int64, jobs), end: make([]atomic.Int64, jobs)}
}

func (t *jobTimes) began(n int64, at time.Time) { t.start[n].Store(at.UnixNano()) }
func (t *jobTimes) ended(n int64, at time.Time) { t.end[n].Store(at.UnixNano()) }

// jobPath is where a slot's time goes besides the handler, by the table's times (database clock,
// which this machine's bench shares): from the claim (started_at, the claim transaction's start) to
// the handler's start, which holds the claim pass, the execution lock and the worker's start; and
// from the handler's end to the finish (processed_at, the finish transaction's start), which is the
// wait in the finisher's queue.
type jobPath struct {
	ClaimToStart durations `json:"claim_to_start"`
	EndToFinish  durations `json:"end_to_finish"`
}

// durations summarise a distribution in milliseconds.
type durations struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func summarise(ds []time.Duration) durations {
	if len(ds) == 0 {
		return durations{}
	}
	slices.Sort(ds)
	return durations{Count: len(ds), P50: ms(pct(ds, 50)), P99: ms(pct(ds, 99)), Max: ms(ds[len(ds)-1])}
}

func (d durations) String() string { return fmt.Sprintf("%.2f / %.2f / %.2f ms", d.P50, d.P99, d.Max) }

// jobPath reads every processed job's started_at and processed_at and sets them against the
// handler's times.
func (s *session) jobPath(ctx context.Context, table pgx.Identifier, t *jobTimes) (jobPath, error) {
	rows, err := s.db.Query(ctx, "SELECT n, started_at, processed_at FROM "+table.Sanitize()+" WHERE "+states.Processed(""))
	if err != nil {
		return jobPath{}, fmt.Errorf("reading the jobs' times: %w", err)
	}
	var toStart, toFinish []time.Duration
	var n int64
	var started, processed time.Time
	_, err = pgx.ForEachRow(rows, []any{&n, &started, &processed}, func() error {
		if n < 0 || n >= int64(len(t.start)) {
			return nil
		}
		if b := t.start[n].Load(); b != 0 {
			toStart = append(toStart, time.Duration(b-started.UnixNano()))
		}
		if e := t.end[n].Load(); e != 0 {
			toFinish = append(toFinish, time.Duration(processed.UnixNano()-e))
		}
		return nil
	})
	if err != nil {
		return jobPath{}, fmt.Errorf("reading the jobs' times: %w", err)
	}
	return jobPath{ClaimToStart: summarise(toStart), EndToFinish: summarise(toFinish)}, nil
}
