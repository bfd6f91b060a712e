package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/execlock"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// claimed is a job this dispatcher has claimed and not yet finished.
type claimed struct {
	id, token    int64
	attempt      int
	createdAt    time.Time
	processAfter *time.Time
	startedAt    time.Time // the claim's time on the database's clock
	slotFreed    bool      // its place in the kind's capacity was given back (see releasePlace)
	slot         int
	key          string
	data         any   // *T
	decodeErr    error // the data columns did not decode into T
	claimedAt    time.Time
	queueLock    *execlock.Lock
	// lastOfKey: no job of its key waited after it when a claim pass claimed it, so a key run from
	// it ends with it (see runEnds). The claims of key runs do not read it.
	lastOfKey bool
}

// claim takes up to n due jobs of the kind, within its limits, and reports when the kind's next
// scheduled job falls due if it read that on the way (see claimPlainReadingDue).
func (p *producer) claim(ctx context.Context, n int) (claims []*claimed, due dueReading, err error) {
	p.contended = false
	lim, err := p.currentLimits(ctx)
	if err != nil || lim.halted() {
		return nil, due, err
	}
	if !p.keyed && lim.maxRunning == nil {
		if !p.claimWasFull {
			return p.claimPlainReadingDue(ctx, n)
		}
		claims, err = p.claimPlain(ctx, p.sh.db, n)
		return claims, due, err
	}
	tx, err := p.sh.db.Begin(ctx)
	if err != nil {
		return nil, due, fmt.Errorf("dispatcher: claiming %q jobs: %w", p.info.Name, err)
	}
	var resume func() // ends the pause of the kind's finishes that a keyed pass may take
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			claims = nil
		}
		if resume != nil {
			resume()
		}
	}()
	if lim.maxRunning != nil {
		if n, err = p.budget(ctx, tx, n); err != nil {
			return nil, due, err
		}
	}
	switch {
	case n == 0:
	case p.keyed:
		claims, resume, err = p.claimKeyed(ctx, tx, n, lim.keyLimit)
	default:
		claims, err = p.claimPlain(ctx, tx, n)
	}
	if err != nil {
		return nil, due, err
	}
	if err := tx.Commit(ctx); err != nil {
		// The queue locks of a claim that did not commit are released; their jobs stay waiting.
		p.releaseQueueLocks(claims)
		return nil, due, fmt.Errorf("dispatcher: claiming %q jobs: %w", p.info.Name, err)
	}
	return claims, due, nil
}

func (k *kindRunner) leaseSeconds() float64 { return k.sh.cfg.LeaseTTL.Seconds() }

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (p *producer) claimPlain(ctx context.Context, db querier, n int) ([]*claimed, error) {
	from := p.plainClaimFrom()
	sent := time.Now()
	rows, err := db.Query(ctx, p.sql.claimPlain, n, p.leaseSeconds(), p.sh.cfg.NodeName, from)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: claiming %q jobs: %w", p.info.Name, err)
	}
	claims, err := p.scanClaimed(rows, sent, false)
	if err == nil {
		p.claimedPlain(from, claims, sent)
	}
	return claims, err
}

// claimPlainReadingDue claims like claimPlain and reads, in the same round trip and transaction,
// when the kind's next scheduled job falls due (see armDueTimer). It is for a kind without a backlog,
// whose claims mostly fall short and are followed by that read: a statement and a transaction per
// claim fewer, which at a moderate rate is one per job.
func (p *producer) claimPlainReadingDue(ctx context.Context, n int) (claims []*claimed, due dueReading, err error) {
	from := p.plainClaimFrom()
	b := &pgx.Batch{}
	b.Queue(p.sql.claimPlain, n, p.leaseSeconds(), p.sh.cfg.NodeName, from)
	b.Queue(p.sql.nextDueAndNow)
	sent := time.Now()
	br := p.sh.db.SendBatch(ctx, b)
	rows, err := br.Query()
	if err == nil {
		claims, err = p.scanClaimed(rows, sent, false)
	}
	if err == nil {
		err = br.QueryRow().Scan(&due.next, &due.now)
	}
	// The batch is one transaction, committed when it ends: the claims stand only if all of it did.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, dueReading{}, fmt.Errorf("dispatcher: claiming %q jobs: %w", p.info.Name, err)
	}
	due.read = true
	p.claimedPlain(from, claims, sent)
	return claims, due, nil
}

