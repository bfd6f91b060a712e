package cli

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

// setupLimits gives the test a migrated schema with three kinds: webhook (keyed by customer_id,
// registered with key limit 3), cleanup (no key) and tenant_sync (keyed by tenant and shard,
// registered only by its DDL, so its configured key limit is not recorded).
func setupLimits(t *testing.T) *testenv.Schema {
	t.Helper()
	s := testenv.NewSchema(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	type webhook struct {
		CustomerID int64  `jobpipe:"customer_id,key"`
		URL        string `jobpipe:"url"`
	}
	type cleanup struct {
		Target string `jobpipe:"target"`
	}
	type tenantSync struct {
		Tenant string `jobpipe:"tenant,key"`
		Shard  int64  `jobpipe:"shard,key"`
	}
	hooks := jobinfo.MustDefine[webhook]("webhook", jobinfo.KeyLimit(3))
	cleanups := jobinfo.MustDefine[cleanup]("cleanup")
	createTables(t, s, hooks.TableSpec(), cleanups.TableSpec(), jobinfo.MustDefine[tenantSync]("tenant_sync").TableSpec())
	if err := hooks.Register(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	if err := cleanups.Register(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	return s
}

// createTables creates the tables of specs in s's schema.
func createTables(t *testing.T, s *testenv.Schema, specs ...jobinfo.TableSpec) {
	t.Helper()
	for _, spec := range specs {
		ddl, err := spec.CreateSQL()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool.Exec(context.Background(), ddl); err != nil {
			t.Fatal(err)
		}
	}
}

// jp runs jobpipe ARGS against s's schema (--database-url goes before any "--").
func jp(t *testing.T, s *testenv.Schema, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	at := len(args)
	if i := slices.Index(args, "--"); i >= 0 {
		at = i
	}
	args = slices.Insert(slices.Clone(args), at, "--database-url", s.URL)
	return runCLI(t, args...)
}

// limitRows is what jobpipe_kind_limits and jobpipe_key_limits hold, one string a row.
func limitRows(t *testing.T, s *testenv.Schema) (kinds, keys []string) {
	t.Helper()
	query := func(sql string) []string {
		rows, err := s.Pool.Query(context.Background(), sql)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	kinds = query(`SELECT format('%s max_running=%s key_limit=%s paused=%s', kind,
    coalesce(max_running::text, 'NULL'), coalesce(key_limit::text, 'NULL'), paused::text)
FROM jobpipe_kind_limits ORDER BY kind`)
	keys = query(`SELECT format('%s %s key_limit=%s paused=%s', kind, to_json(key_value),
    coalesce(key_limit::text, 'NULL'), paused::text)
FROM jobpipe_key_limits ORDER BY kind, key_value`)
	return kinds, keys
}

func assertLimitRows(t *testing.T, s *testenv.Schema, step string, wantKinds, wantKeys []string) {
	t.Helper()
	kinds, keys := limitRows(t, s)
	if !slices.Equal(kinds, wantKinds) || !slices.Equal(keys, wantKeys) {
		t.Errorf("%s: stored limits:\n got kinds %q\n     keys  %q\nwant kinds %q\n     keys  %q", step, kinds, keys, wantKinds, wantKeys)
	}
}

// limitStep is one command of a scenario: its exact output and the rows stored after it.
type limitStep struct {
	args       []string
	wantStdout string
	wantKinds  []string
	wantKeys   []string
}

func runSteps(t *testing.T, s *testenv.Schema, steps []limitStep) {
	t.Helper()
	for _, st := range steps {
		code, stdout, stderr := jp(t, s, st.args...)
		check(t, st.args, code, stable(stdout), stderr, 0, st.wantStdout, "")
		assertLimitRows(t, s, "after jobpipe "+st.args[0]+" "+st.args[1], st.wantKinds, st.wantKeys)
	}
}

const running = "note: running jobs are not stopped: they finish; "

// set and clear change what is stored, say what applies now and what did before, and note what a
// lower limit does not do.
func TestLimitSetAndClear(t *testing.T) {
	t.Parallel()
	s := setupLimits(t)
	webhook := func(maxRunning, keyLimit string) []string {
		return []string{"webhook max_running=" + maxRunning + " key_limit=" + keyLimit + " paused=false"}
	}
	runSteps(t, s, []limitStep{
		{args: []string{"limit", "set", "webhook", "5"},
			wantStdout: "webhook: total limit 5 (was: none)\n" +
				running + "no new job of webhook starts while 5 or more run\n",
			wantKinds: webhook("5", "NULL")},
		{args: []string{"limit", "set", "webhook", "10", "--per-key"},
			wantStdout: "webhook: per-key default 10 (was: configured 3)\n",
			wantKinds:  webhook("5", "10")},
		{args: []string{"limit", "set", "webhook", "2", "--key", "42"},
			wantStdout: "webhook: key \"42\" limit 2 (was: kind per-key default 10)\n" +
				running + "no new job of key \"42\" starts while 2 or more of it run\n",
			wantKinds: webhook("5", "10"), wantKeys: []string{`webhook "42" key_limit=2 paused=false`}},
		{args: []string{"limit", "set", "webhook", "20", "--key=43"},
			wantStdout: "webhook: key \"43\" limit 20 (was: kind per-key default 10)\n",
			wantKinds:  webhook("5", "10"), wantKeys: []string{`webhook "42" key_limit=2 paused=false`, `webhook "43" key_limit=20 paused=false`}},
		// Raising the total: no note.
		{args: []string{"limit", "set", "webhook", "8"},
			wantStdout: "webhook: total limit 8 (was: 5)\n",
			wantKinds:  webhook("8", "10"), wantKeys: []string{`webhook "42" key_limit=2 paused=false`, `webhook "43" key_limit=20 paused=false`}},
		{args: []string{"limit", "set", "--per-key", "webhook", "4"},
			wantStdout: "webhook: per-key default 4 (was: kind per-key default 10)\n" +
				running + "no new job of a key without a limit of its own starts while 4 or more of that key run\n" +
				"note: 2 keys have a limit of their own, which wins over the per-key default: jobpipe limit list webhook\n",
			wantKinds: webhook("8", "4"), wantKeys: []string{`webhook "42" key_limit=2 paused=false`, `webhook "43" key_limit=20 paused=false`}},
		{args: []string{"limit", "clear", "webhook", "--key", "42"},
			wantStdout: "webhook: key \"42\" limit cleared: kind per-key default 4 applies (was: key override 2)\n",
			wantKinds:  webhook("8", "4"), wantKeys: []string{`webhook "43" key_limit=20 paused=false`}},
		{args: []string{"limit", "clear", "webhook", "--total"},
			wantStdout: "webhook: total limit cleared: no total limit (was: 8)\n",
			wantKinds:  webhook("NULL", "4"), wantKeys: []string{`webhook "43" key_limit=20 paused=false`}},
		// Without a flag, both; the configured 3 is lower than the default 4 that goes.
		{args: []string{"limit", "clear", "webhook"},
			wantStdout: "webhook: total limit cleared: no total limit (was: none); per-key default cleared: configured 3 applies (was: kind per-key default 4)\n" +
				running + "no new job of a key without a limit of its own starts while 3 or more of that key run\n" +
				"note: 1 key has a limit of their own, which wins over the per-key default: jobpipe limit list webhook\n",
			wantKeys: []string{`webhook "43" key_limit=20 paused=false`}},
		{args: []string{"limit", "clear", "webhook", "--key", "43"},
			wantStdout: "webhook: key \"43\" limit cleared: configured 3 applies (was: key override 20)\n" +
				running + "no new job of key \"43\" starts while 3 or more of it run\n"},
		{args: []string{"limit", "set", "cleanup", "0"},
			wantStdout: "cleanup: total limit 0 (was: none)\n" +
				running + "no new job of cleanup starts while the limit is 0\n",
			wantKinds: []string{"cleanup max_running=0 key_limit=NULL paused=false"}},
		// A kind without key has only its total to clear.
		{args: []string{"limit", "clear", "cleanup"},
			wantStdout: "cleanup: total limit cleared: no total limit (was: 0)\n"},
		{args: []string{"limit", "set", "tenant_sync", "2", "--key", `[ "acme",1 ]`},
			wantStdout: "tenant_sync: key [\"acme\", 1] limit 2 (was: jobpipe's default 1)\n",
			wantKeys:   []string{`tenant_sync "[\"acme\", 1]" key_limit=2 paused=false`}},
		// Clearing what is not stored changes nothing.
		{args: []string{"limit", "clear", "tenant_sync", "--per-key"},
			wantStdout: "tenant_sync: per-key default cleared: jobpipe's default 1 applies (was: jobpipe's default 1)\n",
			wantKeys:   []string{`tenant_sync "[\"acme\", 1]" key_limit=2 paused=false`}},
		{args: []string{"limit", "set", "webhook", "2", "--key", "-1"},
			wantStdout: "webhook: key \"-1\" limit 2 (was: configured 3)\n" +
				running + "no new job of key \"-1\" starts while 2 or more of it run\n",
			wantKeys: []string{`tenant_sync "[\"acme\", 1]" key_limit=2 paused=false`, `webhook "-1" key_limit=2 paused=false`}},
	})
}

// pause and resume halt and restart a kind or a key, keeping its limits, and say that running jobs
// go on.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	s := setupLimits(t)
	runSteps(t, s, []limitStep{
		{args: []string{"limit", "set", "webhook", "5"},
			wantStdout: "webhook: total limit 5 (was: none)\n" + running + "no new job of webhook starts while 5 or more run\n",
			wantKinds:  []string{"webhook max_running=5 key_limit=NULL paused=false"}},
		{args: []string{"pause", "webhook"},
			wantStdout: "webhook: paused (was: not paused)\n" + running + "no new job of webhook starts until \"jobpipe resume webhook\"\n",
			wantKinds:  []string{"webhook max_running=5 key_limit=NULL paused=true"}},
		{args: []string{"pause", "webhook"},
			wantStdout: "webhook: paused (was: paused)\nnote: webhook is paused: no job of it starts until \"jobpipe resume webhook\"\n",
			wantKinds:  []string{"webhook max_running=5 key_limit=NULL paused=true"}},
		// A change to a paused kind is stored, and the pause still halts it.
		{args: []string{"limit", "set", "webhook", "6"},
			wantStdout: "webhook: total limit 6 (was: 5)\nnote: webhook is paused: no job of it starts until \"jobpipe resume webhook\"\n",
			wantKinds:  []string{"webhook max_running=6 key_limit=NULL paused=true"}},
		{args: []string{"resume", "webhook"},
			wantStdout: "webhook: resumed: total limit 6 applies (was: paused)\n",
			wantKinds:  []string{"webhook max_running=6 key_limit=NULL paused=false"}},
		{args: []string{"limit", "clear", "webhook"},
			wantStdout: "webhook: total limit cleared: no total limit (was: 6); per-key default cleared: configured 3 applies (was: configured 3)\n"},
		{args: []string{"pause", "webhook", "--key", "acme corp"},
			wantStdout: "webhook: key \"acme corp\" paused (was: not paused)\n" +
				running + "no new job of key \"acme corp\" starts until \"jobpipe resume webhook --key 'acme corp'\"\n",
			wantKeys: []string{`webhook "acme corp" key_limit=NULL paused=true`}},
		{args: []string{"limit", "set", "webhook", "0", "--key", "acme corp"},
			wantStdout: "webhook: key \"acme corp\" limit 0 (was: configured 3)\n" +
				"note: key \"acme corp\" is paused: no job of it starts until \"jobpipe resume webhook --key 'acme corp'\"\n",
			wantKeys: []string{`webhook "acme corp" key_limit=0 paused=true`}},
		{args: []string{"resume", "webhook", "--key", "acme corp"},
			wantStdout: "webhook: key \"acme corp\" resumed: key override 0 applies (was: paused)\n",
			wantKeys:   []string{`webhook "acme corp" key_limit=0 paused=false`}},
		// Pausing where the limit is 0 already still notes the running jobs.
		{args: []string{"pause", "webhook", "--key", "acme corp"},
			wantStdout: "webhook: key \"acme corp\" paused (was: not paused)\n" +
				running + "no new job of key \"acme corp\" starts until \"jobpipe resume webhook --key 'acme corp'\"\n",
			wantKeys: []string{`webhook "acme corp" key_limit=0 paused=true`}},
		{args: []string{"limit", "clear", "webhook", "--key", "acme corp"},
			wantStdout: "webhook: key \"acme corp\" limit cleared: configured 3 applies (was: key override 0)\n" +
				"note: key \"acme corp\" is paused: no job of it starts until \"jobpipe resume webhook --key 'acme corp'\"\n",
			wantKeys: []string{`webhook "acme corp" key_limit=NULL paused=true`}},
		// Resuming the last thing stored deletes the row.
		{args: []string{"resume", "webhook", "--key", "acme corp"},
			wantStdout: "webhook: key \"acme corp\" resumed: configured 3 applies (was: paused)\n"},
		{args: []string{"pause", "tenant_sync", "--key", `["it's", 2]`},
			wantStdout: "tenant_sync: key [\"it's\", 2] paused (was: not paused)\n" +
				running + "no new job of key [\"it's\", 2] starts until \"jobpipe resume tenant_sync --key '[\\\"it'\\\\''s\\\", 2]'\"\n",
			wantKeys: []string{`tenant_sync "[\"it's\", 2]" key_limit=NULL paused=true`}},
	})
}

// setLimitState stores a mix of limits through the command line itself.
func setLimitState(t *testing.T, s *testenv.Schema) {
	t.Helper()
	for _, args := range [][]string{
		{"limit", "set", "webhook", "5"},
		{"limit", "set", "webhook", "10", "--per-key"},
		{"limit", "set", "webhook", "2", "--key", "42"},
		{"pause", "webhook", "--key", "7"},
		{"limit", "set", "cleanup", "4"},
		{"pause", "cleanup"},
		{"limit", "set", "tenant_sync", "0", "--key", `["acme", 1]`},
	} {
		if code, _, stderr := jp(t, s, args...); code != 0 {
			t.Fatalf("jobpipe %q: exit %d: %s", args, code, stderr)
		}
	}
}

// get shows what is in force, with what is stored under it and where a per-key limit comes from.
func TestLimitGet(t *testing.T) {
	t.Parallel()
	s := setupLimits(t)
	setLimitState(t, s)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"limit", "get", "webhook"}, `kind:           webhook
key columns:    customer_id
paused:         no
total limit:    5
  stored:       5
per-key limit:  10 (kind per-key default)
  stored:       10
  configured:   3
keys stored:    1 with a limit of their own, 2 in all (jobpipe limit list webhook)
updated:        YYYY-MM-DD hh:mm:ss UTC
`},
		{[]string{"limit", "get", "webhook", "--key", "42"}, `kind:         webhook
key:          42
kind paused:  no
key paused:   no
total limit:  5
  stored:     5
key limit:    2 (key override)
  stored:     2
  otherwise:  10 (kind per-key default)
updated:      YYYY-MM-DD hh:mm:ss UTC
`},
		{[]string{"limit", "get", "webhook", "--key", "7"}, `kind:         webhook
key:          7
kind paused:  no
key paused:   yes
total limit:  5
  stored:     5
key limit:    0 (key paused)
  stored:     none
  otherwise:  10 (kind per-key default)
updated:      YYYY-MM-DD hh:mm:ss UTC
`},
		{[]string{"limit", "get", "webhook", "--key", "99"}, `kind:         webhook
key:          99
kind paused:  no
key paused:   no
total limit:  5
  stored:     5
key limit:    10 (kind per-key default)
  stored:     none
  otherwise:  10 (kind per-key default)
updated:      nothing stored
`},
		{[]string{"limit", "get", "cleanup"}, `kind:         cleanup
key columns:  none (no per-key limits)
paused:       yes
total limit:  0 (paused)
  stored:     4
updated:      YYYY-MM-DD hh:mm:ss UTC
`},
		{[]string{"limit", "get", "tenant_sync"}, `kind:           tenant_sync
key columns:    tenant, shard
paused:         no
total limit:    none
  stored:       none
per-key limit:  1 (jobpipe's default)
  stored:       none
  configured:   not recorded yet: a dispatcher records it when it starts with the kind (jobpipe's default is 1)
keys stored:    1 with a limit of their own, 1 in all (jobpipe limit list tenant_sync)
updated:        nothing stored
`},
		{[]string{"limit", "get", "tenant_sync", "--key", `["acme",1]`}, `kind:         tenant_sync
key:          ["acme", 1]
kind paused:  no
key paused:   no
total limit:  none
  stored:     none
key limit:    0 (key override)
  stored:     0
  otherwise:  1 (jobpipe's default)
updated:      YYYY-MM-DD hh:mm:ss UTC
`},
		{[]string{"limit", "get", "webhook", "--key", ""}, `kind:         webhook
key:          ""
kind paused:  no
key paused:   no
total limit:  5
  stored:     5
key limit:    10 (kind per-key default)
  stored:     none
  otherwise:  10 (kind per-key default)
updated:      nothing stored
`},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, stable(stdout), stderr, 0, tc.want, "")
	}
}

