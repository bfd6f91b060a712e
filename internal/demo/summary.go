package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/dispatcher"
)

// Check is one promise the demo verified.
type Check struct {
	// Promise says what must hold.
	Promise string
	// Seen says what the demo measured.
	Seen string
	// OK is whether it held.
	OK bool
}

// Summary is the demo's verified outcome.
type Summary struct {
	// Checks are the promises, each with what was seen.
	Checks []Check
	// Elapsed is the whole run's time.
	Elapsed time.Duration
	// PerDispatcher counts the jobs each dispatcher processed.
	PerDispatcher []dispatcher.Stats
}

// OK reports whether every check held.
func (s *Summary) OK() bool {
	for _, c := range s.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

func summarise(ctx context.Context, db *pgxpool.Pool, p *plan, w *watch, ds []*dispatcher.Dispatcher) (*Summary, error) {
	q := func(sql string) (n int, err error) { return n, db.QueryRow(ctx, sql).Scan(&n) }
	var s Summary
	add := func(promise string, ok bool, seen string, args ...any) {
		s.Checks = append(s.Checks, Check{Promise: promise, Seen: fmt.Sprintf(seen, args...), OK: ok})
	}
	deliveries, err := q(`SELECT count(*) FROM webhook_delivery`)
	if err != nil {
		return nil, err
	}
	posts, err := q(`SELECT count(*) FROM blog_post_sync`)
	if err != nil {
		return nil, err
	}
	add("duplicates refused", deliveries == p.deliveries && posts == p.posts && p.deliveryDups > 0 && p.postDups > 0,
		"%d + %d refused; tables hold %d deliveries and %d post changes, one per event and post", p.deliveryDups, p.postDups, deliveries, posts)
	w.mu.Lock()
	maxDelivery, maxPost, outOfSeq, early, latest := w.maxPerKey["webhook_delivery"], w.maxPerKey["blog_post_sync"], w.outOfSeq, w.early, w.latest
	w.mu.Unlock()
	add("no key ever over its limit", maxDelivery <= DeliveryLimit && maxPost == 1,
		"at most %d deliveries of one customer at once (limit %d); at most %d change of one blog (limit 1)", maxDelivery, DeliveryLimit, maxPost)
	add("per-key order kept", outOfSeq == 0, "%d blog changes started out of order", outOfSeq)
	imports, err := q(`SELECT count(*) FROM flaky_import WHERE processed_at IS NOT NULL AND attempts_made = 3 AND last_error LIKE '%attempt 2)'`)
	if err != nil {
		return nil, err
	}
	reports, err := q(fmt.Sprintf(`SELECT count(*) FROM poison_report WHERE failed_at IS NOT NULL AND attempts_made = %d AND last_error LIKE '%%template missing'`, ReportAttempts))
	if err != nil {
		return nil, err
	}
	add("retries and failures as configured", imports == p.imports && reports == p.reports,
		"%d/%d imports processed on attempt 3 (last error kept); %d/%d poison reports failed after %d attempts with their error",
		imports, p.imports, reports, p.reports, ReportAttempts)
	unfinished, err := q(`SELECT (SELECT count(*) FROM webhook_delivery WHERE processed_at IS NULL) + (SELECT count(*) FROM blog_post_sync WHERE processed_at IS NULL)
		+ (SELECT count(*) FROM reminder WHERE processed_at IS NULL) + (SELECT count(*) FROM flaky_import WHERE processed_at IS NULL)
		+ (SELECT count(*) FROM poison_report WHERE failed_at IS NULL)`)
	if err != nil {
		return nil, err
	}
	twice := w.completedTwice()
	add("nothing lost, nothing done twice", unfinished == 0 && twice == 0,
		"%d jobs not in their expected final state; %d jobs completed more than once", unfinished, twice)
	add("no scheduled job early", early == 0, "%d of %d reminders started early; the latest started %v after its time",
		early, p.reminders, latest.Round(time.Millisecond))
	for _, d := range ds {
		s.PerDispatcher = append(s.PerDispatcher, d.Stats())
	}
	return &s, nil
}

func (s *Summary) print(out io.Writer) {
	fmt.Fprintf(out, "summary, checked against the handlers' observations and the tables:\n")
	for _, c := range s.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "  %s %-36s %s\n", mark, c.Promise, c.Seen)
	}
	for i, st := range s.PerDispatcher {
		fmt.Fprintf(out, "  dispatcher demo-%c: claimed %d, processed %d, retried %d, failed %d\n",
			'a'+i, st.Claimed, st.Processed, st.Retried, st.Failed)
	}
	verdict := "every promise held"
	if !s.OK() {
		verdict = "SOME PROMISES FAILED"
	}
	fmt.Fprintf(out, "%s (%v)\n", verdict, s.Elapsed.Round(100*time.Millisecond))
}
