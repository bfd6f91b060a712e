package limits_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// A kind's row holds what is set, and goes once nothing is: limits NULL and not paused.
func TestKindLimitsStoredAndCleared(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	for _, step := range []struct {
		name string
		do   func() error
		want []string
	}{
		{"set total", func() error { return limits.SetMaxRunning(ctx, s.Pool, "webhook", 5) },
			[]string{"webhook max_running=5 key_limit=NULL paused=false"}},
		{"set per-key default", func() error { return limits.SetKeyLimit(ctx, s.Pool, "webhook", 10) },
			[]string{"webhook max_running=5 key_limit=10 paused=false"}},
		{"total 0 halts and is stored", func() error { return limits.SetMaxRunning(ctx, s.Pool, "webhook", 0) },
			[]string{"webhook max_running=0 key_limit=10 paused=false"}},
		{"clear total", func() error { return limits.ClearMaxRunning(ctx, s.Pool, "webhook") },
			[]string{"webhook max_running=NULL key_limit=10 paused=false"}},
		{"pause", func() error { return limits.Pause(ctx, s.Pool, "webhook") },
			[]string{"webhook max_running=NULL key_limit=10 paused=true"}},
		{"pause again", func() error { return limits.Pause(ctx, s.Pool, "webhook") },
			[]string{"webhook max_running=NULL key_limit=10 paused=true"}},
		{"clear per-key default", func() error { return limits.ClearKeyLimit(ctx, s.Pool, "webhook") },
			[]string{"webhook max_running=NULL key_limit=NULL paused=true"}},
		{"resume empties the row: deleted", func() error { return limits.Resume(ctx, s.Pool, "webhook") }, nil},
		{"clear what is not stored", func() error { return limits.ClearMaxRunning(ctx, s.Pool, "webhook") }, nil},
		{"resume what is not paused", func() error { return limits.Resume(ctx, s.Pool, "webhook") }, nil},
		{"a kind without key has a total", func() error { return limits.SetMaxRunning(ctx, s.Pool, "cleanup", 1) },
			[]string{"cleanup max_running=1 key_limit=NULL paused=false"}},
		{"largest total", func() error { return limits.SetMaxRunning(ctx, s.Pool, "cleanup", limits.MaxMaxRunning) },
			[]string{"cleanup max_running=2147483647 key_limit=NULL paused=false"}},
		{"largest per-key default", func() error { return limits.SetKeyLimit(ctx, s.Pool, "webhook", limits.MaxKeyLimit) },
			[]string{"cleanup max_running=2147483647 key_limit=NULL paused=false", "webhook max_running=NULL key_limit=1024 paused=false"}},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		t.Log(step.name)
		assertRows(t, s, step.want, nil)
	}
}

