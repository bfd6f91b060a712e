package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobpipe/jobpipe/execlock"
)

// A dispatcher with a keyed kind watches its Redis lock nodes: Start checks that a quorum answers
// (checkLockNodes), and while it runs, watchLocks reports each keyed kind whose lock calls keep
// failing for want of nodes, in the log (one WARN, a reminder a minute, one INFO at the end), to the
// Observer, and in jobpipe_lock_waits, where `jobpipe kinds` and the dashboard read it.

const (
	// lockWaitGrace is how long a kind's lock calls must keep failing, with none succeeding, before
	// it is reported: a single slow call under load is not an outage.
	lockWaitGrace = time.Second
	// lockWaitRemind is how often a kind that still waits is reported again, in the log and in
	// jobpipe_lock_waits (whose readers ignore rows older than two reminders).
	lockWaitRemind = time.Minute
	// lockPingEvery is how often the nodes are pinged while every kind's lock calls succeed, for the
	// Observer's count of nodes up; lockPingFailing while a kind's fail.
	lockPingEvery   = 5 * time.Second
	lockPingFailing = time.Second
	// lockWaitWrite bounds the statements that record a wait in jobpipe_lock_waits.
	lockWaitWrite = 5 * time.Second
	// lockWaitIdle is how long a kind whose lock calls failed must make no failing call (and at least
	// three polls) before its wait ends without a success: it no longer calls (no job of it is due, or
	// it was paused). Generous, so that a slow claim pass during an outage does not end the wait.
	lockWaitIdle = 30 * time.Second
)

const (
	saveLockWaitSQL = `INSERT INTO jobpipe_lock_waits (kind, node_name, since, error) VALUES ($1, $2, $3, $4)
ON CONFLICT (kind, node_name) DO UPDATE SET since = EXCLUDED.since, error = EXCLUDED.error, updated_at = now()`
	// Rows a crashed dispatcher left behind are removed with the next wait of their kind to end.
	deleteLockWaitSQL = `DELETE FROM jobpipe_lock_waits WHERE kind = $1 AND (node_name = $2 OR updated_at < now() - interval '1 hour')`
)

// lockWait is what a keyed kind's lock calls tell of the nodes. The calls set it, the watch reads it.
// A call that succeeds costs one atomic load while nothing fails.
type lockWait struct {
	failing atomic.Bool
	mu      sync.Mutex
	since   time.Time // the first failure since the last success
	last    time.Time // the latest failure
	err     error     // the latest failure's error
}

// lockCalled records how a lock call of the kind ended. Only a quorum of nodes not answering counts
// as a failure: contention (ErrTaken) is an answer, and a call ended by its context (Stop) tells
// nothing of the nodes.
func (k *kindRunner) lockCalled(err error) {
	switch {
	case err == nil:
		if k.lockWait.failing.Load() {
			k.lockWait.succeeded()
		}
	case errors.Is(err, execlock.ErrUnavailable):
		if k.lockWait.failed(err, time.Now()) {
			k.sh.wakeLockWatch()
		}
	case errors.Is(err, execlock.ErrTaken):
		if k.lockWait.failing.Load() {
			k.lockWait.succeeded()
		}
	}
}

// failed records a failure and reports whether it began a run of failures.
func (w *lockWait) failed(err error, now time.Time) (first bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failing.Load() {
		w.since, first = now, true
		w.failing.Store(true)
	}
	w.last, w.err = now, err
	return first
}

func (w *lockWait) succeeded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing.Store(false)
}

// state returns whether the kind's lock calls fail now, since when, the latest failure and its error.
func (w *lockWait) state() (failing bool, since, last time.Time, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failing.Load(), w.since, w.last, w.err
}

// idleSince ends a run of failures in which no call failed since before cutoff: the kind stopped
// calling (no job of it is due any more, or it was paused), so nothing of it waits for the nodes.
func (w *lockWait) idleSince(cutoff time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing.Load() && w.last.Before(cutoff) {
		w.failing.Store(false)
		return true
	}
	return false
}