// list shows every kind, then every key with something stored, or one kind and its keys.
func TestLimitList(t *testing.T) {
	t.Parallel()
	s := setupLimits(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"limit", "list"}, `KIND         PAUSED  TOTAL  STORED  PER KEY                STORED  KEY COLUMNS
cleanup      no      none   -       -                      -       -
tenant_sync  no      none   -       1 (jobpipe's default)  -       tenant, shard
webhook      no      none   -       3 (configured)         -       customer_id

no key has a limit of its own or is paused
`},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, stdout, stderr, 0, tc.want, "")
	}
	setLimitState(t, s)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"limit", "list"}, `KIND         PAUSED  TOTAL       STORED  PER KEY                    STORED  KEY COLUMNS
cleanup      yes     0 (paused)  4       -                          -       -
tenant_sync  no      none        -       1 (jobpipe's default)      -       tenant, shard
webhook      no      5           5       10 (kind per-key default)  10      customer_id

KIND         KEY          PAUSED  LIMIT             STORED
tenant_sync  ["acme", 1]  no      0 (key override)  0
webhook      42           no      2 (key override)  2
webhook      7            yes     0 (key paused)    -
`},
		{[]string{"limit", "list", "webhook"}, `KIND     PAUSED  TOTAL  STORED  PER KEY                    STORED  KEY COLUMNS
webhook  no      5      5       10 (kind per-key default)  10      customer_id

KIND     KEY  PAUSED  LIMIT             STORED
webhook  42   no      2 (key override)  2
webhook  7    yes     0 (key paused)    -
`},
		{[]string{"limit", "list", "cleanup"}, `KIND     PAUSED  TOTAL       STORED  PER KEY  STORED  KEY COLUMNS
cleanup  yes     0 (paused)  4       -        -       -

no key has a limit of its own or is paused
`},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, stdout, stderr, 0, tc.want, "")
	}
}