// A key's row is the kind's row for one key value: set, cleared, and gone once empty.
func TestKeyLimitsStoredAndCleared(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	for _, step := range []struct {
		name string
		do   func() error
		want []string
	}{
		{"set", func() error { return limits.SetKey(ctx, s.Pool, "webhook", "42", 2) },
			[]string{`webhook "42" key_limit=2 paused=false`}},
		{"0 halts the key and is stored", func() error { return limits.SetKey(ctx, s.Pool, "webhook", "7", 0) },
			[]string{`webhook "42" key_limit=2 paused=false`, `webhook "7" key_limit=0 paused=false`}},
		{"pause keeps the limit", func() error { return limits.PauseKey(ctx, s.Pool, "webhook", "42") },
			[]string{`webhook "42" key_limit=2 paused=true`, `webhook "7" key_limit=0 paused=false`}},
		{"clear keeps the pause", func() error { return limits.ClearKey(ctx, s.Pool, "webhook", "42") },
			[]string{`webhook "42" key_limit=NULL paused=true`, `webhook "7" key_limit=0 paused=false`}},
		{"resume empties the row: deleted", func() error { return limits.ResumeKey(ctx, s.Pool, "webhook", "42") },
			[]string{`webhook "7" key_limit=0 paused=false`}},
		{"clear the last", func() error { return limits.ClearKey(ctx, s.Pool, "webhook", "7") }, nil},
		{"clear what is not stored", func() error { return limits.ClearKey(ctx, s.Pool, "webhook", "7") }, nil},
		{"resume what is not paused", func() error { return limits.ResumeKey(ctx, s.Pool, "webhook", "7") }, nil},
		{"pause alone", func() error { return limits.PauseKey(ctx, s.Pool, "fresh", "1") },
			[]string{`fresh "1" key_limit=NULL paused=true`}},
		{"largest", func() error { return limits.SetKey(ctx, s.Pool, "webhook", "1", limits.MaxKeyLimit) },
			[]string{`fresh "1" key_limit=NULL paused=true`, `webhook "1" key_limit=1024 paused=false`}},
		{"a composite key is stored as json_build_array prints it",
			func() error { return limits.SetKey(ctx, s.Pool, "tenant_sync", ` [ "acme",42 ,true ] `, 3) },
			[]string{`fresh "1" key_limit=NULL paused=true`, `tenant_sync "[\"acme\", 42, true]" key_limit=3 paused=false`,
				`webhook "1" key_limit=1024 paused=false`}},
		{"and found in any spacing",
			func() error { return limits.PauseKey(ctx, s.Pool, "tenant_sync", `["acme", 42, true]`) },
			[]string{`fresh "1" key_limit=NULL paused=true`, `tenant_sync "[\"acme\", 42, true]" key_limit=3 paused=true`,
				`webhook "1" key_limit=1024 paused=false`}},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		t.Log(step.name)
		assertRows(t, s, nil, step.want)
	}
}

const unknownKindMessage = `limits: unknown kind "nosuch": it is not in jobpipe_kinds; a kind is registered ` +
	`when a dispatcher starts with it or when the migration that creates its table (jobpipe kind new) is applied`

// A kind that is not registered is refused by every function, naming it and saying how kinds are
// registered, and nothing is written: the foreign keys would refuse it later anyway, less clearly.
func TestUnknownKind(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	for name, do := range map[string]func() error{
		"SetMaxRunning":   func() error { return limits.SetMaxRunning(ctx, s.Pool, "nosuch", 1) },
		"ClearMaxRunning": func() error { return limits.ClearMaxRunning(ctx, s.Pool, "nosuch") },
		"SetKeyLimit":     func() error { return limits.SetKeyLimit(ctx, s.Pool, "nosuch", 1) },
		"ClearKeyLimit":   func() error { return limits.ClearKeyLimit(ctx, s.Pool, "nosuch") },
		"Pause":           func() error { return limits.Pause(ctx, s.Pool, "nosuch") },
		"Resume":          func() error { return limits.Resume(ctx, s.Pool, "nosuch") },
		"SetKey":          func() error { return limits.SetKey(ctx, s.Pool, "nosuch", "1", 1) },
		"ClearKey":        func() error { return limits.ClearKey(ctx, s.Pool, "nosuch", "1") },
		"PauseKey":        func() error { return limits.PauseKey(ctx, s.Pool, "nosuch", "1") },
		"ResumeKey":       func() error { return limits.ResumeKey(ctx, s.Pool, "nosuch", "1") },
		"Get":             func() error { _, err := limits.Get(ctx, s.Pool, "nosuch"); return err },
		"GetKey":          func() error { _, err := limits.GetKey(ctx, s.Pool, "nosuch", "1"); return err },
		"List":            func() error { _, _, err := limits.List(ctx, s.Pool, "nosuch"); return err },
	} {
		err := do()
		if !errors.Is(err, limits.ErrUnknownKind) || err.Error() != unknownKindMessage {
			t.Errorf("%s = %v\nwant %s", name, err, unknownKindMessage)
		}
	}
	assertRows(t, s, nil, nil)
}

