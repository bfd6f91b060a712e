package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
)

var kindNow = time.Date(2030, 4, 5, 6, 7, 8, 0, time.UTC)

// A table written by `kind new` and applied by `migrate up --dir` is one that registration accepts.
func TestKindNewThenMigrateThenRegister(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	dir := filepath.Join(t.TempDir(), "db", "migrations")
	code, stdout, stderr := runWith(t, nil, kindNow, "kind", "new", "webhook_delivery",
		"--field", "customer_id:bigint", "--field", "event_id:text", "--field", "payload:jsonb",
		"--field", "note:text:null", "--unique", "event_id", "--key", "customer_id", "--order", "process_after", "--dir", dir)
	path := filepath.Join(dir, "20300405060708_create_webhook_delivery.sql")
	check(t, nil, code, stdout, stderr, 0,
		"wrote "+path+"\napply it with: jobpipe migrate up --dir "+dir+"\n", "")

	code, stdout, stderr = runCLI(t, "migrate", "up", "--dir", dir, "--database-url", s.URL)
	check(t, nil, code, stable(stdout), stderr, 0, jobpipeApplied(t)+
		"applied app 20300405060708_create_webhook_delivery.sql (Nms)\n"+
		fmt.Sprintf("%s; now jobpipe at version %d, app at version 20300405060708\n",
			appliedCount(len(jobpipeMigrations(t))+1), jobpipeLatest(t)), "")

	type delivery struct {
		CustomerID int64   `jobpipe:"customer_id,key"`
		EventID    string  `jobpipe:"event_id,unique"`
		Payload    []byte  `jobpipe:"payload"`
		Note       *string `jobpipe:"note"`
	}
	// []byte is stored as bytea, not jsonb: the check must say so.
	kind := jobinfo.MustDefine[delivery]("webhook_delivery", jobinfo.WithOrder(jobinfo.OrderProcessAfter))
	err := kind.Register(context.Background(), s.Pool)
	var mismatch *jobinfo.MismatchError
	if !errors.As(err, &mismatch) || len(mismatch.Problems) != 1 ||
		mismatch.Problems[0] != `column "payload" (field Payload, Go type []uint8) has type jsonb: expected bytea` {
		t.Fatalf("Register with a mistyped field = %v", err)
	}
	type fixed struct {
		CustomerID int64   `jobpipe:"customer_id,key"`
		EventID    string  `jobpipe:"event_id,unique"`
		Payload    any     `jobpipe:"payload"`
		Note       *string `jobpipe:"note"`
	}
	if err := jobinfo.MustDefine[fixed]("webhook_delivery", jobinfo.WithOrder(jobinfo.OrderProcessAfter)).Register(context.Background(), s.Pool); err != nil {
		t.Fatalf("Register of the generated table: %v", err)
	}

	// And back down: the table and its registry row go.
	code, _, stderr = runCLI(t, "migrate", "down", "--dir", dir, "--database-url", s.URL)
	if code != 0 {
		t.Fatalf("migrate down: exit %d: %s", code, stderr)
	}
	assertTables(t, s, append([]string{"goose_db_version"}, jobpipeTables...)...)
	var kinds int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM jobpipe_kinds`).Scan(&kinds); err != nil || kinds != 0 {
		t.Fatalf("jobpipe_kinds has %d rows after down (%v), want 0", kinds, err)
	}
}

// Two kinds written in one second get two versions, and both apply.
func TestKindNewTwiceInOneSecond(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	dir := t.TempDir()
	for i, kind := range []string{"webhook", "mail"} {
		args := []string{"kind", "new", kind, "--field", "n:bigint", "--dir", dir}
		code, stdout, stderr := runWith(t, nil, kindNow, args...)
		path := filepath.Join(dir, fmt.Sprintf("2030040506070%d_create_%s.sql", 8+i, kind))
		check(t, args, code, stdout, stderr, 0, "wrote "+path+"\napply it with: jobpipe migrate up --dir "+dir+"\n", "")
	}
	code, stdout, stderr := runCLI(t, "migrate", "up", "--dir", dir, "--database-url", s.URL)
	check(t, nil, code, stable(stdout), stderr, 0, jobpipeApplied(t)+
		"applied app 20300405060708_create_webhook.sql (Nms)\n"+
		"applied app 20300405060709_create_mail.sql (Nms)\n"+
		fmt.Sprintf("%s; now jobpipe at version %d, app at version 20300405060709\n",
			appliedCount(len(jobpipeMigrations(t))+2), jobpipeLatest(t)), "")
}

func TestKindNewPrintsWithoutDir(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "kind", "new", "reminder", "--field", "user_id:bigint", "--unique", "user_id")
	want, err := jobinfo.TableSpec{Kind: "reminder", Columns: []jobinfo.Column{{Name: "user_id", Type: "bigint"}},
		Unique: []string{"user_id"}, Key: []string{"user_id"}}.Migration()
	if err != nil {
		t.Fatal(err)
	}
	check(t, nil, code, stdout, stderr, 0, want, "")
}

// Hostile or wrong input is refused with every problem named, and nothing is written.
func TestKindNewRefusesBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"hostile names", []string{"x; DROP TABLE users", "--field", `a"b:text`, "--field", "ok:text; drop table x", "--unique", "nope"}, 1, []string{
			`kind name "x; DROP TABLE users" is not allowed`,
			`table name "x; DROP TABLE users" is not allowed`,
			`column name "a\"b" is not allowed`,
			`column type "text; drop table x" is not supported`,
			`unique column "nope" is not a data column`,
		}},
		{"pipeline column", []string{"k", "--field", "attempts_made:int"}, 1, []string{`column "attempts_made" is a pipeline column jobpipe adds itself`}},
		{"no fields", []string{"k"}, 1, []string{`kind "k" has no data columns: give at least one`}},
		{"bad order", []string{"k", "--field", "a:text", "--order", "random"}, 1, []string{`order "random" is unknown: use "created" or "process_after"`}},
		{"bad field flag", []string{"k", "--field", "justaname"}, 2, []string{`invalid value "justaname" for flag -field: field "justaname" is not COLUMN:TYPE`}},
		{"unknown flag", []string{"k", "--uniq", "a"}, 2, []string{"flag provided but not defined: -uniq"}},
		{"two names", []string{"a", "b", "--field", "x:text"}, 2, []string{"want exactly one kind NAME, got 2 arguments"}},
		{"no-key with key", []string{"k", "--field", "a:text", "--no-key", "--key", "a"}, 2, []string{"--no-key and --key contradict each other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append(append([]string{"kind", "new"}, tt.args...), "--dir", dir)
			code, stdout, stderr := runWith(t, nil, kindNow, args...)
			if code != tt.wantCode || stdout != "" {
				t.Errorf("exit %d (want %d), stdout %q", code, tt.wantCode, stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("%d files written, want none", len(entries))
			}
		})
	}
}
