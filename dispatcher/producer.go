package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// producer is a kind's claiming loop (run): a single goroutine, the only one that reads or writes
// the fields below. It reaches the rest of the kind through the embedded kindRunner, whose own
// fields are read-only or safe for concurrent use.
type producer struct {
	*kindRunner
	heads headPicker // a keyed kind's

	// limits is the copy of the kind's stored limits in force, read at limitsRead (see currentLimits).
	limits     kindLimits
	limitsRead time.Time

	// claimWasFull: the last claim got all it asked for, so the kind has a backlog (see run, linger
	// and plainClaimFrom).
	claimWasFull bool
	// contended: the last claim pass of a keyed kind claimed fewer jobs than it chose heads, as
	// another dispatcher held their queue locks or claimed them first (see run).
	contended bool
	// Where the claims of a plain kind in created order start (see plainClaimFrom).
	claimFrom   int64
	fullClaimAt time.Time
	// claimedFrom is where the last claim of a plain kind started: above 0, it skipped the front of
	// the index, where a job committed after a higher id may wait.
	claimedFrom int64

	// missedPauses counts the passes that went without their pause since missedPauseLogged, when
	// the last line about them was logged (see pauseMissed).
	missedPauses      int
	missedPauseLogged time.Time

	// lingerFor bounds the wait for a full claim's worth of free workers (see linger), gatherFor the
	// wait before a claim without a backlog (see gather).
	lingerFor, gatherFor time.Duration
	// batch is the most jobs one claim takes (Config.ClaimBatch).
	batch int
}