// A schema without kinds says how kinds get registered.
func TestLimitListNoKinds(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	if err := migrations.Up(context.Background(), s.Pool); err != nil {
		t.Fatal(err)
	}
	args := []string{"limit", "list"}
	code, stdout, stderr := jp(t, s, args...)
	check(t, args, code, stdout, stderr, 0, "no kind is registered: a kind is registered when a dispatcher starts with it "+
		"or when the migration that creates its table (jobpipe kind new) is applied\n", "")
}

var jsonTimes = regexp.MustCompile(`"updated_at": "[^"]+"`)

// --json prints the same facts under the field names docs/cli.md documents.
func TestLimitJSON(t *testing.T) {
	t.Parallel()
	s := setupLimits(t)
	setLimitState(t, s)
	const webhookJSON = `{
      "kind": "webhook",
      "key_columns": [
        "customer_id"
      ],
      "paused": false,
      "max_running": 5,
      "key_limit": 10,
      "configured_key_limit": 3,
      "effective_max_running": 5,
      "effective_key_limit": 10,
      "effective_key_limit_source": "kind_default",
      "updated_at": "T"
    }`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"limit", "get", "tenant_sync", "--json"}, `{
  "kind": {
    "kind": "tenant_sync",
    "key_columns": [
      "tenant",
      "shard"
    ],
    "paused": false,
    "max_running": null,
    "key_limit": null,
    "configured_key_limit": null,
    "effective_max_running": null,
    "effective_key_limit": 1,
    "effective_key_limit_source": "default",
    "updated_at": null
  },
  "key": null,
  "stored_keys": 1,
  "keys_with_limit": 1
}
`},
		{[]string{"limit", "get", "cleanup", "--json"}, `{
  "kind": {
    "kind": "cleanup",
    "key_columns": [],
    "paused": true,
    "max_running": 4,
    "key_limit": null,
    "configured_key_limit": null,
    "effective_max_running": 0,
    "effective_key_limit": null,
    "effective_key_limit_source": null,
    "updated_at": "T"
  },
  "key": null,
  "stored_keys": 0,
  "keys_with_limit": 0
}
`},
		{[]string{"limit", "get", "webhook", "--key", "7", "--json"}, `{
  "kind": ` + strings.ReplaceAll(webhookJSON, "\n  ", "\n") + `,
  "key": {
    "kind": "webhook",
    "key": "7",
    "paused": true,
    "limit": null,
    "effective_limit": 0,
    "effective_limit_source": "key_paused",
    "updated_at": "T"
  },
  "stored_keys": 2,
  "keys_with_limit": 1
}
`},
		{[]string{"limit", "set", "webhook", "3", "--key", "42", "--json"}, `{
  "message": "webhook: key \"42\" limit 3 (was: key override 2)",
  "notes": [],
  "before": {
    "kind": ` + webhookJSON + `,
    "key": {
      "kind": "webhook",
      "key": "42",
      "paused": false,
      "limit": 2,
      "effective_limit": 2,
      "effective_limit_source": "key_override",
      "updated_at": "T"
    }
  },
  "after": {
    "kind": ` + webhookJSON + `,
    "key": {
      "kind": "webhook",
      "key": "42",
      "paused": false,
      "limit": 3,
      "effective_limit": 3,
      "effective_limit_source": "key_override",
      "updated_at": "T"
    }
  }
}
`},
		{[]string{"pause", "webhook", "--json"}, `{
  "message": "webhook: paused (was: not paused)",
  "notes": [
    "running jobs are not stopped: they finish; no new job of webhook starts until \"jobpipe resume webhook\""
  ],
  "before": {
    "kind": ` + webhookJSON + `,
    "key": null
  },
  "after": {
    "kind": {
      "kind": "webhook",
      "key_columns": [
        "customer_id"
      ],
      "paused": true,
      "max_running": 5,
      "key_limit": 10,
      "configured_key_limit": 3,
      "effective_max_running": 0,
      "effective_key_limit": 10,
      "effective_key_limit_source": "kind_default",
      "updated_at": "T"
    },
    "key": null
  }
}
`},
		{[]string{"limit", "list", "tenant_sync", "--json"}, `{
  "kinds": [
    {
      "kind": "tenant_sync",
      "key_columns": [
        "tenant",
        "shard"
      ],
      "paused": false,
      "max_running": null,
      "key_limit": null,
      "configured_key_limit": null,
      "effective_max_running": null,
      "effective_key_limit": 1,
      "effective_key_limit_source": "default",
      "updated_at": null
    }
  ],
  "keys": [
    {
      "kind": "tenant_sync",
      "key": "[\"acme\", 1]",
      "paused": false,
      "limit": 0,
      "effective_limit": 0,
      "effective_limit_source": "key_override",
      "updated_at": "T"
    }
  ]
}
`},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, jsonTimes.ReplaceAllString(stdout, `"updated_at": "T"`), stderr, 0, tc.want, "")
	}
}