// checkLockNodes pings every lock node when a keyed kind is registered (kinds without a key never
// touch Redis, so nodes they do not need cannot stop them), and returns each node's answer (nil when
// no keyed kind is registered). Fewer answers than a quorum is an error naming each node that did not
// answer, unless Config.StartWithoutLockQuorum: the same text is then returned as noQuorum, for Start
// to log once it has started.
func (d *Dispatcher) checkLockNodes(ctx context.Context) (answers []error, noQuorum string, err error) {
	keyed := keyedKinds(d.kinds)
	if len(keyed) == 0 {
		return nil, "", nil
	}
	answers = d.locker.PingNodes(ctx)
	up := nodesUp(answers)
	if up >= d.locker.Quorum() {
		return answers, "", nil
	}
	noQuorum = fmt.Sprintf("%d of %d Redis lock nodes answered PING, and the keyed kinds (%s) need a quorum of %d to take their locks:\n%s",
		up, len(answers), strings.Join(keyed, ", "), d.locker.Quorum(), d.nodesDown(answers, "\n"))
	if d.cfg.StartWithoutLockQuorum {
		return answers, noQuorum, nil
	}
	return nil, "", fmt.Errorf("dispatcher: Start: %s\ncheck the addresses in Config.Redis and that those Redis servers run, "+
		"or set Config.StartWithoutLockQuorum to start anyway (keyed jobs then wait until a quorum answers)", noQuorum)
}