func newProducer(k *kindRunner) (*producer, error) {
	p := &producer{kindRunner: k, lingerFor: claimLinger, gatherFor: claimGather, batch: k.sh.cfg.ClaimBatch}
	if p.batch == 0 {
		p.batch = DefaultClaimBatchFor(k.concurrency)
	}
	if k.keyed {
		var err error
		if p.heads, err = newHeadPicker(k.info); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// claimRetryFirst is how long a kind waits to claim again after a claim failed; the wait doubles
// while claims keep failing, up to PollInterval.
const claimRetryFirst = 50 * time.Millisecond

// run is the producer's claiming loop: whenever it is woken (a job was enqueued or finished, a scheduled
// job fell due, the poll ticked) and this dispatcher has free slots for the kind, it claims due jobs
// and starts them. A claim that failed is tried again soon: most failures are a connection the
// server ended (a restart, a terminated backend), and the next claim gets a new one; waiting for the
// poll instead would leave due jobs idle that long after every such failure.
func (p *producer) run(ctx context.Context) {
	poll := time.NewTicker(p.sh.cfg.PollInterval)
	defer poll.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	retryWait := claimRetryFirst
	// unserved is set while jobs may be due that no worker was free to take: a wake-up came when the
	// kind could claim none.
	unserved := false
	for {
		want := p.nextClaim(ctx, linger)
		if ctx.Err() != nil {
			return // stopping: claim nothing more
		}
		unserved = want <= 0
		if want > 0 {
			got, reading, err := p.claimAndStart(ctx, want)
			if ctx.Err() != nil {
				return
			}
			// A claim that got all it asked for leaves more jobs waiting, likely: a backlog.
			p.claimWasFull = err == nil && got == want
			switch {
			case err != nil:
				p.sh.logger.Warn("dispatcher: claim failed; retrying", "kind", p.info.Name, "in", retryWait, "err", err)
				retry.Reset(retryWait)
				retryWait = min(2*retryWait, p.sh.cfg.PollInterval)
			case got == want:
				retryWait = claimRetryFirst
				continue // there may be more: look again at once
			case p.claimedFrom > 0:
				// A claim that skipped the front of the index and fell short looks there at once: a
				// job committed after one with a higher id may wait below where it started, and no
				// notification may come for it.
				retryWait = claimRetryFirst
				continue
			case p.contended:
				// Another dispatcher's pass took some of the heads this one chose, and may leave
				// others unclaimed: it claims no more than it has workers for. Look again soon rather
				// than at the next poll, less often while the heads stay taken.
				retry.Reset(retryWait)
				retryWait = min(2*retryWait, p.sh.cfg.PollInterval)
				p.armDueTimer(ctx, due, reading)
			default:
				retryWait = claimRetryFirst
				p.armDueTimer(ctx, due, reading)
			}
		}
		// A worker that frees up matters only when due jobs may be left over: a backlog, or a wake-up
		// no worker could answer. Otherwise new work announces itself (a notification, the due
		// timer, the poll), and a claim at each job's end would find nothing.
		var freed <-chan struct{}
		if p.claimWasFull || unserved {
			freed = p.capacity.freed
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-freed:
		case <-poll.C:
		case <-due.C:
		case <-retry.C:
		}
	}
}

// claimLinger is the longest a kind with a backlog waits for more of its workers to free up before
// a claim that cannot take a full batch (see linger): producer.lingerFor's value.
const claimLinger = time.Millisecond

// nextClaim is how many jobs the kind claims next: as many as it has free workers for, up to a full
// claim, after waiting for a full claim's worth while it has a backlog (see linger); 0 when it may
// claim none, as while outcomes or lease renewals of the kind wait for the database (behind):
// once it answers again they go first.
func (p *producer) nextClaim(ctx context.Context, timer *time.Timer) int {
	if p.behind.Load() > 0 {
		return 0
	}
	free := p.capacity.free()
	switch {
	case free > 0 && p.claimWasFull && free < p.fullClaim():
		// The count may fall meanwhile, to 0 or below: handlers that return during the wait move their
		// jobs to the finisher, which may hold maxFinishing of them already.
		free = p.linger(ctx, timer)
	case free > 0 && !p.claimWasFull && p.gatherFor > 0:
		p.gather(ctx, timer)
		free = p.capacity.free()
	}
	return max(0, min(free, p.batch))
}

// claimGather is how long a kind without a backlog waits, once woken, before it claims (see gather):
// producer.gatherFor's value.
const claimGather = 2 * time.Millisecond

// gather waits p.gatherFor before a claim of a kind without a backlog, so that the jobs enqueued
// meanwhile start with the same claim: when jobs trickle in, each would otherwise cost a claim
// statement and a commit of its own, which at a moderate rate are most of what the database spends
// on a job. The wake-ups that come during the wait are for jobs the claim will see, so they are
// dropped, rather than costing a claim that finds nothing; those that come during the claim are kept.
func (p *producer) gather(ctx context.Context, timer *time.Timer) {
	timer.Reset(p.gatherFor)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	select {
	case <-p.wake:
	default:
	}
}

// fullClaim is the most one claim of the kind takes.
func (p *producer) fullClaim() int { return min(p.batch, p.capacity.size()) }

// linger waits, while the kind has a backlog, up to p.lingerFor for a full claim's worth of free
// workers, and returns how many are free: at once when a full claim's worth is, when the wait ends,
// or when ctx ends. Each worker that frees its place tells it (capacity.freed), so it looks again each time.
//
// Each claim is a statement and a commit whatever its size, and a claim sent at once takes only the
// workers freed during the previous claim: with short handlers, the jobs of one claim are still
// starting when the next is sent, so claims settle well below a full claim and each job pays for more
// statements. The jobs of the last claim free their workers within the wait, so it is short,
// and it is paid only under a backlog, where a job waits longer than that for its turn anyway.
func (p *producer) linger(ctx context.Context, timer *time.Timer) int {
	timer.Reset(p.lingerFor)
	defer timer.Stop()
	for {
		free := p.capacity.free()
		if free >= p.fullClaim() {
			return free
		}
		select {
		case <-p.capacity.freed:
		case <-timer.C:
			return p.capacity.free()
		case <-ctx.Done():
			return free
		}
	}
}

func (p *producer) claimAndStart(ctx context.Context, n int) (int, dueReading, error) {
	start := time.Now()
	// A pass that has begun completes even if Stop comes meanwhile: a claim whose commit raced with a
	// cancellation could be committed yet reported as failed, and its jobs left leased with nobody
	// running them. Stop waits for the pass, and then for the jobs it started.
	passCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.sh.cfg.LeaseTTL)
	defer cancel()
	claims, due, err := p.claim(passCtx, n)
	p.sh.logger.Debug("dispatcher: claim pass", "kind", p.info.Name, "wanted", n, "claimed", len(claims), "took", time.Since(start))
	for _, c := range claims {
		p.capacity.take()
		p.sh.workers.Add(1)
		go p.work(c)
	}
	p.sh.stats.claimed.Add(int64(len(claims)))
	return len(claims), due, err
}

// armDueTimer sets the timer to the next scheduled job's time, so it starts on time without polling.
// The claim just made may have read it already (see claimPlainReadingDue).
func (p *producer) armDueTimer(ctx context.Context, timer *time.Timer, due dueReading) {
	if !due.read {
		err := p.sh.db.QueryRow(ctx, p.sql.nextDueAndNow).Scan(&due.next, &due.now)
		if err != nil {
			if !errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil {
				p.sh.logger.Warn("dispatcher: reading the next scheduled time failed", "kind", p.info.Name, "err", err)
			}
			return
		}
	}
	next, now := due.next, due.now
	if next == nil {
		return
	}
	// The wait is measured on the database's clock, which decides when a job is due.
	timer.Reset(next.Sub(now) + time.Millisecond)
}
