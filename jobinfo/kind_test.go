package jobinfo

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

type delivery struct {
	CustomerID int64           `jobpipe:"customer_id,key"`
	EventID    string          `jobpipe:"event_id,unique"`
	Payload    json.RawMessage `jobpipe:"payload"`
	Attempt    int32
	Note       *string `jobpipe:"note"`
	Sent       time.Time
	Skipped    string `jobpipe:"-"`
	//lint:ignore U1000 an unexported field, which Define must skip
	internal int
}

func TestDefineReadsTags(t *testing.T) {
	t.Parallel()
	k, err := Define[delivery]("webhook_delivery", MaxAttempts(7), WithOrder(OrderProcessAfter))
	if err != nil {
		t.Fatal(err)
	}
	info := k.Info()
	if got, want := info.Columns(), []string{"customer_id", "event_id", "payload", "attempt", "note", "sent"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Columns() = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(info.Unique, []string{"event_id"}) || !reflect.DeepEqual(info.Key, []string{"customer_id"}) {
		t.Errorf("Unique = %v, Key = %v; want [event_id], [customer_id]", info.Unique, info.Key)
	}
	if info.KeyLimit != 1 || info.MaxAttempts != 7 || info.Order != OrderProcessAfter || info.Table.Sanitize() != `"webhook_delivery"` {
		t.Errorf("KeyLimit=%d MaxAttempts=%d Order=%q Table=%s", info.KeyLimit, info.MaxAttempts, info.Order, info.Table.Sanitize())
	}
	note := "n"
	job := delivery{CustomerID: 4, EventID: "e", Payload: json.RawMessage(`{}`), Attempt: 2, Note: &note}
	vals := k.Values(&job)
	if vals[0] != int64(4) || vals[1] != "e" || vals[3] != int32(2) || vals[4] != &note {
		t.Errorf("Values() = %v", vals)
	}
	var back delivery
	targets := k.ScanTargets(&back)
	*(targets[1].(*string)) = "scanned"
	if back.EventID != "scanned" {
		t.Errorf("ScanTargets()[1] does not point at EventID")
	}
}

func TestDefineKeyDefaultsToUnique(t *testing.T) {
	t.Parallel()
	type post struct {
		BlogID int64 `jobpipe:"blog_id,unique"`
	}
	k := MustDefine[post]("blog_post")
	if !reflect.DeepEqual(k.Info().Key, []string{"blog_id"}) || k.Info().KeyLimit != 1 {
		t.Errorf("Key = %v, KeyLimit = %d; want [blog_id], 1", k.Info().Key, k.Info().KeyLimit)
	}
	k = MustDefine[post]("blog_post", NoKey())
	if k.Info().Key != nil || k.Info().KeyLimit != 0 {
		t.Errorf("with NoKey: Key = %v, KeyLimit = %d; want none", k.Info().Key, k.Info().KeyLimit)
	}
	type plain struct{ N int64 }
	if _, err := Define[plain]("plain", KeyLimit(3)); err == nil || !strings.Contains(err.Error(), "has a key limit but no key") {
		t.Errorf("KeyLimit without a key: err = %v", err)
	}
}

func TestDefineListsEveryProblem(t *testing.T) {
	t.Parallel()
	type bad struct {
		A  int64   `jobpipe:"a,uniq"`
		B  string  `jobpipe:"a"`
		C  uint64  `jobpipe:"c"`
		ID int64   `jobpipe:"id"`
		D  string  `jobpipe:"D; drop table x"`
		E  complex `jobpipe:"e"`
		//lint:ignore U1000 an unexported field, which Define must skip
		internal int
	}
	_, err := Define[bad]("Bad Kind", MaxAttempts(0))
	if err == nil {
		t.Fatal("Define accepted a bad struct")
	}
	for _, want := range []string{
		`kind name "Bad Kind" is not allowed`,
		`field A has unknown tag option "uniq": the options are unique and key`,
		`fields A and B both map to column "a"`,
		`field C: the Go type uint64 is not supported`,
		`field ID maps to "id", a pipeline column jobpipe manages`,
		`column name "D; drop table x" is not allowed`,
		`max attempts 0 is not allowed`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := Define[int]("n"); err == nil || !strings.Contains(err.Error(), "job type int is not a struct") {
		t.Errorf("Define[int]: err = %v", err)
	}
}

type complex = complex128

// A kind's timeout: DefaultTimeout unless set, 0 the default, a negative duration none.
func TestTimeoutOption(t *testing.T) {
	t.Parallel()
	type job struct{ N int64 }
	for _, tc := range []struct {
		opts []Option
		want time.Duration
	}{
		{nil, time.Minute},
		{[]Option{Timeout(0)}, DefaultTimeout},
		{[]Option{Timeout(90 * time.Second)}, 90 * time.Second},
		{[]Option{Timeout(-time.Second)}, NoTimeout},
		{[]Option{Timeout(NoTimeout)}, -1},
	} {
		if got := MustDefine[job]("timed", tc.opts...).Info().Timeout; got != tc.want {
			t.Errorf("with %d options: Timeout = %v, want %v", len(tc.opts), got, tc.want)
		}
	}
}
