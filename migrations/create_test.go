package migrations_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/migrations"
)

func TestCreateWritesEmptyMigration(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db", "migrations") // created by Create
	now := time.Date(2025, 3, 4, 6, 6, 7, 0, time.FixedZone("CET", 3600))

	path, err := migrations.Create(dir, "add_email_index", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "20250304050607_add_email_index.sql"); path != want {
		t.Fatalf("path = %s, want %s", path, want)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const want = "-- +goose Up\n\n\n-- +goose Down\n\n"
	if string(got) != want {
		t.Fatalf("content = %q, want %q", got, want)
	}

	// goose refuses two migrations with one version: more in the same second take the next ones.
	for i, name := range []string{"add_email_index", "other"} {
		got, err := migrations.Create(dir, name, now)
		want := filepath.Join(dir, fmt.Sprintf("2025030405060%d_%s.sql", 8+i, name))
		if err != nil || got != want {
			t.Errorf("Create(%s) in the same second = %s, %v; want %s", name, got, err, want)
		}
	}
	if got2, _ := os.ReadFile(path); string(got2) != want {
		t.Fatalf("existing file was overwritten: %q", got2)
	}
}

// A migration is never older than one already in the directory, which goose would refuse to apply
// after it; files that are not migrations do not count.
func TestCreateFollowsTheHighestVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"20300101000000_later.sql", "99999999999999_notes.txt", "README.md", "00007_old.sql"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := migrations.Create(dir, "next", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	if want := filepath.Join(dir, "20300101000001_next.sql"); err != nil || got != want {
		t.Errorf("Create = %s, %v; want %s", got, err, want)
	}
}

func TestCreateRejectsBadNames(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ name, want string }{
		{"", "migrations: create: the migration name is empty; name what it does, e.g. add_email_index"},
		{"Add", `migrations: create: the migration name "Add" may hold only a-z, 0-9 and _; e.g. add_email_index`},
		{"add-index", `migrations: create: the migration name "add-index" may hold only a-z, 0-9 and _; e.g. add_email_index`},
		{"../escape", `migrations: create: the migration name "../escape" may hold only a-z, 0-9 and _; e.g. add_email_index`},
		{strings.Repeat("a", 101), "migrations: create: the migration name is 101 characters long; use at most 100"},
	} {
		dir := t.TempDir()
		if _, err := migrations.Create(dir, tc.name, now); err == nil || err.Error() != tc.want {
			t.Errorf("Create(%q) err = %v, want %s", tc.name, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("Create(%q) wrote %v", tc.name, entries)
		}
	}
	if _, err := migrations.Create(t.TempDir(), strings.Repeat("a", 100), now); err != nil {
		t.Errorf("Create with a 100 character name: %v", err)
	}
}

func TestWriteWritesGivenContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const content = "-- +goose Up\nCREATE TABLE t (id int);\n\n-- +goose Down\nDROP TABLE t;\n"
	path, err := migrations.Write(dir, "create_t", time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), content)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "20250102030405_create_t.sql"); path != want {
		t.Fatalf("path = %s, want %s", path, want)
	}
	if got, _ := os.ReadFile(path); string(got) != content {
		t.Fatalf("content = %q, want %q", got, content)
	}
	if _, err := migrations.Write(dir, "Bad", time.Now(), content); err == nil {
		t.Fatal("Write accepted the name Bad")
	}
}
