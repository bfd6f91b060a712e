package uniqueness

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/jobinfo"
)

func TestParseStrategyRoundTrips(t *testing.T) {
	t.Parallel()
	for _, s := range []Strategy{Skip, Replace, ReplaceData, ReplaceSchedule, Error} {
		got, err := ParseStrategy(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStrategy(%q) = %v, %v", s.String(), got, err)
		}
	}
	_, err := ParseStrategy("merge")
	if err == nil || err.Error() != `uniqueness: on-duplicate strategy "merge" is unknown: use skip, replace, replace-data, replace-schedule or error` {
		t.Errorf("ParseStrategy(merge) = %v", err)
	}
	if got := Strategy(42).String(); got != "Strategy(42)" {
		t.Errorf("String of an unknown strategy = %q", got)
	}
}

func TestDuplicateErrorMatchesSentinel(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("enqueue: %w", &DuplicateError{Kind: "reminder", ExistingID: 7})
	var dup *DuplicateError
	if !errors.Is(err, ErrDuplicate) || !errors.As(err, &dup) || dup.ExistingID != 7 {
		t.Errorf("%v does not match ErrDuplicate / *DuplicateError", err)
	}
	if want := `enqueue: uniqueness: kind "reminder" already has waiting job 7 with the same unique fields`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

type reminder struct {
	UserID int64  `jobpipe:"user_id,unique"`
	Text   string `jobpipe:"text"`
}

// The statements name the until-executed index as their arbiter, and each strategy updates what it
// promises and nothing more.
func TestInserterStatements(t *testing.T) {
	t.Parallel()
	in := For(jobinfo.MustDefine[reminder]("reminder", jobinfo.NoKey()).Info())
	const conflict = `ON CONFLICT ("user_id") WHERE started_at IS NULL AND processed_at IS NULL AND failed_at IS NULL DO UPDATE SET `
	for s, set := range map[Strategy]string{
		Skip:            "lock_token = j.lock_token\n",
		Error:           "lock_token = j.lock_token\n",
		Replace:         `"user_id" = EXCLUDED."user_id", "text" = EXCLUDED."text", process_after = EXCLUDED.process_after, updated_at = now()` + "\n",
		ReplaceData:     `"user_id" = EXCLUDED."user_id", "text" = EXCLUDED."text", updated_at = now()` + "\n",
		ReplaceSchedule: "process_after = EXCLUDED.process_after, updated_at = now()\n",
	} {
		if q := in.SQL(s); !strings.Contains(q, conflict+set) || !strings.Contains(q, `INSERT INTO "reminder" AS j ("user_id", "text", process_after)`) {
			t.Errorf("%v statement:\n%s", s, q)
		}
	}
	if For(in.info) != in {
		t.Error("For built a second Inserter for the same kind")
	}
	plain := For(jobinfo.MustDefine[struct{ N int64 }]("plain").Info())
	if strings.Contains(plain.SQL(Skip), "ON CONFLICT") {
		t.Errorf("a kind without unique fields has an ON CONFLICT clause:\n%s", plain.SQL(Skip))
	}
}
