package integration_test

// The fault scenario of failing jobs (13 in docs/reliability.md): jobs that fail now and then, and
// jobs that always fail, under a steady load. No lease is lost here: it checks the attempts, the
// errors kept and the throughput.

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/integration_test/internal/faultkit"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// Jobs of a plain kind of 3 attempts (mp_flaky, retried after 100 ms) fail by a rule on their seq
// (faultkit.FlakyError): 1% on every attempt (poison), 5% on their first two (transient), the rest
// never, offered at a steady 200 jobs/s to three workers for 12 s; before and after that stretch only
// jobs that never fail are offered. Every transient job ends processed on its third attempt, every
// poison job failed once, after its third, with the third attempt's error kept word for word, and
// every other job processed on its first attempt. Leases are the default 30 s: nothing here loses
// one.
func TestFault13PoisonAndTransient(t *testing.T) {
	faultkit.SkipUnlessFaultSuite(t)
	const (
		kindName   = "mp_flaky"
		retryDelay = 100 * time.Millisecond
		rate       = 200.0 // jobs offered per second
		window     = 6 * time.Second
		failing    = 12 * time.Second
	)

	// Arranged: three workers of the flaky kind, a steady load of jobs that never fail.
	e, kind, workers := arrangeFlakyKindWorkers(t, kindName, retryDelay)
	// Jobs are numbered by the producer; outside the failing stretch each takes a seq ending in 06 to
	// 99, which never fails.
	var failingNow atomic.Bool
	seq := func(k int) int64 {
		if failingNow.Load() {
			return int64(k)
		}
		return int64(k/94*100 + 6 + k%94)
	}
	var ids faultkit.IDs
	stopLoad := faultkit.StartSteadyLoad(t, rate, faultkit.PlainJobs(e, kind, seq, &ids))
	time.Sleep(time.Second)
	before := faultkit.Measure(t, e, window)

	// Injected: for 12 s, jobs that fail now and then or always.
	failingNow.Store(true)
	during := faultkit.Measure(t, e, failing)
	failingNow.Store(false)
	after := faultkit.Measure(t, e, window)
	sent := stopLoad()
	all := ids.All()
	faultkit.WaitFinished(t, e.DB, kindName, all, 60*time.Second)
	faultkit.CheckAlive(t, "after the failing stretch", workers...)
	faultkit.Terminate(t, workers...)
	e.CheckQuiet(t)

	// What must hold: each job ended as its rule says, once; nothing lost, no duplicate; the workers
	// counted as much.
	ends := checkJobsEndedByTheirRule(t, e, kindName, len(all))
	audit := faultkit.CheckAudit(t, e.DB, kindName, kindName)
	if audit.Completions != len(all) {
		t.Errorf("%d completions (processed or failed) of %d jobs: want exactly one each", audit.Completions, len(all))
	}
	lost, dups := faultkit.CheckLostAndDuplicates(t, e.DB, kindName, kindName, all, func(id int64) bool { return ends.poison[id] })
	if dups != 0 {
		t.Errorf("%d jobs ran to ok more than once; no lease was lost here", dups)
	}
	sum := faultkit.SumStats(t, workers)
	poison, transient, clean := len(ends.poison), ends.transient, ends.clean
	if sum.Failed != int64(poison) || sum.Retried != int64(2*(poison+transient)) || sum.Processed != int64(clean+transient) ||
		sum.StaleFinishes != 0 || sum.LeasesLost != 0 || sum.Rescued != 0 {
		t.Errorf("the workers' stats: %+v; want %d failed, %d retried, %d processed, nothing stale, lost or rescued",
			sum, poison, 2*(poison+transient), clean+transient)
	}
	if poison == 0 || transient == 0 {
		t.Errorf("%d poison and %d transient jobs: the failing stretch offered none", poison, transient)
	}
	faultkit.ReportFigures(t, "13 poison and transient",
		"throughput_before", before.Rate(t, e.DB, kindName), "throughput_during", during.Rate(t, e.DB, kindName),
		"throughput_after", after.Rate(t, e.DB, kindName), "offered", rate,
		"recovery", max(ends.lastFailing.Sub(during.To), 0), "jobs", sent, "poison_failed", poison, "transient_processed_on_3rd", transient,
		"clean_processed_on_1st", clean, "attempts", sum.Processed+sum.Retried+sum.Failed, "duplicates", dups, "lost", lost)
}