// Per-key limits need a key, and limits have a range; refusals write nothing.
func TestInvalidChanges(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	const noKey = `limits: invalid: kind "cleanup" has no key, so it has no per-key limit; ` +
		`limit its total instead (SetMaxRunning, or jobpipe limit set cleanup N)`
	const noKeyValue = `limits: invalid key "x" for kind "cleanup": the kind has no key, so it has no per-key limits`
	for _, tc := range []struct {
		name string
		do   func() error
		want string
	}{
		{"SetKeyLimit without key", func() error { return limits.SetKeyLimit(ctx, s.Pool, "cleanup", 1) }, noKey},
		{"ClearKeyLimit without key", func() error { return limits.ClearKeyLimit(ctx, s.Pool, "cleanup") }, noKey},
		{"SetKey without key", func() error { return limits.SetKey(ctx, s.Pool, "cleanup", "x", 1) }, noKeyValue},
		{"ClearKey without key", func() error { return limits.ClearKey(ctx, s.Pool, "cleanup", "x") }, noKeyValue},
		{"PauseKey without key", func() error { return limits.PauseKey(ctx, s.Pool, "cleanup", "x") }, noKeyValue},
		{"ResumeKey without key", func() error { return limits.ResumeKey(ctx, s.Pool, "cleanup", "x") }, noKeyValue},
		{"GetKey without key", func() error { _, err := limits.GetKey(ctx, s.Pool, "cleanup", "x"); return err }, noKeyValue},
		{"SetMaxRunning -1", func() error { return limits.SetMaxRunning(ctx, s.Pool, "webhook", -1) },
			`limits: invalid limit -1 for kind "webhook": want 0 (halt) to 2147483647`},
		{"SetMaxRunning above the maximum", func() error { return limits.SetMaxRunning(ctx, s.Pool, "webhook", limits.MaxMaxRunning+1) },
			`limits: invalid limit 2147483648 for kind "webhook": want 0 (halt) to 2147483647`},
		{"SetKeyLimit -1", func() error { return limits.SetKeyLimit(ctx, s.Pool, "webhook", -1) },
			`limits: invalid per-key limit -1 for kind "webhook": want 0 (halt) to 1024`},
		{"SetKeyLimit above the maximum", func() error { return limits.SetKeyLimit(ctx, s.Pool, "webhook", limits.MaxKeyLimit+1) },
			`limits: invalid per-key limit 1025 for kind "webhook": want 0 (halt) to 1024`},
		{"SetKey -1", func() error { return limits.SetKey(ctx, s.Pool, "webhook", "42", -1) },
			`limits: invalid per-key limit -1 for kind "webhook": want 0 (halt) to 1024`},
		{"SetKey above the maximum", func() error { return limits.SetKey(ctx, s.Pool, "webhook", "42", limits.MaxKeyLimit+1) },
			`limits: invalid per-key limit 1025 for kind "webhook": want 0 (halt) to 1024`},
		{"composite key of the wrong arity", func() error { return limits.SetKey(ctx, s.Pool, "tenant_sync", `["acme", 1]`, 1) },
			`limits: invalid key "[\"acme\", 1]" for kind "tenant_sync": 2 values for the 3 key columns (tenant, shard, live)`},
		{"composite key not JSON", func() error { return limits.PauseKey(ctx, s.Pool, "tenant_sync", "acme") },
			`limits: invalid key "acme" for kind "tenant_sync": not JSON: the key has 3 columns (tenant, shard, live), ` +
				`so give a JSON array of their values, for example ["acme", 42, true]`},
	} {
		err := tc.do()
		if !errors.Is(err, limits.ErrInvalid) || err.Error() != tc.want {
			t.Errorf("%s = %v\nwant %s", tc.name, err, tc.want)
		}
	}
	assertRows(t, s, nil, nil)
}

