package migrationtest

import (
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestRead(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"00010_later.sql": {Data: []byte("-- +goose Up\nALTER TABLE a ADD COLUMN b int;\n\n-- +goose Down\nCREATE TABLE down_only (id int);\n")},
		"00002_first.sql": {Data: []byte("-- +goose Up\n-- CREATE TABLE commented_out (id int);\n" +
			"CREATE TABLE a (id int);\ncreate table if not exists b_2 (id int);\n\n-- +goose Down\nDROP TABLE b_2;\nDROP TABLE a;\n")},
		"README.md": {Data: []byte("not a migration")},
	}
	got, err := read(fsys)
	want := []Migration{
		{Version: 2, File: "00002_first.sql", Tables: []string{"a", "b_2"}},
		{Version: 10, File: "00010_later.sql"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read = %+v, %v; want %+v, nil", got, err, want)
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"empty", fstest.MapFS{}, "no *.sql migrations"},
		{"no version", fstest.MapFS{"init.sql": {Data: []byte("-- +goose Up\n")}}, "init.sql: no goose version"},
		{"bad version", fstest.MapFS{"v1_init.sql": {Data: []byte("-- +goose Up\n")}}, "v1_init.sql: no goose version"},
		{"no up", fstest.MapFS{"00001_init.sql": {Data: []byte("CREATE TABLE a (id int);\n")}}, "00001_init.sql: no -- +goose Up section"},
	} {
		if _, err := read(tc.fsys); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// Jobpipe reads jobpipe's own embedded migrations: at least one, strictly ascending, each creating
// only jobpipe_ tables.
func TestJobpipe(t *testing.T) {
	t.Parallel()
	ms, err := Jobpipe()
	if err != nil || len(ms) == 0 {
		t.Fatalf("Jobpipe() = %v, %v; want migrations", ms, err)
	}
	for i, m := range ms {
		if i > 0 && m.Version <= ms[i-1].Version {
			t.Errorf("%s: version %d after %d", m.File, m.Version, ms[i-1].Version)
		}
		for _, table := range m.Tables {
			if !strings.HasPrefix(table, "jobpipe_") {
				t.Errorf("%s creates %q, not a jobpipe_ table", m.File, table)
			}
		}
	}
}
