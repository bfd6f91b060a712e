package dispatcher

import (
	"github.com/jobpipe/jobpipe/internal/kindsql"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// kindSQL holds a kind's statements, built once at registration by package internal/kindsql, which
// documents each (kindsql.Dispatcher).
type kindSQL struct {
	claimPlain, countRunning, countDue, busySlots, nextOfKeys, claimIDs, finish, finishEnds, extend, nextDueAndNow, rescue string
}

// pipelineColumns is how many columns a claim returns before the data columns (see scanClaimed).
const pipelineColumns = kindsql.ReturnedPipelineColumns

// writeCodes are the numbers the finish statements name each rowWrite by.
var writeCodes = kindsql.WriteCodes{
	Processed: int(writeProcessed), Retry: int(writeRetry), Failed: int(writeFailed),
	Snooze: int(writeSnooze), RunAgain: int(writeRunAgain), Release: int(writeRelease),
}

func buildSQL(info *jobinfo.Info) kindSQL {
	s := kindsql.ForDispatcher(info, writeCodes, uniqueness.NotifyChannel)
	return kindSQL{claimPlain: s.ClaimPlain, countRunning: s.CountRunning, countDue: s.CountDue, busySlots: s.BusySlots, nextOfKeys: s.NextOfKeys,
		claimIDs: s.ClaimIDs, finish: s.Finish, finishEnds: s.FinishEnds, extend: s.Extend, nextDueAndNow: s.NextDueAndNow, rescue: s.Rescue}
}