// arrangeFlakyKindWorkers starts three workers of the flaky kind named name, whose table is audited.
func arrangeFlakyKindWorkers(t *testing.T, name string, retryDelay time.Duration) (*faultkit.World, *jobinfo.Kind[faultkit.PlainJob], []*faultkit.Worker) {
	t.Helper()
	faultkit.Reserve(t, 3)
	r := testenv.NewRedis(t)
	e := faultkit.NewWorld(t, retryDelay, r.Addrs, r.Clients, r.Prefix)
	kind, err := faultkit.DefineFlakyKind(name, retryDelay)
	if err != nil {
		t.Fatal(err)
	}
	faultkit.CreateKindTable(t, e, kind)
	faultkit.InstallAudit(t, e.DB, e.Schema.Name, name)
	var workers []*faultkit.Worker
	for _, node := range []string{"w1", "w2", "w3"} {
		s := e.WorkerSettings(node)
		s.SleepMin, s.SleepMax, s.RetryDelay = 2*time.Millisecond, 5*time.Millisecond, retryDelay
		s.FlakyKind = name
		workers = append(workers, faultkit.StartWorker(t, s))
	}
	faultkit.WaitReady(t, 60*time.Second, workers...)
	return e, kind, workers
}

// flakyEnds is how the flaky kind's jobs ended.
type flakyEnds struct {
	poison           map[int64]bool // the poison jobs, failed
	transient, clean int            // processed on attempt 3, on attempt 1
	lastFailing      time.Time      // when the last job that failed an attempt ended
}

// checkJobsEndedByTheirRule checks each job of the flaky kind's table against the rule on its seq:
// the attempts it takes, each attempt's outcome, its end and the error it keeps; and that as many
// jobs ran as were enqueued.
func checkJobsEndedByTheirRule(t *testing.T, e *faultkit.World, kindName string, enqueued int) flakyEnds {
	t.Helper()
	// Each job's row, and its handler calls' attempts and outcomes in attempt order.
	rows, err := e.DB.Query(context.Background(), `SELECT j.id, j.seq, j.attempts_made, j.processed_at IS NOT NULL, j.failed_at IS NOT NULL, j.last_error,
		coalesce(j.processed_at, j.failed_at), array_agg(l.attempt ORDER BY l.attempt, l.n), array_agg(coalesce(l.outcome, 'never ended') ORDER BY l.attempt, l.n)
		FROM mp_flaky j JOIN mp_ledger l ON l.job_id = j.id AND l.kind = $1 GROUP BY j.id`, kindName)
	if err != nil {
		t.Fatal(err)
	}
	type ended struct {
		id, seq           int64
		attempts          int
		processed, failed bool
		lastError         *string
		at                time.Time
		callAttempts      []int
		outcomes          []string
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ended, error) {
		var j ended
		return j, r.Scan(&j.id, &j.seq, &j.attempts, &j.processed, &j.failed, &j.lastError, &j.at, &j.callAttempts, &j.outcomes)
	})
	if err != nil {
		t.Fatal(err)
	}
	bad := faultkit.NewFailureLog(t, "jobs ended otherwise than their rule says")
	ends := flakyEnds{poison: map[int64]bool{}}
	for _, j := range jobs {
		// What the rule says: the attempts it takes, and each attempt's outcome.
		var want []string
		for a := 1; a <= faultkit.FlakyMaxAttempts; a++ {
			err := faultkit.FlakyError(j.seq, a)
			if err == nil {
				want = append(want, "ok")
				break
			}
			want = append(want, err.Error())
		}
		wantFailed := want[len(want)-1] != "ok"
		var wantLast *string
		switch {
		case wantFailed:
			ends.poison[j.id] = true
			wantLast = &want[len(want)-1]
		case len(want) > 1:
			ends.transient++
			wantLast = &want[len(want)-2]
		default:
			ends.clean++
		}
		if len(want) > 1 && j.at.After(ends.lastFailing) {
			ends.lastFailing = j.at
		}
		attempts := make([]int, len(want))
		for i := range attempts {
			attempts[i] = i + 1
		}
		if j.attempts != len(want) || j.failed != wantFailed || j.processed == wantFailed || !slices.Equal(j.outcomes, want) ||
			!slices.Equal(j.callAttempts, attempts) || (j.lastError == nil) != (wantLast == nil) || (wantLast != nil && *j.lastError != *wantLast) {
			bad.Errorf("job %d (seq %d): attempts_made %d, processed %v, failed %v, last error %q, calls %v %q; want %d attempts %q, last error %q",
				j.id, j.seq, j.attempts, j.processed, j.failed, faultkit.ShowString(j.lastError), j.callAttempts, j.outcomes, len(want), want, faultkit.ShowString(wantLast))
		}
	}
	bad.Done()
	if len(jobs) != enqueued {
		t.Errorf("%d jobs ran, %d were enqueued", len(jobs), enqueued)
	}
	return ends
}