// keyedKinds names the registered kinds with a concurrency key, sorted.
func keyedKinds(kinds map[string]*kindRunner) []string {
	var names []string
	for name, k := range kinds {
		if k.keyed {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func nodesUp(answers []error) int {
	up := 0
	for _, err := range answers {
		if err == nil {
			up++
		}
	}
	return up
}

// nodesDown describes each node that did not answer, "node <address>: <error>", joined by sep.
func (d *shared) nodesDown(answers []error, sep string) string {
	var down []string
	for i, err := range answers {
		if err != nil {
			down = append(down, fmt.Sprintf("node %s: %v", d.cfg.Redis[i].Options().Addr, err))
		}
	}
	return strings.Join(down, sep)
}

// wakeLockWatch tells the watch that a kind's lock calls began to fail, without blocking.
func (d *shared) wakeLockWatch() {
	select {
	case d.lockWake <- struct{}{}:
	default:
	}
}

// kindLockWatch is the watch's record of one keyed kind.
type kindLockWatch struct {
	k          *kindRunner
	reported   bool      // a WARN said the kind waits, and no INFO has said it no longer does
	since      time.Time // when the reported run of failures began
	remindedAt time.Time
}

// lockAction is what the watch does about a kind at a tick.
type lockAction int

const (
	lockNone lockAction = iota
	lockWarn
	lockRemind
	lockRecovered
)

// next decides what to report about the kind at now: a WARN once its calls have kept failing for
// lockWaitGrace (failing, from since to the latest failure last), a reminder every lockWaitRemind
// while they still fail, and its recovery once they no longer do.
func (w *kindLockWatch) next(now time.Time, failing bool, since, last time.Time) lockAction {
	switch {
	case !w.reported && failing && last.Sub(since) >= lockWaitGrace:
		return lockWarn
	case w.reported && !failing:
		return lockRecovered
	case w.reported && now.Sub(w.remindedAt) >= lockWaitRemind:
		return lockRemind
	}
	return lockNone
}

// lockWatch watches the Redis lock nodes for the keyed kinds: one goroutine (run), started when a
// keyed kind is registered.
type lockWatch struct {
	*shared
	kinds map[string]*kindRunner // read-only
}

// run pings the lock nodes every lockPingEvery (every lockPingFailing while a kind's lock
// calls fail, and at once when they begin to), tells the Observer how many answer, and reports the
// keyed kinds whose lock calls keep failing. Before it returns, at Stop, it takes back what it
// reported: the rows in jobpipe_lock_waits and the Observer's gauges.
func (lw *lockWatch) run(ctx context.Context, answers []error) {
	var watched []*kindLockWatch
	for _, name := range keyedKinds(lw.kinds) {
		watched = append(watched, &kindLockWatch{k: lw.kinds[name]})
	}
	up := nodesUp(answers)
	lw.observeLockNodes(up)
	defer func() {
		for _, w := range watched {
			if w.reported {
				lw.endLockWait(w, "the dispatcher stops")
			}
		}
		lw.observeLockNodes(-1)
	}()
	t := time.NewTimer(lockPingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lw.lockWake:
		case <-t.C:
		}
		answers = lw.locker.PingNodes(ctx)
		if ctx.Err() != nil {
			return
		}
		if n := nodesUp(answers); n != up {
			up = n
			lw.observeLockNodes(up)
		}
		busy := false
		for _, w := range watched {
			if lw.watchKind(ctx, w, answers) {
				busy = true
			}
		}
		if busy {
			t.Reset(lockPingFailing)
		} else {
			t.Reset(lockPingEvery)
		}
	}
}

// watchKind reports what changed for the kind, and whether its lock calls fail or it is reported.
func (lw *lockWatch) watchKind(ctx context.Context, w *kindLockWatch, answers []error) bool {
	now := time.Now()
	// A kind whose calls stopped failing without one succeeding stopped calling: nothing of it waits.
	idle := w.k.lockWait.idleSince(now.Add(-max(lockWaitIdle, 3*lw.cfg.PollInterval)))
	failing, since, last, err := w.k.lockWait.state()
	switch w.next(now, failing, since, last) {
	case lockWarn:
		w.reported, w.since, w.remindedAt = true, since, now
		lw.reportLockWait(ctx, w, answers, err, "dispatcher: a kind's Redis lock calls fail: its keyed jobs wait until a quorum of lock nodes answers")
		w.k.observeLockWait(true)
	case lockRemind:
		w.remindedAt = now
		lw.reportLockWait(ctx, w, answers, err, "dispatcher: a kind's keyed jobs still wait for a quorum of Redis lock nodes")
	case lockRecovered:
		how := "its lock calls succeed again"
		if idle {
			how = "none of its lock calls failed lately (no job of it is due, or it is paused)"
		}
		lw.endLockWait(w, how)
	}
	return failing || w.reported
}

// reportLockWait logs that the kind waits (at WARN), with the nodes that do not answer, the latest
// lock call's error and how many of its jobs are due, and records it in jobpipe_lock_waits.
func (lw *lockWatch) reportLockWait(ctx context.Context, w *kindLockWatch, answers []error, err error, msg string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockWaitWrite)
	defer cancel()
	name := w.k.info.Name
	var due int64
	if qerr := lw.db.QueryRow(wctx, w.k.sql.countDue).Scan(&due); qerr != nil {
		due = -1
		lw.logger.Warn("dispatcher: counting a kind's due jobs failed", "kind", name, "err", qerr)
	}
	down := lw.nodesDown(answers, "; ")
	status := down
	if status == "" {
		// Every node answers PING, yet lock calls fail: their own error says why.
		status = err.Error()
	}
	// Recorded before it is logged, so that whoever reads the log finds it in the table too.
	if _, werr := lw.db.Exec(wctx, saveLockWaitSQL, name, lw.cfg.NodeName, w.since, status); werr != nil {
		lw.logger.Warn("dispatcher: recording a kind's wait for Redis lock nodes in jobpipe_lock_waits failed", "kind", name, "err", werr)
	}
	lw.logger.Warn(msg, "kind", name, "since", w.since, "for", time.Since(w.since).Round(time.Second),
		"jobs_due", due, "nodes_up", nodesUp(answers), "nodes", len(answers), "quorum", lw.locker.Quorum(),
		"down", down, "err", err)
}

// endLockWait logs that the kind no longer waits (at INFO) and takes back what reportLockWait
// recorded.
func (lw *lockWatch) endLockWait(w *kindLockWatch, how string) {
	w.reported = false
	name := w.k.info.Name
	ctx, cancel := context.WithTimeout(context.Background(), lockWaitWrite)
	defer cancel()
	if _, err := lw.db.Exec(ctx, deleteLockWaitSQL, name, lw.cfg.NodeName); err != nil {
		lw.logger.Warn("dispatcher: removing a kind's wait for Redis lock nodes from jobpipe_lock_waits failed", "kind", name, "err", err)
	}
	w.k.observeLockWait(false)
	lw.logger.Info("dispatcher: a kind's keyed jobs no longer wait for Redis lock nodes", "kind", name, "how", how,
		"waited", time.Since(w.since).Round(time.Millisecond))
}