// Get, GetKey and List return what is stored with the key columns and the configured key limit,
// and the Effective methods say what is in force.
func TestReadLimits(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	for _, change := range []error{
		limits.SetMaxRunning(ctx, s.Pool, "webhook", 5),
		limits.SetKeyLimit(ctx, s.Pool, "webhook", 10),
		limits.SetKey(ctx, s.Pool, "webhook", "42", 2),
		limits.PauseKey(ctx, s.Pool, "webhook", "7"),
		limits.SetMaxRunning(ctx, s.Pool, "cleanup", 4),
		limits.Pause(ctx, s.Pool, "cleanup"),
		limits.SetKey(ctx, s.Pool, "tenant_sync", `["acme",1,true]`, 0),
	} {
		if change != nil {
			t.Fatal(change)
		}
	}
	want := map[string]string{
		"cleanup": `cleanup key=[] max_running=4 key_limit=nil paused=true configured=nil updated=true effective_total=0 effective_key=1`,
		// The per-key default set at runtime wins over the configured 3.
		"webhook": `webhook key=["customer_id"] max_running=5 key_limit=10 paused=false configured=3 updated=true effective_total=5 effective_key=10`,
		// Nothing stored: unlimited in total, the configured key limit (jobinfo's default, 1) per key.
		"tenant_sync": `tenant_sync key=["tenant" "shard" "live"] max_running=nil key_limit=nil paused=false configured=1 updated=false effective_total=-1 effective_key=1`,
		// Registered by its DDL only: no configured key limit is recorded, and jobinfo's default applies.
		"fresh": `fresh key=["user_id"] max_running=nil key_limit=nil paused=false configured=nil updated=false effective_total=-1 effective_key=1`,
	}
	for name, w := range want {
		k, err := limits.Get(ctx, s.Pool, name)
		if err != nil || kindString(k) != w {
			t.Errorf("Get(%s) = %v\n got %s\nwant %s", name, err, kindString(k), w)
		}
	}

	// UpdatedAt is the row's.
	webhookKind, err := limits.Get(ctx, s.Pool, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	var updated time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT updated_at FROM jobpipe_kind_limits WHERE kind = 'webhook'`).Scan(&updated); err != nil {
		t.Fatal(err)
	}
	if !webhookKind.UpdatedAt.Equal(updated) {
		t.Errorf("Get(webhook).UpdatedAt = %v, want the row's %v", webhookKind.UpdatedAt, updated)
	}

	for _, tc := range []struct {
		kind, key, want string
		effective       int
	}{
		{"webhook", "42", `webhook "42" limit=2 paused=false updated=true`, 2},
		{"webhook", "7", `webhook "7" limit=nil paused=true updated=true`, 0},
		{"webhook", "99", `webhook "99" limit=nil paused=false updated=false`, 10}, // the kind's per-key default
		{"tenant_sync", `[ "acme" , 1 , true ]`, `tenant_sync "[\"acme\", 1, true]" limit=0 paused=false updated=true`, 0},
		{"tenant_sync", `["acme", 2, true]`, `tenant_sync "[\"acme\", 2, true]" limit=nil paused=false updated=false`, 1},
	} {
		key, err := limits.GetKey(ctx, s.Pool, tc.kind, tc.key)
		if err != nil || keyString(key) != tc.want {
			t.Errorf("GetKey(%s, %s) = %v\n got %s\nwant %s", tc.kind, tc.key, err, keyString(key), tc.want)
		}
		kind, err := limits.Get(ctx, s.Pool, tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		if got := kind.EffectiveKeyLimit(key); got != tc.effective {
			t.Errorf("EffectiveKeyLimit of %s %s = %d, want %d", tc.kind, tc.key, got, tc.effective)
		}
	}

	kinds, keys, err := limits.List(ctx, s.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	assertList(t, "List()", kinds, keys,
		[]string{want["cleanup"], want["fresh"], want["tenant_sync"], want["webhook"]},
		[]string{`tenant_sync "[\"acme\", 1, true]" limit=0 paused=false updated=true`,
			`webhook "42" limit=2 paused=false updated=true`, `webhook "7" limit=nil paused=true updated=true`})

	kinds, keys, err = limits.List(ctx, s.Pool, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	assertList(t, "List(webhook)", kinds, keys, []string{want["webhook"]},
		[]string{`webhook "42" limit=2 paused=false updated=true`, `webhook "7" limit=nil paused=true updated=true`})

	kinds, keys, err = limits.List(ctx, s.Pool, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	assertList(t, "List(fresh)", kinds, keys, []string{want["fresh"]}, nil)
}

func assertList(t *testing.T, call string, kinds []limits.Kind, keys []limits.Key, wantKinds, wantKeys []string) {
	t.Helper()
	var gotKinds, gotKeys []string
	for _, k := range kinds {
		gotKinds = append(gotKinds, kindString(k))
	}
	for _, k := range keys {
		gotKeys = append(gotKeys, keyString(k))
	}
	if !slices.Equal(gotKinds, wantKinds) || !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("%s:\n got kinds %q\n     keys %q\nwant kinds %q\n     keys %q", call, gotKinds, gotKeys, wantKinds, wantKeys)
	}
}

// The Effective methods resolve what is in force from what is stored, most specific first.
func TestEffectiveLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		kind          limits.Kind
		key           limits.Key
		wantTotal     int
		wantKeyLimit  int
		wantSameTotal bool
	}{
		{name: "nothing known", wantTotal: limits.Unlimited, wantKeyLimit: jobinfo.DefaultKeyLimit},
		{name: "configured", kind: limits.Kind{ConfiguredKeyLimit: intp(3)}, wantTotal: limits.Unlimited, wantKeyLimit: 3},
		{name: "kind default over configured", kind: limits.Kind{KeyLimit: intp(10), ConfiguredKeyLimit: intp(3)},
			wantTotal: limits.Unlimited, wantKeyLimit: 10},
		{name: "key override over kind default", kind: limits.Kind{KeyLimit: intp(10)}, key: limits.Key{Limit: intp(20)},
			wantTotal: limits.Unlimited, wantKeyLimit: 20},
		{name: "key override 0", kind: limits.Kind{KeyLimit: intp(10)}, key: limits.Key{Limit: intp(0)},
			wantTotal: limits.Unlimited, wantKeyLimit: 0},
		{name: "key paused", kind: limits.Kind{KeyLimit: intp(10)}, key: limits.Key{Limit: intp(5), Paused: true},
			wantTotal: limits.Unlimited, wantKeyLimit: 0},
		{name: "total", kind: limits.Kind{MaxRunning: intp(7)}, wantTotal: 7, wantKeyLimit: 1},
		{name: "total 0", kind: limits.Kind{MaxRunning: intp(0)}, wantTotal: 0, wantKeyLimit: 1},
		// A paused kind halts in total; its per-key limits are what applies once it is resumed.
		{name: "kind paused", kind: limits.Kind{MaxRunning: intp(7), KeyLimit: intp(4), Paused: true}, wantTotal: 0, wantKeyLimit: 4},
	} {
		if got := tc.kind.EffectiveMaxRunning(); got != tc.wantTotal {
			t.Errorf("%s: EffectiveMaxRunning = %d, want %d", tc.name, got, tc.wantTotal)
		}
		if got := tc.kind.EffectiveKeyLimit(tc.key); got != tc.wantKeyLimit {
			t.Errorf("%s: EffectiveKeyLimit = %d, want %d", tc.name, got, tc.wantKeyLimit)
		}
	}
}

// NormalizeKey writes a composite key exactly as the dispatcher's key expression (json_build_array
// over the key columns, cast to text) prints the same values in PostgreSQL, whatever spacing and
// escapes the user typed.
func TestNormalizeKeyMatchesPostgres(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	info := jobinfo.MustDefine[tenantSync]("tenant_sync").Info()
	for _, tc := range []struct {
		typed  string
		tenant string
		shard  int64
		live   bool
	}{
		{`["acme",42,true]`, "acme", 42, true},
		{" [ \"acme\" ,\n 42 ,\tfalse ] ", "acme", 42, false},
		{`["a\"b\\c", -7, true]`, `a"b\c`, -7, true},
		{`["line\nbreak\ttab\u0001\u001F", 0, true]`, "line\nbreak\ttab\x01\x1f", 0, true},
		{`["\b\f\r", 9223372036854775807, false]`, "\b\f\r", math.MaxInt64, false},
		{`["\u00e9t\u00E9 \/ \ud83d\ude00", 1, true]`, "été / 😀", 1, true},
		{"[\"\u2028 \u007f <&> 'q'\", 1, true]", "\u2028 \x7f <&> 'q'", 1, true},
		{`["", 0, false]`, "", 0, false},
	} {
		var id int64
		if err := s.Pool.QueryRow(ctx, `INSERT INTO tenant_sync (tenant, shard, live) VALUES ($1, $2, $3) RETURNING id`,
			tc.tenant, tc.shard, tc.live).Scan(&id); err != nil {
			t.Fatal(err)
		}
		var pg string
		if err := s.Pool.QueryRow(ctx, `SELECT `+info.KeyText("j")+` FROM tenant_sync j WHERE id = $1`, id).Scan(&pg); err != nil {
			t.Fatal(err)
		}
		got, err := limits.NormalizeKey(info.Key, tc.typed)
		if err != nil || got != pg {
			t.Errorf("NormalizeKey(%q) = %q, %v; PostgreSQL prints %q", tc.typed, got, err, pg)
		}
	}
}

