package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/execlock"
)

// claimed is a job this dispatcher has claimed and not yet finished.
type claimed struct {
	id, token    int64
	attempt      int
	createdAt    time.Time
	processAfter *time.Time
	slot         int
	key          string
	data         any   // *T
	decodeErr    error // the data columns did not decode into T
	claimedAt    time.Time
	queueLock    *execlock.Lock
}

// claim takes up to n due jobs of the kind.
func (k *kindRunner) claim(ctx context.Context, n int) ([]*claimed, error) {
	if k.keyLimit == 0 {
		return k.claimPlain(ctx, n)
	}
	return k.claimKeyed(ctx, n)
}

func (k *kindRunner) leaseSeconds() float64 { return k.d.cfg.LeaseTTL.Seconds() }

func (k *kindRunner) claimPlain(ctx context.Context, n int) ([]*claimed, error) {
	sent := time.Now()
	rows, err := k.d.cfg.DB.Query(ctx, k.sql.claimPlain, n, k.leaseSeconds(), k.d.cfg.NodeName)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: claiming %q jobs: %w", k.info.Name, err)
	}
	return k.scanClaimed(rows, sent)
}

// claimKeyed locks due heads of keys below their limit, takes a queue lock on a free slot of each
// key, and claims the rows whose lock it got, all in one transaction so other dispatchers skip them.
func (k *kindRunner) claimKeyed(ctx context.Context, n int) (claims []*claimed, err error) {
	tx, err := k.d.cfg.DB.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: claiming %q jobs: %w", k.info.Name, err)
	}
	var locks []*execlock.Lock // queue locks taken, released unless their job is claimed
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			claims = nil
		}
		k.releaseUnclaimed(ctx, locks, claims)
	}()
	heads, err := k.selectHeads(ctx, tx, n)
	if err != nil {
		return nil, err
	}
	var ids []int64
	var slots []int32
	for _, h := range heads {
		lock, lerr := k.d.locker.TryQueueSlot(ctx, k.info.Name, h.key, k.keyLimit, h.busy...)
		if lerr != nil {
			k.d.logger.Debug("dispatcher: no queue lock", "kind", k.info.Name, "key", h.key, "err", lerr)
			continue
		}
		locks = append(locks, lock)
		ids, slots = append(ids, h.id), append(slots, int32(lock.Slot()))
	}
	if len(ids) == 0 {
		return nil, tx.Commit(ctx)
	}
	claims, err = k.claimIDs(ctx, tx, ids, slots)
	if err != nil {
		return nil, err
	}
	byID := map[int64]*execlock.Lock{}
	for i, id := range ids {
		byID[id] = locks[i]
	}
	for _, c := range claims {
		c.queueLock = byID[c.id]
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("dispatcher: claiming %q jobs: %w", k.info.Name, err)
	}
	return claims, nil
}

// head is a key's first waiting job, chosen to start, with the slots its key's running jobs hold.
type head struct {
	id   int64
	key  string
	busy []int
}

// headWalk is how many waiting jobs the fast head query walks per head wanted (see headsSQL).
const headWalk = 4

// selectHeads locks up to n heads: the bounded walk first, the key scan when the walk falls short.
func (k *kindRunner) selectHeads(ctx context.Context, tx pgx.Tx, n int) ([]head, error) {
	heads, err := k.queryHeads(ctx, tx, k.sql.headsFast, n, k.keyLimit, headWalk*n+100)
	if err != nil || len(heads) == n {
		return heads, err
	}
	got := make([]int64, len(heads))
	for i, h := range heads {
		got[i] = h.id
	}
	more, err := k.queryHeads(ctx, tx, k.sql.headsScan, n-len(heads), k.keyLimit, got)
	return append(heads, more...), err
}

func (k *kindRunner) queryHeads(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]head, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: selecting %q jobs: %w", k.info.Name, err)
	}
	heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (head, error) {
		var h head
		var busy []int32
		err := r.Scan(&h.id, &h.key, &busy)
		for _, b := range busy {
			h.busy = append(h.busy, int(b))
		}
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("dispatcher: selecting %q jobs: %w", k.info.Name, err)
	}
	return heads, nil
}

// claimIDs claims the rows in one statement. When the database refuses a slot that Redis granted
// (a lock node lost its data: invariant I3), it claims them one at a time and leaves out the refused.
func (k *kindRunner) claimIDs(ctx context.Context, tx pgx.Tx, ids []int64, slots []int32) ([]*claimed, error) {
	claims, err := k.claimBatch(ctx, tx, ids, slots)
	if !isUniqueViolation(err) {
		return claims, err
	}
	claims = nil
	for i := range ids {
		one, err := k.claimBatch(ctx, tx, ids[i:i+1], slots[i:i+1])
		if isUniqueViolation(err) {
			k.d.logger.Warn("dispatcher: the database refused a slot Redis granted; the job waits",
				"kind", k.info.Name, "id", ids[i], "slot", slots[i])
			k.d.stats.claimsRefused.Add(1)
			continue
		}
		if err != nil {
			return nil, err
		}
		claims = append(claims, one...)
	}
	return claims, nil
}

// claimBatch runs one claim inside a savepoint, so a refused claim does not abort tx.
func (k *kindRunner) claimBatch(ctx context.Context, tx pgx.Tx, ids []int64, slots []int32) ([]*claimed, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	rows, err := sp.Query(ctx, k.sql.claimIDs, ids, slots, k.leaseSeconds(), k.d.cfg.NodeName)
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	claims, err := k.scanClaimed(rows, sent)
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	return claims, sp.Commit(ctx)
}

func (k *kindRunner) releaseUnclaimed(ctx context.Context, locks []*execlock.Lock, claims []*claimed) {
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

// scanClaimed reads claimed rows. Every column is decoded from its raw value, so a row whose data does
// not decode into T fails alone (it is then recorded as failed) instead of failing the batch.
func (k *kindRunner) scanClaimed(rows pgx.Rows, sent time.Time) ([]*claimed, error) {
	defer rows.Close()
	var claims []*claimed
	for rows.Next() {
		c := &claimed{claimedAt: sent}
		var attempt, slot int32
		m, fds, raw := rows.Conn().TypeMap(), rows.FieldDescriptions(), rows.RawValues()
		for i, target := range []any{&c.id, &attempt, &c.token, &c.createdAt, &c.processAfter, &slot, &c.key} {
			if err := m.Scan(fds[i].DataTypeOID, fds[i].Format, raw[i], target); err != nil {
				return nil, fmt.Errorf("dispatcher: reading claimed %q jobs: column %s: %w", k.info.Name, fds[i].Name, err)
			}
		}
		c.attempt, c.slot = int(attempt), int(slot)
		c.data, c.decodeErr = k.decode(m, fds[pipelineColumns:], raw[pipelineColumns:])
		claims = append(claims, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dispatcher: claiming %q jobs: %w", k.info.Name, err)
	}
	return claims, nil
}