// Wrong command lines and wrong values are refused with what is wrong, exit 2 for the shape of the
// command line and 1 for a value the database refuses, and nothing is changed.
func TestLimitBadInput(t *testing.T) {
	t.Parallel()
	s := setupLimits(t)
	setLimitState(t, s)
	wantKinds, wantKeys := limitRows(t, s)
	unknown := func(where string) string { return "jobpipe " + where + ": unknown kind \"nosuch\": " + noSuchKind }
	const noKeyValue = "jobpipe: limits: invalid key \"x\" for kind \"cleanup\": the kind has no key, so it has no per-key limits\n"
	const noPerKey = "jobpipe: limits: invalid: kind \"cleanup\" has no key, so it has no per-key limit; " +
		"limit its total instead (SetMaxRunning, or jobpipe limit set cleanup N)\n"
	usage := func(where, msg, usage string) string { return "jobpipe " + where + ": " + msg + "\n\n" + usage }
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"limit", "set", "nosuch", "3"}, 1, unknown("limit set")},
		{[]string{"limit", "set", "nosuch", "3", "--json"}, 1, unknown("limit set")},
		{[]string{"limit", "set", "nosuch", "3", "--per-key"}, 1, unknown("limit set")},
		{[]string{"limit", "set", "nosuch", "3", "--key", "1"}, 1, unknown("limit set")},
		{[]string{"limit", "get", "nosuch"}, 1, unknown("limit get")},
		{[]string{"limit", "list", "nosuch"}, 1, unknown("limit list")},
		{[]string{"limit", "clear", "nosuch"}, 1, unknown("limit clear")},
		{[]string{"pause", "nosuch"}, 1, unknown("pause")},
		{[]string{"resume", "nosuch", "--key", "1"}, 1, unknown("resume")},

		{[]string{"limit", "set", "cleanup", "1", "--key", "x"}, 1, noKeyValue},
		{[]string{"limit", "get", "cleanup", "--key", "x"}, 1, noKeyValue},
		{[]string{"limit", "clear", "cleanup", "--key", "x"}, 1, noKeyValue},
		{[]string{"pause", "cleanup", "--key", "x"}, 1, noKeyValue},
		{[]string{"limit", "set", "cleanup", "1", "--per-key"}, 1, noPerKey},
		{[]string{"limit", "clear", "cleanup", "--per-key"}, 1, noPerKey},
		{[]string{"limit", "set", "tenant_sync", "1", "--key", "acme"}, 1,
			"jobpipe: limits: invalid key \"acme\" for kind \"tenant_sync\": not JSON: the key has 2 columns (tenant, shard), " +
				"so give a JSON array of their values, for example [\"acme\", 42]\n"},
		{[]string{"pause", "tenant_sync", "--key", `["acme", 1, 2]`}, 1,
			"jobpipe: limits: invalid key \"[\\\"acme\\\", 1, 2]\" for kind \"tenant_sync\": 3 values for the 2 key columns (tenant, shard)\n"},
		{[]string{"limit", "get", "tenant_sync", "--key", `[null, 1]`}, 1,
			"jobpipe: limits: invalid key \"[null, 1]\" for kind \"tenant_sync\": value 1 (column tenant) is null; " +
				"key columns hold scalars (string, number, boolean), never null\n"},

		{[]string{"limit", "set", "webhook", "-1"}, 2, usage("limit set", "N -1 is negative: give 0 (halt) to 2147483647", limitUsage)},
		{[]string{"limit", "set", "webhook", "99999999999999999999\n"}, 2, usage("limit set", `N "99999999999999999999\n" is not a whole number: give 0 (halt) to 2147483647`, limitUsage)},
		{[]string{"limit", "set", "webhook", "-5", "--per-key"}, 2, usage("limit set", "N -5 is negative: give 0 (halt) to 1024", limitUsage)},
		{[]string{"limit", "set", "webhook", "--", "-1"}, 2, usage("limit set", "N -1 is negative: give 0 (halt) to 2147483647", limitUsage)},
		{[]string{"limit", "set", "webhook", "1.5"}, 2, usage("limit set", `N "1.5" is not a whole number: give 0 (halt) to 2147483647`, limitUsage)},
		{[]string{"limit", "set", "webhook", "ten"}, 2, usage("limit set", `N "ten" is not a whole number: give 0 (halt) to 2147483647`, limitUsage)},
		{[]string{"limit", "set", "webhook", ""}, 2, usage("limit set", `N "" is not a whole number: give 0 (halt) to 2147483647`, limitUsage)},
		{[]string{"limit", "set", "webhook", "2147483648"}, 2, usage("limit set", "N 2147483648 is too large for a total limit: give 0 (halt) to 2147483647", limitUsage)},
		{[]string{"limit", "set", "webhook", "99999999999999999999"}, 2, usage("limit set", "N 99999999999999999999 is too large for a total limit: give 0 (halt) to 2147483647", limitUsage)},
		{[]string{"limit", "set", "webhook", "-99999999999999999999"}, 2, usage("limit set", "N -99999999999999999999 is negative: give 0 (halt) to 2147483647", limitUsage)},
		{[]string{"limit", "set", "webhook", "1025", "--per-key"}, 2, usage("limit set", "N 1025 is too large for a per-key limit: give 0 (halt) to 1024", limitUsage)},
		{[]string{"limit", "set", "webhook", "1025", "--key", "42"}, 2, usage("limit set", "N 1025 is too large for a per-key limit: give 0 (halt) to 1024", limitUsage)},

		{[]string{"limit", "set", "webhook", "3", "--key", "42", "--per-key"}, 2, usage("limit set", "--key and --per-key contradict each other: give one", limitUsage)},
		{[]string{"limit", "clear", "webhook", "--per-key", "--total"}, 2, usage("limit clear", "--per-key and --total contradict each other: give one", limitUsage)},
		{[]string{"limit", "clear", "webhook", "--key", "42", "--total"}, 2, usage("limit clear", "--key and --total contradict each other: give one", limitUsage)},
		{[]string{"limit", "set", "webhook", "3", "--total"}, 2, usage("limit set", "flag provided but not defined: -total", limitUsage)},
		{[]string{"limit", "get", "webhook", "--per-key"}, 2, usage("limit get", "flag provided but not defined: -per-key", limitUsage)},
		{[]string{"pause", "webhook", "--bogus"}, 2, usage("pause", "flag provided but not defined: -bogus", pauseUsage)},
		{[]string{"resume", "webhook", "--total"}, 2, usage("resume", "flag provided but not defined: -total", resumeUsage)},
		{[]string{"limit", "set", "webhook"}, 2, usage("limit set", "missing KIND and N", limitUsage)},
		{[]string{"limit", "set", "webhook", "3", "4"}, 2, usage("limit set", `unexpected argument "4"; want KIND and N`, limitUsage)},
		{[]string{"limit", "get"}, 2, usage("limit get", "missing KIND", limitUsage)},
		{[]string{"limit", "get", "webhook", "42"}, 2, usage("limit get", `unexpected argument "42"; want KIND`, limitUsage)},
		{[]string{"limit", "clear", "webhook", "42"}, 2, usage("limit clear", `unexpected argument "42"; want KIND`, limitUsage)},
		{[]string{"limit", "list", "webhook", "cleanup"}, 2, usage("limit list", `unexpected argument "cleanup"; want at most one KIND`, limitUsage)},
		{[]string{"pause"}, 2, usage("pause", "missing KIND", pauseUsage)},
		{[]string{"resume", "webhook", "cleanup"}, 2, usage("resume", `unexpected argument "cleanup"; want KIND`, resumeUsage)},
	} {
		code, stdout, stderr := jp(t, s, tc.args...)
		check(t, tc.args, code, stdout, stderr, tc.wantCode, "", tc.wantStderr)
	}
	// Before any database: without a subcommand there is nothing to add --database-url to.
	for _, tc := range []struct {
		args       []string
		wantStderr string
	}{
		{[]string{"limit"}, usage("limit", "missing subcommand; want set, get, list or clear", limitUsage)},
		{[]string{"limit", "frob"}, usage("limit", `unknown subcommand "frob"; want set, get, list or clear`, limitUsage)},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		check(t, tc.args, code, stdout, stderr, 2, "", tc.wantStderr)
	}
	assertLimitRows(t, s, "after the refused commands", wantKinds, wantKeys)
}

func TestLimitHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "limit"}, limitUsage},
		{[]string{"limit", "-h"}, limitUsage},
		{[]string{"limit", "set", "--help"}, limitUsage},
		{[]string{"limit", "list", "-h"}, limitUsage},
		{[]string{"help", "pause"}, pauseUsage},
		{[]string{"pause", "-h"}, pauseUsage},
		{[]string{"help", "resume"}, resumeUsage},
		{[]string{"resume", "webhook", "-h"}, resumeUsage},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		check(t, tc.args, code, stdout, stderr, 0, tc.want, "")
	}
	u := mainUsage()
	for _, re := range []string{
		`(?m)^  limit +show and change the running limits of job kinds and keys$`,
		`(?m)^  pause +stop starting jobs of a kind or key \(running jobs finish\)$`,
		`(?m)^  resume +start jobs of a paused kind or key again$`,
	} {
		if !regexp.MustCompile(re).MatchString(u) {
			t.Errorf("usage does not match %s:\n%s", re, u)
		}
	}
}

// A negative N reaches the N check as a positional argument; the values of --key and
// --database-url stay with their flags.
func TestNegativesLast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want []string }{
		{[]string{"webhook", "3"}, []string{"webhook", "3"}},
		{[]string{"webhook", "-1"}, []string{"webhook", "--", "-1"}},
		{[]string{"webhook", "-1", "--per-key"}, []string{"webhook", "--per-key", "--", "-1"}},
		{[]string{"webhook", "2", "--key", "-1"}, []string{"webhook", "2", "--key", "-1"}},
		{[]string{"-key", "-1", "webhook", "-2"}, []string{"-key", "-1", "webhook", "--", "-2"}},
		{[]string{"--database-url", "-3", "webhook", "2"}, []string{"--database-url", "-3", "webhook", "2"}},
		{[]string{"webhook", "-1", "--", "x"}, []string{"webhook", "--", "x", "-1"}},
		{[]string{"webhook", "--key=-1", "-1"}, []string{"webhook", "--key=-1", "--", "-1"}},
		{[]string{"webhook", "--", "-1"}, []string{"webhook", "--", "-1"}},
	} {
		if got := negativesLast(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("negativesLast(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