// Malformed keys are refused with what is wrong and what to give instead.
func TestNormalizeKeyErrors(t *testing.T) {
	t.Parallel()
	cols := []string{"tenant", "shard", "live"}
	const want = `the key has 3 columns (tenant, shard, live), so give a JSON array of their values, for example ["acme", 42, true]`
	for _, tc := range []struct {
		cols  []string
		value string
		want  string
	}{
		{cols, `["acme", 1]`, `limits: invalid key "[\"acme\", 1]": 2 values for the 3 key columns (tenant, shard, live)`},
		{cols, `["acme", 1, true, 2]`, `limits: invalid key "[\"acme\", 1, true, 2]": 4 values for the 3 key columns (tenant, shard, live)`},
		{cols, `[]`, `limits: invalid key "[]": 0 values for the 3 key columns (tenant, shard, live)`},
		{cols, `[null, 1, true]`, `limits: invalid key "[null, 1, true]": value 1 (column tenant) is null; key columns hold scalars (string, number, boolean), never null`},
		{cols, `["acme", {"a": 1}, true]`, `limits: invalid key "[\"acme\", {\"a\": 1}, true]": value 2 (column shard) is an object; key columns hold scalars (string, number, boolean), never null`},
		{cols, `["acme", 1, [true]]`, `limits: invalid key "[\"acme\", 1, [true]]": value 3 (column live) is an array; key columns hold scalars (string, number, boolean), never null`},
		{cols, `acme`, `limits: invalid key "acme": not JSON: ` + want},
		{cols, ``, `limits: invalid key "": not JSON: ` + want},
		{cols, `["acme", 1, true`, `limits: invalid key "[\"acme\", 1, true": not JSON: ` + want},
		{cols, `["acme", 1, true] x`, `limits: invalid key "[\"acme\", 1, true] x": not JSON: ` + want},
		{cols, `["acme", 1, true]]`, `limits: invalid key "[\"acme\", 1, true]]": not JSON: ` + want},
		{cols, `["acme", 1, True]`, `limits: invalid key "[\"acme\", 1, True]": not JSON: ` + want},
		{cols, `{"tenant": "acme"}`, `limits: invalid key "{\"tenant\": \"acme\"}": an object, not an array: ` + want},
		{cols, `null`, `limits: invalid key "null": null, not an array: ` + want},
		{cols, `"acme"`, `limits: invalid key "\"acme\"": a string, not an array: ` + want},
		{cols, `42`, `limits: invalid key "42": a number, not an array: ` + want},
		{nil, `x`, `limits: invalid key "x": the kind has no key, so it has no per-key limits`},
		{[]string{"a", "b"}, `[1]`, `limits: invalid key "[1]": 1 values for the 2 key columns (a, b)`},
		{[]string{"a", "b", "c", "d"}, `x`, `limits: invalid key "x": not JSON: the key has 4 columns (a, b, c, d), so give a JSON array of their values, for example ["acme", 42, true, "x"]`},
	} {
		got, err := limits.NormalizeKey(tc.cols, tc.value)
		if !errors.Is(err, limits.ErrInvalid) || err.Error() != tc.want {
			t.Errorf("NormalizeKey(%q, %q) = %q, %v\nwant error %s", tc.cols, tc.value, got, err, tc.want)
		}
	}
}

