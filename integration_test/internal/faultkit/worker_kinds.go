package faultkit

// The kinds a worker process can work besides the keyed one, each switched on by a setting of
// WorkerSettings (an environment variable of the worker), and what else a worker may be given: a
// ledger on a server of its own.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/schedule"
)

// envInputKind names the bad-input scenario's plain kind for the workers to work (unset: none).
const envInputKind = "JPW_INPUT_KIND"

// InputJob is the data of the bad-input scenario's plain kind. Meta carries the payload's own
// check: "body_len" is len(Body) and "keys" is len(Meta), so the handler can tell a payload that
// arrived whole. BlogID only spreads the handler's ledger rows (mp_conc) over blogs of their own.
type InputJob struct {
	BlogID int64          `jobpipe:"blog_id"`
	Seq    int64          `jobpipe:"seq"`
	Body   string         `jobpipe:"body"`
	Meta   map[string]int `jobpipe:"meta"`
	Wait   time.Duration  `jobpipe:"wait"`
}

// InputBlogBase puts the plain kind's blogs apart from the keyed kind's in mp_conc.
const InputBlogBase = 1_000_000

// DefineInputKind defines the plain kind the test and its workers share.
func DefineInputKind(name string) (*jobinfo.Kind[InputJob], error) {
	return jobinfo.Define[InputJob](name, jobinfo.MaxAttempts(3), jobinfo.Backoff(backoff.Constant(200*time.Millisecond)))
}

// InputPayload is job seq with body and extraKeys more members in Meta, which vouches for both.
func InputPayload(seq int64, body string, extraKeys int) InputJob {
	meta := map[string]int{"body_len": len(body)}
	for i := range extraKeys {
		meta["k"+strconv.Itoa(i)] = i
	}
	meta["keys"] = len(meta) + 1
	return InputJob{BlogID: InputBlogBase + seq, Seq: seq, Body: body, Meta: meta, Wait: time.Duration(seq) * time.Millisecond}
}

// check reports a payload that did not arrive as it was enqueued.
func (j InputJob) check() error {
	if j.Meta["body_len"] != len(j.Body) || j.Meta["keys"] != len(j.Meta) {
		return fmt.Errorf("payload damaged: body of %d bytes (meta says %d), meta of %d keys (meta says %d)",
			len(j.Body), j.Meta["body_len"], len(j.Meta), j.Meta["keys"])
	}
	return nil
}

// inputKindExtra gives a worker the bad-input scenario's plain kind, when JPW_INPUT_KIND names it.
func inputKindExtra(h *workerHost) error {
	name := h.Env(envInputKind)
	if name == "" {
		return nil
	}
	kind, err := DefineInputKind(name)
	if err != nil {
		return err
	}
	return dispatcher.Register(h.D, kind, func(jctx context.Context, j *dispatcher.Job[InputJob]) error {
		c := handlerCall{Kind: name, JobID: j.ID, BlogID: j.Data.BlogID, Seq: j.Data.Seq, Attempt: j.Attempt, Token: j.Token, Slot: j.Slot}
		return h.HandleWith(jctx, c, func(jctx context.Context, _ handlerCall) error {
			if err := j.Data.check(); err != nil {
				return err
			}
			return h.behave(jctx, c)
		})
	})
}

// envPlainKind names the plain kind a worker works besides the keyed one (unset: none).
const envPlainKind = "JPW_PLAIN_KIND"

// PlainJob is the plain kind's data: blog_id is an ordinary column here. A plain kind (no key, so no
// Redis lock) runs beside the keyed one where a scenario checks what keeps running from PostgreSQL
// alone, or measures throughput; its handler calls are recorded in the ledger under its name.
type PlainJob struct {
	BlogID int64 `jobpipe:"blog_id"`
	Seq    int64 `jobpipe:"seq"`
}

// definePlainKind defines the plain kind the test and its workers share, with the keyed kind's
// attempts and a constant backoff.
func definePlainKind(name string, retryDelay time.Duration) (*jobinfo.Kind[PlainJob], error) {
	return jobinfo.Define[PlainJob](name, jobinfo.MaxAttempts(5), jobinfo.Backoff(backoff.Constant(retryDelay)))
}

// plainKindExtra gives a worker the plain kind, when JPW_PLAIN_KIND names it.
func plainKindExtra(h *workerHost) error {
	name := h.Env(envPlainKind)
	if name == "" {
		return nil
	}
	retryDelay, err := h.RetryDelay()
	if err != nil {
		return err
	}
	kind, err := definePlainKind(name, retryDelay)
	if err != nil {
		return err
	}
	return dispatcher.Register(h.D, kind, func(jctx context.Context, j *dispatcher.Job[PlainJob]) error {
		return h.Handle(jctx, handlerCall{Kind: name, JobID: j.ID, BlogID: j.Data.BlogID, Seq: j.Data.Seq,
			Attempt: j.Attempt, Token: j.Token, Slot: j.Slot})
	})
}

