package bench

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// tracer times every statement sent through the dispatchers' pools, by what the statement does, as
// the client sees it (round trip, server time and reading the rows): where a scenario's time goes,
// without pg_stat_statements.
type tracer struct {
	mu    sync.Mutex
	stats map[string]*stmtStat
	known sync.Map // exact statement text -> label, checked before statementLabels
}

type stmtStat struct {
	calls      int64
	rows       int64
	total, max time.Duration
}

type traceStart struct {
	label string
	at    time.Time
}

type traceKey struct{}

func newTracer() *tracer { return &tracer{stats: map[string]*stmtStat{}} }

// name labels a statement by its exact text, for statements the library exports (the head queries).
func (t *tracer) name(sql, label string) {
	if sql != "" {
		t.known.Store(sql, label)
	}
}

func (t *tracer) label(sql string) string {
	if l, ok := t.known.Load(sql); ok {
		return l.(string)
	}
	return statementLabel(sql)
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{t.label(data.SQL), time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	t.end(ctx, data.CommandTag.RowsAffected())
}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (t *tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{"copy (enqueue)", time.Now()})
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (t *tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	t.end(ctx, data.CommandTag.RowsAffected())
}

// batchMark is when a batch was sent or its last result read: a result's time is from there.
type batchMark struct{ at time.Time }

// TraceBatchStart implements pgx.BatchTracer.
func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, &batchMark{time.Now()})
}

// TraceBatchQuery implements pgx.BatchTracer: each statement of a batch counts as a call of its own,
// timed from the batch's previous result (the first from the batch's start).
func (t *tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	m, ok := ctx.Value(traceKey{}).(*batchMark)
	if !ok {
		return
	}
	now := time.Now()
	t.add(t.label(data.SQL), data.CommandTag.RowsAffected(), now.Sub(m.at))
	m.at = now
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t *tracer) end(ctx context.Context, rows int64) {
	s, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	t.add(s.label, rows, time.Since(s.at))
}

func (t *tracer) add(label string, rows int64, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stats[label]
	if st == nil {
		st = &stmtStat{}
		t.stats[label] = st
	}
	st.calls++
	st.rows += rows
	st.total += d
	st.max = max(st.max, d)
}

// reset forgets what was timed so far, so a report covers only the measured phase.
func (t *tracer) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats = map[string]*stmtStat{}
}

// calls returns how many statements were timed since the last reset.
func (t *tracer) calls() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, st := range t.stats {
		n += st.calls
	}
	return n
}

// statementRow is one statement kind's timings in a report.
type statementRow struct {
	Statement string  `json:"statement"`
	Calls     int64   `json:"calls"`
	Rows      int64   `json:"rows"`
	TotalS    float64 `json:"total_s"`
	MeanMs    float64 `json:"mean_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// rows returns the timings, most total time first.
func (t *tracer) rows() []statementRow {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []statementRow
	for label, s := range t.stats {
		out = append(out, statementRow{Statement: label, Calls: s.calls, Rows: s.rows, TotalS: round(s.total.Seconds(), 3),
			MeanMs: ms(s.total / time.Duration(max(s.calls, 1))), MaxMs: ms(s.max)})
	}
	slices.SortFunc(out, func(a, b statementRow) int {
		if a.TotalS != b.TotalS {
			if a.TotalS > b.TotalS {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Statement, b.Statement)
	})
	return out
}

// table returns the timings as a report table.
func (t *tracer) table(title string) Table {
	tab := Table{Title: title, Header: []string{"statement", "calls", "rows", "total s", "mean ms", "max ms"}}
	for _, r := range t.rows() {
		tab.Rows = append(tab.Rows, []string{r.Statement, format(r.Calls), format(r.Rows), format(r.TotalS),
			format(r.MeanMs), format(r.MaxMs)})
	}
	return tab
}

// statementLabels name the statements jobpipe sends, by a fragment only that statement contains
// (checked in order). They follow dispatcher/queries.go, leader.go and uniqueness; a statement that
// matches none is labelled by its first words. The head queries are named by their exact text
// (tracer.name), since package heads returns them.
var statementLabels = []struct{ fragment, label string }{
	{"WITH expired AS", "rescue"},
	{"FOR UPDATE SKIP LOCKED)\nUPDATE", "claim plain (select+update)"},
	{"AS u(id, slot, first, n)", "claim ids (keyed)"},
	{"AS u(id, token, outcome, err, delay)", "finish (batch)"},
	{"AS u(id, token, outcome, err, delay, slot)", "finish and next claims (keyed)"},
	{"SET lease_expires_at = now() + make_interval(secs => $3)", "heartbeat"},
	{"SELECT min(t.process_after)", "next due time"},
	{"INTO jobpipe_leaders", "leader lease"},
	{"array_agg(nextval(", "reserve ids (enqueue)"},
	{"SELECT pg_notify(", "notify (enqueue)"},
	{"INSERT INTO jobpipe_kinds", "register kind"},
	{"SELECT h.id, coalesce(s.slots, '{}')", "busy slots (keyed)"},
	{"AS u(head, n)", "next of running keys (keyed)"},
	{"FROM jobpipe_kind_limits", "read kind limits"},
}

func statementLabel(sql string) string {
	for _, l := range statementLabels {
		if strings.Contains(sql, l.fragment) {
			return l.label
		}
	}
	f := strings.Fields(sql)
	if len(f) > 4 {
		f = f[:4]
	}
	return strings.ToLower(strings.Join(f, " "))
}
