package states

import "testing"

// TestConditions pins the text of each condition: the partial indexes are created with it, and Check
// compares existing indexes with it, so a change here is a change of every kind's indexes.
func TestConditions(t *testing.T) {
	cases := []struct {
		name, got, want string
	}{
		{"waiting", Waiting("t"), "t.lease_expires_at IS NULL AND t.processed_at IS NULL AND t.failed_at IS NULL"},
		{"waiting unaliased", Waiting(""), "lease_expires_at IS NULL AND processed_at IS NULL AND failed_at IS NULL"},
		{"running", Running("e"), "e.lease_expires_at IS NOT NULL"},
		{"leased", Leased("e"), "e.lease_expires_at IS NOT NULL AND e.processed_at IS NULL AND e.failed_at IS NULL"},
		{"still running", StillRunning("t"), "(t.lease_expires_at IS NOT NULL) IS TRUE"},
		{"not running", NotRunning("t"), "t.lease_expires_at IS NULL"},
		{"not finished", NotFinished("t"), "t.processed_at IS NULL AND t.failed_at IS NULL"},
		{"never ran", NeverRan("x"), "x.started_at IS NULL AND x.processed_at IS NULL AND x.failed_at IS NULL"},
		{"processed", Processed(""), "processed_at IS NOT NULL"},
		{"failed", Failed("t"), "t.failed_at IS NOT NULL"},
		{"waiting deparsed", WaitingDeparsed(), "((lease_expires_at IS NULL) AND (processed_at IS NULL) AND (failed_at IS NULL))"},
		{"running deparsed", RunningDeparsed(), "(lease_expires_at IS NOT NULL)"},
		{"never ran deparsed", NeverRanDeparsed(), "((started_at IS NULL) AND (processed_at IS NULL) AND (failed_at IS NULL))"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}
