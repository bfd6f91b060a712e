package kindsql

import "github.com/jobpipe/jobpipe/jobinfo"

// WriteCodes are the numbers by which the finish statements' $3 names the change to each row; the dispatcher
// defines them.
type WriteCodes struct {
	Processed, Retry, Failed, Snooze, RunAgain, Release int
}

// Dispatcher holds a kind's statements for the dispatcher. The parameters of each are the dispatcher's
// to document where it runs them.
type Dispatcher struct {
	// ClaimPlain claims up to $1 due jobs of a kind without a key. $2 lease seconds, $3 owner, $4 the
	// lowest id to look at.
	//
	// Its update finds the locked rows by id in an array, bounded by $4 too, for the plan's sake: pgx
	// prepares the statement once per connection, and PostgreSQL keeps its generic plan, made with
	// the table's size at that moment, until the table is next analyzed. A join of the locked rows to
	// the table may then be planned as a hash join over a sequential scan, and the id array alone,
	// planned over a kind's first few jobs, as a sequential scan. With both conditions every plan reads
	// the primary key.
	ClaimPlain string
	// CountRunning counts the kind's running jobs.
	CountRunning string
	// CountDue counts the kind's waiting jobs that are due.
	CountDue string
	// BusySlots returns, for each job $1 of a keyed kind, the slots its key's running jobs hold. It
	// reads each key's running jobs once, however many of its jobs $1 holds.
	BusySlots string
	// NextOfKeys locks the next jobs of keys that run jobs: for each row $1 of a keyed kind, the first
	// $2 waiting jobs of its key, as far as they can start in order (see nextOfKeysSQL).
	NextOfKeys string
	// ClaimIDs claims the rows $1 of a keyed kind with slots $2. $3 lease seconds, $4 owner, $5 the
	// first waiting job of each row's key when the heads were chosen (see claimIDsSQL). Its rows end
	// with last_of_key.
	ClaimIDs string
	// Finish records outcomes: $1 ids, $2 tokens, $3 outcomes, $4 errors, $5 delays in seconds; $6
	// whether to notify the kind's channel. A keyed kind's also continues key runs (see finishRunSQL):
	// $7 slots, $8 the default key limit, $9 the kind, $10 lease seconds, $11 owner.
	Finish string
	// FinishEnds is a keyed kind's Finish for a batch that continues no key run: Finish's first six
	// parameters, and the rows of a plain kind's. The run-continuing statement, planned afresh for
	// each batch, costs a small batch several times what this one does.
	FinishEnds string
	// Extend renews the lease of $1 (token $2) by $3 seconds; returns a row when the fence held.
	Extend string
	// NextDueAndNow is the earliest future process_after of a waiting job, and the database's now().
	NextDueAndNow string
	// Rescue takes back up to 1000 expired leases; $1 max attempts, $2 retry delays by attempt. It
	// takes none until the server has been up for $3 seconds.
	Rescue string
}

// ReturnedPipelineColumns is how many columns a claim returns before the data columns: the id, the
// attempts made, the token, created_at, process_after, the slot (-1 for none), the key text (empty for
// none) and started_at.
const ReturnedPipelineColumns = 8

// dispatcherKind is the data of the dispatcher's templates.
type dispatcherKind struct {
	*kind
	// Out are the outcome numbers; Channel is the notification channel, as a string literal.
	Out     WriteCodes
	Channel string
}

// ForDispatcher renders the dispatcher's statements for info; out are the dispatcher's outcome numbers
// and channel the channel that finishes notify with the kind's name. BusySlots, NextOfKeys and ClaimIDs
// are "" for a kind without a key.
func ForDispatcher(info *jobinfo.Info, out WriteCodes, channel string) Dispatcher {
	k := dispatcherKind{kind: newKind(info), Out: out, Channel: quote(channel)}
	d := Dispatcher{
		ClaimPlain:    render("claimPlain", k),
		CountRunning:  render("countRunning", k),
		CountDue:      render("countDue", k),
		Extend:        render("extend", k),
		NextDueAndNow: render("nextDueAndNow", k),
		Rescue:        render("rescue", k),
		Finish:        render("finishSQL", k),
	}
	if k.Keyed {
		d.BusySlots = render("busySlots", k)
		d.ClaimIDs = render("claimIDsSQL", k)
		d.NextOfKeys = render("nextOfKeys", k)
		d.FinishEnds = d.Finish
		d.Finish = render("finishRunSQL", k)
	}
	return d
}

// ClaimSet is the SET list of a claim: the attempt counted, its lease of lease seconds held by owner,
// the token bumped.
func (k *kind) ClaimSet(lease, owner string) string {
	return `attempts_made = t.attempts_made + 1, started_at = now(), lease_expires_at = now() + make_interval(secs => ` + lease + `),
		lease_owner = ` + owner + `, lock_token = t.lock_token + 1, updated_at = now()`
}

