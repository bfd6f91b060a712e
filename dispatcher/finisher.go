package dispatcher

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/semaphore"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// finishReq is one job's outcome on its way to the database.
type finishReq struct {
	id, token int64
	out       rowWrite
	errText   string
	delay     time.Duration
	held      chan bool // receives whether the fence held (the row was this attempt's)
	// next is set when a key run continues on slot: the finish also claims the key's next job for it
	// and sends it to next (nil when none was claimed) before held.
	next chan *claimed
	slot int
}

// maxFinishBatch bounds one finish statement.
const maxFinishBatch = 500

// finishStatements is how many finish statements of a kind may be in flight at once. Each waits for
// its commit to be flushed to disk; with two, one batch gathers and commits while the other does,
// which keeps a busy kind from being held to one commit at a time. A key run waits for its job's
// finish before its next job starts, so the same holds for keyed kinds.
const finishStatements = 2

// finisher writes outcomes in batches: while a statement runs, the next batch gathers, so a busy
// kind commits many jobs at once and an idle one commits each at once.
//
// A keyed kind's outcomes go to the statement loop of their key (lanes): the finish statements in
// flight at once then never hold runs of the same key, which would take the key's next jobs from one
// another, ending the runs that lose (see finishRunSQL). A plain kind's share one lane.
type finisher struct {
	k      *kindRunner
	lanes  []chan finishReq
	gather gathering
	done   chan struct{} // closed once every statement has returned after close
	// statements holds a unit for each statement being sent; pauseStatements takes them all.
	statements *semaphore.Weighted
}

func newFinisher(k *kindRunner) *finisher {
	f := &finisher{k: k, done: make(chan struct{}), statements: semaphore.NewWeighted(finishStatements),
		gather: gathering{wait: k.sh.cfg.FinishWait, upTo: finishGatherBelow, runGap: runGatherGap, runMost: runGatherMost}}
	lanes := 1
	if k.keyed {
		lanes = finishStatements
	}
	for range lanes {
		f.lanes = append(f.lanes, make(chan finishReq, maxFinishBatch))
	}
	return f
}

// start runs the finisher's statement loops until close and every lane is drained.
func (f *finisher) start() {
	var loops sync.WaitGroup
	turns := make([]sync.Mutex, len(f.lanes))
	for i := range finishStatements {
		lane := i % len(f.lanes)
		loops.Go(func() { f.run(f.lanes[lane], &turns[lane]) })
	}
	go func() {
		loops.Wait()
		close(f.done)
	}()
}

// statementPause is the longest a claim pass waits for the finish statements under way to end (see
// pauseStatements): longer than a statement takes on a loaded database. One that takes longer is
// stalled, and the pass goes on without the pause, as it would with another dispatcher's statements.
const statementPause = 100 * time.Millisecond

// pauseStatements waits until none of the kind's finish statements is being sent, up to
// statementPause, and keeps new ones from starting until resume is called; resume is nil when the
// wait ran out, and nothing is held then.
//
// A claim pass holds the pause while it locks and claims the next jobs of keys that run. A finish
// that continues a run takes its key's next job, and gives up the run when a pass holds that job
// locked; a pass finds the key's first jobs held by the finishes in flight and leaves the key's
// free slots idle. Taking turns, the pass gets its heads and the runs their next jobs after them,
// so the keys with several slots reach their limit and their runs keep going.
func (f *finisher) pauseStatements(ctx context.Context) (resume func()) {
	ctx, cancel := context.WithTimeout(ctx, statementPause)
	defer cancel()
	if f.statements.Acquire(ctx, finishStatements) != nil {
		return nil
	}
	return func() { f.statements.Release(finishStatements) }
}

// submit queues req, on its key's lane.
func (f *finisher) submit(req finishReq, key string) {
	lane := 0
	if len(f.lanes) > 1 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(key))
		lane = int(h.Sum32() % uint32(len(f.lanes)))
	}
	f.lanes[lane] <- req
}

// close ends the loops once they have written what was submitted.
func (f *finisher) close() {
	for _, lane := range f.lanes {
		close(lane)
	}
	<-f.done
}