// dueReading is when the kind's next scheduled job falls due (next, nil when none waits for its
// time), read at now on the database's clock; read is false when it was not read.
type dueReading struct {
	read bool
	next *time.Time
	now  time.Time
}

// fullClaimEvery is how often a plain kind's claim looks at its whole ready index at least, however
// full its claims from claimFrom are.
const fullClaimEvery = time.Second

// plainClaimFrom is the lowest id the next claim of a plain kind in created order looks at.
//
// A worked job leaves its entry in the ready index until a vacuum removes it, and a claim reading the
// index from its start steps over every such entry, so a long drain would slow as it goes. While the
// kind has a backlog (the last claim got all it asked for), the next claim starts at the lowest id
// that claim got instead: jobs below it were all claimed then, or held by another dispatcher. A job below it that waits again (a retry, a
// released claim) is found by the next claim from the start, which comes as soon as a claim gets
// fewer jobs than it asked for, and at least every fullClaimEvery.
func (p *producer) plainClaimFrom() int64 {
	if p.info.Order != jobinfo.OrderCreated || !p.claimWasFull || time.Since(p.fullClaimAt) >= fullClaimEvery {
		return 0
	}
	return p.claimFrom
}

// claimedPlain remembers where the next claim may start (see plainClaimFrom), and whether this one
// skipped the front of the index (see producer.run).
func (p *producer) claimedPlain(from int64, claims []*claimed, at time.Time) {
	p.claimedFrom = from
	if from == 0 {
		p.fullClaimAt = at
	}
	if len(claims) > 0 {
		lowest := claims[0].id
		for _, c := range claims[1:] {
			lowest = min(lowest, c.id)
		}
		p.claimFrom = lowest
	}
}

// claimKeyed chooses the due jobs that may start under their key's limit (see internal/heads), takes a
// queue lock on a free slot of each key for each of them, and claims the rows whose lock it got, in tx
// so that other dispatchers skip them. A key that runs jobs has its rows locked only once its queue
// locks are taken (see lockNextOfKeys), with the kind's finish statements paused; call resume, when
// not nil, once tx has ended. keyLimit is the kind's per-key default.
func (p *producer) claimKeyed(ctx context.Context, tx pgx.Tx, n, keyLimit int) (claims []*claimed, resume func(), err error) {
	var locks []*execlock.Lock // queue locks taken, released unless their job is claimed
	var heads []head
	defer func() {
		p.releaseUnclaimed(ctx, locks, claims)
		p.contended = len(claims) < len(heads)
	}()
	heads, _, err = p.heads.pick(ctx, tx, n, keyLimit)
	if err != nil {
		return nil, nil, err
	}
	if err := p.refreshBusy(ctx, tx, heads); err != nil {
		return nil, nil, err
	}
	locks = p.lockHeads(ctx, heads)
	resume = p.pauseFinishes(ctx, heads, locks)
	if err := p.lockNextOfKeys(ctx, tx, heads, locks); err != nil {
		return nil, resume, err
	}
	var got []*execlock.Lock
	var locked []head
	var slots []int32
	for i, h := range heads {
		if l := locks[i]; l != nil {
			got, locked, slots = append(got, l), append(locked, h), append(slots, int32(l.Slot()))
		}
	}
	locks = got
	if len(locked) == 0 {
		return nil, resume, nil
	}
	claims, err = p.claimIDs(ctx, tx, locked, slots)
	if err != nil {
		return nil, resume, err
	}
	byID := make(map[int64]*execlock.Lock, len(locked))
	for i, h := range locked {
		byID[h.id] = locks[i]
	}
	for _, c := range claims {
		c.queueLock = byID[c.id]
	}
	return claims, resume, nil
}

