package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// herdStartTarget is the bound on the time from due until every job has started.
const herdStartTarget = 2 * time.Second

// herdRound is one dispatcher count of the sweep.
type herdRound struct {
	Dispatchers   int        `json:"dispatchers"`
	Seconds       float64    `json:"seconds"`        // due until the last job was processed (database clock)
	LastStartS    float64    `json:"last_start_s"`   // due until the last handler began (local clock)
	FirstStartS   float64    `json:"first_start_s"`  // due until the first handler began (local clock)
	P50StartS     float64    `json:"p50_start_s"`    // median of the same
	LastClaimS    float64    `json:"last_claim_s"`   // due until the last claim (started_at, database clock)
	Claimed       int64      `json:"claimed"`        // sum of Stats().Claimed
	StaleFinishes int64      `json:"stale_finishes"` // sum of Stats().StaleFinishes
	Wasted        int64      `json:"wasted_claims"`  // Claimed - jobs + StaleFinishes
	InsertS       float64    `json:"insert_s"`       // how long the insert took
	Accounting    accounting `json:"accounting"`
}

// runHerd enqueues Jobs jobs all due at one instant and times the dispatchers of each count in the
// sweep working them, each dispatcher with a pool of its own.
func runHerd(ctx context.Context, s *session) error {
	o, r := s.opts, s.report
	kind, err := createKind[plainJob](ctx, s, "bench_herd")
	if err != nil {
		return err
	}
	s.trace.reset()
	var rounds []herdRound
	for i, d := range o.Dispatchers {
		if i > 0 {
			if err := s.truncate(ctx, kind.Info().Table); err != nil {
				return err
			}
		}
		round, err := s.herdRound(ctx, kind, d)
		if err != nil {
			return fmt.Errorf("%d dispatchers: %w", d, err)
		}
		rounds = append(rounds, round)
	}
	recordHerd(r, int64(o.Jobs), rounds)
	s.statements("dispatchers' statements over the whole sweep (client-side time)")
	return nil
}

// herdRound starts d dispatchers, enqueues the jobs due Lead from now, and waits until all are
// processed.
func (s *session) herdRound(ctx context.Context, kind *jobinfo.Kind[plainJob], d int) (herdRound, error) {
	o := s.opts
	jobs := int64(o.Jobs)
	var led ledger
	starts := make([]atomic.Int64, jobs) // when each job's handler began, Unix ns (local clock)
	var early atomic.Int64
	f, err := s.startFleet(ctx, d, fmt.Sprintf("herd%d", d), false, func(disp *dispatcher.Dispatcher) error {
		return dispatcher.Register(disp, kind, func(_ context.Context, j *dispatcher.Job[plainJob]) error {
			now := time.Now()
			if j.ProcessAfter != nil && now.Before(*j.ProcessAfter) {
				early.Add(1)
			}
			starts[j.Data.N].CompareAndSwap(0, now.UnixNano())
			led.run(j.Data.N)
			return nil
		})
	})
	if err != nil {
		return herdRound{}, err
	}
	defer f.stop(ctx)
	due := time.Now().Add(o.Lead)
	var inserted atomic.Int64
	insertStart := time.Now()
	err = insert(ctx, s, kind, 0, jobs, &inserted, newPlainJob, dispatcher.ProcessAfter(due))
	if err != nil {
		return herdRound{}, err
	}
	insertTime := time.Since(insertStart)
	if left := time.Until(due); left < 200*time.Millisecond {
		return herdRound{}, fmt.Errorf("the insert took %v and ended %v before the jobs fell due: raise --lead (now %v)",
			insertTime.Round(time.Millisecond), left.Round(time.Millisecond), o.Lead)
	}
	stop := progress(o.Log, o.Progress, fmt.Sprintf("herd d=%d", d), func() (int64, int64) {
		p := f.processed()
		return p, jobs - p
	})
	err = s.waitProcessed(ctx, f, jobs)
	stop()
	if err != nil {
		return herdRound{}, err
	}
	if err := f.stop(ctx); err != nil {
		return herdRound{}, err
	}
	round := herdRound{Dispatchers: d, InsertS: round(insertTime.Seconds(), 2)}
	if err := s.herdTimes(ctx, kind, due, &round); err != nil {
		return round, err
	}
	lags := make([]int64, jobs)
	for i := range starts {
		lags[i] = starts[i].Load() - due.UnixNano()
	}
	slices.Sort(lags)
	round.LastStartS = round3(time.Duration(lags[len(lags)-1]))
	round.P50StartS = round3(time.Duration(lags[len(lags)/2]))
	round.FirstStartS = round3(time.Duration(lags[0]))
	st := f.stats()
	round.Claimed, round.StaleFinishes = st.Claimed, st.StaleFinishes
	round.Wasted = st.Claimed - jobs + st.StaleFinishes
	round.Accounting, err = s.account(ctx, kind.Info().Table, &led, jobs, early.Load())
	return round, err
}