// run is one statement loop of a lane. The loops of a lane take turns to gather a batch (turn): one
// gathers while the other's statement runs, and two loops gathering at once would halve each other's
// batches.
func (f *finisher) run(reqs chan finishReq, turn *sync.Mutex) {
	batch := make([]finishReq, 0, maxFinishBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	continued := 0 // key runs the loop's last statement continued
	for {
		turn.Lock()
		req, ok := <-reqs
		if !ok {
			turn.Unlock()
			return
		}
		batch = append(batch[:0], req)
	gather:
		for len(batch) < maxFinishBatch {
			select {
			case r, ok := <-reqs:
				if !ok {
					break gather
				}
				batch = append(batch, r)
			default:
				break gather
			}
		}
		// A finished job of a kind with a total limit holds its share of it until its outcome is
		// written, so those are written at once; key runs wait only for each other (see gatherMore).
		if len(batch) < f.gather.upTo && f.gather.wait > 0 && !f.k.hasTotal.Load() {
			batch = gatherMore(batch, reqs, timer, f.gather, continued)
		}
		turn.Unlock()
		continued = f.flush(batch)
	}
}

// finishGatherBelow is the batch size below which a finisher waits up to
// Config.FinishWait for more outcomes (see gatherMore): a statement's own cost is then shared by
// enough rows that waiting for more would save little.
const finishGatherBelow = 128

// gathering bounds how long a batch of outcomes waits for more (see gatherMore).
type gathering struct {
	wait time.Duration // Config.FinishWait: the longest a batch waits
	upTo int           // the size at which a batch stops waiting
	// runGap and runMost bound a batch that continues key runs: the wait for each next outcome,
	// and in all.
	runGap, runMost time.Duration
}

// gatherMore adds to batch the outcomes that come within g.wait, until it holds g.upTo. When jobs
// trickle in, each outcome would otherwise be a statement and a commit of its own; under load the
// batch fills at once, and the outcomes left in the lane wait for the next statement rather than
// holding this one back.
//
// An outcome that continues a key run has its next job waiting for the statement, so a batch with
// one waits only for the other runs the lane's last statement continued (expected): while each
// comes within g.runGap of the one before, for g.runMost at most. Those runs' jobs started
// together, and fast ones end together: one statement for all of them is a statement sooner for
// most than one for the first and another, after it, for the rest. A lone run does not wait.
func gatherMore(batch []finishReq, reqs chan finishReq, timer *time.Timer, g gathering, expected int) []finishReq {
	deadline := time.Now().Add(g.wait)
	runs := 0
	addRun := func() {
		if runs++; runs == 1 && time.Until(deadline) > g.runMost {
			deadline = time.Now().Add(g.runMost)
		}
	}
	for _, r := range batch {
		if r.continuesRun() {
			addRun()
		}
	}
	timer.Reset(g.wait)
	defer timer.Stop()
	for len(batch) < g.upTo {
		if runs > 0 {
			d := min(g.runGap, time.Until(deadline))
			if runs >= expected || d <= 0 {
				return batch
			}
			timer.Reset(d) // discards an expiry not received yet
		}
		select {
		case r, ok := <-reqs:
			if !ok {
				return batch
			}
			batch = append(batch, r)
			if r.continuesRun() {
				addRun()
			}
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// runGatherGap and runGatherMost are a finisher's gathering.runGap and runMost: longer than the
// workers a statement woke take to end fast jobs and send their outcomes, shorter than a statement.
const (
	runGatherGap  = 300 * time.Microsecond
	runGatherMost = time.Millisecond
)

// continuesRun reports whether the outcome continues a key run (see finishReq.next).
func (r finishReq) continuesRun() bool { return r.next != nil }

// flush writes a batch. While the database cannot be reached it retries, at least every second,
// until the database answers or Stop's deadline passes: the rows' leases may run out on the
// database's clock meanwhile, but the rescuer leaves them to this dispatcher once it is back (see
// reach.go). An error the database answered with is retried for up to a lease, then given up: the
// rescuer will retry those jobs. It returns how many key runs the batch continued.
func (f *finisher) flush(batch []finishReq) (continued int) {
	k := f.k
	answered := time.Now().Add(k.sh.cfg.LeaseTTL) // the bound for errors the database answered with
	wait := 50 * time.Millisecond
	var failing time.Time // since the first failure, if any
	var warned time.Time
	// A batch that fails twice holds the kind's claims back until it is written (see producer.go); one
	// failure is most often a single lost connection, retried at once.
	holding := false
	defer func() {
		if holding {
			k.behind.Add(-1)
			k.signal() // claims may resume
		}
	}()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), k.sh.cfg.LeaseTTL)
		_ = f.statements.Acquire(context.Background(), 1) // never fails; a pause ends with its pass
		held, err := k.runFinish(ctx, k.sh.db, batch)
		f.statements.Release(1)
		cancel()
		if err == nil {
			if !failing.IsZero() {
				k.sh.logger.Info("dispatcher: outcomes recorded after the database failed", "kind", k.info.Name, "jobs", len(batch), "failing for", time.Since(failing).Round(time.Millisecond))
			}
			for _, r := range batch {
				if r.next != nil {
					r.next <- held.next[r.id]
				}
				r.held <- held.ok[r.id]
			}
			return len(held.next)
		}
		k.sh.noteReach(err)
		if failing.IsZero() {
			failing = time.Now()
		} else if !holding && unreachable(err) {
			holding = true
			k.behind.Add(1)
		}
		reason := ""
		switch {
		case !unreachable(err) && time.Now().Add(wait).After(answered):
			reason = "the database refused them"
		case f.pastStopDeadline():
			reason = "Stop's deadline passed"
		}
		if reason != "" {
			k.sh.logger.Error("dispatcher: recording outcomes failed; the rescuer will retry these jobs", "kind", k.info.Name, "jobs", len(batch), "why", reason, "err", err)
			for _, r := range batch {
				if r.next != nil {
					r.next <- nil
				}
				r.held <- false
			}
			return 0
		}
		if time.Since(warned) >= time.Minute {
			warned = time.Now()
			k.sh.logger.Warn("dispatcher: recording outcomes failed; retrying", "kind", k.info.Name, "jobs", len(batch), "failing for", time.Since(failing).Round(time.Millisecond), "err", err)
		}
		select {
		case <-time.After(wait):
		case <-k.sh.stopDeadline:
		}
		wait = min(2*wait, time.Second)
	}
}

// pastStopDeadline reports whether Stop's deadline has passed.
func (f *finisher) pastStopDeadline() bool {
	select {
	case <-f.k.sh.stopDeadline:
		return true
	default:
		return false
	}
}

// finished is what a finish statement returns: the ids whose fence held, and the next jobs it
// claimed for key runs, by the id of the job each follows.
type finished struct {
	ok   map[int64]bool
	next map[int64]*claimed
}

// runFinish executes the finish statement on db.
func (k *kindRunner) runFinish(ctx context.Context, db jobinfo.DB, batch []finishReq) (finished, error) {
	n := len(batch)
	ids, tokens, outs := make([]int64, n), make([]int64, n), make([]int16, n)
	errs, delays, slots := make([]string, n), make([]float64, n), make([]int32, n)
	for i, r := range batch {
		ids[i], tokens[i], outs[i], errs[i], delays[i], slots[i] = r.id, r.token, int16(r.out), r.errText, r.delay.Seconds(), -1
		if r.next != nil {
			slots[i] = int32(r.slot)
		}
	}
	// Planned for its arguments each time rather than once per connection. A plan kept from when
	// the table was nearly empty joins the batch to the whole table, read in full for every batch,
	// and PostgreSQL keeps it until the table is next analyzed. A keyed kind's generic plan also
	// prices the batch's arrays at ten elements and joins the finished and the claimed rows to them
	// in nested loops, quadratic in a batch of hundreds (docs/benchmarks.md, "Finish statements").
	args := []any{pgx.QueryExecModeExec, ids, tokens, outs, errs, delays, k.finishNotifies(batch)}
	stmt, runs := k.sql.finish, k.keyed && slices.ContainsFunc(batch, finishReq.continuesRun)
	if runs {
		args = append(args, slots, k.info.KeyLimit, k.info.Name, k.leaseSeconds(), k.sh.cfg.NodeName)
	} else if k.keyed {
		stmt = k.sql.finishEnds
	}
	sent := time.Now()
	rows, err := db.Query(ctx, stmt, args...)
	if err != nil {
		return finished{}, fmt.Errorf("dispatcher: finishing %q jobs: %w", k.info.Name, err)
	}
	defer rows.Close()
	f := finished{ok: make(map[int64]bool, n)}
	for rows.Next() {
		m, fds, raw := rows.Conn().TypeMap(), rows.FieldDescriptions(), rows.RawValues()
		if !runs {
			var id int64
			if err := m.Scan(fds[0].DataTypeOID, fds[0].Format, raw[0], &id); err != nil {
				return finished{}, fmt.Errorf("dispatcher: finishing %q jobs: %w", k.info.Name, err)
			}
			f.ok[id] = true
			continue
		}
		// See finishRunSQL for the columns.
		if raw[0] != nil {
			var done []int64
			if err := m.Scan(fds[0].DataTypeOID, fds[0].Format, raw[0], &done); err != nil {
				return finished{}, fmt.Errorf("dispatcher: finishing %q jobs: %w", k.info.Name, err)
			}
			for _, id := range done {
				f.ok[id] = true
			}
		}
		if raw[2] == nil {
			continue
		}
		var prev int64
		if err := m.Scan(fds[2].DataTypeOID, fds[2].Format, raw[2], &prev); err != nil {
			return finished{}, fmt.Errorf("dispatcher: finishing %q jobs: %w", k.info.Name, err)
		}
		c, err := k.scanClaim(rows, 3, sent)
		if err != nil {
			return finished{}, err
		}
		if f.next == nil {
			f.next = map[int64]*claimed{}
		}
		f.next[prev] = c
	}
	return f, rows.Err()
}

// finishNotifies reports whether finishing batch must wake the kind's dispatchers. A finished job
// frees something for the others only when the kind has a key (its slot) or a total limit (a share
// of it), and a job that goes back to wait (retry, snooze, run again, release) has a due time they
// must learn. A plain kind's successes and failures free nothing but this dispatcher's own slots,
// which it knows of without a notification; skipping it spares every listener a wake-up per batch.
//
// A key run that continues frees nothing either: its slot passes to the key's next job. The finish
// statement itself notifies when a run ends there (see finishRunSQL).
func (k *kindRunner) finishNotifies(batch []finishReq) bool {
	if k.hasTotal.Load() {
		return true
	}
	for _, r := range batch {
		if r.out != writeProcessed && r.out != writeFailed || k.keyed && r.next == nil {
			return true
		}
	}
	return false
}

// finishOne records c's outcome, waits until it is written, and reports whether the row accepted it.
func (k *kindRunner) finishOne(c *claimed, out rowWrite, errText string, delay time.Duration) bool {
	held, _ := k.finishAndContinue(c, out, errText, delay, -1)
	return held
}

// finishAndContinue records c's outcome like finishOne and, when slot is not -1, claims the next job
// of c's key on that slot in the same statement (see finishRunSQL); next is nil when none was claimed.
func (k *kindRunner) finishAndContinue(c *claimed, out rowWrite, errText string, delay time.Duration, slot int) (held bool, next *claimed) {
	req := finishReq{id: c.id, token: c.token, out: out, errText: errText, delay: delay, held: make(chan bool, 1), slot: slot}
	if slot >= 0 {
		req.next = make(chan *claimed, 1)
	}
	k.fin.submit(req, c.key)
	if req.next != nil {
		next = <-req.next
	}
	if held := <-req.held; !held {
		k.sh.logger.Info("dispatcher: the job's row had moved on; its outcome was not recorded",
			"kind", k.info.Name, "id", c.id, "outcome", out.String())
		return false, nil
	}
	return true, next
}
