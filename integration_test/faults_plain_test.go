package integration_test

// A plain kind (no key, so no Redis lock) beside the keyed one, for the fault scenarios that check
// what keeps running from PostgreSQL alone or measure throughput. A worker process works it when
// JPW_PLAIN_KIND names it; its handler calls are recorded in the ledger under that name, with the
// worker's sleep settings.

import (
	"context"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// mpEnvPlainKind names the plain kind a worker works besides the keyed one (unset: none).
const mpEnvPlainKind = "JPW_PLAIN_KIND"

// mpPlainJob is the plain kind's data: blog_id is an ordinary column here.
type mpPlainJob struct {
	BlogID int64 `jobpipe:"blog_id"`
	Seq    int64 `jobpipe:"seq"`
}

// mpDefinePlainKind defines the plain kind the test and its workers share, with the keyed kind's
// attempts and a constant backoff.
func mpDefinePlainKind(name string, retryDelay time.Duration) (*jobinfo.Kind[mpPlainJob], error) {
	return jobinfo.Define[mpPlainJob](name, jobinfo.MaxAttempts(5), jobinfo.Backoff(backoff.Constant(retryDelay)))
}

func init() {
	mpWorkerExtras = append(mpWorkerExtras, func(h *mpWorkerHost) error {
		name := h.Env(mpEnvPlainKind)
		if name == "" {
			return nil
		}
		retryDelay, err := h.RetryDelay()
		if err != nil {
			return err
		}
		kind, err := mpDefinePlainKind(name, retryDelay)
		if err != nil {
			return err
		}
		return dispatcher.Register(h.D, kind, func(jctx context.Context, j *dispatcher.Job[mpPlainJob]) error {
			return h.Handle(jctx, mpCall{Kind: name, JobID: j.ID, BlogID: j.Data.BlogID, Seq: j.Data.Seq,
				Attempt: j.Attempt, Token: j.Token, Slot: j.Slot})
		})
	})
}

// addPlainKind creates the table of a plain kind named name in e's schema and returns the kind; set
// Extra[mpEnvPlainKind] = name in the workers' settings for them to work it.
func (e *mpEnv) addPlainKind(t *testing.T, name string, retryDelay time.Duration) *jobinfo.Kind[mpPlainJob] {
	t.Helper()
	kind, err := mpDefinePlainKind(name, retryDelay)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	return kind
}
