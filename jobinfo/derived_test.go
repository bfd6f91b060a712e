package jobinfo_test

import (
	"sync"
	"testing"

	"github.com/jobpipe/jobpipe/jobinfo"
)

type derivedKey struct{}

type invoice struct {
	Number string `jobpipe:"number,unique"`
}

// A kind made by Define keeps what is derived from it, built once even when asked for at once from
// many goroutines; a copy of its Info and an Info written as a literal keep nothing, so that a value
// built from one description is never used for another.
func TestDerivedBelongsToTheKind(t *testing.T) {
	t.Parallel()
	info := jobinfo.MustDefine[invoice]("derived_invoice").Info()
	var builds int
	var mu sync.Mutex
	build := func() any {
		mu.Lock()
		defer mu.Unlock()
		builds++
		return &builds
	}
	var wg sync.WaitGroup
	got := make([]any, 16)
	for i := range got {
		wg.Go(func() { got[i] = info.Derived(derivedKey{}, build) })
	}
	wg.Wait()
	for _, v := range got {
		if v != got[0] {
			t.Fatal("Derived returned different values for one kind and key")
		}
	}
	if builds != 1 {
		t.Errorf("%d builds for one kind and key, want 1", builds)
	}
	if other := info.Derived(struct{ derivedKey }{}, func() any { return "other" }); other != "other" {
		t.Errorf("another key got %v", other)
	}

	cp := *info
	literal := &jobinfo.Info{Name: "derived_invoice"}
	for name, i := range map[string]*jobinfo.Info{"a copy": &cp, "a literal": literal} {
		builds = 0
		i.Derived(derivedKey{}, build)
		i.Derived(derivedKey{}, build)
		if builds != 2 {
			t.Errorf("%s: %d builds for two calls, want 2 (nothing kept)", name, builds)
		}
	}
}