// envLedgerURL is the connection string of the ledger's pool in a worker (unset: the worker's
// database URL). A scenario gives the ledger a server of its own when the fault would otherwise
// take the witness down with the library, or an application_name of its own so that a storm of
// terminated backends spares it.
const envLedgerURL = "JPW_LEDGER_URL"

// ledgerURLExtra gives the worker's ledger a pool of its own on JPW_LEDGER_URL, when set.
func ledgerURLExtra(h *workerHost) error {
	u := h.Env(envLedgerURL)
	if u == "" {
		return nil
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return fmt.Errorf("%s: %w", envLedgerURL, err)
	}
	// The worker's own ledger pool has 2 connections, for the shared server; on a private cluster
	// the witness gets 8, so that its writes (two per handler call) never bound the throughput
	// measured. The worker's own pool stays unused (and is closed on exit).
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", envLedgerURL, err)
	}
	// Handle reads h.Ledger at each call; the process exits right after its dispatcher stops,
	// which closes this pool's connections with it.
	h.Ledger = pool
	return nil
}

// The kinds share the ledger and mp_conc, which know a call by its blog id: each kind's blogs lie in a
// range of their own, so that a plain job never counts as running beside a keyed job of the same blog.
const (
	RedisPlainBlogBase = 10_000_000 // the plain kind's blog ids start here; the keyed kind's lie below
	ProbeBlogBase      = 30_000_000 // the probe kind's keys start here
)

// The kinds' names besides the keyed one (KeyedKind).
const (
	RedisPlainKind = "fr_plain"
	ProbeKind      = "fr_probe"
)

// envProbes names the probe kind a worker works besides the keyed one (unset: none).
const envProbes = "JPW_FR_PROBE_KIND"

// probeEvery is how often a probe job heartbeats.
const probeEvery = 200 * time.Millisecond

// probeDDL: fr_heartbeats records each heartbeat of a probe job: when it was sent (the worker's clock,
// which is the database's: one machine), how long Job.Heartbeat took, and its error. A row in
// fr_probe_stop ends every probe job.
const probeDDL = `CREATE TABLE fr_heartbeats (
	n bigserial PRIMARY KEY,
	job_id bigint NOT NULL,
	token bigint NOT NULL,
	pid int NOT NULL,
	sent_at timestamptz NOT NULL,
	took_us bigint NOT NULL,
	err text);
CREATE TABLE fr_probe_stop (stop bool)`

// ProbeJob is a probe job: one per key, running until fr_probe_stop has a row, heartbeating every
// probeEvery. Its key makes it take an execution lock like any keyed job, so its heartbeats extend
// a lock on the scenario's nodes.
type ProbeJob struct {
	Probe int64 `jobpipe:"probe,key"`
	Seq   int64 `jobpipe:"seq"`
}

// defineProbeKind defines the probe kind the test and its workers share.
func defineProbeKind() (*jobinfo.Kind[ProbeJob], error) {
	return jobinfo.Define[ProbeJob](ProbeKind, jobinfo.MaxAttempts(5), jobinfo.Backoff(backoff.Constant(DefaultRetryDelay)))
}

// probeKindExtra gives a worker the probe kind, when JPW_FR_PROBE_KIND is set.
func probeKindExtra(h *workerHost) error {
	if h.Env(envProbes) == "" {
		return nil
	}
	kind, err := defineProbeKind()
	if err != nil {
		return err
	}
	return dispatcher.Register(h.D, kind, func(jctx context.Context, j *dispatcher.Job[ProbeJob]) error {
		c := handlerCall{Kind: ProbeKind, JobID: j.ID, BlogID: ProbeBlogBase + j.Data.Probe, Seq: j.Data.Seq,
			Attempt: j.Attempt, Token: j.Token, Slot: j.Slot}
		return h.HandleWith(jctx, c, func(jctx context.Context, _ handlerCall) error { return runProbe(jctx, h, j) })
	})
}

