package dispatcher

import (
	"sync/atomic"

	"github.com/jobpipe/jobpipe/execlock"
)

// Stats counts what a dispatcher has done since it was created.
type Stats struct {
	// Claimed is how many jobs it claimed; RunClaimed how many of them key runs claimed as their
	// predecessor's outcome was written (see Config.KeyRunJobs).
	Claimed, RunClaimed int64
	// Processed, Retried, Failed, Snoozed, RunAgain and Released count recorded outcomes.
	Processed, Retried, Failed, Snoozed, RunAgain, Released int64
	// StaleFinishes counts outcomes not recorded because the row had moved on (its token changed).
	StaleFinishes int64
	// LeasesLost counts jobs whose lease or execution lock was lost while they ran.
	LeasesLost int64
	// TimedOut counts attempts that ran past their kind's timeout and ended as a retry (or failed)
	// for it; Abandoned counts handlers the workers stopped waiting for, HandlerGrace after their
	// context ended (a timeout, a lost lease, or Stop's deadline).
	TimedOut, Abandoned int64
	// ClaimsRefused counts jobs whose claim the database refused or left out although Redis granted
	// their slot: the slot was taken meanwhile (or forgotten by a Redis node), or an earlier job of
	// the key was still waiting. The jobs stay waiting for a later pass.
	ClaimsRefused int64
	// Rescued counts jobs this node's rescuer took back after their lease expired.
	Rescued int64
	// ScheduleFired counts the instants this node fired as a schedule's leader (one job each), and
	// ScheduleSkipped the missed instants it skipped as the schedules' catch-up policies say.
	ScheduleFired, ScheduleSkipped int64
	// PrunedProcessed and PrunedFailed count the finished jobs this node's pruner deleted.
	PrunedProcessed, PrunedFailed int64
	// Locks counts the dispatcher's Redis lock calls (zero without Redis nodes). Locks.Taken counts
	// lock attempts refused because the slot was held: with a key at its limit left waiting in the
	// table, it stays near 0.
	Locks execlock.Stats
}

type stats struct {
	claimed, runClaimed, staleFinishes, leasesLost, claimsRefused, rescued atomic.Int64
	timedOut, abandoned                                                    atomic.Int64
	outcomes                                                               [6]atomic.Int64
	// maintenance by the leader: schedules and pruning
	scheduleFired, scheduleSkipped, prunedProcessed, prunedFailed atomic.Int64
}

func (s *stats) count(o outcome) { s.outcomes[o].Add(1) }

func (s *stats) snapshot(locker *execlock.Locker) Stats {
	o := func(x outcome) int64 { return s.outcomes[x].Load() }
	var locks execlock.Stats
	if locker != nil {
		locks = locker.Stats()
	}
	return Stats{
		Claimed: s.claimed.Load(), RunClaimed: s.runClaimed.Load(), Processed: o(outProcessed), Retried: o(outRetry), Failed: o(outFailed),
		Snoozed: o(outSnooze), RunAgain: o(outRunAgain), Released: o(outRelease),
		StaleFinishes: s.staleFinishes.Load(), LeasesLost: s.leasesLost.Load(),
		TimedOut: s.timedOut.Load(), Abandoned: s.abandoned.Load(),
		ClaimsRefused: s.claimsRefused.Load(), Rescued: s.rescued.Load(), Locks: locks,
		ScheduleFired: s.scheduleFired.Load(), ScheduleSkipped: s.scheduleSkipped.Load(),
		PrunedProcessed: s.prunedProcessed.Load(), PrunedFailed: s.prunedFailed.Load(),
	}
}
