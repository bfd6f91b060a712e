package uniqueness

import (
	"testing"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// For keeps one Inserter per kind made by Define; New builds the same statements and keeps nothing,
// and so does For for an Info that Define did not make.
func TestForKeepsOnePerKindNewKeepsNothing(t *testing.T) {
	t.Parallel()
	type report struct {
		Month string `jobpipe:"month,unique"`
	}
	info := jobinfo.MustDefine[report]("new_report").Info()
	if first, again := For(info), For(info); first != again {
		t.Error("For built a second Inserter for a kind made by Define")
	}
	if a, b := New(info), New(info); a == b || a == For(info) {
		t.Error("New returned a kept Inserter")
	}
	literal := &jobinfo.Info{Name: "new_report", Table: info.Table, Fields: info.Fields, Unique: info.Unique}
	if first, again := For(literal), For(literal); first == again {
		t.Error("For kept an Inserter for an Info that Define did not make")
	}
	for s := range strategyNames {
		if New(info).SQL(s) != For(info).SQL(s) || For(literal).SQL(s) != For(info).SQL(s) {
			t.Errorf("%v: the statements differ:\n%s\n%s\n%s", s, New(info).SQL(s), For(info).SQL(s), For(literal).SQL(s))
		}
	}
}
