package jobpipe_test

import (
	"context"
	"os"
	"strings"
	"testing"
)

// run is the quick start's: compiled, never run, since its job waits a minute and it serves until
// its context ends. Example runs the same steps.
var _ = run

// post stands for the application's work in the quick start.
func post(context.Context, string) error { return nil }

// TestReadmeQuickStart checks that README.md's quick start is the code of quickstart_test.go, which
// the package's tests compile.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("quickstart_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Quick start")
	_, code, _ := strings.Cut(section, "```go\n")
	code, _, found := strings.Cut(code, "```")
	if !found {
		t.Fatal("README.md has no Go block under its Quick start heading")
	}
	_, want, _ := strings.Cut(string(file), "package jobpipe_test\n\n")
	if code == want {
		return
	}
	got, wantLines := strings.Split(code, "\n"), strings.Split(want, "\n")
	for i := range max(len(got), len(wantLines)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("README.md's quick start differs from quickstart_test.go at its line %d:\nREADME: %q\nfile:   %q", i+1, g, w)
		}
	}
}