// A one-column key is the column's text: taken as it is, spaces and all.
func TestNormalizeKeyOneColumn(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"42", "acme corp", " x ", `["a", 1]`, ""} {
		if got, err := limits.NormalizeKey([]string{"customer_id"}, v); err != nil || got != v {
			t.Errorf("NormalizeKey(one column, %q) = %q, %v; want it unchanged", v, got, err)
		}
	}
}

// Every change notifies limits.NotifyChannel once, with the kind as payload, when it commits; a
// change that changes nothing or fails does not.
func TestChangesNotify(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	// Notifications are per database, not per schema: kinds named for this test's schema keep other
	// tests' changes out of what this one hears.
	suffix := s.Name[strings.LastIndexByte(s.Name, '_')+1:]
	hook, plain, composite := "webhook_"+suffix, "cleanup_"+suffix, "sync_"+suffix
	createKind[webhook](t, s, hook)
	createKind[cleanup](t, s, plain)
	createKind[tenantSync](t, s, composite)
	mine := []string{hook, plain, composite}

	conn, err := pgx.ConnectConfig(ctx, s.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+limits.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func() error
		want string // the payload, or "" for no notification
	}{
		{"set a total", func() error { return limits.SetMaxRunning(ctx, s.Pool, hook, 5) }, hook},
		{"set a key", func() error { return limits.SetKey(ctx, s.Pool, composite, `["a", 1, true]`, 2) }, composite},
		{"pause", func() error { return limits.Pause(ctx, s.Pool, plain) }, plain},
		{"clear a key, deleting its row", func() error { return limits.ClearKey(ctx, s.Pool, composite, `["a", 1, true]`) }, composite},
		{"clear what is not stored", func() error { return limits.ClearKeyLimit(ctx, s.Pool, composite) }, ""},
		{"resume a key not paused", func() error { return limits.ResumeKey(ctx, s.Pool, hook, "1") }, ""},
		{"a refused change", func() error {
			if err := limits.SetKeyLimit(ctx, s.Pool, plain, 1); !errors.Is(err, limits.ErrInvalid) {
				return fmt.Errorf("SetKeyLimit on a kind without key = %v, want ErrInvalid", err)
			}
			return nil
		}, ""},
		{"plain SQL", func() error {
			_, err := s.Pool.Exec(ctx, `UPDATE jobpipe_kind_limits SET max_running = 6 WHERE kind = $1`, hook)
			return err
		}, hook},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.want != "" {
			n := waitNotification(t, conn, mine, 5*time.Second)
			if n == nil || n.Channel != limits.NotifyChannel || n.Payload != step.want {
				t.Fatalf("%s: notification %+v, want channel %s payload %q", step.name, n, limits.NotifyChannel, step.want)
			}
		}
		// One transaction's statements notify once: PostgreSQL folds equal notifications.
		if n := waitNotification(t, conn, mine, 200*time.Millisecond); n != nil {
			t.Fatalf("%s: unexpected notification %+v", step.name, n)
		}
	}
}