// runProbe heartbeats every probeEvery until the probes are stopped or the lease is lost, and records
// how long each heartbeat took. A heartbeat gets a context of its own with a long deadline, so that what
// is measured is the dispatcher's own bound on it, not this caller's.
func runProbe(jctx context.Context, h *workerHost, j *dispatcher.Job[ProbeJob]) error {
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-jctx.Done():
			return context.Cause(jctx)
		case <-tick.C:
		}
		var stop bool
		qctx, cancel := context.WithTimeout(jctx, 5*time.Second)
		err := h.Ledger.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM fr_probe_stop)`).Scan(&stop)
		cancel()
		if err == nil && stop {
			return nil
		}
		sent := time.Now()
		hctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		hbErr := j.Heartbeat(hctx)
		cancel()
		took := time.Since(sent)
		var msg any
		if hbErr != nil {
			msg = hbErr.Error()
		}
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = retryUnsent(lctx, func() error {
			_, err := h.Ledger.Exec(lctx, `INSERT INTO fr_heartbeats (job_id, token, pid, sent_at, took_us, err) VALUES ($1, $2, $3, $4, $5, $6)`,
				j.ID, j.Token, h.Pid, sent, took.Microseconds(), msg)
			return err
		})
		cancel()
		if err != nil {
			h.Logger.Error("worker: recording a probe heartbeat", "id", j.ID, "err", err)
		}
		if hbErr != nil {
			return hbErr
		}
	}
}

// Worker extras of the scenarios, each on when its variable names its kind.
const (
	// envTickKind names a kind whose job a schedule of the same name enqueues every second.
	envTickKind = "JPW_TICK_KIND"
	// envFlakyKind names a plain kind of at most 3 attempts whose jobs fail by FlakyError.
	envFlakyKind = "JPW_FLAKY_KIND"
)

// TickJob is the data of the schedule's kind.
type TickJob struct {
	Source string `jobpipe:"source"`
}

// DefineTickKind defines the schedule's kind. It keeps finished jobs a day, so that the kind has a
// pruning lease (prune:NAME) besides its rescue lease: one more maintenance lease to take over.
func DefineTickKind(name string) (*jobinfo.Kind[TickJob], error) {
	return jobinfo.Define[TickJob](name, jobinfo.MaxAttempts(5), jobinfo.Backoff(backoff.Constant(200*time.Millisecond)),
		jobinfo.Retention(24*time.Hour, 24*time.Hour))
}

// tickSpec is the schedule: every second, and every missed instant fired late rather than skipped,
// so that a change of leader that takes long still leaves one job for each second.
func tickSpec(name string) schedule.Spec {
	return schedule.Spec{Name: name, Cron: "* * * * * *", CatchUp: schedule.CatchUpAll}
}

// FlakyMaxAttempts is the flaky kind's max attempts.
const FlakyMaxAttempts = 3

// DefineFlakyKind defines the flaky kind: a plain kind (PlainJob) of 3 attempts, retried after
// retryDelay.
func DefineFlakyKind(name string, retryDelay time.Duration) (*jobinfo.Kind[PlainJob], error) {
	return jobinfo.Define[PlainJob](name, jobinfo.MaxAttempts(FlakyMaxAttempts), jobinfo.Backoff(backoff.Constant(retryDelay)))
}

// FlakyError is the error of attempt of the flaky kind's job seq, or nil: a job whose seq ends in 00
// is poison (1%: fails every attempt), one whose seq ends in 01 to 05 is transient (5%: fails its first
// two attempts, then succeeds), every other one succeeds at once. Each error names its attempt, so that
// the error a failed job keeps shows which attempt it came from.
func FlakyError(seq int64, attempt int) error {
	switch r := seq % 100; {
	case r == 0:
		return fmt.Errorf("poison job seq %d: attempt %d failed, as every attempt does", seq, attempt)
	case r <= 5 && attempt <= 2:
		return fmt.Errorf("transient failure of job seq %d on attempt %d", seq, attempt)
	}
	return nil
}

// tickKindExtra registers the schedule's kind and adds its schedule; its handler is recorded in the
// ledger under the kind's name, with blog 0 and seq 0.
func tickKindExtra(h *workerHost) error {
	name := h.Env(envTickKind)
	if name == "" {
		return nil
	}
	kind, err := DefineTickKind(name)
	if err != nil {
		return err
	}
	err = dispatcher.Register(h.D, kind, func(jctx context.Context, j *dispatcher.Job[TickJob]) error {
		return h.Handle(jctx, handlerCall{Kind: name, JobID: j.ID, Attempt: j.Attempt, Token: j.Token, Slot: j.Slot})
	})
	if err != nil {
		return err
	}
	return dispatcher.AddSchedule(h.D, kind, tickSpec(name), TickJob{Source: "schedule"})
}

// flakyKindExtra registers the flaky kind: its handler sleeps as the worker's settings say, then fails
// as FlakyError says, recorded in the ledger under the kind's name.
func flakyKindExtra(h *workerHost) error {
	name := h.Env(envFlakyKind)
	if name == "" {
		return nil
	}
	retryDelay, err := h.RetryDelay()
	if err != nil {
		return err
	}
	kind, err := DefineFlakyKind(name, retryDelay)
	if err != nil {
		return err
	}
	return dispatcher.Register(h.D, kind, func(jctx context.Context, j *dispatcher.Job[PlainJob]) error {
		c := handlerCall{Kind: name, JobID: j.ID, BlogID: j.Data.BlogID, Seq: j.Data.Seq, Attempt: j.Attempt, Token: j.Token, Slot: j.Slot}
		return h.HandleWith(jctx, c, func(jctx context.Context, c handlerCall) error {
			if err := h.behave(jctx, c); err != nil {
				return err
			}
			return FlakyError(c.Seq, c.Attempt)
		})
	})
}
