package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

type rowState struct {
	Attempts  int
	Processed bool
	Failed    bool
	LastError string
}

// readState reads where job id of table stands.
func readState(t *testing.T, db *pgxpool.Pool, table string, id int64) rowState {
	t.Helper()
	var s rowState
	err := db.QueryRow(context.Background(), `SELECT attempts_made, processed_at IS NOT NULL, failed_at IS NOT NULL, coalesce(last_error, '')
		FROM `+table+` WHERE id = $1`, id).Scan(&s.Attempts, &s.Processed, &s.Failed, &s.LastError)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Snooze does not count the attempt; Discard fails at once; RunAgain processes the job and enqueues
// its next run.
func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	kind := jobinfo.MustDefine[plainJob]("steered", jobinfo.MaxAttempts(5), jobinfo.Backoff(backoff.Constant(10*time.Millisecond)))
	createKind(t, b.db, kind)
	ctx := context.Background()
	snoozer, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 1, Note: "snooze"})
	discarder, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 2, Note: "discard"})
	seed, _ := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: 3, Note: "again"})
	runs := map[string]int{}
	runsCh := make(chan string, 100)
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.Register(d, kind, func(ctx context.Context, j *dispatcher.Job[plainJob]) error {
			runsCh <- j.Data.Note
			switch j.Data.Note {
			case "snooze":
				if j.Attempt == 1 && countWhere(t, b.db, "steered", "note = 'snooze' AND last_error = 'snoozed'") == 0 {
					_, _ = b.db.Exec(ctx, `UPDATE steered SET last_error = 'snoozed' WHERE id = $1`, j.ID)
					return dispatcher.Snooze(20 * time.Millisecond)
				}
				if j.Attempt != 1 {
					return dispatcher.Discard(errors.New("snooze counted an attempt"))
				}
				return nil
			case "discard":
				return dispatcher.Discard(errors.New("bad recipient"))
			case "again":
				// The seed re-enqueues itself while work is left: three runs in all.
				if countWhere(t, b.db, "steered", "note = 'again'") < 3 {
					return dispatcher.RunAgain(0)
				}
				return nil
			}
			return nil
		})
	})
	waitFor(t, "all finished", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "steered", "processed_at IS NULL AND failed_at IS NULL") == 0 &&
			countWhere(t, b.db, "steered", "note = 'again'") == 3, nil
	})
	close(runsCh)
	for r := range runsCh {
		runs[r]++
	}
	if s := readState(t, b.db, "steered", snoozer.ID); s != (rowState{Attempts: 1, Processed: true, LastError: "snoozed"}) || runs["snooze"] != 2 {
		t.Errorf("snoozed job: %+v after %d runs; want 1 attempt counted over 2 runs", s, runs["snooze"])
	}
	if s := readState(t, b.db, "steered", discarder.ID); s != (rowState{Attempts: 1, Failed: true, LastError: "dispatcher: discarded: bad recipient"}) {
		t.Errorf("discarded job: %+v", s)
	}
	if s := readState(t, b.db, "steered", seed.ID); s != (rowState{Attempts: 1, Processed: true}) {
		t.Errorf("seed job: %+v", s)
	}
	if n := countWhere(t, b.db, "steered", "note = 'again' AND processed_at IS NOT NULL AND attempts_made = 1"); n != 3 || runs["again"] != 3 {
		t.Errorf("run-again chain: %d processed rows, %d runs; want 3 and 3", n, runs["again"])
	}
}

type transfer struct {
	Account string `jobpipe:"account"`
	Amount  int64  `jobpipe:"amount"`
}

// A TxHandler's writes commit with the job's completion, or not at all.
func TestTransactionalCompletion(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[transfer]("transfer", jobinfo.MaxAttempts(2), jobinfo.Backoff(backoff.Constant(10*time.Millisecond)))
	createKind(t, b.db, kind)
	if _, err := b.db.Exec(ctx, `CREATE TABLE ledger (job_id bigint, attempt int, amount bigint)`); err != nil {
		t.Fatal(err)
	}
	ok, _ := dispatcher.Enqueue(ctx, b.db, kind, transfer{Account: "a", Amount: 10})
	bad, _ := dispatcher.Enqueue(ctx, b.db, kind, transfer{Account: "b", Amount: -1})
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.RegisterTx(d, kind, func(ctx context.Context, tx pgx.Tx, j *dispatcher.Job[transfer]) error {
			if _, err := tx.Exec(ctx, `INSERT INTO ledger VALUES ($1, $2, $3)`, j.ID, j.Attempt, j.Data.Amount); err != nil {
				return err
			}
			if j.Data.Amount < 0 {
				return errors.New("negative amount")
			}
			return nil
		})
	})
	waitFor(t, "both finished", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "transfer", "processed_at IS NOT NULL OR failed_at IS NOT NULL") == 2, nil
	})
	if s := readState(t, b.db, "transfer", ok.ID); s != (rowState{Attempts: 1, Processed: true}) {
		t.Errorf("good transfer: %+v", s)
	}
	if s := readState(t, b.db, "transfer", bad.ID); s != (rowState{Attempts: 2, Failed: true, LastError: "negative amount"}) {
		t.Errorf("bad transfer: %+v", s)
	}
	if n := countWhere(t, b.db, "ledger", "true"); n != 1 || countWhere(t, b.db, "ledger", "job_id = "+strconv.FormatInt(ok.ID, 10)+" AND attempt = 1") != 1 {
		t.Errorf("ledger has %d rows, want only the good transfer's", n)
	}
}

