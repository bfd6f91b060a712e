package testenv

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in    string
		wantOptions string // the "options" startup parameter pgx parses from the result
	}{
		{"URL without query", "postgres://u@h:5432/db", "-csearch_path=s1"},
		{"URL with query", "postgres://u:p@h:5432/db?sslmode=disable", "-csearch_path=s1"},
		{"URL keeps other options", "postgresql://h/db?options=-cstatement_timeout%3D5s", "-cstatement_timeout=5s -csearch_path=s1"},
		{"key=value form", "host=h port=5432 dbname=db", "-csearch_path=s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := withSearchPath(tt.in, "s1")
			if err != nil {
				t.Fatalf("withSearchPath(%q): %v", tt.in, err)
			}
			cfg, err := pgx.ParseConfig(got)
			if err != nil {
				t.Fatalf("pgx cannot parse %q: %v", got, err)
			}
			if o := cfg.RuntimeParams["options"]; o != tt.wantOptions {
				t.Errorf("withSearchPath(%q) = %q: options %q, want %q", tt.in, got, o, tt.wantOptions)
			}
		})
	}
}

func TestWithSearchPathRefusesKeyValueOptions(t *testing.T) {
	t.Parallel()
	_, err := withSearchPath("host=h options='-cwork_mem=1MB'", "s1")
	if err == nil || !strings.Contains(err.Error(), "URL form") {
		t.Errorf("withSearchPath with key=value options: err = %v, want one asking for the URL form", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://h/db?password=secret", "postgres://h/db?password=xxxxx"},
		{"postgres://127.0.0.1:5432/postgres", "postgres://127.0.0.1:5432/postgres"},
		{"host=h password=secret dbname=db", "host=h password=xxxxx dbname=db"},
		{"host=h password='se cret' dbname=db", "host=h password=xxxxx dbname=db"},
		{"redis://:secret@h:6379/2", "redis://:xxxxx@h:6379/2"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
