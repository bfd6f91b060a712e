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
	// The next ten count ended attempts by their Outcome, the one an Observer is told: every claimed
	// job's attempt ends in exactly one of them, so once the dispatcher has stopped they add up to
	// Claimed. Processed counts OutcomeProcessed, Retried OutcomeRetried, and so on; a timed-out
	// attempt counts in TimedOut only, whether it is retried or failed.
	Processed, Retried, Failed, Discarded, Snoozed, RunAgain, Released int64
	// LeasesLost counts OutcomeLeaseLost, StaleFinishes OutcomeStale and TimedOut OutcomeTimedOut.
	LeasesLost, StaleFinishes, TimedOut int64
	// Abandoned counts handlers the workers stopped waiting for, HandlerGrace after their context
	// ended (a timeout, a lost lease, or Stop's deadline); their attempts end with an Outcome too.
	Abandoned int64
	// ClaimsRefused counts jobs whose claim the database refused or left out although Redis granted
	// their slot: the slot was taken meanwhile (or forgotten by a Redis node), or an earlier job of
	// the key was still waiting. The jobs stay waiting for a later pass.
	ClaimsRefused int64
	// PausesMissed counts claim passes that went on without pausing this dispatcher's finish
	// statements, as those under way did not end within a tenth of a second (a slow or stalled
	// database). The pass and the key runs may then take each other's next jobs, ending runs early.
	PausesMissed int64
	// Rescued counts jobs this node's rescuer took back after their lease expired.
	Rescued int64
	// KeyRunsEnded counts the key runs that ended, by why (indexed by RunEnd; see KeyRunObserver).
	KeyRunsEnded [numRunEnds]int64
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
	claimed, runClaimed, claimsRefused, pausesMissed, rescued, abandoned atomic.Int64
	ended                                                                [numOutcomes]atomic.Int64 // by Outcome
	runsEnded                                                            [numRunEnds]atomic.Int64  // by RunEnd
	// maintenance by the leader: schedules and pruning
	scheduleFired, scheduleSkipped, prunedProcessed, prunedFailed atomic.Int64
}

func (s *stats) snapshot(locker *execlock.Locker) Stats {
	o := func(x Outcome) int64 { return s.ended[x].Load() }
	var locks execlock.Stats
	if locker != nil {
		locks = locker.Stats()
	}
	var runs [numRunEnds]int64
	for i := range runs {
		runs[i] = s.runsEnded[i].Load()
	}
	return Stats{
		Claimed: s.claimed.Load(), RunClaimed: s.runClaimed.Load(),
		Processed: o(OutcomeProcessed), Retried: o(OutcomeRetried), Failed: o(OutcomeFailed), Discarded: o(OutcomeDiscarded),
		Snoozed: o(OutcomeSnoozed), RunAgain: o(OutcomeRunAgain), Released: o(OutcomeReleased),
		LeasesLost: o(OutcomeLeaseLost), StaleFinishes: o(OutcomeStale), TimedOut: o(OutcomeTimedOut), Abandoned: s.abandoned.Load(),
		ClaimsRefused: s.claimsRefused.Load(), PausesMissed: s.pausesMissed.Load(), Rescued: s.rescued.Load(), KeyRunsEnded: runs, Locks: locks,
		ScheduleFired: s.scheduleFired.Load(), ScheduleSkipped: s.scheduleSkipped.Load(),
		PrunedProcessed: s.prunedProcessed.Load(), PrunedFailed: s.prunedFailed.Load(),
	}
}