// A TxHandler's writes commit with the outcomes that end an attempt well (success, Snooze, RunAgain)
// and roll back with those that fail it (an error, Discard).
func TestTxHandlerOutcomes(t *testing.T) {
	t.Parallel()
	b := newRun(t)
	ctx := context.Background()
	kind := jobinfo.MustDefine[plainJob]("txsteered", jobinfo.MaxAttempts(2), jobinfo.Backoff(backoff.Constant(10*time.Millisecond)))
	createKind(t, b.db, kind)
	if _, err := b.db.Exec(ctx, `CREATE TABLE effects (job_id bigint, attempt int, note text)`); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for i, note := range []string{"snooze", "again", "discard", "error"} {
		res, err := dispatcher.Enqueue(ctx, b.db, kind, plainJob{N: int64(i), Note: note})
		if err != nil {
			t.Fatal(err)
		}
		ids[note] = res.ID
	}
	var runs sync.Map // note -> *atomic.Int64
	b.start(t, b.cfg, func(d *dispatcher.Dispatcher) error {
		return dispatcher.RegisterTx(d, kind, func(ctx context.Context, tx pgx.Tx, j *dispatcher.Job[plainJob]) error {
			n, _ := runs.LoadOrStore(j.Data.Note, new(atomic.Int64))
			run := n.(*atomic.Int64).Add(1)
			var before int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM effects WHERE note = $1`, j.Data.Note).Scan(&before); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, j.ID, j.Attempt, j.Data.Note); err != nil {
				return err
			}
			switch j.Data.Note {
			case "snooze":
				if before == 0 {
					return dispatcher.Snooze(10 * time.Millisecond)
				}
			case "again":
				// A poller that stops after three runs, counted from what its runs wrote. Runs are
				// capped, so that losing its writes ends the test rather than looping.
				if before < 2 && run < 10 {
					return dispatcher.RunAgain(0)
				}
			case "discard":
				return dispatcher.Discard(errors.New("bad recipient"))
			case "error":
				return errors.New("upstream refused")
			}
			return nil
		})
	})
	waitFor(t, "all finished", 20*time.Second, func() (bool, error) {
		return countWhere(t, b.db, "txsteered", "processed_at IS NULL AND failed_at IS NULL") == 0, nil
	})
	if s := readState(t, b.db, "txsteered", ids["snooze"]); s != (rowState{Attempts: 1, Processed: true}) {
		t.Errorf("snoozed job: %+v; want processed after 1 counted attempt", s)
	}
	if s := readState(t, b.db, "txsteered", ids["discard"]); s != (rowState{Attempts: 1, Failed: true, LastError: "dispatcher: discarded: bad recipient"}) {
		t.Errorf("discarded job: %+v", s)
	}
	if s := readState(t, b.db, "txsteered", ids["error"]); s != (rowState{Attempts: 2, Failed: true, LastError: "upstream refused"}) {
		t.Errorf("failing job: %+v", s)
	}
	if n := countWhere(t, b.db, "txsteered", "note = 'again' AND processed_at IS NOT NULL AND attempts_made = 1"); n != 3 {
		t.Errorf("run-again chain: %d processed rows; want 3", n)
	}
	rows, err := b.db.Query(ctx, `SELECT note, attempt, count(*) FROM effects GROUP BY note, attempt ORDER BY note, attempt`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var note string
		var attempt, n int
		err := r.Scan(&note, &attempt, &n)
		return fmt.Sprintf("%s/%d x%d", note, attempt, n), err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The snoozed job's two runs and the poller's three commit; the discarded and failing attempts
	// write nothing.
	if want := []string{"again/1 x3", "snooze/1 x2"}; !slices.Equal(got, want) {
		t.Errorf("committed effects %v; want %v", got, want)
	}
}