// lockParallelism is how many heads' queue locks a claim pass takes at once. A pass holds its row
// locks while it waits for Redis, and lock calls made at once share each node's pipelines (see
// execlock), so a pass of up to this many heads waits about one round trip rather than one per few
// heads. The bound keeps a large ClaimBatch from sending thousands of calls at once.
const lockParallelism = 256

// lockHeads takes a queue lock for each head, all heads at once (up to the pass's parallelism), and
// returns them by head (nil where none was taken). Each head first tries the free slot its position
// among the key's waiting jobs ranks (see firstSlot), so the heads of one key start on different
// slots and need not wait for each other: a pass of 100 heads over ten keys takes one round of lock
// calls, not ten. A queue lock is its key's slot, not its job's, so the m locks a key got go to its
// first m heads: a later head may not start before an earlier one, and a lock taken by a head that
// then goes without is its earlier sibling's.
func (p *producer) lockHeads(ctx context.Context, heads []head) []*execlock.Lock {
	// first[i] is head i's first choice of slot (-1: none free); reserved[key] the first choices of
	// the key's heads, which the others' fallbacks leave to them.
	first := make([]int, len(heads))
	reserved := map[string][]int{}
	for i, h := range heads {
		first[i] = firstSlot(h)
		if first[i] >= 0 {
			reserved[h.key] = append(reserved[h.key], first[i])
		}
	}
	locks := make([]*execlock.Lock, len(heads))
	next := make(chan int, len(heads))
	for i := range heads {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(lockParallelism, len(heads)) {
		wg.Go(func() {
			for i := range next {
				lock, err := p.lockSlot(ctx, heads[i], first[i], reserved[heads[i].key])
				if err != nil {
					p.sh.logger.Debug("dispatcher: no queue lock", "kind", p.info.Name, "key", heads[i].key, "err", err)
					continue
				}
				locks[i] = lock
			}
		})
	}
	wg.Wait()
	// heads is in the kind's order, so a key's heads come in their order too.
	got := map[string][]*execlock.Lock{}
	for i, h := range heads {
		if locks[i] != nil {
			got[h.key] = append(got[h.key], locks[i])
		}
	}
	for i, h := range heads {
		locks[i] = nil
		if l := got[h.key]; len(l) > 0 {
			locks[i], got[h.key] = l[0], l[1:]
		}
	}
	return locks
}

// firstSlot is the free slot of h's key whose rank among the key's free slots is h's position among
// the key's waiting jobs, or -1 when there are fewer free slots. Dispatchers claiming different jobs
// of a key at the same moment see the same free slots and so start on different ones, instead of
// colliding in Redis, and so do the heads of one key in one pass.
func firstSlot(h head) int {
	limit := min(h.limit, execlock.MaxLimit)
	busy := make([]bool, limit)
	for _, s := range h.busy {
		if s >= 0 && s < limit {
			busy[s] = true
		}
	}
	// The position counts jobs claimed elsewhere since the heads query as waiting, and the fresh
	// slots count them as running: count them once. A head they moved to the front ranks first.
	rank := max(0, h.pos-1-max(0, len(h.busy)-len(h.snapBusy)))
	for slot := range limit {
		if busy[slot] {
			continue
		}
		if rank == 0 {
			return slot
		}
		rank--
	}
	return -1
}

// lockSlot takes the queue lock of a free slot of h's key: first (see firstSlot) when there is one,
// then, if that is taken or there is none, another free slot in random order, leaving out those
// reserved as the first choices of the key's other heads in this pass.
func (p *producer) lockSlot(ctx context.Context, h head, first int, reserved []int) (*execlock.Lock, error) {
	limit := min(h.limit, execlock.MaxLimit)
	skip := append(slices.Clone(h.busy), reserved...)
	if first >= 0 {
		lock, err := p.sh.locker.TryQueue(ctx, p.info.Name, h.key, first)
		p.observeLock(err)
		if !errors.Is(err, execlock.ErrTaken) {
			return lock, err
		}
	}
	lock, err := p.sh.locker.TryQueueSlot(ctx, p.info.Name, h.key, limit, skip...)
	p.observeSlotLock(lock, err, limit, skip)
	return lock, err
}

// refreshBusy reads the busy slots of the heads' keys again. The heads query's snapshot was taken
// before it waited for row locks and before this dispatcher's Redis calls: a claim committed
// elsewhere meanwhile holds slots that snapshot shows free. Its queue lock may already be given back
// (its worker holds the execution lock instead), so Redis alone would grant the slot again and the
// database refuse the claim. A fresh read sees every claim committed before it.
//
// Heads of keys whose limit is 1 are not read again, and a pass with only those (a unique kind's)
// saves the statement: such a head is its key's first waiting job and its key ran nothing when the
// snapshot was taken, and the head is now locked by this pass. A job of the key that another
// dispatcher started since is one that became waiting ahead of the head in the kind's order after
// the snapshot: rare, and the claim statement, which reads the running jobs afresh, leaves the head
// out then, as would the unique index over running slots.
func (p *producer) refreshBusy(ctx context.Context, tx pgx.Tx, heads []head) error {
	var ids []int64
	for i, h := range heads {
		heads[i].snapBusy = h.busy
		if h.limit > 1 {
			ids = append(ids, h.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, p.sql.busySlots, ids)
	if err != nil {
		return fmt.Errorf("dispatcher: reading %q slots: %w", p.info.Name, err)
	}
	busy := make(map[int64][]int, len(heads))
	var id int64
	var slots []int32
	_, err = pgx.ForEachRow(rows, []any{&id, &slots}, func() error {
		b := make([]int, len(slots))
		for i, s := range slots {
			b[i] = int(s)
		}
		busy[id] = b
		return nil
	})
	if err != nil {
		return fmt.Errorf("dispatcher: reading %q slots: %w", p.info.Name, err)
	}
	for i, h := range heads {
		if h.limit > 1 {
			heads[i].busy = busy[h.id]
		}
	}
	return nil
}

// pauseFinishes holds the kind's finish statements back (see finisher.pauseStatements) when the pass
// is about to lock the next jobs of keys that run, and returns the function that ends the pause (nil
// when none was taken).
func (p *producer) pauseFinishes(ctx context.Context, heads []head, locks []*execlock.Lock) (resume func()) {
	for i, h := range heads {
		if len(h.snapBusy) > 0 && locks[i] != nil {
			resume = p.fin.pauseStatements(ctx)
			if resume == nil && ctx.Err() == nil {
				p.pauseMissed()
			}
			return resume
		}
	}
	return nil
}

// pauseMissed counts a pass that went on without its pause, and says so at most once a minute: the
// pass and the key runs may then take each other's next jobs, which ends runs early, and the cause,
// finish statements slower than statementPause, is the database's.
func (p *producer) pauseMissed() {
	p.sh.stats.pausesMissed.Add(1)
	if p.pauseObs != nil {
		p.pauseObs.PauseMissed()
	}
	p.missedPauses++
	if time.Since(p.missedPauseLogged) < time.Minute {
		return
	}
	p.sh.logger.Info("dispatcher: claim passes went on without pausing the finish statements, which did not end in time; "+
		"key runs may end early meanwhile", "kind", p.info.Name, "passes", p.missedPauses, "waited", statementPause)
	p.missedPauses, p.missedPauseLogged = 0, time.Now()
}

// lockNextOfKeys locks the rows of the heads whose key ran jobs when the heads were chosen, which
// the heads query leaves unlocked (see kindsql's headsFinalSQL), once their queue locks are taken.
// Meanwhile the key's runs may have claimed those jobs, so each key's heads that got a queue lock
// take the jobs now first in its order instead, as far as this transaction could lock them. A head
// left without a job gives its queue lock back (locks[i] becomes nil).
func (p *producer) lockNextOfKeys(ctx context.Context, tx pgx.Tx, heads []head, locks []*execlock.Lock) error {
	byKey := map[string][]int{} // the heads to lock of each key, in order
	var keys []string           // in the order of their first heads
	for i, h := range heads {
		if len(h.snapBusy) == 0 || locks[i] == nil {
			continue
		}
		if byKey[h.key] == nil {
			keys = append(keys, h.key)
		}
		byKey[h.key] = append(byKey[h.key], i)
	}
	if len(keys) == 0 {
		return nil
	}
	first, counts := make([]int64, len(keys)), make([]int32, len(keys)) // each key's first head, and how many
	for j, key := range keys {
		first[j], counts[j] = heads[byKey[key][0]].id, int32(len(byKey[key]))
	}
	rows, err := tx.Query(ctx, p.sql.nextOfKeys, first, counts)
	if err != nil {
		return fmt.Errorf("dispatcher: locking %q jobs: %w", p.info.Name, err)
	}
	next := make(map[int64][]int64, len(first))
	var head int64
	var ids []int64
	if _, err := pgx.ForEachRow(rows, []any{&head, &ids}, func() error {
		next[head] = slices.Clone(ids)
		return nil
	}); err != nil {
		return fmt.Errorf("dispatcher: locking %q jobs: %w", p.info.Name, err)
	}
	for _, at := range byKey {
		ids := next[heads[at[0]].id]
		for j, i := range at {
			if j < len(ids) {
				heads[i].id, heads[i].first = ids[j], ids[0]
				continue
			}
			_ = locks[i].Release(ctx)
			locks[i] = nil
		}
	}
	return nil
}

// claimIDs claims the rows ids (in the kind's order) with their slots, in one statement. A row whose
// slot turns out taken in the database, or that would overtake an earlier job of its key, is left
// out, and so are the later rows of its key (see claimIDsSQL). When the database refuses a slot that commits
// meanwhile (or that Redis granted although a lock node lost its data: I3), it claims them one at a
// time and leaves out the refused and the rest of their key.
func (p *producer) claimIDs(ctx context.Context, tx pgx.Tx, heads []head, slots []int32) ([]*claimed, error) {
	ids, firsts := make([]int64, len(heads)), make([]int64, len(heads))
	for i, h := range heads {
		ids[i], firsts[i] = h.id, h.first
	}
	claims, err := p.claimBatch(ctx, tx, ids, slots, firsts)
	if err == nil && len(claims) < len(ids) {
		p.sh.logger.Info("dispatcher: jobs left waiting: their slot was taken meanwhile, or an earlier job of their key still waits",
			"kind", p.info.Name, "jobs", len(ids)-len(claims))
		p.sh.stats.claimsRefused.Add(int64(len(ids) - len(claims)))
	}
	if !isUniqueViolation(err) {
		return claims, err
	}
	claims = nil
	refused := map[string]bool{}
	for i, h := range heads {
		if refused[h.key] {
			continue
		}
		one, err := p.claimBatch(ctx, tx, ids[i:i+1], slots[i:i+1], firsts[i:i+1])
		if err != nil && !isUniqueViolation(err) {
			return nil, err
		}
		if len(one) == 0 {
			p.sh.logger.Warn("dispatcher: the database refused a slot Redis granted; the key's jobs wait",
				"kind", p.info.Name, "id", ids[i], "slot", slots[i])
			p.sh.stats.claimsRefused.Add(1)
			refused[h.key] = true
			continue
		}
		claims = append(claims, one...)
	}
	return claims, nil
}

// claimSavepoint is the savepoint a claim statement runs in.
const claimSavepoint = "jobpipe_claim"

// claimBatch runs one claim inside a savepoint, so that a refused claim does not abort tx. The
// savepoint, the claim and the savepoint's release go in one round trip (a pgx batch). When the claim
// fails, tx is rolled back to the savepoint, in a second round trip, and stays open.
func (p *producer) claimBatch(ctx context.Context, tx pgx.Tx, ids []int64, slots []int32, firsts []int64) ([]*claimed, error) {
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT " + claimSavepoint)
	b.Queue(p.sql.claimIDs, ids, slots, p.leaseSeconds(), p.sh.cfg.NodeName, firsts)
	b.Queue("RELEASE SAVEPOINT " + claimSavepoint)
	sent := time.Now()
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	var claims []*claimed
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			claims, err = p.scanClaimed(rows, sent, true)
		}
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return claims, nil
	}
	// The claim (or the savepoint) failed, and the statements after it with it: undo the claim.
	if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+claimSavepoint); rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("dispatcher: undoing a refused claim of %q jobs: %w", p.info.Name, rerr))
	}
	return nil, err
}