// waitNotification returns the next notification on conn about one of kinds, or nil when none comes
// within timeout. Other tests' notifications, about their own kinds, are skipped.
func waitNotification(t *testing.T, conn *pgx.Conn, kinds []string, timeout time.Duration) *pgconn.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kinds, n.Payload) {
			return n
		}
	}
}

// Changes to different limits of one kind at the same time all take effect: a change that empties
// and deletes the row never swallows another's insert into it.
func TestConcurrentChangesKeepEachOther(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	const rounds = 200
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() {
		for range rounds {
			if err := limits.SetKeyLimit(ctx, s.Pool, "webhook", 10); err != nil {
				errs <- err
				return
			}
			if err := limits.ClearKeyLimit(ctx, s.Pool, "webhook"); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() {
		for i := range rounds {
			if err := limits.SetMaxRunning(ctx, s.Pool, "webhook", i); err != nil {
				errs <- err
				return
			}
			k, err := limits.Get(ctx, s.Pool, "webhook")
			if err != nil {
				errs <- err
				return
			}
			if k.MaxRunning == nil || *k.MaxRunning != i {
				errs <- errors.New("round " + ptr(&i) + ": SetMaxRunning was lost: max_running is " + ptr(k.MaxRunning))
				return
			}
			if err := limits.ClearMaxRunning(ctx, s.Pool, "webhook"); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assertRows(t, s, nil, nil)
}