// Returning lists what a claim reads back: the ReturnedPipelineColumns, then the data columns.
func (k *kind) Returning() string {
	key := "''"
	if k.Keyed {
		key = k.KeyText("t")
	}
	s := "t.id, t.attempts_made, t.lock_token, t.created_at, t.process_after, coalesce(t.lock_slot, -1), " + key + ", t.started_at"
	if len(k.data) > 0 {
		s += ", " + k.Columns("t")
	}
	return s
}

var _ = parse(statements, map[string]string{
	"claimPlain": `WITH next AS (
	SELECT t.id FROM {{.Table}} t WHERE {{waiting "t"}} AND {{.Due "t"}} AND t.id >= $4 ORDER BY {{.Order "t"}} LIMIT $1 FOR UPDATE SKIP LOCKED)
UPDATE {{.Table}} t SET {{.ClaimSet "$2" "$3"}}
WHERE t.id = ANY (ARRAY(SELECT id FROM next)) AND t.id >= $4
RETURNING {{.Returning}}`,

	"countRunning": `SELECT count(*) FROM {{.Table}} t WHERE {{leased "t"}}`,

	"countDue": `SELECT count(*) FROM {{.Table}} t WHERE {{waiting "t"}} AND {{.Due "t"}}`,

	"extend": `UPDATE {{.Table}} t SET lease_expires_at = now() + make_interval(secs => $3)
WHERE t.id = $1 AND t.lock_token = $2 AND {{stillRunning "t"}} RETURNING t.id`,

	"nextDueAndNow": `SELECT (SELECT min(t.process_after) FROM {{.Table}} t WHERE t.process_after > now() AND {{waiting "t"}}), now()`,

	"rescue": `WITH expired AS (
	SELECT t.id FROM {{.Table}} t WHERE t.lease_expires_at < now() AND {{notFinished "t"}}
		AND pg_postmaster_start_time() < now() - make_interval(secs => $3)
	ORDER BY t.lease_expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED)
UPDATE {{.Table}} t SET lease_expires_at = NULL, lease_owner = NULL, lock_slot = NULL, lock_token = t.lock_token + 1,
	updated_at = now(),
	last_error = 'lease expired: ' || coalesce(t.lease_owner, 'a dispatcher') || ' stopped renewing it (worker died or stalled)',
	failed_at = CASE WHEN t.attempts_made >= $1 THEN now() END,
	process_after = CASE WHEN t.attempts_made >= $1 THEN t.process_after
		ELSE now() + make_interval(secs => ($2::float8[])[least(t.attempts_made, $1)]) END
FROM expired WHERE t.id = expired.id
RETURNING t.id, {{failed "t"}}`,

	"busySlots": `WITH h AS MATERIALIZED (SELECT t.id, {{.KeyCols "t"}} FROM {{.Table}} t WHERE t.id = ANY ($1)),
s AS (SELECT k.*, r.slots FROM (SELECT DISTINCT {{.KeyCols ""}} FROM h) k CROSS JOIN LATERAL ({{.KeySlots "k"}}) r)
SELECT h.id, coalesce(s.slots, '{}') FROM h LEFT JOIN s ON {{.SameKey "h" "s"}}`,
})

// usageKind is the data of the usage templates.
type usageKind struct {
	*kind
	MaxKeys int
}

// Usage returns the statements that read a kind's usage: counts, its running and waiting jobs; and
// for a keyed kind keysAtLimit, the keys running at least their limit ($1 the kind's name, $2 its
// per-key limit), at most maxKeys of them, most running first ("" for a kind without a key).
func Usage(info *jobinfo.Info, maxKeys int) (counts, keysAtLimit string) {
	k := usageKind{kind: newKind(info), MaxKeys: maxKeys}
	counts = render("usageCounts", k)
	if k.Keyed {
		keysAtLimit = render("usageKeysAtLimit", k)
	}
	return counts, keysAtLimit
}

var _ = parse(statements, map[string]string{
	"usageCounts": `SELECT (SELECT count(*) FROM {{.Table}} t WHERE {{leased "t"}}), (SELECT count(*) FROM {{.Table}} t WHERE {{waiting "t"}})`,
	"usageKeysAtLimit": `SELECT r.key, r.n, x.lim FROM (
	SELECT {{.KeyText "t"}} AS key, count(*) AS n FROM {{.Table}} t WHERE {{running "t"}} GROUP BY 1) r
CROSS JOIN LATERAL (SELECT coalesce((SELECT CASE WHEN l.paused THEN 0 ELSE coalesce(l.key_limit, $2) END
	FROM jobpipe_key_limits l WHERE l.kind = $1 AND l.key_value = r.key), $2) AS lim) x
WHERE r.n >= x.lim
ORDER BY r.n DESC, r.key LIMIT {{.MaxKeys}}`,
})