// releaseQueueLocks releases the queue locks of claims that will not run.
func (p *producer) releaseQueueLocks(claims []*claimed) {
	for _, c := range claims {
		p.releaseQueueLock(c)
	}
}

func (p *producer) releaseUnclaimed(ctx context.Context, locks []*execlock.Lock, claims []*claimed) {
	kept := map[*execlock.Lock]bool{}
	for _, c := range claims {
		kept[c.queueLock] = true
	}
	for _, l := range locks {
		if !kept[l] {
			_ = l.Release(ctx)
		}
	}
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// scanClaimed reads claimed rows; with lastOfKey, each ends with claimed.lastOfKey (ClaimIDs').
func (k *kindRunner) scanClaimed(rows pgx.Rows, sent time.Time, lastOfKey bool) ([]*claimed, error) {
	defer rows.Close()
	var claims []*claimed
	for rows.Next() {
		c, err := k.scanClaim(rows, 0, sent)
		if err != nil {
			return nil, err
		}
		if lastOfKey {
			last := len(rows.RawValues()) - 1
			if err := k.scanColumn(rows, last, &c.lastOfKey); err != nil {
				return nil, err
			}
		}
		claims = append(claims, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dispatcher: claiming %q jobs: %w", k.info.Name, err)
	}
	return claims, nil
}

// scanClaim reads the claim in the current row's columns from the from-th on (in returning's order).
// Every column is decoded from its raw value, so a row whose data does not decode into T fails alone
// (it is then recorded as failed) instead of failing the batch.
func (k *kindRunner) scanClaim(rows pgx.Rows, from int, sent time.Time) (*claimed, error) {
	c := &claimed{claimedAt: sent}
	var attempt, slot int32
	for i, target := range []any{&c.id, &attempt, &c.token, &c.createdAt, &c.processAfter, &slot, &c.key, &c.startedAt} {
		if err := k.scanColumn(rows, from+i, target); err != nil {
			return nil, err
		}
	}
	c.attempt, c.slot = int(attempt), int(slot)
	fds, raw := rows.FieldDescriptions()[from+pipelineColumns:], rows.RawValues()[from+pipelineColumns:]
	c.data, c.decodeErr = k.decode(rows.Conn().TypeMap(), fds, raw)
	return c, nil
}

// scanColumn reads column i of a claimed row into target.
func (k *kindRunner) scanColumn(rows pgx.Rows, i int, target any) error {
	fd := rows.FieldDescriptions()[i]
	if err := rows.Conn().TypeMap().Scan(fd.DataTypeOID, fd.Format, rows.RawValues()[i], target); err != nil {
		return fmt.Errorf("dispatcher: reading claimed %q jobs: column %s: %w", k.info.Name, fd.Name, err)
	}
	return nil
}
