package uniqueness_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
	"github.com/jobpipe/jobpipe/uniqueness"
)

type signup struct {
	Email string `jobpipe:"email"`
}

// callKey marks a statement's context with the InsertCoalesced call that sent it.
type callKey struct{}

// event is one thing the statements log records, in the order it happened.
type event struct {
	call     int    // the call whose context the statement ran under
	what     string // "insert start", "insert end", "notify start", "notify end" or "return"
	notifies bool   // an insert whose statement notifies by itself
	failed   bool   // a statement that returned an error
}

// statements logs, in one order, the inserts and notifications a pool sends and when calls return.
type statements struct {
	mu     sync.Mutex
	events []event
}

func (l *statements) add(e event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	call, ok := ctx.Value(callKey{}).(int)
	switch {
	case !ok:
	case strings.HasPrefix(d.SQL, "SELECT pg_notify"):
		l.add(event{call: call, what: "notify start"})
		return context.WithValue(ctx, l, "notify")
	default:
		l.add(event{call: call, what: "insert start", notifies: strings.Contains(d.SQL, "pg_notify")})
		return context.WithValue(ctx, l, "insert")
	}
	return ctx
}

func (l *statements) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if call, ok := ctx.Value(callKey{}).(int); ok {
		l.add(event{call: call, what: ctx.Value(l).(string) + " end", failed: d.Err != nil})
	}
}

// Each of many concurrent InsertCoalesced calls returns only after its job was announced: its own
// statement notified at its commit, or a notification that started after its insert had committed
// was sent before it returned. Most calls share a notification.
func TestInsertCoalescedAnnouncesEveryJobBeforeReturning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kind := jobinfo.MustDefine[signup]("signup")
	s := testenv.NewSchema(t)
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	log := &statements{}
	cfg := s.Config()
	cfg.ConnConfig.Tracer = log
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	const calls = 64
	in := uniqueness.For(kind.Info())
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ctx := context.WithValue(ctx, callKey{}, i)
			row := uniqueness.Row{Values: kind.Values(&signup{Email: "x"})}
			if _, err := in.InsertCoalesced(ctx, pool, row, uniqueness.Skip); err != nil {
				t.Error(err)
			}
			log.add(event{call: i, what: "return"})
		})
	}
	wg.Wait()

	log.mu.Lock()
	defer log.mu.Unlock()
	committed := map[int]int{} // call -> index of its insert's end
	notifying := map[int]bool{}
	notifyStarts := map[int]int{} // sending call -> index of its notification's start
	var sent []struct{ start, end int }
	for i, e := range log.events {
		switch e.what {
		case "insert start":
			notifying[e.call] = e.notifies
		case "insert end":
			committed[e.call] = i
		case "notify start":
			notifyStarts[e.call] = i
		case "notify end":
			if !e.failed {
				sent = append(sent, struct{ start, end int }{notifyStarts[e.call], i})
			}
		case "return":
			if notifying[e.call] {
				continue
			}
			announced := false
			for _, n := range sent {
				announced = announced || (n.start > committed[e.call] && n.end < i)
			}
			if !announced {
				t.Errorf("call %d returned without a notification sent after its commit", e.call)
			}
		}
	}
	var own int
	for _, n := range notifying {
		if n {
			own++
		}
	}
	t.Logf("%d calls notified in their own statement; %d notifications sent for the others", own, len(sent))
	if own+len(sent) >= calls {
		t.Errorf("%d calls notified in their own statement and %d notifications were sent for %d calls; want fewer notifications than calls", own, len(sent), calls)
	}
	if own == calls {
		t.Error("every call notified in its own statement: none shared a notification")
	}
}