// herdTimes reads the round's times from the table, by the database's clock: due until the last
// processed_at and until the last started_at.
func (s *session) herdTimes(ctx context.Context, kind *jobinfo.Kind[plainJob], due time.Time, h *herdRound) error {
	var done, claimed float64
	err := s.db.QueryRow(ctx, `SELECT extract(epoch FROM max(processed_at) - $1::timestamptz),
		extract(epoch FROM max(started_at) - $1::timestamptz) FROM `+kind.Info().Table.Sanitize(), due).Scan(&done, &claimed)
	h.Seconds, h.LastClaimS = round(done, 3), round(claimed, 3)
	return err
}

func round3(d time.Duration) float64 { return round(d.Seconds(), 3) }

func recordHerd(r *Report, jobs int64, rounds []herdRound) {
	r.result("scenario", "herd")
	r.result("jobs", jobs)
	ds := make([]int, len(rounds))
	for i, h := range rounds {
		ds[i] = h.Dispatchers
	}
	r.result("dispatchers", ds)
	tab := Table{Title: fmt.Sprintf("herd: %d jobs due at one instant (start times by the local clock, which the database shares on this machine)", jobs),
		Header: []string{"dispatchers", "due->all processed s", "due->first start s", "p50 start s", "due->last start s", "due->last claim s",
			"jobs/s", "claimed", "wasted claims", "stale finishes", "early (db/local)"}}
	var sum accounting
	var wasted int64
	var worstStart float64
	for _, h := range rounds {
		d := strconv.Itoa(h.Dispatchers)
		r.result("seconds_d"+d, h.Seconds)
		r.result("last_start_s_d"+d, h.LastStartS)
		tab.Rows = append(tab.Rows, []string{d, format(h.Seconds), format(h.FirstStartS), format(h.P50StartS), format(h.LastStartS),
			format(h.LastClaimS), format(rate(jobs, time.Duration(h.Seconds*float64(time.Second)))), format(h.Claimed),
			format(h.Wasted), format(h.StaleFinishes), fmt.Sprintf("%d/%d", h.Accounting.EarlyDB, h.Accounting.EarlyLocal)})
		wasted += h.Wasted
		worstStart = max(worstStart, h.LastStartS)
		a := h.Accounting
		sum.Jobs += a.Jobs
		sum.Rows += a.Rows
		sum.Processed += a.Processed
		sum.Failed += a.Failed
		sum.Retried += a.Retried
		sum.Duplicates += a.Duplicates
		sum.Lost += a.Lost
		sum.EarlyDB += a.EarlyDB
		sum.EarlyLocal += a.EarlyLocal
		sum.NeverRan = append(sum.NeverRan, a.NeverRan...)
	}
	r.result("wasted_claims", wasted)
	r.result("max_last_start_s", worstStart)
	sum.resultPairs(r)
	r.table(tab)
	r.table(Table{Title: "herd targets", Header: []string{"target", "measured"}, Rows: [][]string{
		{"0 wasted claims", format(wasted)},
		{fmt.Sprintf("all started within %v of due", herdStartTarget), fmt.Sprintf("worst %.3f s", worstStart)},
		{"0 early starts", format(sum.early())},
		{"time does not grow with dispatchers", "see due->all processed above"},
	}})
	r.Details["rounds"] = rounds
	sum.record(r)
}
