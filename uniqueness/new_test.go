package uniqueness

import (
	"testing"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// New builds the statements For builds, and keeps nothing.
func TestNewDoesNotKeep(t *testing.T) {
	t.Parallel()
	type report struct {
		Month string `jobpipe:"month,unique"`
	}
	info := jobinfo.MustDefine[report]("new_report").Info()
	a, b := New(info), New(info)
	if a == b {
		t.Error("New returned the same Inserter twice")
	}
	if _, kept := inserters.Load(info); kept {
		t.Error("New kept its Inserter in the cache of For")
	}
	for s := range strategyNames {
		if a.SQL(s) != For(info).SQL(s) {
			t.Errorf("%v: New's statement differs from For's:\n%s\n%s", s, a.SQL(s), For(info).SQL(s))
		}
	}
}
