package faultkit

// A periodic log of the throughput, backlog and the server's and machine's state, to read a
// scenario's figures against.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartTimeline logs, every period until stopped, each ledger kind's completions per second, its table's
// backlog (jobs neither processed nor failed), and the state of the whole server: its client backends,
// how many are active, the transactions older than 5 s (another test's long transaction holds back
// the cleanup of every table, and slows claims) and the round trip of the timeline's own query. It is
// what a throughput figure needs to be read against on a shared machine: a dip that the server's
// round trip shows before the fault is another test's, not the fault's. It also logs the machine's
// CPU pressure (see cpuPressure).
func StartTimeline(t *testing.T, e *World, period time.Duration, tables map[string]string) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		ctx := context.Background()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			var now time.Time
			var long, active, backends int
			sent := time.Now()
			if err := e.DB.QueryRow(ctx, `SELECT clock_timestamp(), count(*) FILTER (WHERE xact_start < now() - interval '5 seconds'),
				count(*) FILTER (WHERE state = 'active'), count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'`).
				Scan(&now, &long, &active, &backends); err != nil {
				continue
			}
			probe := time.Since(sent)
			var parts []string
			for _, table := range slices.Sorted(maps.Keys(tables)) {
				var ok, backlog int
				if err := e.DB.QueryRow(ctx, `SELECT (SELECT count(*) FROM mp_ledger WHERE kind IS NOT DISTINCT FROM $1 AND outcome = 'ok'
					AND ended_at >= $2 AND ended_at < $3), (SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+`
					WHERE processed_at IS NULL AND failed_at IS NULL)`, ledgerKindArg(tables[table]), now.Add(-period), now).Scan(&ok, &backlog); err != nil {
					continue
				}
				parts = append(parts, fmt.Sprintf("%s %.0f/s backlog %d", table, float64(ok)/period.Seconds(), backlog))
			}
			t.Logf("timeline %s: %s; server: %d client backends, %d active, %d transactions older than 5 s, a query's round trip %v; machine: %s (sampled %v late)",
				now.Format("15:04:05"), strings.Join(parts, ", "), backends, active, long, probe.Round(time.Millisecond), cpuPressure(),
				(time.Since(last) - period).Round(time.Millisecond))
			last = time.Now()
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// cpuPressure reads the share of the last 10 s in which tasks of the machine waited for a CPU (Linux
// PSI, /proc/pressure/cpu "some avg10"): near 100, the workers got only part of the time they asked
// for, whatever the fault did.
func cpuPressure() string {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return "CPU pressure unknown"
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "avg10="); ok {
			return "CPU pressure " + v + "%"
		}
	}
	return "CPU pressure unknown"
}
